// Frames HTTP/1.1 responses in a byte stream: fed whatever a read returned,
// it reports each complete response (status, keep-alive, body) in order.
// Bodies are delimited by Content-Length, chunked transfer coding, or the
// connection's close; 1xx interim responses are skipped; responses to HEAD
// and 204/304 have no body. Only what framing needs is parsed, in one pass
// over each head, so the load generator stays cheaper than the server it
// measures. Sans-I/O: unit-testable with any split of the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sm::loadgen {

struct Response {
    int status = 0;
    bool close =
        false;  // the server closes after it (Connection: close, HTTP/1.0, read-until-close body)
    std::uint64_t body_bytes = 0;  // decoded body length
    std::string_view body;  // the body, when capture is on (else empty); valid during the callback
    bool body_truncated = false;  // capture on, and the body was longer than the capture limit
};

class ResponseFramer {
  public:
    enum class Result {
        ok,         // everything fed was consumed; more may complete later
        closed,     // a response with `close` completed: the bytes after it were ignored
        malformed,  // not a valid HTTP/1.x response: error() says why
    };

    static constexpr std::size_t kMaxHead = 64 * 1024;  // status line + headers
    static constexpr std::size_t kMaxLine = 4 * 1024;   // a chunk-size or trailer line

    // Bodies of responses to HEAD requests are absent whatever the headers say.
    void set_head_requests(bool head) noexcept { head_requests_ = head; }
    // Keep each body (up to `limit` bytes) so the callback can check it.
    void set_capture(std::size_t limit);

    // Frames `data`, calling on_response(const Response&) for every response
    // completed in it. After `closed` or `malformed` call reset() before reuse.
    template <class OnResponse>
    Result feed(std::string_view data, OnResponse&& on_response);

    // The connection reached EOF: completes a body delimited by the close.
    // Returns true (and calls on_response) if that completed a response.
    template <class OnResponse>
    bool finish(OnResponse&& on_response);

    // Bytes of a response are pending (a head, body or chunk still incomplete).
    [[nodiscard]] bool in_response() const noexcept {
        return state_ != State::head || !carry_.empty();
    }
    [[nodiscard]] std::string_view error() const noexcept { return error_; }
    // The bytes of the head that failed, up to 256, for diagnostics.
    [[nodiscard]] std::string_view error_context() const noexcept { return error_context_; }
    void reset() noexcept;

  private:
    enum class State {
        head,
        body_length,
        body_until_close,
        chunk_size,
        chunk_data,
        chunk_data_crlf,
        trailers
    };
    enum class Step { more, response, error };

    // Parses one head in [p, end); on success sets state_ and current_.
    // Returns the bytes consumed, 0 if the head is incomplete, or npos on error.
    std::size_t parse_head(const char* p, const char* end);
    Step run(std::string_view& data);  // advances until a response completes or input runs out
    void append_body(const char* p, std::size_t n);
    void fail(std::string_view why, std::string_view context = {});
    bool chunk_size_line(std::string_view line);
    bool trailer_line(std::string_view line);

    State state_ = State::head;
    Response current_{};
    std::uint64_t remaining_ = 0;  // body_length: bytes left; chunk_data: bytes left in the chunk
    std::string carry_;            // a head, chunk-size or trailer line split across feeds
    std::string body_;
    std::size_t capture_limit_ = 0;
    bool capture_ = false;
    bool head_requests_ = false;
    bool done_ = false;  // current_ completed, not yet reported
    std::string error_;
    std::string error_context_;
};

template <class OnResponse>
ResponseFramer::Result ResponseFramer::feed(std::string_view data, OnResponse&& on_response) {
    while (true) {
        switch (run(data)) {
            case Step::more: return Result::ok;
            case Step::error: return Result::malformed;
            case Step::response: {
                const bool close = current_.close;
                if (capture_) current_.body = body_;
                on_response(static_cast<const Response&>(current_));
                current_ = Response{};
                body_.clear();
                if (close) return Result::closed;
                if (data.empty()) return Result::ok;
                break;
            }
        }
    }
}

template <class OnResponse>
bool ResponseFramer::finish(OnResponse&& on_response) {
    if (state_ != State::body_until_close) return false;
    current_.close = true;
    if (capture_) current_.body = body_;
    on_response(static_cast<const Response&>(current_));
    reset();
    return true;
}

}  // namespace sm::loadgen
