// sm_deny_io_uring COMMAND [ARGS...]: runs COMMAND where io_uring is denied,
// the way Docker's default seccomp profile denies it: io_uring_setup,
// io_uring_enter and io_uring_register fail with EPERM, every other system
// call is allowed. The io_uring probe test runs server-uring under it.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

// The architecture the numbers below belong to: a system call made through
// another ABI (i386's int 0x80 on x86-64) has other numbers, and the filter
// kills such a process rather than misread them.
#if defined(__x86_64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#elif defined(__i386__)
constexpr std::uint32_t kArch = AUDIT_ARCH_I386;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr std::uint32_t kArch = AUDIT_ARCH_RISCV64;
#else
#error "sm_deny_io_uring: add this architecture's AUDIT_ARCH_* value"
#endif

#if defined(__x86_64__)
// x32 system calls share AUDIT_ARCH_X86_64 and set this bit in the number.
constexpr std::uint32_t kX32Bit = 0x40000000;
#else
constexpr std::uint32_t kX32Bit = 0;
#endif

// BPF_STMT and BPF_JUMP without their C casts (-Wold-style-cast).
constexpr sock_filter stmt(std::uint16_t code, std::uint32_t k) {
    return sock_filter{code, 0, 0, k};
}
constexpr sock_filter jump(std::uint16_t code, std::uint32_t k, std::uint8_t jt, std::uint8_t jf) {
    return sock_filter{code, jt, jf, k};
}

constexpr std::uint16_t kLoadWord = BPF_LD | BPF_W | BPF_ABS;
constexpr std::uint16_t kJumpIfEqual = BPF_JMP | BPF_JEQ | BPF_K;
constexpr std::uint16_t kReturn = BPF_RET | BPF_K;

constexpr std::array<sock_filter, 10> kFilter = {{
    // arch != ours: kill (the numbers would mean other calls).
    stmt(kLoadWord, offsetof(seccomp_data, arch)),
    jump(kJumpIfEqual, kArch, 1, 0),
    stmt(kReturn, SECCOMP_RET_KILL_PROCESS),
    // The number, with x32's marker bit cleared.
    stmt(kLoadWord, offsetof(seccomp_data, nr)),
    stmt(BPF_ALU | BPF_AND | BPF_K, ~kX32Bit),
    jump(kJumpIfEqual, __NR_io_uring_setup, 3, 0),
    jump(kJumpIfEqual, __NR_io_uring_enter, 2, 0),
    jump(kJumpIfEqual, __NR_io_uring_register, 1, 0),
    stmt(kReturn, SECCOMP_RET_ALLOW),
    stmt(kReturn, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
}};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
        return 2;
    }
    // Required to install a filter without CAP_SYS_ADMIN; also what
    // container runtimes set.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        std::fprintf(stderr, "sm_deny_io_uring: PR_SET_NO_NEW_PRIVS: %s\n", std::strerror(errno));
        return 126;
    }
    sock_fprog prog{};
    prog.len = static_cast<unsigned short>(kFilter.size());
    prog.filter = const_cast<sock_filter*>(kFilter.data());
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
        std::fprintf(stderr, "sm_deny_io_uring: PR_SET_SECCOMP: %s\n", std::strerror(errno));
        return 126;
    }
    ::execvp(argv[1], argv + 1);
    std::fprintf(stderr, "sm_deny_io_uring: %s: %s\n", argv[1], std::strerror(errno));
    return 127;
}
