#include "runtime/log.hpp"

#include <cstdio>
#include <string>

#include <fmt/core.h>

namespace sm::runtime {
namespace {
std::string& program() {
    static std::string name = "servermodels";
    return name;
}
}  // namespace

void set_program_name(std::string_view name) {
    program() = name;
}

void log(std::string_view message) {
    // One fprintf per line: stderr is unbuffered and a single call keeps lines
    // from different threads whole.
    std::fprintf(stderr, "%s: %.*s\n", program().c_str(), static_cast<int>(message.size()),
                 message.data());
}

void RateLimitedLog::emit(std::string_view message, unsigned long suppressed) {
    if (suppressed == 0) return log(message);
    log(fmt::format("{} ({} more like this)", message, suppressed));
}

}  // namespace sm::runtime
