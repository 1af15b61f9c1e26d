// Only in a ThreadSanitizer build: shows TSan the file descriptors libuv
// closes, so that it does not report the kernel's reuse of their numbers by
// another thread as a data race.
//
// libuv closes every descriptor with syscall(SYS_close, fd) (its
// uv__close_nocancel, which avoids close()'s cancellation point), and TSan
// intercepts close() but not syscall(). So TSan never sees the close. When
// another worker's accept4, eventfd, pipe2 or dup then gets the same number,
// TSan sees a second thread use "the same" descriptor with no ordering
// between them and reports a race. What orders them is the close itself,
// which the kernel serialises on the process's descriptor table.
//
// This definition of syscall() comes before libc's for libuv.so (the
// executable is searched first). It tells TSan of each close through the
// sanitizer's own syscall hooks and passes every call on to libc's syscall()
// unchanged. The other descriptor races TSan can see are still reported.
#include "runtime/tsan.hpp"

#ifdef SM_TSAN
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>

// The hooks <sanitizer/linux_syscall_hooks.h> wraps (g++ 12 does not ship the
// header; libtsan exports them under these names).
extern "C" void __sanitizer_syscall_pre_impl_close(long fd);
extern "C" void __sanitizer_syscall_post_impl_close(long res, long fd);

namespace {

using Syscall = long (*)(long, ...);

Syscall libc_syscall() noexcept {
    static const auto next = reinterpret_cast<Syscall>(::dlsym(RTLD_NEXT, "syscall"));
    return next;
}

}  // namespace

extern "C" long syscall(long number, ...) noexcept {
    // A system call takes at most six arguments, passed in registers: reading
    // six is what libc's own syscall() does whatever the call.
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (long& x : a)
        x = va_arg(ap, long);
    va_end(ap);
    const bool closing = number == SYS_close;
    if (closing) __sanitizer_syscall_pre_impl_close(a[0]);
    const long r = libc_syscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (closing) __sanitizer_syscall_post_impl_close(r, a[0]);
    return r;
}
#endif
