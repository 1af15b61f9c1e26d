// Small pieces the epoll-based models (server-epoll, server-threadpool)
// share, so neither keeps its own copy.
#pragma once

#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace sm::runtime {

// An epoll_event carrying `ptr` (a connection, or a tag for the listener and
// the stop eventfd).
inline epoll_event event_for(void* ptr, std::uint32_t events) noexcept {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = ptr;
    return ev;
}

// std::system_error from errno, for set-up failures a worker cannot go on without.
[[noreturn]] inline void throw_errno(const char* what) {
    throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace sm::runtime
