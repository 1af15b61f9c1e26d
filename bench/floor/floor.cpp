// bench/floor: a measuring stick, not a server. It parses nothing: per
// request it looks at two things only, the request's first ten bytes and the
// blank line ("\r\n\r\n") that ends it, and answers each blank line with one
// of two canned responses:
//   - a request that starts with "GET /json " or "GET /json?" gets the
//     models' /json response (Content-Type: application/json,
//     {"message":"Hello, World!"}), as their router ignores the query;
//   - any other request gets their /plaintext response ("Hello, World!").
// Both are the bytes server-epoll sends (rendered once, at start, by
// common/http's ResponseCache, so they cannot drift; only the Date stays
// frozen at the start). Per read batch one read() and one send(), the least
// any HTTP/1.1 server on epoll can do. Comparisons show it as the
// syscall-floor row of both the plaintext and the json scenario, and it shows
// a load generator's own ceiling.
//
// Why a byte check and not an option: one floor process serves both
// scenarios (and a loadgen mix of the two), pipelined requests for both get
// their answers in order, and the check costs one compare for each of the
// first ten bytes of a request only; llhttp never runs.
//
// --spin-ns N makes it a calibration: N nanoseconds of busy CPU per
// response, in place of the parse and render a server does. Against the
// plain floor it shows what a given user-space cost per request costs a
// server in all on this machine, kernel time included: a slower server lets
// the client go idle, and waking it is work the server's sends pay for
// (bench/compare/README.md, "What a nanosecond costs").
//
// Shared with the servers: options, ready line, signals (common/runtime),
// the response bytes (common/http). Not shared: request parsing. Do not use
// it to serve anything.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "http/response.hpp"
#include "runtime/server.hpp"

namespace {

constexpr std::size_t kReadSize = 64 * 1024;
constexpr int kMaxEvents = 256;

// The start of a request that gets the JSON response: these nine bytes,
// then a space or a '?'.
constexpr std::string_view kJsonStart = "GET /json";
constexpr unsigned kJson = kJsonStart.size() + 1;  // Conn::start: the request is for /json
constexpr unsigned kNotJson = kJson + 1;           // Conn::start: it is not

// A keep-alive response of server-epoll for `endpoint` (its Date: now).
std::string canned_response(sm::http::Endpoint endpoint) {
    const sm::http::ResponseCache cache(sm::http::ResponseMode::composed, std::time(nullptr));
    sm::http::ByteBuffer out;
    cache.write_endpoint(endpoint, false, sm::http::Persistence::keep_alive, out);
    return std::string(out.view());
}

struct Conn {
    int fd = -1;
    unsigned matched = 0;  // bytes of "\r\n\r\n" matched at the end of the last read
    unsigned start = 0;    // bytes of kJsonStart the current request began with, or kJson, kNotJson
    std::string pending;   // unsent responses (only when the socket was full)
};

struct Responses {
    std::string plaintext;
    std::string json;
};

// Appends to `out` a response for every "\r\n\r\n" in [p, end), continuing
// the matches carried over from the last read in `c`; returns how many
// (kCount; the plain floor counts nothing, so its loop stays what it was).
template <bool kCount>
std::size_t answer(const char* p, const char* end, Conn& c, const Responses& responses,
                   std::string& out) {
    static constexpr char kEnd[] = "\r\n\r\n";
    std::size_t answered = 0;
    for (; p < end; ++p) {
        const char ch = *p;
        if (c.start < kJsonStart.size())
            c.start = ch == kJsonStart[c.start] ? c.start + 1 : kNotJson;
        else if (c.start == kJsonStart.size())
            c.start = ch == ' ' || ch == '?' ? kJson : kNotJson;
        if (ch == kEnd[c.matched]) {
            if (++c.matched == 4) {
                out += c.start == kJson ? responses.json : responses.plaintext;
                if constexpr (kCount) ++answered;
                c.matched = 0;
                c.start = 0;
            }
        } else {
            c.matched = ch == '\r' ? 1 : 0;
        }
    }
    return answered;
}

constexpr sm::runtime::ModelOption kSpinNs{
    .name = "spin-ns",
    .help =
        "Nanoseconds of busy CPU per response (a loop on the monotonic clock), standing in for "
        "the parse and render a server does: what that much user-space work per request costs "
        "in all on this machine, against the plain floor. 0: none",
    .value = 0,
    .min = 0,
    .max = 10'000'000};

constexpr sm::runtime::ModelOption kFloorOptions[] = {kSpinNs};

// A busy wait. steady_clock reads are vDSO calls on the usual clocksources
// (tsc, kvm-clock): no syscall, no kernel time.
void spin(std::chrono::nanoseconds total) {
    const auto until = std::chrono::steady_clock::now() + total;
    while (std::chrono::steady_clock::now() < until) {
    }
}

// kSpin: --spin-ns is set. Two instances, so that the plain floor's loop has
// not even a branch more than it had before the option.
template <bool kSpin>
void run_floor(const sm::runtime::WorkerContext& ctx) {
    const Responses responses{canned_response(sm::http::Endpoint::plaintext),
                              canned_response(sm::http::Endpoint::json)};
    [[maybe_unused]] const std::chrono::nanoseconds spin_ns(ctx.options.model_option(kSpinNs.name));
    std::string out;
    auto buf = std::make_unique<char[]>(kReadSize);
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    std::vector<std::unique_ptr<Conn>> conns;  // by fd
    char listen_tag = 0, stop_tag = 0;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &listen_tag;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, ctx.listener.handle(), &ev);
    ev.data.ptr = &stop_tag;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, ctx.stop.handle(), &ev);

    auto close_conn = [&](Conn& c) {
        ::close(c.fd);
        c.fd = -1;
    };
    epoll_event events[kMaxEvents];
    bool stopping = false;
    while (!stopping) {
        const int n = ::epoll_wait(ep, events, kMaxEvents, -1);
        for (int i = 0; i < n; ++i) {
            void* tag = events[i].data.ptr;
            if (tag == &stop_tag) {
                stopping = true;
                break;
            }
            if (tag == &listen_tag) {
                while (true) {
                    const int fd = ::accept4(ctx.listener.handle(), nullptr, nullptr,
                                             SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) break;
                    sm::runtime::set_nodelay(fd);
                    if (static_cast<std::size_t>(fd) >= conns.size()) conns.resize(fd + 1);
                    if (!conns[fd]) conns[fd] = std::make_unique<Conn>();
                    Conn& c = *conns[fd];
                    c = Conn{};
                    c.fd = fd;
                    epoll_event cev{};
                    cev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
                    cev.data.ptr = &c;
                    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            Conn& c = *static_cast<Conn*>(tag);
            if (c.fd < 0) continue;
            if ((events[i].events & EPOLLOUT) && !c.pending.empty()) {
                const ssize_t w = ::send(c.fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
                if (w > 0) c.pending.erase(0, static_cast<std::size_t>(w));
            }
            if (!(events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) continue;
            while (true) {
                const ssize_t r = ::read(c.fd, buf.get(), kReadSize);
                if (r <= 0) {
                    if (r == 0 || errno != EAGAIN) close_conn(c);
                    break;
                }
                out.clear();
                [[maybe_unused]] const std::size_t answered =
                    answer<kSpin>(buf.get(), buf.get() + r, c, responses, out);
                if constexpr (kSpin) spin(spin_ns * answered);
                if (!c.pending.empty()) {
                    c.pending += out;
                } else if (!out.empty()) {
                    const ssize_t w = ::send(c.fd, out.data(), out.size(), MSG_NOSIGNAL);
                    if (w < 0 && errno != EAGAIN) {
                        close_conn(c);
                        break;
                    }
                    if (static_cast<std::size_t>(w < 0 ? 0 : w) < out.size())
                        c.pending.assign(out, static_cast<std::size_t>(w < 0 ? 0 : w));
                }
                if (static_cast<std::size_t>(r) < kReadSize && !(events[i].events & EPOLLRDHUP))
                    break;
            }
        }
    }
    for (auto& c : conns)
        if (c && c->fd >= 0) ::close(c->fd);
    ::close(ep);
}

void run_worker(const sm::runtime::WorkerContext& ctx) {
    if (ctx.options.model_option(kSpinNs.name) != 0)
        run_floor<true>(ctx);
    else
        run_floor<false>(ctx);
}

}  // namespace

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kFloor{
        .name = "floor",
        .worker = &run_worker,
        .options = kFloorOptions,
        .description =
            "a no-parse responder, NOT a server: one canned response per blank line "
            "seen, one write per read (the syscall floor, and a load generator's "
            "ceiling). A request starting with \"GET /json \" or \"GET /json?\" gets "
            "server-epoll's /json response, any other its /plaintext response (Date frozen "
            "at start)",
        .program = "floor"};
    return sm::runtime::serve(kFloor, argc, argv);
}
