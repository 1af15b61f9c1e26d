#include "http/session.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "http/chars.hpp"

namespace sm::http {
namespace {

Session& self(llhttp_t* p) noexcept {
    return *static_cast<Session*>(p->data);
}

llhttp_settings_t make_settings(llhttp_cb begin, llhttp_data_cb url, llhttp_data_cb field,
                                llhttp_cb field_complete, llhttp_data_cb value,
                                llhttp_cb value_complete, llhttp_cb headers_complete) noexcept {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_begin = begin;
    s.on_url = url;
    s.on_header_field = field;
    s.on_header_field_complete = field_complete;
    s.on_header_value = value;
    s.on_header_value_complete = value_complete;
    s.on_headers_complete = headers_complete;
    return s;
}

constexpr std::string_view kHostName = "host";
constexpr std::string_view kTransferEncodingName = "transfer-encoding";
constexpr std::string_view kUpgradeName = "upgrade";

}  // namespace

const llhttp_settings_t Session::kSettings =
    make_settings(&Session::on_message_begin, &Session::on_url, &Session::on_header_field,
                  &Session::on_header_field_complete, &Session::on_header_value,
                  &Session::on_header_value_complete, &Session::on_headers_complete);

Session::Session(const ResponseCache& cache, const Limits& limits) noexcept
    : cache_(&cache), limits_(&limits) {
    reset();
}

void Session::reset() noexcept {
    llhttp_init(&parser_, HTTP_REQUEST, &kSettings);
    // Any single-digit version gets as far as head_done(), which serves
    // HTTP/1.x as HTTP/1.1 (RFC 9110 2.5: HTTP/1.2 is an HTTP/1.1 request
    // from a newer client) and answers other majors with 505. llhttp 8.1.0
    // has no setter for this flag.
    parser_.lenient_flags |= LENIENT_VERSION;
    // The session parses Transfer-Encoding itself (fields.hpp) and frames
    // bodies by that parse; llhttp's own check refuses valid lists such as
    // "chunked," (RFC 9110 5.6.1: empty elements are ignored).
    parser_.lenient_flags |= LENIENT_TRANSFER_ENCODING;
    parser_.data = this;
    out_ = nullptr;
    scan_pos_ = nullptr;
    guard_.start_head();
    phase_ = Phase::head;
    in_message_ = closed_ = close_requested_ = false;
    unknown_method_ = in_method_ = false;
    error_status_ = Status::bad_request;
    error_detail_ = "";
    responses_ = jobs_ = 0;
    ++epoch_;
    limit_ = kNoLimit;
    fail_detail_ = {};
    // A flood's deferred answers are not kept for the next connection, nor
    // their memory: an idle connection holds none.
    deferred_first_ = 0;
    if (deferred_.capacity() != 0) std::vector<Deferred>().swap(deferred_);
    if (held_) {
        // Jobs still out for the old connection are stale (their epoch);
        // the entries and their buffers serve the next.
        for (std::size_t i = held_->first; i < held_->end; ++i) {
            held_->entries[i].response.clear();
            held_->entries[i].after.clear();
        }
        held_->first = held_->end = held_->handed = 0;
    }
    start_request();
}

void Session::start_request() noexcept {
    method_known_ = close_after_ = false;
    uri_bytes_ = header_count_ = 0;
    host_count_ = te_count_ = name_match_ = 0;
    name_candidate_ = Field::other;
    upgrade_field_ = false;
    field_ = Field::other;
    std::construct_at(&framing_.head);  // the checks start afresh for each head
    target_len_ = path_len_ = 0;
    target_state_ = TargetState::start;
}

Session::Result Session::feed(std::span<const char> in, ByteBuffer& out,
                              std::size_t limit) noexcept {
    if (closed_) return Result::close;
    if (in.empty()) return Result::open;  // llhttp must not see a null pointer
    out_ = &out;
    limit_ = limit;
    const char* p = in.data();
    const char* const end = p + in.size();
    scan_pos_ = p;
    // The next HTAB at or after p, or end; null until a head needs it (a read
    // of body bytes only is not searched), and again after body bytes.
    const char* tab = nullptr;
    while (!closed_ && p < end) {
        switch (phase_) {
            case Phase::head: p = parse_head(p, end, tab); break;
            // Body bytes are not the guard's: it goes on after them.
            case Phase::body_length:
                scan_pos_ = p = skip_body(p, end);
                tab = nullptr;
                break;
            case Phase::body_chunked:
                scan_pos_ = p = decode_chunked(p, end);
                tab = nullptr;
                break;
        }
    }
    out_ = nullptr;
    return closed_ ? Result::close : Result::open;
}

Session::Result Session::resume(ByteBuffer& out, std::size_t limit) noexcept {
    if (waiting()) return closed_ ? Result::close : Result::open;
    out_ = &out;
    limit_ = limit;
    render_deferred();
    out_ = nullptr;
    return closed_ ? Result::close : Result::open;
}

// llhttp 8.1.0 treats SP as optional whitespace in places where it does not
// treat HTAB as such, although RFC 9110 5.6.3 makes them the same: trailing
// whitespace ends "Content-Length: 5 " and "Transfer-Encoding: chunked "
// but "Content-Length: 5<HTAB>" is refused, "Transfer-Encoding:
// chunked<HTAB>" taken for an unknown coding, and "Connection:
// close<HTAB>" not taken for close at all. So llhttp is shown every HTAB
// as SP. In a head an HTAB is legal only as whitespace inside a field value
// (the guard, which sees the real bytes, refuses it anywhere else), where
// the two mean the same; the session reads no value that could tell them
// apart. Heads rarely hold an HTAB: one memchr over the head bytes of a
// read finds none (a read of body bytes only is not searched).
namespace {
const char* find_tab(const char* p, const char* end) noexcept {
    const void* t = std::memchr(p, '\t', static_cast<std::size_t>(end - p));
    return t != nullptr ? static_cast<const char*>(t) : end;
}
}  // namespace

llhttp_errno_t Session::execute(const char* p, const char* end, const char*& tab,
                                const char*& pos) noexcept {
    static constexpr char kSpace = ' ';
    if (tab == nullptr) [[unlikely]]
        tab = find_tab(p, end);
    while (tab < end) {  // an HTAB in this read, rare in heads
        if (tab > p) {
            const llhttp_errno_t err =
                llhttp_execute(&parser_, p, static_cast<std::size_t>(tab - p));
            if (err != HPE_OK) {
                pos = llhttp_get_error_pos(&parser_);
                return err;
            }
        }
        const llhttp_errno_t err = llhttp_execute(&parser_, &kSpace, 1);
        if (err != HPE_OK) {
            pos = llhttp_get_error_pos(&parser_) == &kSpace ? tab : tab + 1;
            return err;
        }
        p = tab + 1;
        tab = find_tab(p, end);
    }
    const llhttp_errno_t err = llhttp_execute(&parser_, p, static_cast<std::size_t>(end - p));
    if (err != HPE_OK) pos = llhttp_get_error_pos(&parser_);
    return err;
}

const char* Session::parse_head(const char* p, const char* end, const char*& tab) noexcept {
    if (unknown_method_) {
        scan_unknown_method(p, end);
        return end;
    }
    const char* pos = end;
    const llhttp_errno_t err = execute(p, end, tab, pos);
    if (err == HPE_OK) {
        scan_to(end);
        return end;
    }
    if (closed_) return end;  // a callback already answered with an error
    if (err == HPE_PAUSED) {
        // on_headers_complete pauses at the end of every head.
        if (scan_to(pos) && head_done() && phase_ == Phase::head) finish_message();
        return pos;
    }
    // llhttp knows a fixed list of methods; any other token is a well-formed
    // request it cannot parse further (the bytes before the error are a
    // prefix of a known method: token characters). It also refuses RTSP's
    // methods (DESCRIBE, PLAY, ...) in an HTTP request: tokens we do not
    // implement either, at the version.
    const bool rtsp_method = err == HPE_INVALID_CONSTANT && parser_.method >= HTTP_DESCRIBE &&
                             parser_.method <= HTTP_FLUSH;
    if (err == HPE_INVALID_METHOD || rtsp_method) {
        if (scan_to(pos)) {
            unknown_method_ = true;
            in_method_ = err == HPE_INVALID_METHOD;
            scan_unknown_method(pos, end);
        }
        return end;
    }
    if (err == HPE_PAUSED_H2_UPGRADE) {
        fail(Status::bad_request, "HTTP/2 connection preface; this server speaks HTTP/1.1");
    } else if (err == HPE_USER) {
        fail(error_status_, error_detail_);
    } else {
        fail(Status::bad_request, llhttp_get_error_reason(&parser_));
    }
    return end;
}

const char* Session::skip_body(const char* p, const char* end) noexcept {
    const auto take = static_cast<std::size_t>(
        std::min<std::uint64_t>(framing_.body_left, static_cast<std::uint64_t>(end - p)));
    framing_.body_left -= take;
    p += take;
    if (framing_.body_left == 0) finish_message();
    return p;
}

const char* Session::decode_chunked(const char* p, const char* end) noexcept {
    const ChunkedDecoder::Step step = framing_.chunked.feed(p, end);
    switch (step.status) {
        case ChunkedDecoder::Status::more: return end;
        case ChunkedDecoder::Status::done: finish_message(); return p + step.used;
        case ChunkedDecoder::Status::invalid: fail(Status::bad_request, step.why); return end;
        case ChunkedDecoder::Status::too_large:
            fail(Status::payload_too_large, step.why);
            return end;
    }
    return end;
}

bool Session::scan_to(const char* to) noexcept {
    const char* const from = scan_pos_;
    scan_pos_ = to;
    if (from == to) return true;
    if (const char* why = guard_.scan(from, to)) {
        fail(Status::bad_request, why);
        return false;
    }
    if (guard_.bytes() > limits_->max_head_bytes) {
        fail(Status::header_fields_too_large, "request head larger than the limit");
        return false;
    }
    return true;
}

void Session::scan_unknown_method(const char* p, const char* end) noexcept {
    // Rare and bounded by --max-head-bytes: one byte at a time, so the head's
    // end is found before whatever follows it (which is not answered).
    for (const char* q = p; q < end; ++q) {
        if (in_method_) {
            if (*q == ' ') {
                in_method_ = false;
            } else if (!chars::is(*q, chars::kTchar)) {
                fail(Status::bad_request, "invalid character in the method");
                return;
            }
        }
        if (!scan_to(q + 1)) return;
        if (guard_.head_complete()) {
            fail(Status::not_implemented, "unknown method");
            return;
        }
    }
}

bool Session::head_done() noexcept {
    if (!guard_.head_complete()) {  // llhttp ended the head where the guard did not
        fail(Status::bad_request, "malformed request head");
        return false;
    }
    if (parser_.http_major != 1) {
        fail(Status::http_version_not_supported, "this server speaks HTTP/1.1");
        return false;
    }
    // RFC 9112 3.2: 400 for an HTTP/1.1 request without Host, and for any
    // request with more than one (an invalid value failed in its callback).
    if (host_count_ > 1) {
        fail(Status::bad_request, "more than one Host header");
        return false;
    }
    if (host_count_ == 0 && parser_.http_minor >= 1) {
        fail(Status::bad_request, "missing Host header (required in HTTP/1.1)");
        return false;
    }
    // The message's framing, RFC 9112 6.3, decided here from the fields
    // llhttp parsed (it refused invalid, duplicate and conflicting
    // Content-Length values, and Content-Length beside Transfer-Encoding).
    // The fields are checked for every method; a CONNECT then has no content
    // whatever they say (RFC 9110 9.3.6), and its response closes.
    const bool connect = parser_.method == HTTP_CONNECT;
    if (te_count_ > 0 || (parser_.flags & F_TRANSFER_ENCODING) != 0) {
        // Framed by chunked only if the final coding is chunked, named once
        // and without parameters; otherwise (an empty value too) the length
        // of a request cannot be determined: 400 and close (RFC 9112 6.3,
        // item 4). The decision is the session's own parse of the values
        // (fields.hpp), not llhttp's flag.
        const TransferEncodingCheck& te = framing_.head.te;
        if (!te.chunked()) {
            fail(Status::bad_request, te.codings() == 0
                                          ? "Transfer-Encoding without a coding"
                                          : "Transfer-Encoding whose final coding is not chunked");
            return false;
        }
        if ((parser_.flags & F_CONTENT_LENGTH) != 0) {
            fail(Status::bad_request, "Content-Length with Transfer-Encoding");
            return false;
        }
        if (connect) return true;
        // RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
        // framing: answer it, then close the connection.
        if (parser_.http_minor == 0) close_after_ = true;
        phase_ = Phase::body_chunked;
        std::construct_at(&framing_.chunked);
        framing_.chunked.start(limits_->max_body_bytes);
    } else if (parser_.content_length > 0) {
        if (parser_.content_length > limits_->max_body_bytes) {
            fail(Status::payload_too_large, "request body larger than the limit");
            return false;
        }
        if (connect) return true;
        phase_ = Phase::body_length;
        framing_.body_left = parser_.content_length;
    }
    return true;
}

void Session::finish_message() noexcept {
    respond();
    // llhttp never sees the body: it starts afresh at the next request (the
    // lenient flags and callbacks stay).
    llhttp_reset(&parser_);
}

void Session::respond() noexcept {
    // llhttp_should_keep_alive() without its response-framing half: HTTP/1.1
    // stays open unless "Connection: close", HTTP/1.0 closes unless
    // "Connection: keep-alive"; a "close" option closes either (RFC 9110
    // 7.6.1), also beside "keep-alive".
    const bool http10 = parser_.http_minor == 0;
    const bool keep_alive = (parser_.flags & F_CONNECTION_CLOSE) == 0 &&
                            (!http10 || (parser_.flags & F_CONNECTION_KEEP_ALIVE) != 0);
    Persistence persistence = Persistence::keep_alive;
    // We do not switch protocols: an Upgrade request (an Upgrade field, with
    // the upgrade option in Connection: RFC 9110 7.8) or a CONNECT is
    // answered as plain HTTP and the connection closed after it.
    const bool upgrade = parser_.method == HTTP_CONNECT ||
                         (upgrade_field_ && (parser_.flags & F_CONNECTION_UPGRADE) != 0);
    if (close_requested_ || close_after_ || upgrade || !keep_alive) {
        persistence = Persistence::close;
    } else if (http10) {
        persistence = Persistence::keep_alive_explicit;
    }
    const Method method = parser_.method == HTTP_GET    ? Method::get
                          : parser_.method == HTTP_HEAD ? Method::head
                                                        : Method::other;
    const Route r = route_path(method, target_path());
    Answer a{.head = r.head, .persistence = persistence};
    if (!r.method_allowed) {
        a.kind = Answer::Kind::error;
        a.status = r.endpoint == Endpoint::none ? Status::not_found : Status::method_not_allowed;
    } else if (const std::optional<Work> work = cache_->work_for(r.endpoint)) {
        a.kind = Answer::Kind::job;
        a.what = static_cast<std::uint8_t>(*work);
        a.count = r.endpoint == Endpoint::queries ? parse_queries(target_query()) : 1;
    } else {
        a.what = static_cast<std::uint8_t>(r.endpoint);
    }
    emit(a);
    ++responses_;
    in_message_ = false;
    method_known_ = false;  // an error before the next request line is no HEAD response
    phase_ = Phase::head;
    guard_.start_head();
    if (persistence == Persistence::close) closed_ = true;
}

namespace {
// What a held job counts against the output limit: its response (a /db
// answer is ~170 bytes, /fortunes ~1.3 KiB) and its entry, so that a flood
// of database requests is bounded as one of Hello World requests is.
constexpr std::size_t kJobRoom = 1024;
}  // namespace

// emit() and render() are forced inline into respond(), the path of every
// request: as calls they made the pipelined session path 240 ns a request
// against 224 before them (sm_bench_session, loadgen /plaintext).
[[gnu::always_inline]] inline void Session::emit(const Answer& a) noexcept {
    if (!deferred() && has_room()) [[likely]]
        return render(a);
    // Out of memory the answer is lost, and with it the order of the rest:
    // the session ends (the model closes once its output is written).
    try {
        if (deferred() && deferred_.back().answer == a &&
            deferred_.back().repeat < std::numeric_limits<std::uint32_t>::max()) {
            ++deferred_.back().repeat;
        } else {
            deferred_.push_back({a});
        }
    } catch (...) {
        closed_ = true;
    }
}

[[gnu::always_inline]] inline void Session::render(Answer a) noexcept {
    // A graceful stop: this response is the last, and says so.
    if (close_requested_ && a.persistence != Persistence::close) [[unlikely]] {
        a.persistence = Persistence::close;
        closed_ = true;
    }
    // Behind a waiting job (rare: the database), what is rendered counts
    // against held_room_; into the model's output, its size says the room.
    const bool held = waiting();
    ByteBuffer& out = sink();
    const std::size_t before = out.size();
    switch (a.kind) {
        case Answer::Kind::endpoint:
            cache_->write_endpoint(static_cast<Endpoint>(a.what), a.head, a.persistence, out);
            break;
        case Answer::Kind::error: cache_->write_error(a.status, {}, a.head, a.persistence, out); break;
        case Answer::Kind::failure:
            cache_->write_error(a.status, fail_detail_, a.head, a.persistence, out);
            break;
        case Answer::Kind::job:
            // The first job of the call: what is left of the output's room
            // is the room behind the jobs.
            if (!held) held_room_ = limit_ > out_->size() ? limit_ - out_->size() : 0;
            hold_job(static_cast<Work>(a.what), a.count, a.head, a.persistence);
            held_room_ -= std::min(held_room_, kJobRoom);
            return;
    }
    if (held) [[unlikely]]
        held_room_ -= std::min(held_room_, out.size() - before);
}

void Session::render_deferred() noexcept {
    while (deferred_first_ < deferred_.size() && has_room()) {
        Deferred& d = deferred_[deferred_first_];
        const Answer a = d.answer;
        if (--d.repeat == 0) ++deferred_first_;
        render(a);
        // A response that closes the session ends it: nothing after it is answered.
        if (a.persistence == Persistence::close || close_requested_) deferred_first_ = deferred_.size();
    }
    if (deferred_first_ < deferred_.size()) return;
    deferred_first_ = 0;
    deferred_.clear();
    // A flood's queue is not kept once answered: ~8 KiB holds 700 runs.
    if (deferred_.capacity() * sizeof(Deferred) > 8 * 1024) std::vector<Deferred>().swap(deferred_);
}

ByteBuffer& Session::sink() noexcept {
    return waiting() ? held_->entries[held_->end - 1].after : *out_;
}

void Session::hold_job(Work work, std::uint16_t count, bool head, Persistence p) noexcept {
    // Allocates only while a connection's queue grows past its deepest so
    // far: the entries and their buffers are kept. Out of memory, the
    // request is answered 503 rather than the process ended.
    try {
        if (!held_) held_ = std::make_unique<HeldQueue>();
        HeldQueue& q = *held_;
        if (q.end == q.entries.size()) q.entries.emplace_back();
        Held& h = q.entries[q.end];
        h.job = Job{++jobs_, epoch_, work, count};
        h.head = head;
        h.done = false;
        h.persistence = p;
        ++q.end;
    } catch (...) {
        cache_->write_error(Status::service_unavailable, "out of memory", head, p, sink());
    }
}

bool Session::next_job(Job& job) noexcept {
    if (!held_ || held_->handed == held_->end) return false;
    job = held_->entries[held_->handed++].job;
    return true;
}

void Session::complete(const Job& job, const JobResult& result, ByteBuffer& out) noexcept {
    if (job.epoch != epoch_ || !waiting()) return;
    HeldQueue& q = *held_;
    std::size_t i = q.first;
    while (i < q.handed && q.entries[i].job.id != job.id)
        ++i;
    if (i == q.handed || q.entries[i].done) return;  // not ours, or already answered
    Held& h = q.entries[i];
    // A graceful stop reached the last response owed: it says "Connection: close".
    if (close_requested_ && i + 1 == q.end && h.after.empty() && !in_message_ &&
        guard_.bytes() == 0 && !deferred())
        h.persistence = Persistence::close;
    if (h.persistence == Persistence::close) closed_ = true;
    try {
        cache_->write_job(h.job, result, h.head, h.persistence, h.response);
    } catch (...) {
        h.response.clear();
        cache_->write_error(Status::service_unavailable, "out of memory", h.head,
                            Persistence::close, h.response);
        closed_ = true;
    }
    h.done = true;
    // Everything no longer waiting goes out, in order.
    while (q.first < q.end && q.entries[q.first].done) {
        Held& f = q.entries[q.first++];
        out.append(f.response.view());
        out.append(f.after.view());
        f.response.clear();
        f.after.clear();
    }
    if (q.first == q.end) q.first = q.end = q.handed = 0;
}

void Session::release_held() noexcept {
    if (held_ && !waiting()) held_.reset();
}

void Session::fail(Status s, std::string_view detail) noexcept {
    const bool head = method_known_ && parser_.method == HTTP_HEAD;
    fail_detail_ = detail;
    emit({.kind = Answer::Kind::failure, .head = head, .persistence = Persistence::close, .status = s});
    ++responses_;
    closed_ = true;
}

void Session::expire_head(ByteBuffer& out) noexcept {
    if (closed_) return;
    out_ = &out;
    limit_ = kNoLimit;
    fail(Status::request_timeout, "request head not received in time");
    out_ = nullptr;
}

int Session::fail_in_callback(Status s, std::string_view detail) noexcept {
    fail(s, detail);
    return HPE_USER;
}

int Session::on_message_begin(llhttp_t* p) noexcept {
    Session& s = self(p);
    s.in_message_ = true;
    s.start_request();
    return 0;
}

int Session::on_url(llhttp_t* p, const char* at, std::size_t n) noexcept {
    Session& s = self(p);
    s.method_known_ = true;
    s.uri_bytes_ += n;
    if (s.uri_bytes_ > s.limits_->max_uri_bytes)
        return s.fail_in_callback(Status::uri_too_long, "request target longer than the limit");
    s.scan_target(at, n);
    return 0;
}

void Session::scan_target(const char* at, std::size_t n) noexcept {
    std::size_t i = 0;
    // Absolute-form prefix, byte by byte (rare; origin-form leaves at once).
    // The '/' that starts the path stays unconsumed: it is part of the path.
    while (i < n && target_state_ < TargetState::path) {
        const char c = at[i];
        switch (target_state_) {
            case TargetState::start:
                if (c == '/')
                    target_state_ = TargetState::path;
                else
                    target_state_ = c == '*' ? TargetState::none : TargetState::scheme;
                break;
            case TargetState::scheme:
                if (c == ':') target_state_ = TargetState::colon;
                break;
            case TargetState::colon:
                target_state_ = c == '/' ? TargetState::slash : TargetState::none;
                break;
            case TargetState::slash:
                target_state_ = c == '/' ? TargetState::authority : TargetState::none;
                break;
            case TargetState::authority:
                if (c == '/')
                    target_state_ = TargetState::path;
                else if (c == '?' || c == '#')
                    target_state_ = TargetState::done;  // empty path: "/"
                break;
            default: break;
        }
        if (target_state_ != TargetState::path) ++i;
    }
    if (target_state_ == TargetState::path) {
        std::size_t end = i;
        // The path's end ('?' or '#'), eight bytes at a time, then byte by byte.
        while (n - end >= 8) {
            const std::uint64_t w = chars::swar::load8(at + end);
            const int run =
                chars::swar::before_stop(chars::swar::equal(w, '?') | chars::swar::equal(w, '#'));
            end += static_cast<std::size_t>(run);
            if (run < 8) break;
        }
        while (end < n && at[end] != '?' && at[end] != '#')
            ++end;
        const std::size_t take = end - i;
        if (take > target_.size() - target_len_) {
            target_state_ = TargetState::overflow;
            return;
        }
        std::memcpy(target_.data() + target_len_, at + i, take);
        target_len_ = static_cast<std::uint8_t>(target_len_ + take);
        if (end == n) return;
        path_len_ = target_len_;
        if (at[end] == '#') {
            target_state_ = TargetState::done;
            return;
        }
        target_state_ = TargetState::query;
        i = end + 1;
    }
    if (target_state_ != TargetState::query) return;
    std::size_t end = i;
    while (end < n && at[end] != '#')
        ++end;
    const std::size_t room = target_.size() - target_len_;
    const std::size_t take = std::min(end - i, room);
    std::memcpy(target_.data() + target_len_, at + i, take);
    target_len_ = static_cast<std::uint8_t>(target_len_ + take);
    if (take < end - i) {
        // The query does not fit: keep its parameters that fit whole.
        while (target_len_ > path_len_ && target_[target_len_ - 1U] != '&')
            --target_len_;
        target_state_ = TargetState::done;
    } else if (end < n) {
        target_state_ = TargetState::done;
    }
}

std::string_view Session::target_query() const noexcept {
    if (target_state_ != TargetState::query && target_state_ != TargetState::done) return {};
    return {target_.data() + path_len_, static_cast<std::size_t>(target_len_ - path_len_)};
}

std::string_view Session::target_path() const noexcept {
    const std::uint8_t len = target_state_ == TargetState::path ? target_len_ : path_len_;
    switch (target_state_) {
        case TargetState::path:
        case TargetState::query:
        case TargetState::done:
            // "http://host?q" has an empty path, which means "/".
            return len != 0 ? std::string_view{target_.data(), len} : "/";
        case TargetState::authority: return "/";  // "http://host"
        default: return {};
    }
}

int Session::on_header_field(llhttp_t* p, const char* at, std::size_t n) noexcept {
    // Is this field Host, Transfer-Encoding or Upgrade? Matched case-
    // insensitively as the name streams in (it may be split across reads).
    // Their first letters differ, so the first letter picks the one
    // candidate: most names are decided there.
    Session& s = self(p);
    if (n == 0 || s.name_match_ == 0xff) return 0;
    if (s.name_match_ == 0) {
        switch (at[0] | 0x20) {
            case 'h': s.name_candidate_ = Field::host; break;
            case 't': s.name_candidate_ = Field::transfer_encoding; break;
            case 'u': s.name_candidate_ = Field::upgrade; break;
            default: s.name_match_ = 0xff; return 0;
        }
    }
    const std::string_view name = s.name_candidate_ == Field::host ? kHostName
                                  : s.name_candidate_ == Field::transfer_encoding
                                      ? kTransferEncodingName
                                      : kUpgradeName;
    if (n > name.size() - s.name_match_) {
        s.name_match_ = 0xff;
        return 0;
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (static_cast<char>(at[i] | 0x20) != name[s.name_match_ + i]) {
            s.name_match_ = 0xff;
            return 0;
        }
    }
    s.name_match_ = static_cast<std::uint8_t>(s.name_match_ + n);
    return 0;
}

int Session::on_header_field_complete(llhttp_t* p) noexcept {
    Session& s = self(p);
    s.field_ = Field::other;
    const bool whole = s.name_match_ != 0xff && s.name_match_ != 0;
    if (whole && s.name_candidate_ == Field::host && s.name_match_ == kHostName.size()) {
        s.field_ = Field::host;
        if (s.host_count_ < 0xff) ++s.host_count_;
        s.framing_.head.host.start();
    } else if (whole && s.name_candidate_ == Field::transfer_encoding &&
               s.name_match_ == kTransferEncodingName.size()) {
        s.field_ = Field::transfer_encoding;
        if (s.te_count_ < 0xff) ++s.te_count_;
        s.framing_.head.te.start_line();
    } else if (whole && s.name_candidate_ == Field::upgrade &&
               s.name_match_ == kUpgradeName.size()) {
        s.upgrade_field_ = true;
    }
    s.name_match_ = 0;
    if (++s.header_count_ > s.limits_->max_header_count)
        return s.fail_in_callback(Status::header_fields_too_large,
                                  "more header fields than the limit");
    return 0;
}

int Session::on_header_value(llhttp_t* p, const char* at, std::size_t n) noexcept {
    Session& s = self(p);
    if (s.field_ == Field::host) {
        s.framing_.head.host.feed(at, n);
    } else if (s.field_ == Field::transfer_encoding) {
        s.framing_.head.te.feed(at, n);
    }
    return 0;
}

int Session::on_header_value_complete(llhttp_t* p) noexcept {
    Session& s = self(p);
    if (s.field_ == Field::host && !s.framing_.head.host.valid())
        return s.fail_in_callback(Status::bad_request, "invalid Host header value");
    if (s.field_ == Field::transfer_encoding) {
        s.framing_.head.te.end_line();
        if (!s.framing_.head.te.valid())
            return s.fail_in_callback(Status::bad_request,
                                      "invalid Transfer-Encoding value (not a list of codings)");
    }
    return 0;
}

int Session::on_headers_complete(llhttp_t*) noexcept {
    // Pause so feed() learns where the head ends: the guard checks the head
    // before anything acts on the request, and the session frames the body.
    return HPE_PAUSED;
}

}  // namespace sm::http
