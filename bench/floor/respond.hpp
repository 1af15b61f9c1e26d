// bench/floor: what both floors (floor on epoll, floor-uring on io_uring) do
// with the bytes they read, written once so that the two differ only in how
// bytes move, as the models do. Per request it looks at two things only, the
// request's first ten bytes and the blank line ("\r\n\r\n") that ends it,
// and answers each blank line with one of two canned responses:
//   - a request that starts with "GET /json " or "GET /json?" gets the
//     models' /json response (Content-Type: application/json,
//     {"message":"Hello, World!"}), as their router ignores the query;
//   - any other request gets their /plaintext response ("Hello, World!").
// Both are the bytes server-epoll sends (rendered once, at start, by
// common/http's ResponseCache, so they cannot drift; only the Date stays
// frozen at the start).
//
// Why a byte check and not an option: one floor process serves both
// scenarios (and a loadgen mix of the two), pipelined requests for both get
// their answers in order, and the check costs one compare for each of the
// first ten bytes of a request only; llhttp never runs.
//
// --spin-ns N makes a floor a calibration: N nanoseconds of busy CPU per
// response, in place of the parse and render a server does. Against the
// plain floor it shows what a given user-space cost per request costs a
// server in all on this machine, kernel time included: a slower server lets
// the client go idle, and waking it is work the server's sends pay for
// (bench/compare/README.md, "What a nanosecond costs").
#pragma once

#include <chrono>
#include <cstddef>
#include <ctime>
#include <string>
#include <string_view>
#include <type_traits>

#include "http/response.hpp"
#include "runtime/server.hpp"

namespace sm::floor {

// A floor's --help line: what it is, its I/O ("one write per read"), the rule.
inline std::string describe(std::string_view io) {
    return std::string("a no-parse responder, NOT a server: one canned response per blank line "
                       "seen, ")
        .append(io)
        .append(" (the syscall floor, and a load generator's ceiling). A request starting with "
                "\"GET /json \" or \"GET /json?\" gets server-epoll's /json response, any other "
                "its /plaintext response (Date frozen at start)");
}

// What a connection carries from one read to the next.
struct Scan {
    unsigned matched = 0;  // bytes of "\r\n\r\n" matched at the end of the last read
    unsigned start = 0;    // bytes of kJsonStart the current request began with, or kJson, kNotJson
};

inline constexpr runtime::ModelOption kSpinNs{
    .name = "spin-ns",
    .help =
        "Nanoseconds of busy CPU per response (a loop on the monotonic clock), standing in for "
        "the parse and render a server does: what that much user-space work per request costs "
        "in all on this machine, against the plain floor. 0: none",
    .value = 0,
    .min = 0,
    .max = 10'000'000};

// Answers blank lines with the canned responses. kSpin: --spin-ns is set;
// two instances (with_spin), so that the plain floor's loop has not even a
// branch more than it had before the option.
template <bool kSpin>
class Responder {
  public:
    explicit Responder(const runtime::ServerOptions& options)
        : plaintext_(canned(http::Endpoint::plaintext)),
          json_(canned(http::Endpoint::json)),
          spin_(static_cast<std::chrono::nanoseconds::rep>(options.model_option(kSpinNs.name))) {}

    // Appends to `out` a response for every "\r\n\r\n" in `in`, continuing
    // the matches carried over from the last read in `scan`.
    void operator()(std::string_view in, Scan& scan, std::string& out) const {
        static constexpr char kEnd[] = "\r\n\r\n";
        [[maybe_unused]] std::size_t answered = 0;  // counted only to spin
        for (const char ch : in) {
            if (scan.start < kJsonStart.size())
                scan.start = ch == kJsonStart[scan.start] ? scan.start + 1 : kNotJson;
            else if (scan.start == kJsonStart.size())
                scan.start = ch == ' ' || ch == '?' ? kJson : kNotJson;
            if (ch == kEnd[scan.matched]) {
                if (++scan.matched == 4) {
                    out += scan.start == kJson ? json_ : plaintext_;
                    if constexpr (kSpin) ++answered;
                    scan.matched = 0;
                    scan.start = 0;
                }
            } else {
                scan.matched = ch == '\r' ? 1 : 0;
            }
        }
        if constexpr (kSpin) spin(spin_ * answered);
    }

  private:
    // The start of a request that gets the JSON response: these nine bytes,
    // then a space or a '?'.
    static constexpr std::string_view kJsonStart = "GET /json";
    static constexpr unsigned kJson = kJsonStart.size() + 1;  // Scan::start: the request is for /json
    static constexpr unsigned kNotJson = kJson + 1;           // Scan::start: it is not

    // A keep-alive response of server-epoll for `endpoint` (its Date: now).
    static std::string canned(http::Endpoint endpoint) {
        const http::ResponseCache cache(http::ResponseMode::composed, std::time(nullptr));
        http::ByteBuffer out;
        cache.write_endpoint(endpoint, false, http::Persistence::keep_alive, out);
        return std::string(out.view());
    }

    // A busy wait. steady_clock reads are vDSO calls on the usual
    // clocksources (tsc, kvm-clock): no syscall, no kernel time.
    static void spin(std::chrono::nanoseconds total) {
        const auto until = std::chrono::steady_clock::now() + total;
        while (std::chrono::steady_clock::now() < until) {
        }
    }

    std::string plaintext_;
    std::string json_;
    std::chrono::nanoseconds spin_;
};

// Runs run(Responder<true>) when --spin-ns is set, else run(Responder<false>).
template <typename Run>
void with_spin(const runtime::WorkerContext& ctx, Run&& run) {
    if (ctx.options.model_option(kSpinNs.name) != 0)
        run(Responder<true>(ctx.options));
    else
        run(Responder<false>(ctx.options));
}

}  // namespace sm::floor
