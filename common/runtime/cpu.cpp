#include "runtime/cpu.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

namespace sm::runtime {
namespace {

int parse_cpu(std::string_view s, std::string_view whole) {
    int v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v < 0 || v >= kMaxCpus)
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

}  // namespace sm::runtime
