// Helpers shared by the unit tests: an independent response parser (llhttp in
// HTTP_RESPONSE mode, so the tests never trust the code under test to frame
// its own output), an independent IMF-fixdate renderer (std::chrono calendar
// arithmetic, not gmtime/strftime as common/ uses), and a session harness.
#pragma once

#include <llhttp.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/byte_buffer.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/session.hpp"

namespace sm::test {

inline bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto lower = [](char c) {
            return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
        };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

struct ParsedResponse {
    int status = 0;
    std::string reason;
    int http_major = 0;
    int http_minor = 0;
    std::vector<std::pair<std::string, std::string>> headers;  // in order, as sent
    std::string body;
    std::string raw;          // the response's bytes exactly as written
    bool keep_alive = false;  // llhttp_should_keep_alive() after the head

    // First value of a header, name compared case-insensitively.
    [[nodiscard]] std::optional<std::string> header(std::string_view name) const {
        for (const auto& [n, v] : headers)
            if (iequals(n, name)) return v;
        return std::nullopt;
    }
    [[nodiscard]] std::size_t count(std::string_view name) const {
        return static_cast<std::size_t>(std::count_if(
            headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); }));
    }
    // Status line and header block including the empty line: raw minus the body.
    [[nodiscard]] std::string head_block() const {
        const auto end = raw.find("\r\n\r\n");
        return end == std::string::npos ? raw : raw.substr(0, end + 4);
    }
};

struct ParsedStream {
    std::vector<ParsedResponse> responses;
    std::string error;     // llhttp's error name and reason; empty when the bytes parsed
    bool partial = false;  // the bytes end inside a response

    [[nodiscard]] bool ok() const noexcept { return error.empty() && !partial; }
    [[nodiscard]] std::size_t size() const noexcept { return responses.size(); }
    const ParsedResponse& operator[](std::size_t i) const { return responses.at(i); }
};

namespace detail {

struct ParseContext {
    ParsedStream* stream;
    const std::vector<bool>* head;
    bool in_message = false;
    bool in_value = false;
};

inline ParseContext& ctx(llhttp_t* p) noexcept {
    return *static_cast<ParseContext*>(p->data);
}

inline ParsedResponse& current(llhttp_t* p) {
    return ctx(p).stream->responses.back();
}

inline int on_message_begin(llhttp_t* p) {
    ctx(p).stream->responses.emplace_back();
    ctx(p).in_message = true;
    ctx(p).in_value = false;
    return 0;
}
inline int on_status(llhttp_t* p, const char* at, std::size_t n) {
    current(p).reason.append(at, n);
    return 0;
}
inline int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    auto& r = current(p);
    if (r.headers.empty() || ctx(p).in_value) r.headers.emplace_back();
    ctx(p).in_value = false;
    r.headers.back().first.append(at, n);
    return 0;
}
inline int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    ctx(p).in_value = true;
    current(p).headers.back().second.append(at, n);
    return 0;
}
inline int on_headers_complete(llhttp_t* p) {
    auto& r = current(p);
    r.status = p->status_code;
    r.http_major = p->http_major;
    r.http_minor = p->http_minor;
    r.keep_alive = llhttp_should_keep_alive(p) != 0;
    // A response to HEAD has no body whatever its Content-Length says; llhttp
    // cannot know the request method, so it is told (1 = no body).
    const auto index = ctx(p).stream->responses.size() - 1;
    const auto& head = *ctx(p).head;
    return index < head.size() && head[index] ? 1 : 0;
}
inline int on_body(llhttp_t* p, const char* at, std::size_t n) {
    current(p).body.append(at, n);
    return 0;
}
inline int on_message_complete(llhttp_t* p) {
    ctx(p).in_message = false;
    return HPE_PAUSED;  // so the parse loop learns where the response ends
}

}  // namespace detail

// Splits `bytes` into responses. head[i] says the i-th response answers a HEAD
// request (missing entries mean it does not).
inline ParsedStream parse_responses(std::string_view bytes, const std::vector<bool>& head = {}) {
    ParsedStream stream;
    if (bytes.empty()) return stream;
    detail::ParseContext context{&stream, &head};
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_message_begin = detail::on_message_begin;
    settings.on_status = detail::on_status;
    settings.on_header_field = detail::on_header_field;
    settings.on_header_value = detail::on_header_value;
    settings.on_headers_complete = detail::on_headers_complete;
    settings.on_body = detail::on_body;
    settings.on_message_complete = detail::on_message_complete;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_RESPONSE, &settings);
    parser.data = &context;

    const char* const begin = bytes.data();
    const char* const end = begin + bytes.size();
    const char* p = begin;
    const char* response_start = begin;
    while (p < end) {
        const llhttp_errno_t err = llhttp_execute(&parser, p, static_cast<std::size_t>(end - p));
        if (err == HPE_PAUSED) {
            const char* const pos = llhttp_get_error_pos(&parser);
            stream.responses.back().raw.assign(response_start, pos);
            response_start = pos;
            llhttp_resume(&parser);
            p = pos;
            continue;
        }
        if (err != HPE_OK) {
            stream.error =
                std::string(llhttp_errno_name(err)) + ": " + llhttp_get_error_reason(&parser);
        }
        break;
    }
    stream.partial = context.in_message;
    if (stream.partial) stream.responses.back().raw.assign(response_start, end);
    return stream;
}

inline ParsedStream parse_responses(const http::ByteBuffer& out,
                                    const std::vector<bool>& head = {}) {
    return parse_responses(out.view(), head);
}

// IMF-fixdate (RFC 9110 5.6.7) of an epoch second, from std::chrono's civil
// calendar: independent of the gmtime_r/strftime path common/ uses.
inline std::string imf_fixdate(std::time_t t) {
    using namespace std::chrono;
    static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const sys_seconds tp{seconds{t}};
    const sys_days day = floor<days>(tp);
    const year_month_day ymd{day};
    const hh_mm_ss<seconds> hms{tp - day};
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s, %02u %s %04d %02d:%02d:%02d GMT",
                  kDays[weekday{day}.c_encoding()], static_cast<unsigned>(ymd.day()),
                  kMonths[static_cast<unsigned>(ymd.month()) - 1], static_cast<int>(ymd.year()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()));
    return buf;
}

// 1994-11-06 08:49:37 UTC, the example date of RFC 9110 (a Sunday).
inline constexpr std::time_t kRfcExampleSecond = 784111777;
inline constexpr std::string_view kRfcExampleDate = "Sun, 06 Nov 1994 08:49:37 GMT";

inline constexpr std::string_view kPlaintextBody = "Hello, World!";
inline constexpr std::string_view kJsonBody = R"({"message":"Hello, World!"})";
inline constexpr std::string_view kRootBody = "Hello World!";

// One session on one connection, with the cache and limits it points to.
struct SessionHarness {
    explicit SessionHarness(http::Limits l = {},
                            http::ResponseMode mode = http::ResponseMode::composed,
                            std::time_t now = kRfcExampleSecond, http::Workloads workloads = {})
        : limits(l), cache(mode, now, workloads), session(cache, limits) {}

    http::Session::Result feed(std::string_view bytes) {
        return session.feed(std::span<const char>(bytes.data(), bytes.size()), out);
    }
    // Feeds a private heap copy that dies right after feed(), so a pointer the
    // session kept into earlier input would be caught by AddressSanitizer.
    http::Session::Result feed_copy(std::string_view bytes) {
        const std::vector<char> copy(bytes.begin(), bytes.end());
        return session.feed(std::span<const char>(copy.data(), copy.size()), out);
    }
    [[nodiscard]] ParsedStream parsed(const std::vector<bool>& head = {}) const {
        return parse_responses(out.view(), head);
    }

    http::Limits limits;
    http::ResponseCache cache;
    http::Session session;
    http::ByteBuffer out;
};

}  // namespace sm::test
