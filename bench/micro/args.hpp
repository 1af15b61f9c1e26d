// The micro-benchmarks' command lines: positional counts and -h/--help.
#pragma once

#include <charconv>
#include <cstring>
#include <string_view>
#include <system_error>

namespace sm::bench {

// The first argument is -h or --help.
inline bool asks_help(int argc, char** argv) noexcept {
    if (argc < 2) return false;
    const std::string_view a = argv[1];
    return a == "-h" || a == "--help";
}

// `text` as a positive integer of at most `max`, else 0.
inline long positive(const char* text, long max) noexcept {
    long v = 0;
    const char* const end = text + std::strlen(text);
    const auto [p, ec] = std::from_chars(text, end, v);
    return ec == std::errc() && p == end && v > 0 && v <= max ? v : 0;
}

}  // namespace sm::bench
