// The sans-I/O HTTP/1.1 session: no sockets, no threads, no clocks. A model
// feeds it the bytes it read from one connection; the session appends a
// complete response for every complete request to the output buffer, in
// order, and says whether the connection stays open. Requests may be split
// anywhere and pipelined; bodies are read and discarded.
//
// Who parses what: llhttp parses each request head (request line and header
// fields) and FramingGuard checks every byte of it; the session then decides
// the message's framing itself (RFC 9112 6.3) and frames the body:
// Content-Length bodies are skipped, chunked ones decoded by ChunkedDecoder,
// and llhttp starts afresh at the next request. So where a message ends never
// depends on llhttp's strict or loose mode.
//
// Responses completed later: a request for /db, /queries (or /fortunes from
// the database) becomes a Job (http/work.hpp) instead of a response. From
// then on every later response is held in the session, in order, until the
// job's rows arrive (complete()); the model takes the jobs (next_job()) and
// should stop reading the connection while waiting() (as it stops while its
// own output is unsent), so the held responses stay bounded by one read.
//
// Output bounded per connection: feed() and resume() take a limit on the
// output. Once `out` reaches it, the responses to the rest of the requests
// are not rendered but deferred: each is kept as a few bytes saying what to
// answer (a run of identical ones as one entry), and rendered by resume()
// once the model has room again, in order, with the Date of that moment.
// So a client that pipelines without reading holds at most the limit (and
// one response) of rendered output, whatever one read brought; the model
// stops reading while deferred() (as while waiting()).
#pragma once

#include <llhttp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/chunked.hpp"
#include "http/fields.hpp"
#include "http/framing_guard.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/work.hpp"

namespace sm::http {

class Session {
  public:
    enum class Result : std::uint8_t {
        open,   // keep reading
        close,  // write what is in the output buffer, then close (lingering)
    };

    Session(const ResponseCache& cache, const Limits& limits) noexcept;
    // llhttp keeps a pointer to the session: it stays where it was made.
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // No limit on the output: every response is rendered at once.
    static constexpr std::size_t kNoLimit = static_cast<std::size_t>(-1);

    // Parses `in`, appending responses to `out` (or holding them while a job
    // is waiting) while out.size() is under `limit`; the responses beyond it
    // are deferred (see above). After Result::close every further input is
    // ignored (the data after "Connection: close" or a bad request is not
    // answered); the connection closes once nothing is owed (owes()) and
    // `out` is written.
    Result feed(std::span<const char> in, ByteBuffer& out, std::size_t limit = kNoLimit) noexcept;
    // Renders deferred responses, in order, into `out` while out.size() is
    // under `limit` (at least one, if any is deferred and `limit` allows any).
    // Nothing while a job waits (complete() releases what waits behind it;
    // resume after). Result::close when the session has ended (a deferred
    // response closed it, or a graceful stop reached it: request_close()).
    Result resume(ByteBuffer& out, std::size_t limit) noexcept;
    // Responses wait to be rendered for want of room in the output: the
    // model should not read until resume() has rendered them all.
    [[nodiscard]] bool deferred() const noexcept { return !deferred_.empty(); }
    // Some request read is not answered in the output yet: a response waits
    // for a job or is deferred. The connection must not be closed as done.
    [[nodiscard]] bool owes() const noexcept { return waiting() || deferred(); }
    // Heap bytes the deferred answers hold (0 unless the output limit was
    // reached): what a flood costs the connection besides its output.
    [[nodiscard]] std::size_t deferred_memory() const noexcept {
        return deferred_.capacity() * sizeof(Deferred);
    }

    // Ready for a new connection: jobs still out for the old one become stale.
    void reset() noexcept;

    // The next job the model has not taken yet, in request order.
    [[nodiscard]] bool next_job(Job& job) noexcept;
    // A job's outcome: renders its response (the rows, or 503 with the
    // error) and appends to `out` every response no longer waiting, in
    // order. A job of an earlier connection (its epoch), or one already
    // completed, is ignored. Jobs may complete in any order.
    void complete(const Job& job, const JobResult& result, ByteBuffer& out) noexcept;
    // Some response waits for a job: the connection must not be closed as
    // done, and should not be read until it is not.
    [[nodiscard]] bool waiting() const noexcept { return held_ != nullptr && held_->end != 0; }
    // Which connection this is: it changes at every reset().
    [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
    // Which connection this is, set by its owner after a reset(): a session
    // taken from a pool (runtime/session_slot.hpp) gets its connection's
    // next epoch, so no job of another request it served matches.
    void set_epoch(std::uint64_t epoch) noexcept { epoch_ = epoch; }
    // Gives back the memory held responses used (an idle connection); only
    // when nothing is waiting.
    void release_held() noexcept;

    // Renders later responses with this cache. A thread-pool worker binds its
    // own per-thread cache before feeding a connection another thread made.
    void bind(const ResponseCache& cache) noexcept { cache_ = &cache; }

    // The next response rendered carries "Connection: close" and ends the
    // session (graceful shutdown): the requests deferred behind it are not
    // answered. A session that is idle() can simply be closed.
    void request_close() noexcept { close_requested_ = true; }
    [[nodiscard]] bool close_requested() const noexcept { return close_requested_; }

    // No request is partly received, and no response is owed.
    [[nodiscard]] bool idle() const noexcept {
        return !in_message_ && guard_.bytes() == 0 && !owes();
    }
    // A request head (request line and headers) is partly received: the
    // model's --header-timeout runs from the moment this became true.
    [[nodiscard]] bool in_head() const noexcept {
        return phase_ == Phase::head && !closed_ && (in_message_ || guard_.bytes() != 0);
    }
    // Which request the head in progress belongs to: requests are answered in
    // order, one response each, so it is the count of responses so far. A
    // read that completes one head and begins the next leaves in_head() true;
    // a changed head_id() tells the model the head (and its deadline) is new.
    [[nodiscard]] std::uint64_t head_id() const noexcept { return responses_; }
    // The head did not arrive in time: appends "408 Request Timeout" with
    // "Connection: close" to `out` and ends the session. Nothing if closed().
    void expire_head(ByteBuffer& out) noexcept;
    [[nodiscard]] bool closed() const noexcept { return closed_; }
    [[nodiscard]] std::uint64_t responses() const noexcept { return responses_; }

  private:
    enum class Phase : std::uint8_t { head, body_length, body_chunked };
    // Which of the fields the session reads a header field is.
    enum class Field : std::uint8_t { other, host, transfer_encoding, upgrade };

    static int on_message_begin(llhttp_t* p) noexcept;
    static int on_url(llhttp_t* p, const char* at, std::size_t n) noexcept;
    static int on_header_field(llhttp_t* p, const char* at, std::size_t n) noexcept;
    static int on_header_field_complete(llhttp_t* p) noexcept;
    static int on_header_value(llhttp_t* p, const char* at, std::size_t n) noexcept;
    static int on_header_value_complete(llhttp_t* p) noexcept;
    static int on_headers_complete(llhttp_t* p) noexcept;
    static const llhttp_settings_t kSettings;

    // llhttp_execute over [p, end) as if every HTAB were SP (see session.cpp);
    // on an error or pause, `pos` is where it happened in [p, end]. `tab` is
    // the next HTAB at or after `p`, or `end`, or null (not searched yet); it
    // moves on.
    llhttp_errno_t execute(const char* p, const char* end, const char*& tab,
                           const char*& pos) noexcept;
    // Parses head bytes from `p`; returns where the next phase starts.
    const char* parse_head(const char* p, const char* end, const char*& tab) noexcept;
    // The per-request state, afresh at a new connection and at each message.
    void start_request() noexcept;
    // Frames body bytes from `p`; returns where the next request starts.
    const char* skip_body(const char* p, const char* end) noexcept;
    const char* decode_chunked(const char* p, const char* end) noexcept;
    // Runs the guard over [scan_pos_, to); false after writing an error response.
    bool scan_to(const char* to) noexcept;
    // After llhttp rejected the method: checks [p, end) as the rest of a head
    // whose method is a token unknown to llhttp, answering 501 at its end.
    void scan_unknown_method(const char* p, const char* end) noexcept;
    // Checks at the end of the head and decides the body's framing; false
    // after writing an error response.
    bool head_done() noexcept;
    // The message has ended: answers it, and readies llhttp for the next.
    void finish_message() noexcept;
    void respond() noexcept;

    // What to answer to one request, decided when it is parsed: small, so
    // that a deferred one costs a few bytes.
    struct Answer {
        enum class Kind : std::uint8_t {
            endpoint,  // a Hello World endpoint's or workload's response (what: Endpoint)
            job,       // a job's, rendered when its rows arrive (what: Work)
            error,     // an error response whose body is the reason phrase
            failure,   // the same with ": " and fail_detail_; the session's last
        };
        Kind kind = Kind::endpoint;
        std::uint8_t what = 0;
        bool head = false;
        Persistence persistence = Persistence::keep_alive;
        Status status = Status::ok;  // error, failure
        std::uint16_t count = 1;     // job: World rows
        friend bool operator==(const Answer&, const Answer&) = default;
    };
    // A run of identical answers (a flood of one request is one entry).
    struct Deferred {
        Answer answer;
        std::uint32_t repeat = 1;
    };
    // Renders `a` now (room is left and nothing is deferred before it), or
    // defers it behind the others.
    void emit(const Answer& a) noexcept;
    void render(Answer a) noexcept;
    // Room is left for another response in what it would be rendered into:
    // the model's output under its limit, or, behind a waiting job, held_room_.
    [[nodiscard]] bool has_room() const noexcept {
        return waiting() ? held_room_ > 0 : out_->size() < limit_;
    }
    // Renders deferred answers while room is left.
    void render_deferred() noexcept;
    // Where the next response goes: the model's output, or behind the last
    // job still waiting.
    [[nodiscard]] ByteBuffer& sink() noexcept;
    // Queues the request's job; the responses after it wait behind it.
    void hold_job(Work work, std::uint16_t count, bool head, Persistence p) noexcept;
    // Answers with an error response with "Connection: close" and ends the session.
    void fail(Status s, std::string_view detail) noexcept;
    int fail_in_callback(Status s, std::string_view detail) noexcept;

    llhttp_t parser_{};
    const ResponseCache* cache_;
    const Limits* limits_;
    ByteBuffer* out_ = nullptr;       // only during feed()
    const char* scan_pos_ = nullptr;  // first byte the guard has not seen
    FramingGuard guard_;
    // What frames the message, by phase_: the checks of the fields the
    // session reads during a head, then the chunked decoder or what is left
    // of a Content-Length body. Never two at once, so they share their
    // bytes: a session is most of an idle connection's memory.
    union Framing {
        struct Head {
            HostCheck host;
            TransferEncodingCheck te;
        } head;
        ChunkedDecoder chunked;
        std::uint64_t body_left;
        Framing() noexcept : head() {}
    } framing_;
    Phase phase_ = Phase::head;
    Field field_ = Field::other;
    bool in_message_ = false;
    bool method_known_ = false;
    bool closed_ = false;
    bool close_requested_ = false;
    // RFC 9112 6.1: an HTTP/1.0 request with Transfer-Encoding is answered,
    // then the connection closed.
    bool close_after_ = false;
    // The request's method is a token llhttp does not know (RFC 9110 9.1: 501,
    // not 400): the rest of the head goes to the guard alone.
    bool unknown_method_ = false;
    bool in_method_ = false;       // still inside that method token
    std::uint8_t host_count_ = 0;  // Host fields in this request (RFC 9112 3.2: exactly one)
    // Transfer-Encoding fields, even empty ones (llhttp flags only non-empty values).
    std::uint8_t te_count_ = 0;
    // An Upgrade field, even an empty one (llhttp flags only non-empty values).
    bool upgrade_field_ = false;
    // The field the current name may still be (decided by its first letter:
    // h, t, u), and how many of its letters it matched; 0xff: none.
    Field name_candidate_ = Field::other;
    std::uint8_t name_match_ = 0;
    Status error_status_ = Status::bad_request;  // for HPE_USER
    const char* error_detail_ = "";
    std::size_t uri_bytes_ = 0;
    std::size_t header_count_ = 0;
    std::uint64_t responses_ = 0;
    // Where on_url is inside the request target. Absolute-form targets
    // ("http://host/path") have their scheme and authority skipped, whatever
    // their length; only the path up to '?' or '#' is kept for routing.
    enum class TargetState : std::uint8_t {
        start,      // nothing seen yet
        scheme,     // absolute-form: before "://"
        colon,      // ":" seen
        slash,      // ":/" seen
        authority,  // "://" seen, before the path
        path,       // keeping bytes in target_
        query,      // after '?': keeping the query's bytes in target_ while they fit
        done,       // '#' ended the path or query, or the query no longer fits
        overflow,   // a path longer than target_: no endpoint of ours
        none,       // asterisk- or authority-form, or malformed: no path
    };
    void scan_target(const char* at, std::size_t n) noexcept;
    [[nodiscard]] std::string_view target_path() const noexcept;

    [[nodiscard]] std::string_view target_query() const noexcept;

    // The path, then (when there is one) '?' and as much of the query as
    // fits: /queries reads its parameter from it.
    std::array<char, 128> target_{};
    std::uint8_t target_len_ = 0;
    std::uint8_t path_len_ = 0;  // of target_, once the path ended
    TargetState target_state_ = TargetState::start;

    // The responses in order from the first that waits for a job: each job,
    // then the responses that follow it up to the next job. Made on the
    // first job a connection sees, kept (with its buffers) for the next.
    struct Held {
        Job job;
        bool head = false;
        bool done = false;
        Persistence persistence = Persistence::keep_alive;
        ByteBuffer response;  // the job's, once complete
        ByteBuffer after;     // the responses behind it
    };
    struct HeldQueue {
        std::vector<Held> entries;  // [first, end) in use; the rest kept for reuse
        std::size_t first = 0;
        std::size_t end = 0;
        std::size_t handed = 0;  // jobs before it are the model's
    };
    std::unique_ptr<HeldQueue> held_;
    std::uint64_t epoch_ = 0;
    std::uint64_t jobs_ = 0;  // jobs queued on this connection: each one's id

    // Deferred answers, [deferred_first_, size()) in order; emptied once all
    // are rendered. Empty (and with no memory) unless the client outruns
    // its output limit.
    std::vector<Deferred> deferred_;
    std::size_t deferred_first_ = 0;
    // The detail of a deferred failure (a static string: llhttp's reasons
    // and the session's own are string literals).
    std::string_view fail_detail_;
    // The size of the model's output at which feed() and resume() defer.
    std::size_t limit_ = kNoLimit;
    // Bytes that may still be rendered behind a waiting job (each job
    // counting kJobRoom), set when the first job of a call is held.
    std::size_t held_room_ = 0;
};

// When a model's --header-timeout deadline starts: at a head's first byte,
// and again when one read completes a head and begins the next (pipelined
// traffic often ends a read inside the next request, so in_head() stays true
// across it). One per connection, beside the model's deadline.
class HeadMark {
  public:
    // After a feed that leaves `s` inside a head: whether that head is new
    // to the model's deadline (`running`: one is set, for the head recorded
    // here), so the deadline must start now. Records the head.
    // (`s`: a Session, or what holds one: runtime::SessionSlot.)
    template <typename S>
    [[nodiscard]] bool is_new(const S& s, bool running) noexcept {
        if (running && id_ == s.head_id()) return false;
        id_ = s.head_id();
        return true;
    }

  private:
    std::uint64_t id_ = 0;
};

}  // namespace sm::http
