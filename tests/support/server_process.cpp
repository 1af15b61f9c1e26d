#include "support/server_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include "support/wait.hpp"

namespace sm::test {
namespace {

std::string errno_text(std::string_view what, int err) {
    return std::string(what) + ": " + std::strerror(err);
}

// Everything written to a memfd so far (read with pread: the child shares the offset).
std::string read_memfd(int fd) {
    std::string text;
    if (fd < 0) return text;
    std::array<char, 4096> buf{};
    off_t offset = 0;
    for (;;) {
        const ssize_t n = ::pread(fd, buf.data(), buf.size(), offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf.data(), static_cast<std::size_t>(n));
        offset += n;
    }
    return text;
}

// The server's stderr as the messages show it, between two marker lines.
std::string stderr_block(int fd) {
    return "--- server stderr ---\n" + read_memfd(fd) + "--- end of stderr ---";
}

int make_memfd(const char* name) {
    const int fd = ::memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) throw std::runtime_error(errno_text("memfd_create", errno));
    return fd;
}

ExitStatus decode(int wstatus) {
    ExitStatus s;
    if (WIFEXITED(wstatus)) {
        s.exited = true;
        s.code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        s.signal = WTERMSIG(wstatus);
    }
    return s;
}

// Reaps `pid` if it has ended within `timeout`.
std::optional<ExitStatus> wait_pid(pid_t pid, std::chrono::milliseconds timeout) {
    std::optional<ExitStatus> result;
    eventually(
        [&] {
            int wstatus = 0;
            const pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
            if (r == pid) {
                result = decode(wstatus);
                return true;
            }
            if (r < 0 && errno != EINTR) {
                // ECHILD: someone else reaped it; report it as gone.
                result = ExitStatus{};
                return true;
            }
            return false;
        },
        timeout, 2ms);
    return result;
}

ExitStatus kill_and_wait(pid_t pid) {
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    pid_t r = 0;
    do {
        r = ::waitpid(pid, &wstatus, 0);
    } while (r < 0 && errno == EINTR);
    ExitStatus s = r == pid ? decode(wstatus) : ExitStatus{};
    s.timed_out = true;
    return s;
}

std::string join_command(const std::string& binary, const std::vector<std::string>& args) {
    std::string s = binary;
    for (const auto& a : args)
        s += " " + a;
    return s;
}

struct Child {
    pid_t pid = -1;
};

// A Windows program (server-iocp.exe) runs under Wine: the command that
// runs it, from SM_WINE (default: wine, looked up in PATH before the fork).
bool is_windows_program(const std::string& binary) {
    return binary.size() > 4 && binary.ends_with(".exe");
}

std::string wine_command() {
    const char* env = std::getenv("SM_WINE");
    const std::string wine = env != nullptr && *env != '\0' ? env : "wine";
    if (wine.find('/') != std::string::npos) return wine;
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
    while (!dirs.empty()) {
        const auto colon = dirs.find(':');
        const std::string dir(dirs.substr(0, colon));
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + wine;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    throw std::runtime_error("cannot run a Windows program: " + wine +
                             " not found (scripts/deps.sh windows installs Wine)");
}

// Wine's console writes "\r\n" line ends; the suites compare lines.
std::string without_cr(std::string text) {
    std::erase(text, '\r');
    return text;
}

// fork + exec with stdin on /dev/null and stdout/stderr on the given
// descriptors. The child dies with the test process (PR_SET_PDEATHSIG), starts
// with default signal dispositions and an empty mask, and inherits no other
// descriptor; `limits` are set just before exec. Throws with errno when exec
// (or setting a limit) fails.
Child spawn(const std::string& binary, const std::vector<std::string>& args, int out_fd, int err_fd,
            const ChildLimits& limits = {}) {
    std::vector<std::string> argv_store;
    argv_store.reserve(args.size() + 2);
    std::string program = binary;
    if (is_windows_program(binary)) {
        program = wine_command();
        argv_store.push_back(program);
    }
    argv_store.push_back(binary);
    argv_store.insert(argv_store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_store)
        argv.push_back(a.data());
    argv.push_back(nullptr);

    // Carries errno from a failed exec; closed by exec on success.
    std::array<int, 2> errpipe{-1, -1};
    if (::pipe2(errpipe.data(), O_CLOEXEC) != 0)
        throw std::runtime_error(errno_text("pipe2", errno));

    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int err = errno;
        ::close(errpipe[0]);
        ::close(errpipe[1]);
        throw std::runtime_error(errno_text("fork", err));
    }
    if (pid == 0) {
        // Child: async-signal-safe calls only until exec.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        for (const int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT})
            ::sigaction(sig, &dfl, nullptr);
        sigset_t none;
        ::sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd >= 0 && null_fd != 0) ::dup2(null_fd, 0);
        ::dup2(out_fd, 1);
        ::dup2(err_fd, 2);
        // Descriptors the test process opened without O_CLOEXEC must not leak
        // into the server: they would show up in its fd count and keep
        // sockets open.
        ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
        if (limits.open_files) {
            // Descriptors open above the limit (errpipe's write end) stay usable.
            const rlimit nofile{*limits.open_files, *limits.open_files};
            if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) {
                const int err = errno;
                [[maybe_unused]] const auto n = ::write(errpipe[1], &err, sizeof err);
                ::_exit(127);
            }
        }
        ::execv(program.c_str(), argv.data());
        const int err = errno;
        [[maybe_unused]] const auto n = ::write(errpipe[1], &err, sizeof err);
        ::_exit(127);
    }
    ::close(errpipe[1]);
    int err = 0;
    ssize_t n = 0;
    do {
        n = ::read(errpipe[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    ::close(errpipe[0]);
    if (n == static_cast<ssize_t>(sizeof err)) {
        int wstatus = 0;
        ::waitpid(pid, &wstatus, 0);
        throw std::runtime_error(errno_text("cannot run " + binary, err));
    }
    return Child{pid};
}

}  // namespace

PortSockets port_sockets(std::uint16_t port) {
    PortSockets out;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream f(table);
        std::string line;
        std::getline(f, line);  // the header
        while (std::getline(f, line)) {
            // "  sl  local_address rem_address   st tx_queue:rx_queue ..."
            char local[64] = {};
            char remote[64] = {};
            unsigned state = 0;
            unsigned long tx = 0;
            unsigned long rx = 0;
            if (std::sscanf(line.c_str(), "%*s %63s %63s %x %lx:%lx", local, remote, &state, &tx,
                            &rx) != 5)
                continue;
            const char* colon = std::strrchr(local, ':');
            if (colon == nullptr || std::strtoul(colon + 1, nullptr, 16) != port) continue;
            constexpr unsigned kEstablished = 0x01, kCloseWait = 0x08, kListen = 0x0A;
            if (state == kListen) {
                out.backlog += rx;  // a listener's rx_queue: its accept queue
            } else if (state == kEstablished || state == kCloseWait) {
                ++out.held;
            } else {
                continue;
            }
            out.describe += line + "\n";
        }
    }
    return out;
}

std::size_t rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
    }
    throw std::runtime_error("no VmRSS for pid " + std::to_string(pid));
}

std::string ExitStatus::describe() const {
    std::string s;
    if (exited) {
        s = "exited with code " + std::to_string(code);
    } else if (signal != 0) {
        s = "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
    } else {
        s = "ended with an unknown status";
    }
    if (timed_out) s = "did not exit in time, so it was killed with SIGKILL; " + s;
    return s;
}

RunResult run_to_exit(const std::string& binary, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout) {
    const int out = make_memfd("sm-run-stdout");
    int err = -1;
    RunResult r;
    try {
        err = make_memfd("sm-run-stderr");
        const Child child = spawn(binary, args, out, err);
        auto status = wait_pid(child.pid, timeout);
        r.status = status ? *status : kill_and_wait(child.pid);
    } catch (...) {
        ::close(out);
        if (err >= 0) ::close(err);
        throw;
    }
    r.out = read_memfd(out);
    r.err = read_memfd(err);
    if (is_windows_program(binary)) {
        r.out = without_cr(std::move(r.out));
        r.err = without_cr(std::move(r.err));
    }
    ::close(out);
    ::close(err);
    return r;
}

BackgroundProcess::BackgroundProcess(const std::string& binary,
                                     const std::vector<std::string>& args)
    : command_line_(join_command(binary, args)) {
    try {
        stdout_fd_ = make_memfd("sm-bg-stdout");
        stderr_fd_ = make_memfd("sm-bg-stderr");
        pid_ = spawn(binary, args, stdout_fd_, stderr_fd_).pid;
    } catch (...) {
        if (stdout_fd_ >= 0) ::close(stdout_fd_);
        if (stderr_fd_ >= 0) ::close(stderr_fd_);
        throw;
    }
}

BackgroundProcess::~BackgroundProcess() {
    if (pid_ > 0 && !status_) status_ = kill_and_wait(pid_);
    ::close(stdout_fd_);
    ::close(stderr_fd_);
}

void BackgroundProcess::signal(int sig) const {
    if (status_)
        throw std::runtime_error("cannot signal " + command_line_ + ": it has already exited");
    if (::kill(pid_, sig) != 0) throw std::runtime_error(errno_text("kill", errno));
}

RunResult BackgroundProcess::wait(std::chrono::milliseconds timeout) {
    if (!status_) {
        status_ = wait_pid(pid_, timeout);
        if (!status_) status_ = kill_and_wait(pid_);
    }
    return RunResult{*status_, stdout_text(), stderr_text()};
}

bool BackgroundProcess::running() {
    if (!status_) status_ = wait_pid(pid_, 0ms);
    return !status_.has_value();
}

std::string BackgroundProcess::stdout_text() const {
    return read_memfd(stdout_fd_);
}

std::string BackgroundProcess::stderr_text() const {
    return read_memfd(stderr_fd_);
}

ServerProcess::ServerProcess(const std::string& binary, const std::vector<std::string>& args,
                             std::chrono::milliseconds ready_timeout, const ChildLimits& limits)
    : command_line_(join_command(binary, args)), windows_(is_windows_program(binary)) {
    std::array<int, 2> out{-1, -1};
    if (::pipe2(out.data(), O_CLOEXEC) != 0) throw std::runtime_error(errno_text("pipe2", errno));
    stdout_fd_ = out[0];
    try {
        stderr_fd_ = make_memfd("sm-server-stderr");
        pid_ = spawn(binary, args, out[1], stderr_fd_, limits).pid;
    } catch (...) {
        ::close(out[0]);
        ::close(out[1]);
        if (stderr_fd_ >= 0) ::close(stderr_fd_);
        throw;
    }
    ::close(out[1]);
    wait_ready(ready_timeout);

    drain_ = std::jthread([this](std::stop_token stop) {
        std::array<char, 4096> buf{};
        pollfd p{stdout_fd_, POLLIN, 0};
        for (;;) {
            const int ready = ::poll(&p, 1, 50);
            if (ready < 0 && errno != EINTR) return;
            if (ready <= 0) {
                if (stop.stop_requested()) return;
                continue;
            }
            const ssize_t n = ::read(stdout_fd_, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;  // EOF: the server has exited
            const std::lock_guard lock(out_mutex_);
            out_rest_.append(buf.data(), static_cast<std::size_t>(n));
        }
    });
}

void ServerProcess::wait_ready(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string got;
    std::array<char, 512> buf{};
    for (;;) {
        const auto nl = got.find('\n');
        if (nl != std::string::npos) {
            ready_line_ = got.substr(0, nl);
            if (ready_line_.ends_with('\r')) ready_line_.pop_back();  // Wine's console
            out_rest_ = got.substr(nl + 1);
            break;
        }
        pollfd p{stdout_fd_, POLLIN, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) fail_start(errno_text("poll on the server's stdout", errno));
        if (ready == 0) {
            fail_start("no ready line within " + std::to_string(timeout.count()) +
                       " ms (stdout so far: \"" + got + "\")");
        }
        const ssize_t n = ::read(stdout_fd_, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            // EOF before the ready line: the server exited (or closed stdout).
            status_ = wait_pid(pid_, 2s);
            fail_start("stdout closed before the ready line (" +
                       (status_ ? status_->describe() : std::string("still running")) +
                       "; stdout: \"" + got + "\")");
        }
        got.append(buf.data(), static_cast<std::size_t>(n));
    }

    // "listening on http://HOST:PORT model=..." with HOST "[v6]" or "v4".
    constexpr std::string_view prefix = "listening on http://";
    std::string_view rest = ready_line_;
    if (!rest.starts_with(prefix)) fail_start("unexpected ready line \"" + ready_line_ + "\"");
    rest.remove_prefix(prefix.size());
    std::size_t host_end = 0;
    if (rest.starts_with('[')) {
        host_end = rest.find(']');
        if (host_end == std::string_view::npos)
            fail_start("no ']' in the ready line \"" + ready_line_ + "\"");
        host_ = std::string(rest.substr(1, host_end - 1));
        ++host_end;
    } else {
        host_end = rest.find(':');
        if (host_end == std::string_view::npos)
            fail_start("no port in the ready line \"" + ready_line_ + "\"");
        host_ = std::string(rest.substr(0, host_end));
    }
    rest.remove_prefix(host_end);
    if (!rest.starts_with(':')) fail_start("no port in the ready line \"" + ready_line_ + "\"");
    rest.remove_prefix(1);
    unsigned long port = 0;
    std::size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && digits < 6) {
        port = port * 10 + static_cast<unsigned long>(rest[digits] - '0');
        ++digits;
    }
    if (digits == 0 || port == 0 || port > 65535)
        fail_start("bad port in the ready line \"" + ready_line_ + "\"");
    port_ = static_cast<std::uint16_t>(port);
}

void ServerProcess::fail_start(const std::string& what) {
    std::string message = command_line_ + ": " + what;
    if (!status_ && pid_ > 0) {
        status_ = kill_and_wait(pid_);
    }
    message += "\n" + stderr_block(stderr_fd_);
    ::close(stdout_fd_);
    ::close(stderr_fd_);
    stdout_fd_ = stderr_fd_ = -1;
    throw std::runtime_error(message);
}

ServerProcess::~ServerProcess() {
    // A server that ended on its own while the test still held it (a crash,
    // a sanitizer's abort) explains the failure the test reports (often a
    // reset connection): say so, with its stderr, where ctest shows it.
    if (pid_ > 0 && !status_) {
        if (auto s = wait_pid(pid_, 0ms)) {
            status_ = s;
            std::fprintf(stderr,
                         "*** the server (%s) ended on its own while the test held it: %s\n%s\n",
                         command_line_.c_str(), s->describe().c_str(),
                         stderr_block(stderr_fd_).c_str());
        }
    }
    kill_and_reap();
    if (drain_.joinable()) {
        drain_.request_stop();
        drain_.join();
    }
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    if (stderr_fd_ >= 0) ::close(stderr_fd_);
}

void ServerProcess::kill_and_reap() noexcept {
    if (pid_ > 0 && !status_) status_ = kill_and_wait(pid_);
}

void ServerProcess::signal(int sig) const {
    if (status_) throw std::runtime_error("cannot signal the server: it has already exited");
    // Windows has no SIGTERM: its stop request is a console event, and Wine
    // turns SIGINT (only) into one (CTRL_C_EVENT). SIGTERM would end a Wine
    // process at once, unlike any Windows stop.
    if (windows_ && sig == SIGTERM) sig = SIGINT;
    if (::kill(pid_, sig) != 0) throw std::runtime_error(errno_text("kill", errno));
}

std::optional<ExitStatus> ServerProcess::wait_exit(std::chrono::milliseconds timeout) {
    if (!status_) status_ = wait_pid(pid_, timeout);
    return status_;
}

ExitStatus ServerProcess::stop(int sig, std::chrono::milliseconds timeout) {
    if (status_) return *status_;
    signal(sig);
    if (auto s = wait_exit(timeout)) return *s;
    status_ = kill_and_wait(pid_);
    return *status_;
}

bool ServerProcess::running() {
    return !wait_exit(0ms).has_value();
}

std::size_t ServerProcess::open_fd_count() const {
    if (status_) throw std::runtime_error("the server has exited: no descriptors to count");
    const std::string dir = "/proc/" + std::to_string(pid_) + "/fd";
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) throw std::runtime_error(errno_text("opendir " + dir, errno));
    std::size_t count = 0;
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') ++count;
    }
    ::closedir(d);
    return count;
}

std::string ServerProcess::describe_fds() const {
    if (status_) return "(the server has exited)";
    const std::string dir = "/proc/" + std::to_string(pid_) + "/fd";
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return errno_text("opendir " + dir, errno);
    std::string s;
    std::array<char, 256> target{};
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string path = dir + "/" + e->d_name;
        const ssize_t n = ::readlink(path.c_str(), target.data(), target.size() - 1);
        s += std::string(e->d_name) + " -> " +
             (n >= 0 ? std::string(target.data(), static_cast<std::size_t>(n)) : "?") + "\n";
    }
    ::closedir(d);
    return s;
}

std::chrono::milliseconds ServerProcess::cpu_time() const {
    if (status_) throw std::runtime_error("the server has exited: no CPU time to read");
    const std::string path = "/proc/" + std::to_string(pid_) + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(errno_text("open " + path, errno));
    std::array<char, 1024> buf{};
    ssize_t n = 0;
    do {
        n = ::read(fd, buf.data(), buf.size() - 1);
    } while (n < 0 && errno == EINTR);
    const int err = errno;
    ::close(fd);
    if (n <= 0) throw std::runtime_error(errno_text("read " + path, n < 0 ? err : EIO));
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
    // the fields are counted from the last ')'. utime and stime are fields 14
    // and 15, the 12th and 13th after the ')'.
    const std::string_view stat(buf.data(), static_cast<std::size_t>(n));
    const auto close_paren = stat.rfind(')');
    if (close_paren == std::string_view::npos)
        throw std::runtime_error("unexpected " + path + ": " + std::string(stat));
    std::string_view rest = stat.substr(close_paren + 1);
    std::array<unsigned long long, 13> fields{};
    for (auto& f : fields) {
        while (!rest.empty() && rest.front() == ' ')
            rest.remove_prefix(1);
        const auto end = rest.find(' ');
        const std::string_view field = rest.substr(0, end);
        f = 0;
        for (const char c : field) {
            if (c < '0' || c > '9') break;  // the state letter, a negative field
            f = f * 10 + static_cast<unsigned long long>(c - '0');
        }
        if (end == std::string_view::npos)
            throw std::runtime_error("unexpected " + path + ": " + std::string(stat));
        rest.remove_prefix(end);
    }
    const long ticks = ::sysconf(_SC_CLK_TCK);
    const unsigned long long total = fields[11] + fields[12];
    return std::chrono::milliseconds(static_cast<std::int64_t>(
        total * 1000 / static_cast<unsigned long long>(ticks > 0 ? ticks : 100)));
}

std::string ServerProcess::stderr_text() const {
    return windows_ ? without_cr(read_memfd(stderr_fd_)) : read_memfd(stderr_fd_);
}

std::string ServerProcess::stdout_text() const {
    const std::lock_guard lock(out_mutex_);
    return windows_ ? without_cr(out_rest_) : out_rest_;
}

}  // namespace sm::test
