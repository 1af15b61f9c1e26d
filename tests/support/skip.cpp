#include "support/skip.hpp"

#include <cstdio>
#include <cstdlib>

namespace sm::test {

void exit_skipped(std::string_view why) {
    std::printf("skipped: %.*s\n", static_cast<int>(why.size()), why.data());
    std::fflush(stdout);
    std::_Exit(kSkipExitCode);
}

}  // namespace sm::test
