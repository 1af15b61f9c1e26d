// libFuzzer harness for http::Session, the code every model runs on untrusted
// bytes. Each input is fed twice to fresh sessions: whole, and split into
// pieces whose sizes come from the input's first byte. Checked on every
// input (a failure aborts, so libFuzzer keeps the input):
//   - the output is a sequence of complete, well-formed HTTP/1.1 responses
//     (parsed with llhttp in response mode, every one with Content-Length;
//     skipped when the input holds "HEAD": a response parser cannot know
//     that a HEAD response's Content-Length has no body behind it);
//   - the split feed gets the same answer as the whole one (the session's
//     answer cannot depend on how TCP cut the stream): byte for byte up to
//     the first error response, then one error response in both. Which
//     error may differ: llhttp, given more bytes at once, can see a fault
//     before the guard or a limit does (found by this harness: 400
//     "Missing expected LF after header value" vs 400 "malformed request
//     line"; 400 "Unexpected char in url schema" vs 414 for a target both
//     too long and malformed). Both are right answers to a bad request;
//     the session then closes either way;
//   - after the session says close, further input changes nothing;
//   - the same twice more with the workloads on (/db, /queries and
//     /fortunes become jobs): whole with each feed's jobs completed in
//     order, in pieces with them completed in reverse after each piece.
//     Responses held behind jobs come out in request order whatever the
//     completion order, so the two answers agree as above, and nothing is
//     left waiting.
//   - the same in pieces with an output limit (from the input's first
//     byte), driven as a model drives it (no more input while responses
//     are deferred; resume() until none is), with the jobs completed after
//     each step: byte for byte the answer without the limit, and nothing
//     left deferred or waiting.
// Small limits make the 413/414/431 paths reachable in short inputs.
#include <llhttp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "fuzz_setup.hpp"
#include "http/byte_buffer.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/session.hpp"

namespace {

using sm::http::ByteBuffer;
using sm::http::Limits;
using sm::http::ResponseCache;
using sm::http::Session;

[[noreturn]] void fail(const char* why) {
    std::fprintf(stderr, "fuzz_session: %s\n", why);
    std::abort();
}

struct Counter {
    int complete = 0;
    bool length = false;
    std::vector<int> statuses;
};

int on_headers_complete(llhttp_t* p) {
    static_cast<Counter*>(p->data)->statuses.push_back(llhttp_get_status_code(p));
    return 0;
}

int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    constexpr std::string_view kLength = "content-length";
    if (n != kLength.size()) return 0;
    for (std::size_t i = 0; i < n; ++i)
        if ((at[i] | 0x20) != kLength[i]) return 0;
    static_cast<Counter*>(p->data)->length = true;
    return 0;
}

int on_message_complete(llhttp_t* p) {
    auto* c = static_cast<Counter*>(p->data);
    if (!c->length) return -1;  // every response says how long it is
    c->length = false;
    ++c->complete;
    return 0;
}

// Every byte of `out` belongs to a complete, well-formed response; their statuses.
std::vector<int> check_responses(std::string_view out) {
    if (out.empty()) return {};
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_header_field = on_header_field;
    settings.on_message_complete = on_message_complete;
    settings.on_headers_complete = on_headers_complete;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_RESPONSE, &settings);
    Counter counter;
    parser.data = &counter;
    if (llhttp_execute(&parser, out.data(), out.size()) != HPE_OK)
        fail("the output is not well-formed HTTP responses");
    // Ends on a response boundary: nothing half-written.
    if (llhttp_finish(&parser) != HPE_OK) fail("the output ends inside a response");
    if (counter.complete == 0) fail("output without a complete response");
    return counter.statuses;
}

// `out` up to its first error response (4xx/5xx).
std::string_view before_error(std::string_view out) {
    for (std::size_t at = 0; at < out.size();) {
        if (out.substr(at, 10) == "HTTP/1.1 4" || out.substr(at, 10) == "HTTP/1.1 5")
            return out.substr(0, at);
        const std::size_t end = out.find("\r\n\r\n", at);
        if (end == std::string_view::npos) break;
        const std::size_t cl = out.find("Content-Length: ", at);
        std::size_t body = 0;
        if (cl != std::string_view::npos && cl < end)
            for (std::size_t i = cl + 16; i < out.size() && out[i] >= '0' && out[i] <= '9'; ++i)
                body = body * 10 + static_cast<std::size_t>(out[i] - '0');
        // A HEAD response has no body behind its Content-Length: the next
        // response starts right after the head then.
        at = out.substr(end + 4, 9) == "HTTP/1.1 " ? end + 4 : end + 4 + body;
    }
    return out;
}

std::string_view feed(Session& s, ByteBuffer& out, std::span<const char> in) {
    s.feed(in, out);
    return {out.data(), out.size()};
}

// Completes every job the session queued, with fixed rows, in order or reversed.
void complete_jobs(Session& s, ByteBuffer& out, bool reversed) {
    static const std::vector<sm::http::WorldRow> rows(sm::http::kMaxQueries,
                                                      sm::http::WorldRow{42, 4242});
    std::vector<sm::http::Job> jobs;
    sm::http::Job j;
    while (s.next_job(j))
        jobs.push_back(j);
    if (reversed) std::reverse(jobs.begin(), jobs.end());
    for (const sm::http::Job& job : jobs)
        s.complete(job, {{rows.data(), job.count}, sm::http::builtin_fortunes(), {}}, out);
    if (s.waiting()) fail("a response still waits after every job completed");
}

// Whole and in pieces must agree (see the top of the file).
void compare(std::string_view a, std::string_view b, std::size_t piece, bool has_head) {
    bool same = before_error(a) == before_error(b) &&
                (a.size() == before_error(a).size()) == (b.size() == before_error(b).size());
    if (!has_head) same = same && check_responses(a).size() == check_responses(b).size();
    if (!same) {
        std::fprintf(stderr, "--- fed whole:\n%.*s\n--- fed in pieces of %zu:\n%.*s\n---\n",
                     static_cast<int>(a.size()), a.data(), piece, static_cast<int>(b.size()),
                     b.data());
        fail("the input fed in pieces got another answer than fed whole");
    }
}

// Feeds `in` in pieces of `piece` bytes with `limit` on the output, as a
// model does: no piece while responses are deferred, resume() first; the
// jobs completed in order after each step. Returns the whole output.
std::string_view limited(Session& s, ByteBuffer& total, std::span<const char> in,
                         std::size_t piece, std::size_t limit) {
    ByteBuffer out;
    std::size_t at = 0;
    for (int steps = 0; at < in.size() || s.owes(); ++steps) {
        if (steps > 1'000'000) fail("deferred responses are never all rendered");
        if (s.deferred() && !s.waiting()) {
            s.resume(out, limit);
        } else if (at < in.size()) {
            const std::size_t n = std::min(piece, in.size() - at);
            s.feed(in.subspan(at, n), out, limit);
            at += n;
        } else if (!s.waiting()) {
            fail("input used up with responses still owed");
        }
        complete_jobs(s, out, false);
        total.append(out.view());
        out.clear();
    }
    if (s.deferred() || s.waiting()) fail("responses left owed");
    return total.view();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const ResponseCache& cache = sm::fuzz::cache();
    const Limits limits = sm::fuzz::limits();

    const std::size_t piece = 1 + data[0] % 17;
    const std::span<const char> in(reinterpret_cast<const char*>(data) + 1, size - 1);

    Session whole(cache, limits);
    ByteBuffer out_whole;
    const auto result = whole.feed(in, out_whole);
    const std::string_view a(out_whole.data(), out_whole.size());
    const bool has_head =
        std::string_view(in.data(), in.size()).find("HEAD") != std::string_view::npos;

    Session split(cache, limits);
    ByteBuffer out_split;
    for (std::size_t at = 0; at < in.size(); at += piece)
        split.feed(in.subspan(at, std::min(piece, in.size() - at)), out_split);
    const std::string_view b(out_split.data(), out_split.size());

    compare(a, b, piece, has_head);

    if (result == Session::Result::close) {
        // Closed: more input is ignored.
        const std::size_t before = out_whole.size();
        if (feed(whole, out_whole, in).size() != before) fail("input after close was answered");
    }

    // With the workloads on.
    const ResponseCache& db_cache = sm::fuzz::cache_with_database();
    Session db_whole(db_cache, limits);
    ByteBuffer out_db_whole;
    db_whole.feed(in, out_db_whole);
    complete_jobs(db_whole, out_db_whole, false);
    Session db_split(db_cache, limits);
    ByteBuffer out_db_split;
    for (std::size_t at = 0; at < in.size(); at += piece) {
        db_split.feed(in.subspan(at, std::min(piece, in.size() - at)), out_db_split);
        complete_jobs(db_split, out_db_split, true);
    }
    compare(out_db_whole.view(), out_db_split.view(), piece, has_head);

    // With an output limit (down to one byte): the same answer, byte for
    // byte, as the same pieces without it.
    const std::size_t limit = 1 + static_cast<std::size_t>(data[0]) * 61;
    Session bounded(cache, limits);
    ByteBuffer out_bounded;
    if (limited(bounded, out_bounded, in, piece, limit) != b)
        fail("an output limit changed the answer");
    Session db_ordered(db_cache, limits);
    ByteBuffer out_db_ordered;
    for (std::size_t at = 0; at < in.size(); at += piece) {
        db_ordered.feed(in.subspan(at, std::min(piece, in.size() - at)), out_db_ordered);
        complete_jobs(db_ordered, out_db_ordered, false);
    }
    Session db_bounded(db_cache, limits);
    ByteBuffer out_db_bounded;
    if (limited(db_bounded, out_db_bounded, in, piece, limit) != out_db_ordered.view())
        fail("an output limit changed the answer with the workloads on");
    return 0;
}
