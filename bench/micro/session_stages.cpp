// The shared core's pipelined path, stage by stage, in nanoseconds per
// request: what a model pays in user space for each request of a 16-deep
// pipelined batch, without the syscalls. The stages:
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
// Each figure is the best of --repeat runs (the machine is shared: the
// minimum is the least disturbed), for the requests loadgen (and wrk: the
// same bytes) sends to /plaintext and /json, and a browser-like one. Pin it to one CPU (taskset -c
// 1 ...) for steady figures.
//   build/release/bench/micro/sm_bench_session [BATCHES [REPEATS]]
// BATCHES: batches per run (default 200000); REPEATS: runs per figure
// (default 7); both positive integers.
#include <llhttp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "http/byte_buffer.hpp"
#include "http/framing_guard.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/router.hpp"
#include "http/session.hpp"

namespace {

constexpr int kDepth = 16;

struct Load {
    const char* name;
    std::string request;
    sm::http::Endpoint endpoint;
};

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

}  // namespace

int main(int argc, char** argv) {
    const char* const usage =
        "usage: sm_bench_session [BATCHES [REPEATS]]\n"
        "  the shared core's pipelined path, stage by stage, in ns per request\n"
        "  BATCHES  16-deep batches per run (default 200000)\n"
        "  REPEATS  runs per figure, the best reported (default 7)\n"
        "  pin it to one CPU for steady figures: taskset -c 1 sm_bench_session\n";
    const auto [batches, repeats_long] =
        sm::bench::counts_or_exit<2>(argc, argv, "sm_bench_session", usage,
                                     {{{"BATCHES", 200'000, 1'000'000'000}, {"REPEATS", 7, 1000}}});
    const int repeats = static_cast<int>(repeats_long);
    using sm::http::Endpoint;
    const std::vector<Load> loads = {
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
    const sm::http::ResponseCache cache(sm::http::ResponseMode::composed, std::time(nullptr));
    const sm::http::Limits limits;
    std::printf("ns per request, %d-deep pipelined batches, best of %d runs of %ld batches\n",
                kDepth, repeats, batches);
    std::printf("%-24s %8s %8s %8s %8s %8s %9s\n", "request", "guard", "llhttp", "through",
                "compose", "session", "256 conns");
    std::size_t sink = 0;
    for (const Load& load : loads) {
        std::string batch;
        for (int i = 0; i < kDepth; ++i)
            batch += load.request;
        const std::size_t len = load.request.size();

        sm::http::FramingGuard guard;
        const double guard_ns = best_ns_per_request(batches, repeats, [&] {
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
        const double llhttp_ns = best_ns_per_request(batches, repeats, [&] {
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
        const double through_ns = best_ns_per_request(batches, repeats, [&] {
            if (llhttp_execute(&parser2, batch.data(), batch.size()) != HPE_OK) std::abort();
        });

        sm::http::ByteBuffer out(64 * 1024);
        const double compose_ns = best_ns_per_request(batches, repeats, [&] {
            out.clear();
            for (int i = 0; i < kDepth; ++i)
                cache.write_endpoint(load.endpoint, false, sm::http::Persistence::keep_alive, out);
            sink += out.size();
        });

        sm::http::Session session(cache, limits);
        const double session_ns = best_ns_per_request(batches, repeats, [&] {
            out.clear();
            if (session.feed(batch, out) != sm::http::Session::Result::open) std::abort();
            sink += out.size();
        });
        constexpr std::size_t kConnections = 256;
        std::vector<std::unique_ptr<sm::http::Session>> sessions;
        for (std::size_t i = 0; i < kConnections; ++i)
            sessions.push_back(std::make_unique<sm::http::Session>(cache, limits));
        std::size_t next = 0;
        const double conns_ns = best_ns_per_request(batches, repeats, [&] {
            out.clear();
            sm::http::Session& s = *sessions[next];
            next = next + 1 == kConnections ? 0 : next + 1;
            if (s.feed(batch, out) != sm::http::Session::Result::open) std::abort();
            sink += out.size();
        });
        std::printf("%-24s %8.1f %8.1f %8.1f %8.1f %8.1f %9.1f\n", load.name, guard_ns, llhttp_ns,
                    through_ns, compose_ns, session_ns, conns_ns);
    }
    std::printf("(checksum %zu)\n", sink);
    return 0;
}
