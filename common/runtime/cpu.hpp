// CPU lists: parsing "0-3,6" (--cpus). Pinning and the allowed set are the
// platform's (runtime/platform.hpp).
#pragma once

#include <string_view>
#include <vector>

namespace sm::runtime {

// The highest CPU number a list may name, plus one: glibc's CPU_SETSIZE.
inline constexpr int kMaxCpus = 1024;

// Parses a cpu list such as "0-3,6"; throws std::invalid_argument with a clear
// message on malformed input.
std::vector<int> parse_cpu_list(std::string_view text);

}  // namespace sm::runtime
