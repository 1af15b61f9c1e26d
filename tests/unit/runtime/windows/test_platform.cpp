// The platform contract (runtime/platform.hpp) as runtime/windows implements
// it, where that differs from POSIX: one SO_EXCLUSIVEADDRUSE listener, the
// stop signal's event, WSA and Win32 error codes and their texts, thread
// stack reservations, affinity masks. Checked with Winsock and Win32's own
// calls (getsockopt, WaitForSingleObject) on real sockets on 127.0.0.1.
// The platform-neutral cases are in ../test_platform.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/platform.hpp"
#include "runtime/windows/winsock.hpp"
#include "socket_support.hpp"

using sm::runtime::AcceptError;
using sm::runtime::as_handle;
using sm::runtime::as_socket;
using sm::runtime::start_winsock;
using sm::runtime::StopSignal;
using sm::runtime::test::connect_to;
using sm::runtime::test::loopback;
using sm::runtime::test::set_nonblocking;
using sm::runtime::test::Socket;
namespace errors = sm::runtime::test::errors;

namespace {

// A bound on waits for what must happen (a signalled event): never a threshold.
constexpr DWORD kWaitMs = 10'000;

// A BOOL or int option. Zeroed first: Windows (and Wine) return TCP_NODELAY
// as a single byte.
int int_option(sm::runtime::NativeHandle s, int level, int name) {
    int v = 0;
    int len = sizeof v;
    REQUIRE(::getsockopt(as_socket(s), level, name, reinterpret_cast<char*>(&v), &len) == 0);
    return v;
}

// What the system itself says about `err`, in the same language error_text uses.
std::string system_text(DWORD err) {
    char buf[512];
    DWORD n = ::FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                               err, 0, buf, sizeof buf, nullptr);
    while (n > 0 &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '.'))
        --n;
    return std::string(buf, n);
}

}  // namespace

TEST_CASE("platform windows open_listeners makes one exclusive, listening, non-blocking socket",
          "[platform]") {
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    REQUIRE(l.sockets.size() == 1);
    const sm::runtime::NativeHandle s = l.sockets[0].handle();
    CHECK(int_option(s, SOL_SOCKET, SO_ACCEPTCONN) != 0);  // listening
    CHECK(int_option(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE) != 0);
    CHECK(int_option(s, IPPROTO_TCP, TCP_NODELAY) != 0);
    // Non-blocking: with nothing queued, accept says so instead of waiting
    // (a blocking listener would hang here; the test's timeout bounds that).
    CHECK(::accept(as_socket(s), nullptr, nullptr) == INVALID_SOCKET);
    CHECK(::WSAGetLastError() == WSAEWOULDBLOCK);
    // And a client's connection is there to take.
    const Socket client = connect_to(l.port);
    REQUIRE(client);
    WSAPOLLFD p{as_socket(s), POLLRDNORM, 0};
    REQUIRE(::WSAPoll(&p, 1, static_cast<int>(kWaitMs)) == 1);
    const Socket accepted(::accept(as_socket(s), nullptr, nullptr));
    CHECK(accepted);
}

TEST_CASE("platform windows open_listeners' port cannot be taken with SO_REUSEADDR", "[platform]") {
    // What SO_EXCLUSIVEADDRUSE is for: without it, another process's socket
    // with SO_REUSEADDR could bind the port and steal its connections.
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const Socket thief(::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
    REQUIRE(thief);
    const BOOL one = TRUE;
    REQUIRE(::setsockopt(as_socket(thief.get()), SOL_SOCKET, SO_REUSEADDR,
                         reinterpret_cast<const char*>(&one), sizeof one) == 0);
    const sockaddr_in a = loopback(l.port);
    CHECK(::bind(as_socket(thief.get()), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0);
    const int err = ::WSAGetLastError();
    CHECK((err == WSAEADDRINUSE || err == WSAEACCES));
}

TEST_CASE("platform windows open_listeners with more than one socket is a clear error",
          "[platform]") {
    CHECK_THROWS_MATCHES(sm::runtime::open_listeners("127.0.0.1", 0, 2, 16), std::runtime_error,
                         Catch::Message("2 listeners on one port: Windows has no SO_REUSEPORT to "
                                        "balance them (one listener serves every thread)"));
}

TEST_CASE("platform windows StopSignal is an event, signalled on request and staying so",
          "[platform]") {
    StopSignal stop;
    const HANDLE h = as_handle(stop.handle());
    CHECK_FALSE(stop.requested());
    CHECK(::WaitForSingleObject(h, 0) == WAIT_TIMEOUT);
    stop.request();
    CHECK(stop.requested());
    // Every worker waits on the same handle, and no wait resets it.
    CHECK(::WaitForSingleObject(h, 0) == WAIT_OBJECT_0);
    CHECK(::WaitForSingleObject(h, 0) == WAIT_OBJECT_0);
    stop.request();  // a second request changes nothing
    CHECK(stop.requested());
    CHECK(::WaitForSingleObject(h, 0) == WAIT_OBJECT_0);
}

TEST_CASE("platform windows StopSignal closes its event", "[platform]") {
    HANDLE h;
    {
        const StopSignal stop;
        h = as_handle(stop.handle());
        DWORD flags = 0;
        CHECK(::GetHandleInformation(h, &flags));
    }
    DWORD flags = 0;
    CHECK_FALSE(::GetHandleInformation(h, &flags));
}

TEST_CASE("platform windows StopSignal seen from another thread", "[platform]") {
    StopSignal stop;
    DWORD waited = WAIT_FAILED;
    bool seen = false;
    std::thread waiter([&] {
        waited = ::WaitForSingleObject(as_handle(stop.handle()), kWaitMs);
        seen = stop.requested();  // release/acquire: set before the wake-up
    });
    stop.request();
    waiter.join();
    CHECK(waited == WAIT_OBJECT_0);
    CHECK(seen);
}

// Per error code, from socket_support.hpp's lists: a connection's own
// failure is skipped, only a shortage pauses, and anything else is unknown
// (logged, accepting goes on; test_accept_gate.cpp).
TEST_CASE("platform windows classify_accept_error would-block is again", "[platform]") {
    const int err = GENERATE(from_range(errors::kAgain));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::again);
}

TEST_CASE("platform windows classify_accept_error a connection's own failure is skip",
          "[platform]") {
    const int err = GENERATE(from_range(errors::kSkip));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::skip);
}

TEST_CASE("platform windows classify_accept_error out of handles or memory is exhausted",
          "[platform]") {
    const int err = GENERATE(from_range(errors::kExhausted));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::exhausted);
}

TEST_CASE("platform windows classify_accept_error anything else is unknown", "[platform]") {
    const int err = GENERATE(from_range(errors::kUnknown));
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::unknown);
}

namespace {

// One AcceptEx on `listener`, waited for (bounded).
struct AcceptExResult {
    int error = 0;         // 0: it took a connection
    bool at_once = false;  // failed without a completion
    bool pending = false;  // still pending after kWaitMs (then cancelled)
};

AcceptExResult accept_ex(sm::runtime::NativeHandle listener) {
    const SOCKET l = as_socket(listener);
    LPFN_ACCEPTEX accept_ex = nullptr;
    GUID guid = WSAID_ACCEPTEX;
    DWORD bytes = 0;
    REQUIRE(::WSAIoctl(l, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid, sizeof guid, &accept_ex,
                       sizeof accept_ex, &bytes, nullptr, nullptr) == 0);
    const Socket s(
        ::WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_OVERLAPPED));
    REQUIRE(s);
    OVERLAPPED ov{};
    ov.hEvent = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);
    REQUIRE(ov.hEvent != nullptr);
    constexpr DWORD kAddressSpace = sizeof(sockaddr_in6) + 16;
    char addresses[2 * kAddressSpace];
    AcceptExResult r;
    if (!accept_ex(l, as_socket(s.get()), addresses, 0, kAddressSpace, kAddressSpace, &bytes,
                   &ov)) {
        r.error = ::WSAGetLastError();
        r.at_once = r.error != ERROR_IO_PENDING;
    }
    if (!r.at_once) {
        r.error = 0;
        if (::WaitForSingleObject(ov.hEvent, kWaitMs) != WAIT_OBJECT_0) {
            ::CancelIoEx(reinterpret_cast<HANDLE>(l), &ov);
            ::WaitForSingleObject(ov.hEvent, kWaitMs);
            r.pending = true;
        } else {
            DWORD flags = 0;
            if (!::WSAGetOverlappedResult(as_socket(s.get()), &ov, &bytes, FALSE, &flags))
                r.error = ::WSAGetLastError();
        }
    }
    ::CloseHandle(ov.hEvent);
    return r;
}

}  // namespace

TEST_CASE("platform windows AcceptEx of a connection reset while queued is a skip", "[platform]") {
    // The clients of issue 29: connect, then close with SO_LINGER 0 before
    // the server accepts. Under Wine the connection is still in the Linux
    // backlog and AcceptEx fails with WSAENOTCONN (its address cannot be
    // read any more); Windows documents WSAECONNRESET. Whatever this system
    // reports, an error must be one classify_accept_error() skips: one
    // client's reset must not pause everyone's accepts.
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    {
        Socket client = connect_to(l.port);
        REQUIRE(client);
        const linger abort{1, 0};
        REQUIRE(::setsockopt(as_socket(client.get()), SOL_SOCKET, SO_LINGER,
                             reinterpret_cast<const char*>(&abort), sizeof abort) == 0);
    }  // closed: a reset
    const AcceptExResult r = accept_ex(l.sockets[0].handle());
    CAPTURE(r.error, r.at_once, r.pending, sm::runtime::error_text(r.error));
    if (r.pending) {
        // Dropped from the backlog by the system: nothing to accept, no error.
        SUCCEED("the reset connection was never offered");
    } else if (r.error != 0) {
        CHECK(sm::runtime::classify_accept_error(r.error) == AcceptError::skip);
    }
}

TEST_CASE("platform windows accept on a socket not listening is unknown", "[platform]") {
    // A real Winsock error that is neither a client's nor a shortage
    // ("listen was not invoked prior to accept").
    start_winsock();
    const Socket not_listening(::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
    REQUIRE(not_listening);
    set_nonblocking(not_listening);
    const sockaddr_in any = loopback(0);
    REQUIRE(::bind(as_socket(not_listening.get()), reinterpret_cast<const sockaddr*>(&any),
                   sizeof any) == 0);
    REQUIRE(::accept(as_socket(not_listening.get()), nullptr, nullptr) == INVALID_SOCKET);
    const int err = ::WSAGetLastError();
    CAPTURE(err, sm::runtime::error_text(err));
    CHECK(err == WSAEINVAL);
    CHECK(sm::runtime::classify_accept_error(err) == AcceptError::unknown);
}

TEST_CASE("platform windows error_text is the system's description and the number", "[platform]") {
    // These two every system describes (Wine too).
    CHECK_FALSE(system_text(WSAEMFILE).empty());
    CHECK_FALSE(system_text(WSAECONNRESET).empty());
    // Wine has no text for some (WSAEWOULDBLOCK, WSAEADDRINUSE,
    // WSAECONNABORTED, WSAENOBUFS): those read "unknown error", with the number.
    for (DWORD err :
         {DWORD{WSAEMFILE}, DWORD{WSAENOBUFS}, DWORD{WSAECONNRESET}, DWORD{WSAECONNABORTED},
          DWORD{WSAEWOULDBLOCK}, DWORD{WSAEADDRINUSE}, DWORD{WSAEINVAL},
          DWORD{ERROR_NETNAME_DELETED}, DWORD{ERROR_NOT_ENOUGH_MEMORY}}) {
        CAPTURE(err);
        const std::string text = sm::runtime::error_text(static_cast<int>(err));
        const std::string description = system_text(err);
        CHECK(text == (description.empty() ? "unknown error" : description) + " (error " +
                          std::to_string(err) + ")");
        CHECK(text.find('\n') == std::string::npos);  // one log line
    }
    // A code no system has text for.
    CHECK(sm::runtime::error_text(0x3fff'fff0) ==
          "unknown error (error " + std::to_string(0x3fff'fff0) + ")");
}

TEST_CASE("platform windows start_lingering_close on what is not a socket fails", "[platform]") {
    HANDLE r = nullptr;
    HANDLE w = nullptr;
    REQUIRE(::CreatePipe(&r, &w, nullptr, 0));
    CHECK_FALSE(sm::runtime::start_lingering_close(reinterpret_cast<sm::runtime::NativeHandle>(w),
                                                   std::chrono::milliseconds(2000)));
    ::CloseHandle(r);
    ::CloseHandle(w);
}

TEST_CASE("platform windows set_nodelay on a TCP connection", "[platform]") {
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const Socket client = connect_to(l.port);
    REQUIRE(client);
    CHECK(int_option(client.get(), IPPROTO_TCP, TCP_NODELAY) == 0);
    CHECK(sm::runtime::set_nodelay(client.get()));
    CHECK(int_option(client.get(), IPPROTO_TCP, TCP_NODELAY) != 0);
    CHECK_FALSE(sm::runtime::set_nodelay(sm::runtime::kNoHandle));  // not a socket
}

TEST_CASE("platform windows Thread reserves the stack size it was given", "[platform]") {
    // More than the executable's default reservation (2 MiB with mingw's
    // ld) and than Wine's minimum (1 MiB: it rounds smaller ones up), so
    // that only the size asked for explains what the thread gets.
    constexpr std::size_t kStack = 4 * 1024 * 1024;
    ULONG_PTR low = 0;
    ULONG_PTR high = 0;
    {
        const sm::runtime::Thread t(kStack, [&] { ::GetCurrentThreadStackLimits(&low, &high); });
    }
    const std::size_t reserved = high - low;
    CHECK(reserved >= kStack);
    CHECK(reserved < 2 * kStack);
}

TEST_CASE("platform windows allowed_cpus and pin_current_thread", "[platform]") {
    const std::vector<int> cpus = sm::runtime::allowed_cpus();
    REQUIRE_FALSE(cpus.empty());
    CHECK(std::is_sorted(cpus.begin(), cpus.end()));
    // On a thread of its own: the test process keeps its affinity. The
    // thread's mask is what SetThreadAffinityMask returns when it is set
    // again (Windows has no getter for it).
    DWORD_PTR mask = 0;
    std::thread([&] {
        sm::runtime::pin_current_thread(cpus.back());
        mask = ::SetThreadAffinityMask(::GetCurrentThread(), DWORD_PTR{1} << cpus.back());
    }).join();
    CHECK(mask == DWORD_PTR{1} << cpus.back());
}

TEST_CASE("platform: unsent_output says nothing on Winsock (the deadlines apply as written)",
          "[platform]") {
    // SIO_TCP_INFO would say, on Windows 10 1703 and later; Wine does not
    // implement it. So a connection's idle and head deadlines there run
    // from the model's last write, not from the client's last byte taken.
    sm::runtime::test::SocketPair pair;
    const char byte = 'x';
    REQUIRE(::send(as_socket(pair.ours.get()), &byte, 1, 0) == 1);
    CHECK(sm::runtime::unsent_output(pair.ours.get()) == 0);
}
