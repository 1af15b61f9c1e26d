#include "http/response.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "http/json.hpp"

namespace sm::http {
namespace {

// Content-Type lines with the Content-Length name that always follows.
constexpr std::string_view kTextPlain = "Content-Type: text/plain\r\nContent-Length: ";
// What ASP.NET's minimal-API "Hello World!" sample answers with.
constexpr std::string_view kTextPlainUtf8 =
    "Content-Type: text/plain; charset=utf-8\r\nContent-Length: ";
constexpr std::string_view kApplicationJson = "Content-Type: application/json\r\nContent-Length: ";
constexpr std::string_view kRootBody = "Hello World!";
constexpr std::string_view kTextHtml = "Content-Type: text/html; charset=utf-8\r\nContent-Length: ";
constexpr std::string_view kNoDatabase = "no database: start the server with --db";

constexpr std::string_view status_line(Status s) noexcept {
    switch (s) {
        case Status::ok: return "HTTP/1.1 200 OK\r\n";
        case Status::bad_request: return "HTTP/1.1 400 Bad Request\r\n";
        case Status::not_found: return "HTTP/1.1 404 Not Found\r\n";
        case Status::method_not_allowed: return "HTTP/1.1 405 Method Not Allowed\r\n";
        case Status::request_timeout: return "HTTP/1.1 408 Request Timeout\r\n";
        case Status::payload_too_large: return "HTTP/1.1 413 Content Too Large\r\n";
        case Status::uri_too_long: return "HTTP/1.1 414 URI Too Long\r\n";
        case Status::header_fields_too_large:
            return "HTTP/1.1 431 Request Header Fields Too Large\r\n";
        case Status::not_implemented: return "HTTP/1.1 501 Not Implemented\r\n";
        case Status::service_unavailable: return "HTTP/1.1 503 Service Unavailable\r\n";
        case Status::http_version_not_supported:
            return "HTTP/1.1 505 HTTP Version Not Supported\r\n";
    }
    return "HTTP/1.1 500 Internal Server Error\r\n";
}

constexpr std::string_view persistence_line(Persistence p) noexcept {
    switch (p) {
        case Persistence::keep_alive: return "";
        case Persistence::keep_alive_explicit: return "Connection: keep-alive\r\n";
        case Persistence::close: return "Connection: close\r\n";
    }
    return "";
}

constexpr std::size_t index_of(Endpoint e) noexcept {
    return static_cast<std::size_t>(e);
}

char* put(char* p, std::string_view s) noexcept {
    std::memcpy(p, s.data(), s.size());
    return p + s.size();
}

}  // namespace

std::string_view reason_phrase(Status s) noexcept {
    std::string_view line = status_line(s);
    line.remove_prefix(sizeof("HTTP/1.1 200 ") - 1);
    line.remove_suffix(2);
    return line;
}

std::string_view to_string(ResponseMode m) noexcept {
    return m == ResponseMode::cached ? "cached" : "composed";
}

std::optional<ResponseMode> parse_response_mode(std::string_view s) noexcept {
    if (s == "composed") return ResponseMode::composed;
    if (s == "cached") return ResponseMode::cached;
    return std::nullopt;
}

ResponseCache::ResponseCache(ResponseMode mode, std::time_t now, Workloads workloads)
    : mode_(mode), workloads_(workloads) {
    if (mode_ == ResponseMode::cached) {
        for (auto& per_endpoint : cached_)
            for (auto& response : per_endpoint)
                response.reserve(256);
        scratch_.reserve(512);
    }
    refresh(now);
}

bool ResponseCache::refresh(std::time_t now) {
    if (rendered_ && now == second_) return false;
    rendered_ = true;
    second_ = now;
    // IMF-fixdate (RFC 9110 5.6.7), from the civil calendar of <chrono>:
    // portable, and no locale or time zone can reach it.
    using namespace std::chrono;
    static constexpr std::array<const char*, 7> kDays = {"Sun", "Mon", "Tue", "Wed",
                                                         "Thu", "Fri", "Sat"};
    static constexpr std::array<const char*, 12> kMonths = {
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const sys_seconds t{seconds{now}};
    const sys_days day = floor<days>(t);
    const year_month_day date{day};
    const hh_mm_ss time{t - day};
    static_assert(kServerLine.substr(8, kServerName.size()) == kServerName);
    std::memcpy(common_.data(), kServerLine.data(), kServerLine.size());
    const int n = std::snprintf(
        common_.data() + kServerLine.size(), common_.size() - kServerLine.size(),
        "Date: %s, %02u %s %04d %02ld:%02ld:%02ld GMT\r\n", kDays[weekday{day}.c_encoding()],
        static_cast<unsigned>(date.day()), kMonths[static_cast<unsigned>(date.month()) - 1],
        static_cast<int>(date.year()), static_cast<long>(time.hours().count()),
        static_cast<long>(time.minutes().count()), static_cast<long>(time.seconds().count()));
    common_len_ = kServerLine.size() + static_cast<std::size_t>(n > 0 ? n : 0);
    if (mode_ == ResponseMode::cached) render_cached();
    return true;
}

void ResponseCache::compose(ByteBuffer& out, Status status, std::string_view type_line,
                            std::string_view body, bool head, Persistence p) const {
    static constexpr std::string_view kAllow = "Allow: GET, HEAD\r\n";
    const std::string_view first = status_line(status);
    const std::string_view connection = persistence_line(p);
    const std::string_view allow = status == Status::method_not_allowed ? kAllow : "";
    const std::size_t worst = first.size() + common_len_ + type_line.size() + 20 + 2 +
                              connection.size() + allow.size() + 2 + body.size();

    char* const start = out.prepare(worst);
    char* w = put(start, first);
    w = put(w, {common_.data(), common_len_});
    w = put(w, type_line);
    w = std::to_chars(w, w + 20, body.size()).ptr;
    w = put(w, "\r\n");
    w = put(w, connection);
    w = put(w, allow);
    w = put(w, "\r\n");
    if (!head) w = put(w, body);
    out.commit(static_cast<std::size_t>(w - start));
}

void ResponseCache::render_cached() {
    // Rendered through compose() itself, so both modes are byte-identical by construction.
    ByteBuffer& scratch = scratch_;
    const Message msg{kHelloWorld};
    char json[json_max_size(Message{kHelloWorld})];
    const std::string_view json_body{json, serialize(msg, json)};
    for (const bool head : {false, true}) {
        const auto h = static_cast<std::size_t>(head);
        scratch.clear();
        compose(scratch, Status::ok, kTextPlainUtf8, kRootBody, head, Persistence::keep_alive);
        cached_[index_of(Endpoint::root)][h].assign(scratch.view());
        scratch.clear();
        compose(scratch, Status::ok, kTextPlain, kHelloWorld, head, Persistence::keep_alive);
        cached_[index_of(Endpoint::plaintext)][h].assign(scratch.view());
        scratch.clear();
        compose(scratch, Status::ok, kApplicationJson, json_body, head, Persistence::keep_alive);
        cached_[index_of(Endpoint::json)][h].assign(scratch.view());
    }
}

std::optional<Work> ResponseCache::work_for(Endpoint e) const noexcept {
    switch (e) {
        case Endpoint::fortunes:
            if (workloads_.fortunes == FortuneSource::database) return Work::fortunes;
            return std::nullopt;
        case Endpoint::db:
            if (workloads_.database) return Work::world;
            return std::nullopt;
        case Endpoint::queries:
            if (workloads_.database) return Work::worlds;
            return std::nullopt;
        default: return std::nullopt;
    }
}

void ResponseCache::write_endpoint(Endpoint e, bool head, Persistence p, ByteBuffer& out) const {
    // Only the Hello World responses are cached: the workloads are work per request.
    const bool cacheable =
        e == Endpoint::root || e == Endpoint::plaintext || e == Endpoint::json;
    if (mode_ == ResponseMode::cached && p == Persistence::keep_alive && cacheable) {
        out.append(cached_[index_of(e)][static_cast<std::size_t>(head)]);
        return;
    }
    switch (e) {
        case Endpoint::plaintext:
            compose(out, Status::ok, kTextPlain, kHelloWorld, head, p);
            return;
        case Endpoint::json: {
            // Instantiated and serialized per request (TechEmpower rule).
            const Message msg{kHelloWorld};
            char json[json_max_size(Message{kHelloWorld})];
            const std::size_t n = serialize(msg, json);
            compose(out, Status::ok, kApplicationJson, {json, n}, head, p);
            return;
        }
        case Endpoint::root: compose(out, Status::ok, kTextPlainUtf8, kRootBody, head, p); return;
        case Endpoint::fortunes:
            // From memory; from the database it is a job (work_for).
            write_fortunes(builtin_fortunes(), head, p, out);
            return;
        case Endpoint::db:
        case Endpoint::queries:
            write_error(Status::service_unavailable, kNoDatabase, head, p, out);
            return;
        case Endpoint::none: write_error(Status::not_found, {}, head, p, out); return;
    }
}

void ResponseCache::write_job(const Job& job, const JobResult& result, bool head, Persistence p,
                              ByteBuffer& out) const {
    // The class of a failure only: its detail went to the server's log.
    if (result.error != JobError::none)
        return write_error(Status::service_unavailable, job_error_text(result.error), head, p, out);
    switch (job.work) {
        case Work::world:
            if (result.worlds.size() != 1)  // no failure, yet no row: a database client's fault
                return write_error(Status::service_unavailable, job_error_text(JobError::failed),
                                   head, p, out);
            return write_worlds(result.worlds, false, head, p, out);
        case Work::worlds: return write_worlds(result.worlds, true, head, p, out);
        case Work::fortunes: return write_fortunes(result.fortunes, head, p, out);
    }
}

namespace {

// HTML-escapes s into w (which holds 6 bytes per byte of s): the five
// characters TechEmpower's verifier checks, as Go's html/template writes them.
char* put_escaped(char* w, std::string_view s) noexcept {
    for (const char c : s) {
        switch (c) {
            case '&': w = put(w, "&amp;"); break;
            case '<': w = put(w, "&lt;"); break;
            case '>': w = put(w, "&gt;"); break;
            case '"': w = put(w, "&quot;"); break;
            case '\'': w = put(w, "&#39;"); break;
            default: *w++ = c;
        }
    }
    return w;
}

constexpr std::string_view kFortunesHead =
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>";
constexpr std::string_view kFortunesTail = "</table></body></html>";
constexpr std::string_view kAddedFortune = "Additional fortune added at request time.";

}  // namespace

void ResponseCache::write_fortunes(std::span<const FortuneRow> rows, bool head, Persistence p,
                                   ByteBuffer& out) const {
    // TechEmpower's Fortunes rules: the rows as fetched plus one added at
    // request time, sorted by message, every message escaped, rendered by
    // a template per request (nothing of the page is cached but its text).
    sorted_.assign(rows.begin(), rows.end());
    sorted_.push_back({0, kAddedFortune});
    std::sort(sorted_.begin(), sorted_.end(),
              [](const FortuneRow& a, const FortuneRow& b) { return a.message < b.message; });
    std::size_t worst = kFortunesHead.size() + kFortunesTail.size();
    static constexpr std::string_view kRowOpen = "<tr><td>";
    static constexpr std::string_view kCell = "</td><td>";
    static constexpr std::string_view kRowClose = "</td></tr>";
    for (const FortuneRow& f : sorted_)
        worst += kRowOpen.size() + 11 + kCell.size() + 6 * f.message.size() + kRowClose.size();
    body_.clear();
    char* const start = body_.prepare(worst);
    char* w = put(start, kFortunesHead);
    for (const FortuneRow& f : sorted_) {
        w = put(w, kRowOpen);
        w = std::to_chars(w, w + 11, f.id).ptr;
        w = put(w, kCell);
        w = put_escaped(w, f.message);
        w = put(w, kRowClose);
    }
    w = put(w, kFortunesTail);
    body_.commit(static_cast<std::size_t>(w - start));
    compose(out, Status::ok, kTextHtml, body_.view(), head, p);
}

void ResponseCache::write_worlds(std::span<const WorldRow> rows, bool array, bool head,
                                 Persistence p, ByteBuffer& out) const {
    // {"id":N,"randomNumber":M}, or an array of them for /queries.
    static constexpr std::string_view kId = "{\"id\":";
    static constexpr std::string_view kNumber = ",\"randomNumber\":";
    const std::size_t row_worst = kId.size() + 11 + kNumber.size() + 11 + 2;
    body_.clear();
    char* const start = body_.prepare(2 + rows.size() * row_worst);
    char* w = start;
    if (array) *w++ = '[';
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i != 0) *w++ = ',';
        w = put(w, kId);
        w = std::to_chars(w, w + 11, rows[i].id).ptr;
        w = put(w, kNumber);
        w = std::to_chars(w, w + 11, rows[i].random_number).ptr;
        *w++ = '}';
    }
    if (array) *w++ = ']';
    body_.commit(static_cast<std::size_t>(w - start));
    compose(out, Status::ok, kApplicationJson, body_.view(), head, p);
}

void ResponseCache::write_error(Status s, std::string_view detail, bool head, Persistence p,
                                ByteBuffer& out) const {
    // Error bodies are short and rare; a stack buffer keeps them allocation-free.
    char body[256];
    std::size_t n = 0;
    auto add = [&](std::string_view part) {  // keeps one byte for the final newline
        const std::size_t take = std::min(part.size(), sizeof body - 1 - n);
        std::memcpy(body + n, part.data(), take);
        n += take;
    };
    add(reason_phrase(s));
    if (!detail.empty()) {
        add(": ");
        add(detail);
    }
    body[n++] = '\n';
    compose(out, s, kTextPlain, {body, n}, head, p);
}

}  // namespace sm::http
