// The micro-benchmarks' command lines: up to N positional counts, each a
// positive integer, and -h/--help.
#pragma once

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

namespace sm::bench {

struct Count {
    const char* name;  // in the usage: "BATCHES"
    long fallback;     // when not given
    long max;
};

// `text` as a positive integer of at most `max`, else 0.
inline long positive(const char* text, long max) noexcept {
    long v = 0;
    const char* const end = text + std::strlen(text);
    const auto [p, ec] = std::from_chars(text, end, v);
    return ec == std::errc() && p == end && v > 0 && v <= max ? v : 0;
}

// argv[1..] as the counts `specs` describes, in order (the ones not given
// take their fallback). -h or --help prints `usage` and exits 0; an argument
// too many, or a count that is not a whole number from 1 to its max, prints
// what is wrong (naming the count) and `usage` on stderr and exits 2.
template <std::size_t N>
std::array<long, N> counts_or_exit(int argc, char** argv, const char* name, const char* usage,
                                   const std::array<Count, N>& specs) {
    if (argc > 1 && (std::string_view(argv[1]) == "-h" || std::string_view(argv[1]) == "--help")) {
        std::fputs(usage, stdout);
        std::exit(0);
    }
    if (static_cast<std::size_t>(argc) > N + 1) {
        std::fprintf(stderr, "%s: at most %zu argument%s\n%s", name, N, N == 1 ? "" : "s", usage);
        std::exit(2);
    }
    std::array<long, N> out{};
    for (std::size_t i = 0; i < N; ++i) {
        if (static_cast<int>(i) + 1 >= argc) {
            out[i] = specs[i].fallback;
            continue;
        }
        out[i] = positive(argv[i + 1], specs[i].max);
        if (out[i] == 0) {
            std::fprintf(stderr, "%s: %s '%s': expected a whole number from 1 to %ld\n%s", name,
                         specs[i].name, argv[i + 1], specs[i].max, usage);
            std::exit(2);
        }
    }
    return out;
}

}  // namespace sm::bench
