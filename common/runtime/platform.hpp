// The platform contract: everything serve() and the shared lifecycle need
// from the operating system, declared once, platform-neutral. Each platform
// implements it in its own folder, runtime/<platform>/, which CMake picks
// (posix/ on Linux; windows/ for server-iocp) and which also provides
// native.hpp: the NativeHandle type (a descriptor, a SOCKET/HANDLE) and
// kNoHandle. Callers never write #ifdef.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "native.hpp"

namespace sm::runtime {

// Closes a socket or other handle of this platform; kNoHandle is ignored.
void close_handle(NativeHandle h) noexcept;

// A listening socket, owned: closing it (close(), or destruction) makes new
// connections be refused instead of queued.
class Listener {
  public:
    Listener() noexcept = default;
    explicit Listener(NativeHandle h) noexcept : h_(h) {}
    Listener(Listener&& o) noexcept : h_(std::exchange(o.h_, kNoHandle)) {}
    Listener& operator=(Listener&& o) noexcept {
        if (this != &o) {
            close();
            h_ = std::exchange(o.h_, kNoHandle);
        }
        return *this;
    }
    ~Listener() { close(); }

    [[nodiscard]] NativeHandle handle() const noexcept { return h_; }
    [[nodiscard]] explicit operator bool() const noexcept { return h_ != kNoHandle; }
    void close() noexcept { close_handle(std::exchange(h_, kNoHandle)); }

  private:
    NativeHandle h_ = kNoHandle;
};

struct Listeners {
    std::vector<Listener> sockets;
    std::string url;  // "http://127.0.0.1:8080", "http://[::1]:8080"
    std::uint16_t port = 0;
};

// Whether `s` is a numeric IPv4 or IPv6 address (what --address takes).
bool is_ip_address(const std::string& s) noexcept;

// Opens `count` listening sockets on address:port, each its own accept
// queue that the kernel balances (SO_REUSEPORT on Linux), non-blocking, with
// TCP_NODELAY. Port 0 picks a free port for the first and binds the others
// to it. A port another process already listens on is an error, not a
// silent share. Throws std::runtime_error with a clear message.
Listeners open_listeners(const std::string& address, std::uint16_t port, unsigned count,
                         int backlog);

// Set when the server must stop, and never reset. A worker waits for it with
// its own poller on handle(): on POSIX an eventfd that turns readable (and
// stays so: never drain it), on Windows an event that stays signalled.
class StopSignal {
  public:
    StopSignal();  // throws std::system_error
    ~StopSignal();
    StopSignal(const StopSignal&) = delete;
    StopSignal& operator=(const StopSignal&) = delete;

    [[nodiscard]] NativeHandle handle() const noexcept { return h_; }
    [[nodiscard]] bool requested() const noexcept {
        return requested_.load(std::memory_order_acquire);
    }
    void request() noexcept;

  private:
    NativeHandle h_ = kNoHandle;
    std::atomic<bool> requested_{false};
};

// Process set-up before any thread starts: stop requests (SIGINT/SIGTERM,
// console events) go to wait_for_stop() only, writes to a reset connection
// fail instead of killing the process, the allocator is tuned.
void prepare_process();
// Blocks until the process is asked to stop; returns what asked ("SIGTERM").
std::string_view wait_for_stop();
// Asks this process to stop as if the operator had (used by a failing thread).
void request_stop_from_thread() noexcept;

// A joinable thread with a chosen stack size, which std::thread cannot set
// (server-blocking's thread per connection). The body must not throw.
class Thread {
  public:
    Thread(std::size_t stack_bytes, std::function<void()> body);  // throws std::system_error
    ~Thread();                                                    // joins
    Thread(const Thread&) = delete;
    Thread& operator=(const Thread&) = delete;

  private:
    NativeThread thread_{};
};

// The CPUs this process may run on, ascending; pinning the calling thread
// (throws std::system_error on failure).
std::vector<int> allowed_cpus();
void pin_current_thread(int cpu);

// What an accept error means for the loop that accepts. One client's
// failure must never pause everyone's accepts: only resource exhaustion does.
enum class AcceptError {
    again,      // nothing is queued: wait for the listener
    skip,       // that connection is gone (reset, aborted, a network error pending
                // on it, a firewall refused it): take the next
    exhausted,  // out of descriptors or memory: more accepting cannot help, pause
    unknown,    // none of those: logged (AcceptGate), and accepting goes on
};
// The platform's lists (errno; WSA and Win32 errors), in posix/process.cpp
// and windows/process.cpp; what to do about each kind is AcceptGate's.
AcceptError classify_accept_error(int err) noexcept;
// The text of a platform error code (errno, WSA error).
std::string error_text(int err);

// Sets TCP_NODELAY on a connected socket; false on failure.
bool set_nodelay(NativeHandle socket) noexcept;

// Starts the lingering close on a connection that owes the client nothing
// more (see runtime/deadlines.hpp): shuts its sending side down, so the
// client gets a FIN after the last response rather than a reset. False:
// close at once instead (--linger-timeout 0, or the peer is already gone).
bool start_lingering_close(NativeHandle socket, std::chrono::milliseconds timeout) noexcept;

// The bytes of output the kernel still holds for `socket` that the client
// has not acknowledged (Linux: SIOCOUTQ). 0 when it holds none, or where
// the platform does not say (Winsock has no count of it that Wine
// implements): the deadlines then apply as though it held none
// (DeadlineClock::expire).
std::size_t unsent_output(NativeHandle socket) noexcept;

}  // namespace sm::runtime
