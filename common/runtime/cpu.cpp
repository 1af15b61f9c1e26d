#include "runtime/cpu.hpp"

#include <pthread.h>
#include <sched.h>

#include <charconv>
#include <stdexcept>
#include <string>
#include <system_error>

namespace sm::runtime {
namespace {

int parse_cpu(std::string_view s, std::string_view whole) {
    int v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v < 0 || v >= CPU_SETSIZE)
        throw std::invalid_argument("invalid CPU list '" + std::string(whole) +
                                    "' (expected numbers and ranges such as 0-3,6)");
    return v;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
    std::vector<int> cpus;
    std::string_view rest = text;
    while (true) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        if (const auto dash = item.find('-'); dash != std::string_view::npos) {
            const int lo = parse_cpu(item.substr(0, dash), text);
            const int hi = parse_cpu(item.substr(dash + 1), text);
            if (lo > hi)
                throw std::invalid_argument("invalid CPU list '" + std::string(text) + "': range " +
                                            std::string(item) + " is reversed");
            for (int c = lo; c <= hi; ++c)
                cpus.push_back(c);
        } else {
            cpus.push_back(parse_cpu(item, text));
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    return cpus;
}

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

void pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0)
        throw std::system_error(rc, std::generic_category(),
                                "cannot pin a thread to CPU " + std::to_string(cpu));
}

}  // namespace sm::runtime
