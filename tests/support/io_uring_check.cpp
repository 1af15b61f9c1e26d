#include "support/io_uring_check.hpp"

#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sm::test {

std::string io_uring_refusal() {
#ifdef SYS_io_uring_setup
    io_uring_params params{};
    const long fd = ::syscall(SYS_io_uring_setup, 4, &params);
    if (fd >= 0) {
        ::close(static_cast<int>(fd));
        return {};
    }
    return std::string("io_uring_setup: ") + std::strerror(errno);
#else
    return "io_uring_setup is not known to this C library";
#endif
}

void exit_skipped_unless_io_uring(const char* set_name) {
    const std::string why = io_uring_refusal();
    if (why.empty()) return;
    exit_skipped(std::string(set_name) + ": io_uring is refused here (" + why + ")");
}

}  // namespace sm::test
