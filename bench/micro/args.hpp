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
    long fallback;  // when not given
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
// take their fallback). -h or --help prints `usage` and exits 0; a count that
// is not a positive integer up to its max, or an argument too many, prints
// what is wrong and `usage` on stderr and exits 2.
template <std::size_t N>
std::array<long, N> counts_or_exit(int argc, char** argv, const char* name, const char* usage,
                                   const std::array<Count, N>& specs) {
    if (argc > 1 && (std::string_view(argv[1]) == "-h" || std::string_view(argv[1]) == "--help")) {
        std::fputs(usage, stdout);
        std::exit(0);
    }
    std::array<long, N> out{};
    bool ok = static_cast<std::size_t>(argc) <= N + 1;
    for (std::size_t i = 0; i < N && ok; ++i) {
        out[i] = static_cast<int>(i) + 1 < argc ? positive(argv[i + 1], specs[i].max)
                                                : specs[i].fallback;
        ok = out[i] > 0;
    }
    if (!ok) {
        std::fprintf(stderr, "%s: at most %zu arguments, each a positive integer\n%s", name, N,
                     usage);
        std::exit(2);
    }
    return out;
}

}  // namespace sm::bench
