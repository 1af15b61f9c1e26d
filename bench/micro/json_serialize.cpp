// Measures the per-request JSON body both ways: nlohmann::json (object built
// and dumped per request) and sm::http::serialize (the writer the servers
// use). Reports nanoseconds and heap allocations per serialization; checks
// that both produce the same bytes.
//   build/release/bench/micro/sm_bench_json [ITERATIONS]
// ITERATIONS: serializations per way (default 2000000), a positive integer.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "args.hpp"
#include "http/json.hpp"

namespace {
std::size_t g_allocations = 0;
}  // namespace

// Counting replacements of the global allocation functions. GCC inlines them
// and then warns that free() receives a pointer from operator new, which is
// exactly what a malloc-based replacement pair does.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
    ++g_allocations;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

namespace {

template <typename F>
void run(const char* name, long iterations, F&& serialize) {
    std::size_t sink = 0;
    for (long i = 0; i < iterations / 10; ++i)
        sink += serialize();  // warm up
    const std::size_t allocs_before = g_allocations;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i)
        sink += serialize();
    const auto t1 = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / iterations;
    const double allocs = static_cast<double>(g_allocations - allocs_before) / iterations;
    std::printf("%-28s %8.1f ns/op %6.2f allocations/op  (checksum %zu)\n", name, ns, allocs, sink);
}

}  // namespace

int main(int argc, char** argv) {
    const char* const usage =
        "usage: sm_bench_json [ITERATIONS]\n"
        "  the JSON body both ways (nlohmann::json and sm::http::serialize): ns and\n"
        "  heap allocations per serialization\n"
        "  ITERATIONS  serializations per way (default 2000000)\n";
    const auto [iterations] = sm::bench::counts_or_exit<1>(
        argc, argv, "sm_bench_json", usage, {{{"ITERATIONS", 2'000'000, 1'000'000'000}}});
    const std::string reference = nlohmann::json{{"message", sm::http::kHelloWorld}}.dump();
    char buf[sm::http::json_max_size(sm::http::Message{sm::http::kHelloWorld})];
    const std::size_t n = sm::http::serialize(sm::http::Message{sm::http::kHelloWorld}, buf);
    if (std::string(buf, n) != reference) {
        std::fprintf(stderr, "outputs differ: %s vs %.*s\n", reference.c_str(), static_cast<int>(n),
                     buf);
        return 1;
    }
    std::printf("body: %s (%zu bytes), %ld iterations each\n", reference.c_str(), n, iterations);
    run("nlohmann::json{...}.dump()", iterations, [] {
        const nlohmann::json j{{"message", sm::http::kHelloWorld}};
        return j.dump().size();
    });
    run("sm::http::serialize", iterations, [&buf] {
        const sm::http::Message msg{sm::http::kHelloWorld};
        return sm::http::serialize(msg, buf);
    });
    return 0;
}
