// CPU sets: parsing "0-3,6" lists, the CPUs this process may run on, pinning.
#pragma once

#include <string_view>
#include <vector>

namespace sm::runtime {

// Parses a cpu list such as "0-3,6"; throws std::invalid_argument with a clear
// message on malformed input.
std::vector<int> parse_cpu_list(std::string_view text);

// The CPUs in this process's affinity mask, ascending.
std::vector<int> allowed_cpus();

// Pins the calling thread to one CPU; throws std::system_error on failure.
void pin_current_thread(int cpu);

}  // namespace sm::runtime
