// Response rendering: status codes, the per-thread response cache and the two
// response modes. One instance per thread (no sharing, no locks); the owner
// calls refresh() with the current time once per event-loop batch.
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include <span>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/router.hpp"
#include "http/work.hpp"

namespace sm::http {

enum class Status : std::uint16_t {
    ok = 200,
    bad_request = 400,
    not_found = 404,
    method_not_allowed = 405,
    request_timeout = 408,
    payload_too_large = 413,
    uri_too_long = 414,
    header_fields_too_large = 431,
    not_implemented = 501,
    service_unavailable = 503,
    http_version_not_supported = 505,
};

// "Bad Request" for 400 and so on.
std::string_view reason_phrase(Status s) noexcept;

// How the connection continues after a response, and what the response says about it.
enum class Persistence : std::uint8_t {
    keep_alive,           // HTTP/1.1 default: no Connection header
    keep_alive_explicit,  // HTTP/1.0 client asked for keep-alive: "Connection: keep-alive"
    close,                // "Connection: close"; the server closes after the response
};

enum class ResponseMode : std::uint8_t {
    composed,  // TechEmpower rules: header block composed per response, JSON serialized per request
    cached,    // whole endpoint responses pre-rendered once per Date second
};

std::string_view to_string(ResponseMode m) noexcept;
std::optional<ResponseMode> parse_response_mode(std::string_view s) noexcept;

inline constexpr std::string_view kServerName = "servermodels";

class ResponseCache {
  public:
    ResponseCache(ResponseMode mode, std::time_t now, Workloads workloads = {});

    // Re-renders the Date line (and, in cached mode, the endpoint responses)
    // when `now` falls in a new second. Returns whether anything changed.
    bool refresh(std::time_t now);

    [[nodiscard]] ResponseMode mode() const noexcept { return mode_; }
    [[nodiscard]] const Workloads& workloads() const noexcept { return workloads_; }
    // What a GET or HEAD of `e` needs: a job (the database) or nothing.
    [[nodiscard]] std::optional<Work> work_for(Endpoint e) const noexcept;
    [[nodiscard]] std::time_t second() const noexcept { return second_; }
    // The "Date: <IMF-fixdate>\r\n" line of the current second.
    [[nodiscard]] std::string_view date_line() const noexcept {
        return {common_.data() + kServerLine.size(), common_len_ - kServerLine.size()};
    }

    // Appends the response for a GET or HEAD of a known endpoint.
    void write_endpoint(Endpoint e, bool head, Persistence p, ByteBuffer& out) const;

    // Appends the response to a job (http/work.hpp): the rows it produced,
    // or 503 naming the class of its failure (job_error_text).
    void write_job(const Job& job, const JobResult& result, bool head, Persistence p,
                   ByteBuffer& out) const;

    // Appends an error response (404, 405 with Allow, 4xx) whose body is the
    // reason phrase, followed by ": detail" when detail is not empty.
    void write_error(Status s, std::string_view detail, bool head, Persistence p,
                     ByteBuffer& out) const;

  private:
    static constexpr std::string_view kServerLine = "Server: servermodels\r\n";

    // type_line: "Content-Type: <type>\r\nContent-Length: " (see response.cpp).
    void compose(ByteBuffer& out, Status status, std::string_view type_line, std::string_view body,
                 bool head, Persistence p) const;
    void render_cached();
    // The bodies of the workloads, built in body_ (kept: no allocation once grown).
    void write_fortunes(std::span<const FortuneRow> rows, bool head, Persistence p,
                        ByteBuffer& out) const;
    void write_worlds(std::span<const WorldRow> rows, bool array, bool head, Persistence p,
                      ByteBuffer& out) const;

    ResponseMode mode_;
    Workloads workloads_;
    std::time_t second_ = 0;
    bool rendered_ = false;  // any time_t, -1 included, is a valid second
    // "Server: ...\r\nDate: ...\r\n": the lines every response shares, one copy.
    std::array<char, 96> common_{};
    std::size_t common_len_ = 0;
    // cached mode: [endpoint][head] for keep-alive responses, and the buffer
    // they are composed in (kept, so a refresh allocates nothing)
    std::array<std::array<std::string, 2>, 3> cached_;
    ByteBuffer scratch_;
    // Per-thread working memory of the workload bodies: a response is built
    // here before its Content-Length is known. Mutable: rendering is const.
    mutable ByteBuffer body_;
    mutable std::vector<FortuneRow> sorted_;
};

}  // namespace sm::http
