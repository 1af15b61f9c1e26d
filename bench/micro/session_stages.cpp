// The shared core's pipelined path, stage by stage, per request: what a
// model pays in user space for each request of a 16-deep pipelined batch,
// without the syscalls. The stages:
//   guard     FramingGuard::scan over each head (every byte, as the session does)
//   llhttp    llhttp_execute over each head, no callbacks, paused at the end of
//             the head and reset (as the session drives it)
//   through   the same run straight through the batch in one call (no pause,
//             no reset): what the pause and reset per head cost, by difference
//   compose   ResponseCache::write_endpoint, one response per request
//   session   Session::feed of the whole batch: all of the above plus the
//             callbacks, the field checks, the target and the routing
//   256 conns the same, each batch fed to the next of 256 sessions in turn (as
//             a server with 256 busy connections does): what the per-
//             connection state costs once it no longer stays in the L1 cache
// for the requests loadgen (and wrk: the same bytes) sends to /plaintext and
// /json, and a browser-like one. Two measures:
//
// Nanoseconds (the default): each figure is the best of REPEATS runs (the
// machine is shared: the minimum is the least disturbed). Pin it to one CPU
// (taskset -c 1 ...) for steady figures.
//   build/release/bench/micro/sm_bench_session [BATCHES [REPEATS]]
// BATCHES: batches per run (default 200000); REPEATS: runs per figure
// (default 7); both positive integers.
//
// Instructions (--instructions): Ir, the instructions executed per request,
// counted by valgrind's callgrind: user space only, under callgrind's CPU
// model (its own JIT of the x86-64 code; no kernel, no caches, no timing).
// The same binary and input give the same count every run, so a change to
// the core can be judged without timing, on a noisy machine or one without
// hardware counters. The front end re-runs this program under
//   valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no
// which, as the counting side, runs each stage BATCHES times not collected,
// then BATCHES times collected and dumped as one profile named
// "<request>: <stage>"; the front end prints each dump's Ir over the
// requests it counted, and the totals (the figures to compare between
// builds). The stages' inputs are made before and nothing in them reads a
// clock (the Date is a fixed second). Instructions see no cache: "256 conns"
// counts what "session" does (plus the turn to the next session); its cost
// in cache misses shows only in nanoseconds. It needs valgrind on PATH and
// valgrind/callgrind.h at build time (Debian's valgrind package); without
// them it says why and exits 3. About 20 s for the default 2000 batches.
//   build/release/bench/micro/sm_bench_session --instructions [BATCHES]
// To see where a stage's instructions go, run the counting side yourself and
// read its dumps with callgrind_annotate:
//   valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no
//     build/release/bench/micro/sm_bench_session --instructions 2000
// (one command line), then callgrind_annotate callgrind.out.<pid>.<N>.
#include <llhttp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "callgrind.hpp"
#include "http/byte_buffer.hpp"
#include "http/framing_guard.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/router.hpp"
#include "http/session.hpp"

namespace {

constexpr int kDepth = 16;
constexpr std::size_t kConnections = 256;
constexpr std::array<const char*, 6> kStages = {"guard",   "llhttp",  "through",
                                                "compose", "session", "256 conns"};
using Row = std::array<double, kStages.size()>;  // a load's figures, stage by stage

struct Load {
    const char* name;
    std::string request;
    sm::http::Endpoint endpoint;
};

std::vector<Load> loads() {
    using sm::http::Endpoint;
    return {
        {"loadgen /plaintext", "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
         Endpoint::plaintext},
        {"loadgen /json", "GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", Endpoint::json},
        {"browser-like /plaintext",
         "GET /plaintext HTTP/1.1\r\nHost: server.example:8080\r\n"
         "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n"
         "Accept: text/plain,text/html;q=0.9,*/*;q=0.8\r\nAccept-Language: en-US,en;q=0.5\r\n"
         "Accept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\n\r\n",
         Endpoint::plaintext},
    };
}

// The name of a stage's callgrind dump.
std::string dump_name(const Load& load, std::size_t stage) {
    return std::string(load.name) + ": " + kStages[stage];
}

template <typename F>
double best_ns_per_request(long batches, int repeats, F&& batch) {
    double best = 1e30;
    for (long i = 0; i < batches / 10; ++i)
        batch();  // warm up
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < batches; ++i)
            batch();
        const auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() /
                                  static_cast<double>(batches * kDepth));
    }
    return best;
}

int on_headers_complete(llhttp_t*) {
    return HPE_PAUSED;
}

// Runs every stage over 16-deep batches of `load`'s request, each through
// measure(stage index, batch), which runs batch() as often as it likes and
// gives the stage's figure. Adds to `sink` what the stages made, so that no
// compiler drops the work.
template <typename Measure>
Row run_stages(const Load& load, const sm::http::ResponseCache& cache,
               const sm::http::Limits& limits, std::size_t& sink, Measure&& measure) {
    std::string batch;
    for (int i = 0; i < kDepth; ++i)
        batch += load.request;
    const std::size_t len = load.request.size();
    Row row{};

    sm::http::FramingGuard guard;
    row[0] = measure(0, [&] {
        for (int i = 0; i < kDepth; ++i) {
            guard.start_head();
            const char* p = batch.data() + i * len;
            sink += guard.scan(p, p + len) == nullptr;
        }
    });

    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_headers_complete = &on_headers_complete;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    row[1] = measure(1, [&] {
        const char* p = batch.data();
        const char* const end = p + batch.size();
        while (p < end) {
            if (llhttp_execute(&parser, p, static_cast<std::size_t>(end - p)) != HPE_PAUSED)
                std::abort();
            p = llhttp_get_error_pos(&parser);
            llhttp_reset(&parser);
        }
    });

    // The same, run through: on_headers_complete lets llhttp go on (1:
    // no body) and the whole batch is one call.
    llhttp_settings_t through;
    llhttp_settings_init(&through);
    through.on_headers_complete = [](llhttp_t*) { return 1; };
    llhttp_t parser2;
    llhttp_init(&parser2, HTTP_REQUEST, &through);
    row[2] = measure(2, [&] {
        if (llhttp_execute(&parser2, batch.data(), batch.size()) != HPE_OK) std::abort();
    });

    sm::http::ByteBuffer out(64 * 1024);
    row[3] = measure(3, [&] {
        out.clear();
        for (int i = 0; i < kDepth; ++i)
            cache.write_endpoint(load.endpoint, false, sm::http::Persistence::keep_alive, out);
        sink += out.size();
    });

    sm::http::Session session(cache, limits);
    row[4] = measure(4, [&] {
        out.clear();
        if (session.feed(batch, out) != sm::http::Session::Result::open) std::abort();
        sink += out.size();
    });
    // Each session is fed a batch before: a warm-up or a count shorter than
    // 256 batches meets none new.
    std::vector<std::unique_ptr<sm::http::Session>> sessions;
    for (std::size_t i = 0; i < kConnections; ++i) {
        sessions.push_back(std::make_unique<sm::http::Session>(cache, limits));
        out.clear();
        if (sessions.back()->feed(batch, out) != sm::http::Session::Result::open) std::abort();
    }
    std::size_t next = 0;
    row[5] = measure(5, [&] {
        out.clear();
        sm::http::Session& s = *sessions[next];
        next = next + 1 == kConnections ? 0 : next + 1;
        if (s.feed(batch, out) != sm::http::Session::Result::open) std::abort();
        sink += out.size();
    });
    return row;
}

// The table: one row per load, one column per stage, figures with
// `decimals`, the columns as wide as the widest figure needs.
void print_table(const std::vector<Load>& all, const std::vector<Row>& rows, int decimals) {
    int width = 8;
    for (const Row& r : rows)
        for (const double v : r)
            width = std::max(width, std::snprintf(nullptr, 0, "%.*f", decimals, v));
    const int last = std::max(width, 9);  // "256 conns"
    std::printf("%-24s %*s %*s %*s %*s %*s %*s\n", "request", width, kStages[0], width, kStages[1],
                width, kStages[2], width, kStages[3], width, kStages[4], last, kStages[5]);
    for (std::size_t l = 0; l < all.size(); ++l) {
        std::printf("%-24s", all[l].name);
        for (std::size_t s = 0; s < kStages.size(); ++s)
            std::printf(" %*.*f", s + 1 < kStages.size() ? width : last, decimals, rows[l][s]);
        std::printf("\n");
    }
}

// --instructions, not under valgrind: runs the counting side under callgrind
// and prints its counts.
int print_instructions(long batches, const std::vector<Load>& all) {
    namespace callgrind = sm::bench::callgrind;
    if (const auto why = callgrind::unavailable()) {
        std::fprintf(stderr, "sm_bench_session: --instructions cannot count here: %s\n",
                     why->c_str());
        return 3;
    }
    const auto counts =
        callgrind::run("sm_bench_session", {"--instructions", std::to_string(batches)});
    if (!counts) return 1;
    std::vector<Row> per_request(all.size()), totals(all.size());
    const double requests = static_cast<double>(batches * kDepth);
    for (std::size_t l = 0; l < all.size(); ++l) {
        for (std::size_t s = 0; s < kStages.size(); ++s) {
            const auto it = counts->ir.find(dump_name(all[l], s));
            if (it == counts->ir.end() || it->second == 0) {
                std::fprintf(stderr, "sm_bench_session: no count for '%s' from callgrind\n",
                             dump_name(all[l], s).c_str());
                return 1;
            }
            totals[l][s] = static_cast<double>(it->second);
            per_request[l][s] = totals[l][s] / requests;
        }
    }
    std::printf(
        "instructions (Ir) per request, %d-deep pipelined batches, %ld batches per stage "
        "counted after as many not\n",
        kDepth, batches);
    std::printf(
        "Ir: instructions executed in user space, under %s's CPU model (no kernel, no "
        "caches, no time); the same every run of the same binary and input\n",
        counts->creator.c_str());
    print_table(all, per_request, 1);
    std::printf("Ir in total per stage, %.0f requests each (compare builds by these)\n", requests);
    print_table(all, totals, 0);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* const usage =
        "usage: sm_bench_session [BATCHES [REPEATS]]\n"
        "       sm_bench_session --instructions [BATCHES]\n"
        "  the shared core's pipelined path, stage by stage, per request of 16-deep batches\n"
        "  timed (the default): nanoseconds per request\n"
        "    BATCHES  batches per run (default 200000)\n"
        "    REPEATS  runs per figure, the best reported (default 7)\n"
        "    pin it to one CPU for steady figures: taskset -c 1 sm_bench_session\n"
        "  --instructions: instructions executed per request (Ir), counted by valgrind's\n"
        "    callgrind: user space only, under its CPU model, no kernel; the same every run\n"
        "    of the same binary, so builds compare without timing. Re-runs itself under\n"
        "    valgrind --tool=callgrind; exits 3 if valgrind is not on PATH or this build\n"
        "    lacks valgrind/callgrind.h\n"
        "    BATCHES  batches counted per stage, after as many not (default 2000)\n";
    const std::vector<Load> all = loads();
    // Nothing reads a clock: the Date in the responses is a fixed second.
    const sm::http::ResponseCache cache(sm::http::ResponseMode::composed, 1'700'000'000);
    const sm::http::Limits limits;
    std::size_t sink = 0;

    if (argc > 1 && std::string_view(argv[1]) == "--instructions") {
        // argv[1] stands in for the program's name: the counts follow it.
        const long batches =
            sm::bench::counts_or_exit<1>(argc - 1, argv + 1, "sm_bench_session --instructions",
                                         usage, {{{"BATCHES", 2'000, 10'000'000}}})[0];
        if (!sm::bench::callgrind::counting()) return print_instructions(batches, all);
        // The counting side, under callgrind: each stage of each load one dump.
        for (const Load& load : all)
            run_stages(load, cache, limits, sink, [&](std::size_t stage, auto&& batch) {
                sm::bench::callgrind::count(dump_name(load, stage), batches, batches, batch);
                return 0.0;
            });
        std::printf(
            "counted %zu stages, one callgrind dump each, \"<request>: <stage>\" "
            "(checksum %zu)\n",
            all.size() * kStages.size(), sink);
        return 0;
    }

    const auto counts =
        sm::bench::counts_or_exit<2>(argc, argv, "sm_bench_session", usage,
                                     {{{"BATCHES", 200'000, 1'000'000'000}, {"REPEATS", 7, 1000}}});
    const long batches = counts[0];
    const int repeats = static_cast<int>(counts[1]);
    std::vector<Row> rows;
    for (const Load& load : all)
        rows.push_back(run_stages(load, cache, limits, sink, [&](std::size_t, auto&& batch) {
            return best_ns_per_request(batches, repeats, batch);
        }));
    std::printf("ns per request, %d-deep pipelined batches, best of %d runs of %ld batches\n",
                kDepth, repeats, batches);
    print_table(all, rows, 1);
    std::printf("(checksum %zu)\n", sink);
    return 0;
}
