// The platform contract (runtime/platform.hpp) where it reads the same on
// every platform: what open_listeners gives, how a Listener owns its socket,
// the lingering close, Thread. Real sockets on 127.0.0.1, and connected
// pairs (socket_support.hpp, the platform's). What only one platform can
// check (descriptor flags, the stop signal's handle, error codes and their
// texts, affinity) is in posix/test_platform.cpp and windows/test_platform.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cpu.hpp"
#include "runtime/platform.hpp"
#include "socket_support.hpp"

using namespace std::chrono_literals;
using sm::runtime::Listener;
using sm::runtime::NativeHandle;
using sm::runtime::test::connect_to;
using sm::runtime::test::handle_open;
using sm::runtime::test::local_port;
using sm::runtime::test::receive;
using sm::runtime::test::receive_now;
using sm::runtime::test::Received;
using sm::runtime::test::send_byte;
using sm::runtime::test::SocketPair;
namespace errors = sm::runtime::test::errors;

TEST_CASE("platform open_listeners on port 0 picks a port and names it in the URL", "[platform]") {
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    REQUIRE(l.sockets.size() == 1);
    REQUIRE(l.sockets[0]);
    CHECK(l.port != 0);
    CHECK(l.url == "http://127.0.0.1:" + std::to_string(l.port));
    CHECK(local_port(l.sockets[0].handle()) == l.port);
    // It listens: a client connects (into its backlog: nobody accepts).
    CHECK(connect_to(l.port));
}

TEST_CASE("platform open_listeners on a port already listened on is a clear error", "[platform]") {
    // Ours, or a stale server's: never joined, shared nor stolen silently.
    const sm::runtime::Listeners first = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const std::string port = std::to_string(first.port);
    CHECK_THROWS_MATCHES(sm::runtime::open_listeners("127.0.0.1", first.port, 1, 16),
                         std::runtime_error,
                         Catch::Message("cannot listen on 127.0.0.1:" + port + ": " +
                                        sm::runtime::error_text(errors::kAddressInUse) +
                                        " (is another server already running on this port?)"));
    // The first one still listens.
    CHECK(connect_to(first.port));
}

TEST_CASE("platform open_listeners on a given free port binds there", "[platform]") {
    std::uint16_t port;
    {
        const auto probe = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
        port = probe.port;
    }  // closed: the port is free again (no connection was made, no TIME_WAIT)
    const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", port, 1, 16);
    CHECK(l.port == port);
    REQUIRE(l.sockets.size() == 1);
    CHECK(local_port(l.sockets[0].handle()) == port);
}

TEST_CASE("platform open_listeners names an address it cannot use", "[platform]") {
    CHECK_THROWS_WITH(sm::runtime::open_listeners("not-an-address", 0, 1, 16),
                      Catch::StartsWith("cannot resolve address 'not-an-address': "));
}

TEST_CASE("platform is_ip_address takes numeric IPv4 and IPv6 addresses only", "[platform]") {
    CHECK(sm::runtime::is_ip_address("127.0.0.1"));
    CHECK(sm::runtime::is_ip_address("0.0.0.0"));
    CHECK(sm::runtime::is_ip_address("::"));
    CHECK(sm::runtime::is_ip_address("::1"));
    CHECK(sm::runtime::is_ip_address("fe80::1"));
    CHECK_FALSE(sm::runtime::is_ip_address(""));
    CHECK_FALSE(sm::runtime::is_ip_address("localhost"));
    CHECK_FALSE(sm::runtime::is_ip_address("127.0.0.1:80"));
    CHECK_FALSE(sm::runtime::is_ip_address("[::1]"));
    CHECK_FALSE(sm::runtime::is_ip_address("256.0.0.1"));
}

TEST_CASE("platform Listener closes its socket on destruction", "[platform]") {
    NativeHandle h;
    {
        const sm::runtime::Listeners l = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
        h = l.sockets[0].handle();
        CHECK(handle_open(h));
    }
    CHECK_FALSE(handle_open(h));
}

TEST_CASE("platform Listener moves its socket and close() closes it once", "[platform]") {
    sm::runtime::Listeners one = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    sm::runtime::Listeners two = sm::runtime::open_listeners("127.0.0.1", 0, 1, 16);
    const NativeHandle a = one.sockets[0].handle();
    const NativeHandle b = two.sockets[0].handle();
    Listener moved(std::move(one.sockets[0]));
    CHECK_FALSE(one.sockets[0]);  // the moved-from one owns nothing
    CHECK(moved.handle() == a);
    one.sockets[0] = Listener();  // destroys nothing it does not own
    CHECK(handle_open(a));

    moved = std::move(two.sockets[0]);  // closes what it held
    CHECK_FALSE(handle_open(a));
    CHECK(moved.handle() == b);
    CHECK_FALSE(two.sockets[0]);
    moved.close();
    CHECK_FALSE(moved);
    CHECK(moved.handle() == sm::runtime::kNoHandle);
    CHECK_FALSE(handle_open(b));
    moved.close();  // again: nothing
}

TEST_CASE("platform start_lingering_close with timeout 0 does nothing and says so", "[platform]") {
    SocketPair sp;
    CHECK_FALSE(sm::runtime::start_lingering_close(sp.ours.get(), 0ms));
    // Not shut down: nothing (no EOF) for the peer, and we can still send.
    char byte = 0;
    CHECK(receive_now(sp.peer.get(), byte) == Received::nothing);
    REQUIRE(send_byte(sp.ours.get(), 'y'));
    CHECK(receive(sp.peer.get(), byte) == Received::byte);
    CHECK(byte == 'y');
}

TEST_CASE("platform start_lingering_close shuts the sending side only", "[platform]") {
    SocketPair sp;
    CHECK(sm::runtime::start_lingering_close(sp.ours.get(), 2000ms));
    char byte = 0;
    CHECK(receive(sp.peer.get(), byte) == Received::eof);  // EOF after our last byte
    CHECK_FALSE(send_byte(sp.ours.get(), 'z'));            // we send no more
    // Our side still reads what the client sends: that is the lingering.
    REQUIRE(send_byte(sp.peer.get(), 'x'));
    CHECK(receive(sp.ours.get(), byte) == Received::byte);
    CHECK(byte == 'x');
}

TEST_CASE("platform Thread runs its body on its own thread and joins", "[platform]") {
    const std::thread::id caller = std::this_thread::get_id();
    std::thread::id inside;
    bool ran = false;
    {
        const sm::runtime::Thread t(256 * 1024, [&] {
            inside = std::this_thread::get_id();
            ran = true;
        });
    }  // joins: what the body wrote is visible here
    CHECK(ran);
    CHECK(inside != caller);
}

TEST_CASE("platform pin_current_thread to a CPU not there names it", "[platform]") {
    // 63: the last of a Windows affinity mask; 1000 and kMaxCpus - 1: inside
    // a Linux cpu_set_t, beyond a Windows mask. Each is skipped where present.
    const std::vector<int> cpus = sm::runtime::allowed_cpus();
    for (const int cpu : {63, 1000, sm::runtime::kMaxCpus - 1}) {
        CAPTURE(cpu);
        if (std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) continue;
        std::string what;
        std::thread([&] {
            try {
                sm::runtime::pin_current_thread(cpu);
            } catch (const std::system_error& e) {
                what = e.what();
            }
        }).join();
        CHECK_THAT(what, Catch::StartsWith("cannot pin a thread to CPU " + std::to_string(cpu)));
    }
}
