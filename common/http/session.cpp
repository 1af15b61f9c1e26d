#include "http/session.hpp"

#include <algorithm>
#include <cstring>

namespace sm::http {
namespace {

Session& self(llhttp_t* p) noexcept {
    return *static_cast<Session*>(p->data);
}

llhttp_settings_t make_settings(llhttp_cb begin, llhttp_data_cb url, llhttp_data_cb field,
                                llhttp_cb field_complete, llhttp_cb headers_complete,
                                llhttp_data_cb body, llhttp_cb message_complete) noexcept {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_begin = begin;
    s.on_url = url;
    s.on_header_field = field;
    s.on_header_field_complete = field_complete;
    s.on_headers_complete = headers_complete;
    s.on_body = body;
    s.on_message_complete = message_complete;
    return s;
}

}  // namespace

const llhttp_settings_t Session::kSettings =
    make_settings(&Session::on_message_begin, &Session::on_url, &Session::on_header_field,
                  &Session::on_header_field_complete, &Session::on_headers_complete,
                  &Session::on_body, &Session::on_message_complete);

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
    parser_.data = this;
    out_ = nullptr;
    scan_pos_ = nullptr;
    guard_.start_head();
    phase_ = Phase::head;
    in_message_ = method_known_ = closed_ = close_requested_ = false;
    unknown_method_ = in_method_ = false;
    error_status_ = Status::bad_request;
    error_detail_ = "";
    uri_bytes_ = header_count_ = 0;
    host_count_ = host_match_ = 0;
    body_bytes_ = responses_ = 0;
    target_len_ = 0;
    target_state_ = TargetState::start;
}

Session::Result Session::feed(std::span<const char> in, ByteBuffer& out) noexcept {
    if (closed_) return Result::close;
    if (in.empty()) return Result::open;  // llhttp must not see a null pointer
    out_ = &out;
    const char* p = in.data();
    const char* const end = p + in.size();
    scan_pos_ = p;
    if (unknown_method_) {
        scan_unknown_method(p, end);
        out_ = nullptr;
        return closed_ ? Result::close : Result::open;
    }
    while (!closed_) {
        const llhttp_errno_t err = llhttp_execute(&parser_, p, static_cast<std::size_t>(end - p));
        if (err == HPE_OK) {
            scan_to(end);
            break;
        }
        if (err == HPE_PAUSED) {
            // on_headers_complete always pauses, on_message_complete pauses for
            // a message with a body or a response that closed the session.
            const char* const pos = llhttp_get_error_pos(&parser_);
            llhttp_resume(&parser_);
            if (closed_) break;
            if (phase_ == Phase::head) {
                if (!scan_to(pos) || !head_done()) break;
            } else {
                if (!scan_to(pos)) break;
                respond();
            }
            p = pos;
            continue;
        }
        if (closed_) break;  // a callback already answered with an error
        if (err == HPE_INVALID_METHOD) {
            // llhttp knows a fixed list of methods; any other token is a
            // well-formed request it cannot parse further. The bytes before
            // the error are a prefix of a known method: token characters.
            const char* const pos = llhttp_get_error_pos(&parser_);
            if (!scan_to(pos)) break;
            unknown_method_ = in_method_ = true;
            scan_unknown_method(pos, end);
            break;
        }
        if (err == HPE_PAUSED_H2_UPGRADE) {
            fail(Status::bad_request, "HTTP/2 connection preface; this server speaks HTTP/1.1");
        } else if (err == HPE_USER) {
            fail(error_status_, error_detail_);
        } else {
            fail(Status::bad_request, llhttp_get_error_reason(&parser_));
        }
        break;
    }
    out_ = nullptr;
    return closed_ ? Result::close : Result::open;
}

bool Session::scan_to(const char* to) noexcept {
    const char* const from = scan_pos_;
    scan_pos_ = to;
    if (phase_ == Phase::body_length || from == to) return true;  // body data is opaque
    if (const char* why = guard_.scan(from, to)) {
        fail(Status::bad_request, why);
        return false;
    }
    if (phase_ == Phase::head) {
        if (guard_.bytes() > limits_->max_head_bytes) {
            fail(Status::header_fields_too_large, "request head larger than the limit");
            return false;
        }
        return true;
    }
    // Chunked framing counts toward the body limit, so chunk extensions cannot
    // make a request unbounded (llhttp 8.1.0 has no limit; CVE-2024-22019).
    body_bytes_ += static_cast<std::uint64_t>(to - from);
    if (body_bytes_ > limits_->max_body_bytes) {
        fail(Status::payload_too_large, "request body larger than the limit");
        return false;
    }
    return true;
}

void Session::scan_unknown_method(const char* p, const char* end) noexcept {
    // RFC 9110 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
    // "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA.
    constexpr auto is_tchar = [](unsigned char c) noexcept {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
    };
    // Rare and bounded by --max-head-bytes: one byte at a time, so the head's
    // end is found before whatever follows it (which is not answered).
    for (const char* q = p; q < end; ++q) {
        if (in_method_) {
            if (*q == ' ') {
                in_method_ = false;
            } else if (!is_tchar(static_cast<unsigned char>(*q))) {
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
    // request with more than one.
    if (host_count_ > 1) {
        fail(Status::bad_request, "more than one Host header");
        return false;
    }
    if (host_count_ == 0 && parser_.http_minor >= 1) {
        fail(Status::bad_request, "missing Host header (required in HTTP/1.1)");
        return false;
    }
    body_bytes_ = 0;
    if (parser_.flags & F_CHUNKED) {
        phase_ = Phase::body_chunked;
        guard_.start_chunked();
    } else if (parser_.content_length > 0) {
        if (parser_.content_length > limits_->max_body_bytes) {
            fail(Status::payload_too_large, "request body larger than the limit");
            return false;
        }
        phase_ = Phase::body_length;
    }
    return true;
}

void Session::respond() noexcept {
    // llhttp_should_keep_alive() without its call and its response-framing
    // half (a request never needs EOF to end): HTTP/1.1 stays open unless
    // "Connection: close", HTTP/1.0 closes unless "Connection: keep-alive".
    const bool http10 = parser_.http_minor == 0;
    const bool keep_alive = http10 ? (parser_.flags & F_CONNECTION_KEEP_ALIVE) != 0
                                   : (parser_.flags & F_CONNECTION_CLOSE) == 0;
    Persistence persistence = Persistence::keep_alive;
    // We do not switch protocols: an Upgrade or CONNECT request is answered
    // as plain HTTP and the connection closed after it.
    if (close_requested_ || parser_.upgrade || !keep_alive) {
        persistence = Persistence::close;
    } else if (http10) {
        persistence = Persistence::keep_alive_explicit;
    }
    const Method method = parser_.method == HTTP_GET    ? Method::get
                          : parser_.method == HTTP_HEAD ? Method::head
                                                        : Method::other;
    const Route r = route_path(method, target_path());
    if (r.method_allowed) {
        cache_->write_endpoint(r.endpoint, r.head, persistence, *out_);
    } else {
        cache_->write_error(
            r.endpoint == Endpoint::none ? Status::not_found : Status::method_not_allowed, {},
            r.head, persistence, *out_);
    }
    ++responses_;
    in_message_ = false;
    method_known_ = false;  // an error before the next request line is no HEAD response
    phase_ = Phase::head;
    guard_.start_head();
    if (persistence == Persistence::close) closed_ = true;
}

void Session::fail(Status s, std::string_view detail) noexcept {
    const bool head = method_known_ && parser_.method == HTTP_HEAD;
    cache_->write_error(s, detail, head, Persistence::close, *out_);
    ++responses_;
    closed_ = true;
}

void Session::expire_head(ByteBuffer& out) noexcept {
    if (closed_) return;
    out_ = &out;
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
    s.method_known_ = false;
    s.uri_bytes_ = s.header_count_ = 0;
    s.host_count_ = s.host_match_ = 0;
    s.body_bytes_ = 0;
    s.target_len_ = 0;
    s.target_state_ = TargetState::start;
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
    if (target_state_ != TargetState::path) return;
    std::size_t end = i;
    while (end < n && at[end] != '?' && at[end] != '#')
        ++end;
    const std::size_t take = end - i;
    if (take > target_.size() - target_len_) {
        target_state_ = TargetState::overflow;
        return;
    }
    std::memcpy(target_.data() + target_len_, at + i, take);
    target_len_ = static_cast<std::uint8_t>(target_len_ + take);
    if (end < n) target_state_ = TargetState::done;
}

std::string_view Session::target_path() const noexcept {
    switch (target_state_) {
        case TargetState::path:
        case TargetState::done:
            // "http://host?q" has an empty path, which means "/".
            return target_len_ != 0 ? std::string_view{target_.data(), target_len_} : "/";
        case TargetState::authority: return "/";  // "http://host"
        default: return {};
    }
}

int Session::on_header_field(llhttp_t* p, const char* at, std::size_t n) noexcept {
    // Is this field "Host"? Matched case-insensitively as the name streams in
    // (it may be split across reads). Most names arrive whole: a name that is
    // not 4 bytes long is decided at once.
    static constexpr char kHost[] = "host";
    Session& s = self(p);
    if (s.host_match_ == 0 && n != 4) {
        if (n > 4)
            s.host_match_ = 0xff;
        else if (n == 0)
            return 0;
    }
    for (std::size_t i = 0; i < n && s.host_match_ != 0xff; ++i) {
        const auto lower = static_cast<char>(at[i] | 0x20);
        s.host_match_ = s.host_match_ < 4 && lower == kHost[s.host_match_]
                            ? static_cast<std::uint8_t>(s.host_match_ + 1)
                            : std::uint8_t{0xff};
    }
    return 0;
}

int Session::on_header_field_complete(llhttp_t* p) noexcept {
    Session& s = self(p);
    if (s.host_match_ == 4 && s.host_count_ < 0xff) ++s.host_count_;
    s.host_match_ = 0;
    if (++s.header_count_ > s.limits_->max_header_count)
        return s.fail_in_callback(Status::header_fields_too_large,
                                  "more header fields than the limit");
    return 0;
}

int Session::on_headers_complete(llhttp_t*) noexcept {
    // Pause so feed() learns where the head ends: the guard checks the head
    // before anything acts on the request.
    return HPE_PAUSED;
}

int Session::on_body(llhttp_t* p, const char* at, std::size_t n) noexcept {
    Session& s = self(p);
    if (s.phase_ == Phase::body_chunked) {
        // Everything between two data spans is chunk framing.
        if (!s.scan_to(at)) return HPE_USER;
        s.scan_pos_ = at + n;
    }
    s.body_bytes_ += n;
    if (s.body_bytes_ > s.limits_->max_body_bytes)
        return s.fail_in_callback(Status::payload_too_large, "request body larger than the limit");
    return 0;
}

int Session::on_message_complete(llhttp_t* p) noexcept {
    Session& s = self(p);
    // With a body, the end of the message (and a chunked body's last framing)
    // is only known in feed(): pause and answer there.
    if (s.phase_ != Phase::head) return HPE_PAUSED;
    s.respond();
    return s.closed_ ? HPE_PAUSED : 0;
}

}  // namespace sm::http
