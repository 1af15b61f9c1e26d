// bench/floor: a measuring stick, not a server. It parses nothing: it
// answers each blank line ("\r\n\r\n") a client sends with one of two canned
// responses, server-epoll's /plaintext or /json one (respond.hpp says which,
// and --spin-ns). Per read batch one read() and one send(), the least any
// HTTP/1.1 server on epoll can do. Comparisons show it as the syscall-floor
// row of both the plaintext and the json scenario, and it shows a load
// generator's own ceiling. floor_uring.cpp is the same floor with
// server-uring's I/O shape.
//
// Shared with the servers: options, ready line, signals (common/runtime),
// the response bytes (common/http). Not shared: request parsing. Do not use
// it to serve anything.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "respond.hpp"
#include "runtime/server.hpp"

namespace {

constexpr std::size_t kReadSize = 64 * 1024;
constexpr int kMaxEvents = 256;

struct Conn {
    int fd = -1;
    sm::floor::Scan scan;
    std::string pending;  // unsent responses (only when the socket was full)
};

template <typename Respond>
void run_floor(const sm::runtime::WorkerContext& ctx, const Respond& respond) {
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
                respond(std::string_view(buf.get(), static_cast<std::size_t>(r)), c.scan, out);
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
    sm::floor::with_spin(ctx, [&](const auto& respond) { run_floor(ctx, respond); });
}

}  // namespace

int main(int argc, char** argv) {
    static constexpr sm::runtime::ModelOption kOptions[] = {sm::floor::kSpinNs};
    static const std::string description = sm::floor::describe("one write per read");
    const sm::runtime::Model model{.name = "floor",
                                   .worker = &run_worker,
                                   .options = kOptions,
                                   .description = description,
                                   .program = "floor"};
    return sm::runtime::serve(model, argc, argv);
}
