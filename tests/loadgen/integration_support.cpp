#include "integration_support.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <span>
#include <sstream>
#include <stdexcept>

#include "support/io_uring_check.hpp"
#include "support/wait.hpp"

namespace sm::test::loadgen {
namespace {

std::string binary_from(const char* env, const char* compiled) {
    const char* value = std::getenv(env);
    std::string path = value != nullptr && *value != '\0' ? value : compiled;
    if (::access(path.c_str(), X_OK) != 0) {
        throw std::runtime_error(std::string(env) + "=" + path +
                                 " is not an executable file (build the loadgen and server-epoll "
                                 "targets, or set " +
                                 env + ")");
    }
    return path;
}

std::string errno_text(std::string_view what, int err) {
    return std::string(what) + ": " + std::strerror(err);
}

std::string join(const std::string& binary, const std::vector<std::string>& args) {
    std::string s = binary;
    for (const auto& a : args) {
        const bool quote = a.empty() || a.find_first_of(" \t'\"{}") != std::string::npos;
        s += quote ? " '" + a + "'" : " " + a;
    }
    return s;
}

Run collect(std::string command, RunResult result, const TempFile& json) {
    Run run;
    run.command = std::move(command);
    run.result = std::move(result);
    run.json_text = json.read();
    if (!run.json_text.empty()) {
        try {
            run.report.emplace(run.json_text);
        } catch (const std::runtime_error&) {
            run.report.reset();  // describe() shows the text; json() fails the test
        }
    }
    return run;
}

}  // namespace

const std::string& loadgen_binary() {
    static const std::string path = binary_from("SM_LOADGEN_BINARY", SM_LOADGEN_BINARY);
    return path;
}

const std::string& server_epoll_binary() {
    static const std::string path = binary_from("SM_SERVER_EPOLL_BINARY", SM_SERVER_EPOLL_BINARY);
    return path;
}

namespace {

// The uring engine's run is skipped as a whole (exit 77, "skipped" in ctest)
// where io_uring is refused, instead of failing every case.
const bool uring_checked = [] {
    const char* engine = std::getenv("SM_LOADGEN_ENGINE");
    if (engine != nullptr && std::string(engine) == "uring")
        exit_skipped_unless_io_uring("loadgen-uring");
    return true;
}();

}  // namespace

const std::string& loadgen_engine() {
    static const std::string engine = [] {
        const char* value = std::getenv("SM_LOADGEN_ENGINE");
        std::string e = value != nullptr ? value : "";
        if (!e.empty() && e != "epoll" && e != "uring" && e != "auto")
            throw std::runtime_error("SM_LOADGEN_ENGINE=" + e + ": expected epoll, uring or auto");
        return e;
    }();
    return engine;
}

std::string deny_io_uring_launcher() {
    const char* value = std::getenv("SM_DENY_IO_URING");
    if (value != nullptr && *value != '\0') return value;
#ifdef SM_DENY_IO_URING_BINARY
    return SM_DENY_IO_URING_BINARY;
#else
    return {};
#endif
}

std::unique_ptr<ServerProcess> start_epoll(const std::string& address) {
    return std::make_unique<ServerProcess>(
        server_epoll_binary(),
        std::vector<std::string>{"--address", address, "--port", "0", "--threads", "1"});
}

std::string url_of(const std::string& host, std::uint16_t port, std::string_view path) {
    const bool v6 = host.find(':') != std::string::npos;
    return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
           std::string(path);
}

std::string url_of(const ServerProcess& server, std::string_view path) {
    return url_of(server.host(), server.port(), path);
}

TempFile::TempFile() {
    const char* dir = std::getenv("TMPDIR");
    std::string name =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/sm-loadgen-test-XXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw std::runtime_error(errno_text("mkstemp " + name, errno));
    ::close(fd);
    path_ = std::move(name);
}

TempFile::~TempFile() {
    ::unlink(path_.c_str());
}

std::string TempFile::read() const {
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

Report::Report(std::string text)
    : text_(std::move(text)), parser_(std::make_unique<simdjson::dom::parser>()) {
    const auto error = parser_->parse(text_).get(root_);
    if (error) {
        throw std::runtime_error(std::string("not valid JSON (") + simdjson::error_message(error) +
                                 "): " + text_);
    }
}

bool Report::has(std::string_view pointer) const {
    return !root_.at_pointer(pointer).error();
}

simdjson::dom::element Report::at(std::string_view pointer) const {
    simdjson::dom::element e;
    if (root_.at_pointer(pointer).get(e)) {
        throw std::runtime_error("the JSON report has no " + std::string(pointer));
    }
    return e;
}

std::uint64_t Report::count(std::string_view pointer) const {
    std::uint64_t v = 0;
    if (at(pointer).get_uint64().get(v)) {
        throw std::runtime_error(
            "JSON " + std::string(pointer) +
            " is not a non-negative integer: " + simdjson::minify(at(pointer)));
    }
    return v;
}

double Report::number(std::string_view pointer) const {
    double v = 0;
    if (at(pointer).get_double().get(v)) {
        throw std::runtime_error("JSON " + std::string(pointer) +
                                 " is not a number: " + simdjson::minify(at(pointer)));
    }
    return v;
}

std::string Report::string(std::string_view pointer) const {
    std::string_view v;
    if (at(pointer).get_string().get(v)) {
        throw std::runtime_error("JSON " + std::string(pointer) +
                                 " is not a string: " + simdjson::minify(at(pointer)));
    }
    return std::string(v);
}

bool Report::boolean(std::string_view pointer) const {
    bool v = false;
    if (at(pointer).get_bool().get(v)) {
        throw std::runtime_error("JSON " + std::string(pointer) +
                                 " is not true or false: " + simdjson::minify(at(pointer)));
    }
    return v;
}

bool Report::is_null(std::string_view pointer) const {
    return at(pointer).is_null();
}

const Report& Run::json() const {
    INFO(describe());
    REQUIRE(report.has_value());
    return *report;
}

std::uint64_t Run::total_errors() const {
    const Report& r = json();
    std::uint64_t sum = 0;
    for (const auto c : kErrorClasses)
        sum += r.count("/errors/" + std::string(c));
    return sum;
}

std::string Run::describe() const {
    std::string s = "command: " + command + "\nstatus: " + result.status.describe() +
                    "\n--- stdout ---\n" + result.out + "--- stderr ---\n" + result.err +
                    "--- JSON ---\n";
    s += json_text.empty() ? "(nothing written)\n" : json_text + "\n";
    if (!json_text.empty() && !report) s += "(not valid JSON)\n";
    return s;
}

std::vector<std::string> with_engine(const std::vector<std::string>& args) {
    std::vector<std::string> full;
    if (!loadgen_engine().empty()) full = {"--engine", loadgen_engine()};
    full.insert(full.end(), args.begin(), args.end());
    return full;
}

Run run_loadgen(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
    const TempFile json;
    std::vector<std::string> full = {"--json", json.path()};
    if (!loadgen_engine().empty()) full.insert(full.end(), {"--engine", loadgen_engine()});
    full.insert(full.end(), args.begin(), args.end());
    RunResult result = run_to_exit(loadgen_binary(), full, timeout);
    return collect(join(loadgen_binary(), full), std::move(result), json);
}

Run run_loadgen_under(const std::string& launcher, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout) {
    const TempFile json;
    std::vector<std::string> full = {"--json", json.path()};
    full.insert(full.end(), args.begin(), args.end());
    if (launcher.empty()) {
        RunResult result = run_to_exit(loadgen_binary(), full, timeout);
        return collect(join(loadgen_binary(), full), std::move(result), json);
    }
    full.insert(full.begin(), loadgen_binary());
    RunResult result = run_to_exit(launcher, full, timeout);
    return collect(join(launcher, full), std::move(result), json);
}

BackgroundLoadgen::BackgroundLoadgen(const std::vector<std::string>& args) {
    std::vector<std::string> full = {"--json", json_.path()};
    if (!loadgen_engine().empty()) full.insert(full.end(), {"--engine", loadgen_engine()});
    full.insert(full.end(), args.begin(), args.end());
    command_ = join(loadgen_binary(), full);
    process_ = std::make_unique<BackgroundProcess>(loadgen_binary(), full);
}

Run BackgroundLoadgen::finish(std::chrono::milliseconds timeout) {
    RunResult result = process_->wait(timeout);
    return collect(command_, std::move(result), json_);
}

void check_consistency(const Report& r) {
    const std::uint64_t requests = r.count("/requests");
    const auto sum = [&](const std::string& base, std::span<const std::string_view> keys) {
        std::uint64_t n = 0;
        for (const auto k : keys)
            n += k == "1xx" ? 0 : r.count(base + "/" + std::string(k));
        return n;
    };
    // Every final response has a status class and a latency.
    INFO("requests " << requests);
    CHECK(sum("/status", kStatusClasses) == requests);
    CHECK(r.count("/latency/count") == requests);
    for (const auto c : kErrorClasses) {
        INFO("errors." << c << " = " << r.count("/errors/" + std::string(c)));
        if (r.count("/errors/" + std::string(c)) > 0)
            CHECK(r.has("/error_messages/" + std::string(c)));
    }
    // latency_uncorrected exactly with --rate, counting what latency counts.
    const bool open_loop = !r.is_null("/config/rate");
    CHECK(r.boolean("/latency/corrected") == open_loop);
    CHECK(r.is_null("/latency_uncorrected") == !open_loop);
    if (open_loop) CHECK(r.count("/latency_uncorrected/count") == requests);
    if (r.string("/ended") == "completed") CHECK(r.is_null("/message"));
    // The URLs of the mix add up to the totals; errors at most (a connect
    // error belongs to no URL).
    const simdjson::dom::array urls = r.at("/urls").get_array().value();
    CHECK(urls.size() >= 1);
    std::uint64_t url_requests = 0, url_sent = 0, url_latency = 0;
    for (std::size_t i = 0; i < urls.size(); ++i) {
        const std::string base = "/urls/" + std::to_string(i);
        const std::uint64_t n = r.count(base + "/requests");
        INFO(base << "/requests = " << n);
        url_requests += n;
        url_sent += r.count(base + "/sent");
        url_latency += r.count(base + "/latency/count");
        CHECK(sum(base + "/status", kStatusClasses) == n);
        CHECK(r.count(base + "/latency/count") == n);
    }
    for (const auto c : kErrorClasses) {
        std::uint64_t n = 0;
        for (std::size_t i = 0; i < urls.size(); ++i)
            n += r.count("/urls/" + std::to_string(i) + "/errors/" + std::string(c));
        INFO("errors." << c << " over the URLs: " << n);
        if (c == "connect") {
            CHECK(n == 0);
        } else if (c == "non_2xx" || c == "body") {
            CHECK(n == r.count("/errors/" + std::string(c)));  // each is one response's
        } else {
            CHECK(n <= r.count("/errors/" + std::string(c)));
        }
    }
    CHECK(url_requests == requests);
    CHECK(url_sent == r.count("/sent"));
    CHECK(url_latency == requests);
    // -n: never more sent than asked, and a run it ended sent them all.
    if (!r.is_null("/config/requests")) {
        const std::uint64_t n = r.count("/config/requests");
        CHECK(r.count("/sent") <= n);
        CHECK(requests <= n);
        if (!r.is_null("/stopped_by") && r.string("/stopped_by") == "requests")
            CHECK(r.count("/sent") == n);
    }
}

bool has_line_starting(std::string_view text, std::string_view prefix) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t eol = text.find('\n', pos);
        std::string_view line =
            text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            line.remove_prefix(1);
        if (line.starts_with(prefix)) return true;
        if (eol == std::string_view::npos) break;
        pos = eol + 1;
    }
    return false;
}

RefusingPort::RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(errno_text("socket", errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const int err = errno;
        ::close(fd_);
        throw std::runtime_error(errno_text("bind 127.0.0.1:0", err));
    }
    port_ = ntohs(addr.sin_port);
}

RefusingPort::~RefusingPort() {
    ::close(fd_);
}

const std::string MisbehavingServer::kOk =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

MisbehavingServer::Behavior MisbehavingServer::answering_ok() {
    return Behavior{.reply = [](std::size_t) { return Reply{{kOk}}; }};
}

MisbehavingServer::Behavior MisbehavingServer::closing_mid_response(std::size_t whole) {
    return Behavior{.reply = [whole](std::size_t n) {
        if (n < whole) return Reply{{kOk}};
        return Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello"}, true};
    }};
}

MisbehavingServer::MisbehavingServer(Behavior behavior) : behavior_(std::move(behavior)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::runtime_error(errno_text("socket", errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 1024) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const int err = errno;
        ::close(listener_);
        throw std::runtime_error(errno_text("listen on 127.0.0.1:0", err));
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::jthread([this](const std::stop_token& stop) { serve(stop); });
}

MisbehavingServer::~MisbehavingServer() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
}

std::string MisbehavingServer::url(std::string_view path) const {
    return url_of("127.0.0.1", port_, path);
}

std::vector<std::vector<std::string>> MisbehavingServer::targets() const {
    const std::lock_guard lock(targets_mutex_);
    return targets_;
}

void MisbehavingServer::serve(const std::stop_token& stop) {
    struct Client {
        int fd = -1;
        std::string in;                 // received, not yet taken as requests
        std::size_t next = 0;           // index of the next request on this connection
        bool closing = false;           // replied with close_after: waiting for the client's EOF
        std::size_t id = 0;             // its list in targets_
        std::vector<std::string> held;  // requests read, not yet answered (answer_after)
        bool failed = false;            // a send failed: to be closed
    };
    const auto alive = [](const Client& c) { return !c.failed && !c.closing; };
    // Bounded: the client may never read, so a send waits a second at most.
    const auto send_all = [](int fd, std::string_view bytes) {
        const auto deadline = std::chrono::steady_clock::now() + 1s;
        while (!bytes.empty()) {
            const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n > 0) {
                bytes.remove_prefix(static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                pollfd p{fd, POLLOUT, 0};
                if (::poll(&p, 1, remaining_ms(deadline)) > 0) continue;
            }
            return false;
        }
        return true;
    };
    // Answers a connection's held requests in order, up to a reply that
    // closes (what follows it is ignored) or a failed send.
    const auto answer_held = [&](Client& c) {
        for (const std::string& target : c.held) {
            if (!alive(c)) break;
            const std::size_t index = c.next++;
            const Reply reply =
                behavior_.reply_to ? behavior_.reply_to(index, target) : behavior_.reply(index);
            for (const std::string& piece : reply.pieces)
                c.failed = c.failed || !send_all(c.fd, piece);
            if (!c.failed && reply.close_after) {
                ::shutdown(c.fd, SHUT_WR);
                c.closing = true;
                c.in.clear();
            }
        }
        c.held.clear();
    };
    std::size_t started = 0;  // connections that have sent a request
    constexpr std::size_t kMaxClients = 4096;
    std::vector<Client> clients;
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    std::vector<pollfd> fds;
    std::array<char, 16 * 1024> buf{};
    while (!stop.stop_requested() && std::chrono::steady_clock::now() < give_up) {
        fds.clear();
        fds.push_back(pollfd{listener_, POLLIN, 0});
        for (const Client& c : clients)
            fds.push_back(pollfd{c.fd, POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 20) <= 0) continue;

        // Clients first: fds[i + 1] is clients[i] until the vector changes.
        std::vector<std::size_t> finished;
        for (std::size_t i = 0; i < clients.size(); ++i) {
            if (fds[i + 1].revents == 0) continue;
            Client& c = clients[i];
            const ssize_t n = ::recv(c.fd, buf.data(), buf.size(), 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) {
                finished.push_back(i);
                continue;
            }
            if (c.closing) continue;  // requests after our close are ignored
            c.in.append(buf.data(), static_cast<std::size_t>(n));
            for (std::size_t end = c.in.find("\r\n\r\n"); end != std::string::npos && alive(c);
                 end = c.in.find("\r\n\r\n")) {
                // The target: between the request line's first two spaces.
                const std::size_t from = std::min(c.in.find(' '), end);
                const std::size_t to = std::min(c.in.find(' ', from + 1), end);
                const std::string target =
                    from < to ? c.in.substr(from + 1, to - from - 1) : std::string();
                {
                    const std::lock_guard lock(targets_mutex_);
                    if (targets_[c.id].empty()) ++started;
                    targets_[c.id].push_back(target);
                }
                c.in.erase(0, end + 4);
                ++requests_;
                if (!behavior_.reply && !behavior_.reply_to) continue;
                c.held.push_back(target);
                if (started >= behavior_.answer_after) answer_held(c);
            }
            if (c.failed) finished.push_back(i);
        }
        // Once answer_after connections have each sent a request, what the
        // others hold is answered too.
        for (std::size_t i = 0; i < clients.size() && started >= behavior_.answer_after; ++i) {
            Client& c = clients[i];
            if (c.held.empty()) continue;
            answer_held(c);
            if (c.failed && std::find(finished.begin(), finished.end(), i) == finished.end())
                finished.push_back(i);
        }
        std::sort(finished.begin(), finished.end());
        for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
            ::close(clients[*it].fd);
            clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(*it));
        }

        if ((fds[0].revents & POLLIN) == 0) continue;
        for (;;) {
            const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;  // EAGAIN: all taken (or an error: try again next round)
            ++accepted_;
            if (behavior_.close_on_accept || clients.size() >= kMaxClients) {
                ::close(fd);
                continue;
            }
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            std::size_t id = 0;
            {
                const std::lock_guard lock(targets_mutex_);
                id = targets_.size();
                targets_.emplace_back();
            }
            clients.push_back(Client{fd, {}, 0, false, id, {}, false});
        }
    }
    for (const Client& c : clients)
        ::close(c.fd);
}

}  // namespace sm::test::loadgen
