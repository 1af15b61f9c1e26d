// Small pieces the epoll-based models (server-epoll, server-threadpool)
// share, so neither keeps its own copy.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include "runtime/accept_gate.hpp"
#include "runtime/platform.hpp"
#include "runtime/posix/unique_fd.hpp"
#include "runtime/tuning.hpp"

namespace sm::runtime {

// An epoll_event carrying `ptr` (a connection, or a tag for the listener and
// the stop signal).
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

// A new epoll set that watches the stop signal (level-triggered: it stays
// set; remove it once seen, or every epoll_wait returns at once).
inline UniqueFd new_epoll(const StopSignal& stop, void* stop_tag) {
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep) throw_errno("epoll_create1");
    auto ev = event_for(stop_tag, EPOLLIN);
    if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, stop.handle(), &ev) != 0)
        throw_errno("epoll_ctl(stop)");
    return ep;
}

// A listener in an epoll set, level-triggered (a bounded accept batch
// leaves the rest for the next wake-up without losing them), watched only
// while the accept gate is open: a readable listener left in the set while
// it is closed would wake the loop forever.
class WatchedListener {
  public:
    WatchedListener(int ep, Listener& listener, AcceptGate& gate, void* tag)
        : ep_(ep), listener_(listener), gate_(gate), tag_(tag) {
        watch(true);
        if (!watching_) throw_errno("epoll_ctl(listener)");
    }

    void watch(bool on) noexcept {
        if (on == watching_ || !listener_) return;
        auto ev = event_for(tag_, EPOLLIN);
        if (::epoll_ctl(ep_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listener_.handle(), &ev) == 0)
            watching_ = on;
        else if (on)
            gate_.pause(errno, Clock::now());  // out of memory: retried after a pause
    }

    // Accepts at most kAcceptBatch connections through the gate, each
    // non-blocking with TCP_NODELAY, and hands each to adopt(fd), which
    // returns false if the gate closed meanwhile. Stops watching when the
    // gate closes.
    template <typename Adopt>
    void accept(Clock::time_point now, Adopt&& adopt) {
        for (int i = 0; i < kAcceptBatch && listener_; ++i) {
            if (!gate_.try_acquire(now)) return watch(false);
            const int fd =
                ::accept4(listener_.handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                switch (gate_.failed(errno, now)) {
                    case AcceptError::again: return;
                    // That one is gone: the next.
                    case AcceptError::skip: continue;
                    // Logged, and the listener stays watched: still readable,
                    // the next wake-up tries again, so an error that repeats
                    // costs one accept per wake-up, not a batch.
                    case AcceptError::unknown: return;
                    case AcceptError::exhausted: return watch(false);
                }
            }
            set_nodelay(fd);
            if (!adopt(fd)) return watch(false);
        }
    }

    // After the loop's batch: watch again when the gate reopens.
    void reopen_if_due(Clock::time_point now) noexcept {
        if (!gate_.reopen_due(now)) return;
        gate_.reopen();
        watch(true);
    }

    // For good (shutdown): new connections are refused, not queued.
    void close() noexcept {
        watch(false);
        listener_.close();
        gate_.shut();
    }

  private:
    int ep_;
    Listener& listener_;
    AcceptGate& gate_;
    void* tag_;
    bool watching_ = false;
};

}  // namespace sm::runtime
