// bench/floor: a measuring stick, not a server. It answers every blank line
// ("\r\n\r\n") it sees with one canned response and parses nothing else:
// per read batch one read() and one send(), the least any HTTP/1.1 server
// on epoll can do. Comparisons show it as the syscall-floor row, and it shows
// a load generator's own ceiling.
//
// Shared with the servers: options, ready line, signals (common/runtime).
// Not shared: everything protocol. Do not use it to serve anything.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/server.hpp"

namespace {

constexpr std::size_t kReadSize = 64 * 1024;
constexpr int kMaxEvents = 256;

// The same bytes server-epoll sends for /plaintext (its Date frozen at start).
std::string canned_response() {
    char date[64];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return std::string("HTTP/1.1 200 OK\r\nServer: servermodels\r\nDate: ") + date +
           "\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
}

struct Conn {
    int fd = -1;
    unsigned matched = 0;  // bytes of "\r\n\r\n" matched at the end of the last read
    std::string pending;   // unsent responses (only when the socket was full)
};

// Counts "\r\n\r\n" in [p, end), continuing a match carried over from the last read.
std::size_t count_blank_lines(const char* p, const char* end, unsigned& matched) {
    static constexpr char kEnd[] = "\r\n\r\n";
    std::size_t n = 0;
    for (; p < end; ++p) {
        if (*p == kEnd[matched]) {
            if (++matched == 4) {
                ++n;
                matched = 0;
            }
        } else {
            matched = *p == '\r' ? 1 : 0;
        }
    }
    return n;
}

void run_floor(const sm::runtime::WorkerContext& ctx) {
    const std::string response = canned_response();
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
                const std::size_t k = count_blank_lines(buf.get(), buf.get() + r, c.matched);
                out.clear();
                for (std::size_t j = 0; j < k; ++j)
                    out += response;
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

}  // namespace

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kFloor{
        .name = "floor",
        .worker = &run_floor,
        .description =
            "a no-parse responder, NOT a server: one canned response per blank line "
            "seen, one write per read (the syscall floor, and a load generator's "
            "ceiling)",
        .program = "floor"};
    return sm::runtime::serve(kFloor, argc, argv);
}
