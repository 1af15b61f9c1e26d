// loadgen's progress line, seen on a real pseudo-terminal (openpty): about
// once a second while the run goes, on stderr, rewritten in place and erased
// before the summary; only when stderr is a terminal, the run is long enough
// (or has -n) and there is no --quiet. Each run is bounded by its own load
// (-n at a --rate, or a short -d) and by a deadline that kills it.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "integration_support.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::loadgen;

namespace {

struct TerminalRun {
    ExitStatus status;
    std::string terminal;  // everything written to the terminal
    std::string err_pipe;  // stderr, when it went to a pipe instead
    [[nodiscard]] std::string describe() const {
        return "status: " + status.describe() + "\n--- terminal ---\n" + terminal +
               "\n--- stderr pipe ---\n" + err_pipe + "\n";
    }
};

// Runs loadgen (with the suite's --engine) with stdin, stdout and stderr on
// a new pseudo-terminal, its controlling terminal; stderr on a pipe instead
// when `stderr_on_terminal` is false. Killed after `timeout`.
TerminalRun run_on_terminal(const std::vector<std::string>& args, bool stderr_on_terminal,
                            std::chrono::milliseconds timeout = 20s) {
    int master = -1, slave = -1;
    winsize size{};
    size.ws_row = 40;
    size.ws_col = 200;
    REQUIRE(::openpty(&master, &slave, nullptr, nullptr, &size) == 0);
    int err_pipe[2] = {-1, -1};
    REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
    const std::string binary = loadgen_binary();
    std::vector<std::string> full = with_engine(args);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (auto& a : full)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // The child: only async-signal-safe calls until exec.
        ::setsid();
        ::ioctl(slave, TIOCSCTTY, 0);
        ::dup2(slave, 0);
        ::dup2(slave, 1);
        ::dup2(stderr_on_terminal ? slave : err_pipe[1], 2);
        ::close(master);
        ::close(slave);
        ::execv(binary.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(slave);
    ::close(err_pipe[1]);
    TerminalRun run;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool terminal_open = true, pipe_open = true;
    char buf[4096];
    while ((terminal_open || pipe_open) && std::chrono::steady_clock::now() < deadline) {
        pollfd fds[2] = {{terminal_open ? master : -1, POLLIN, 0},
                         {pipe_open ? err_pipe[0] : -1, POLLIN, 0}};
        if (::poll(fds, 2, std::min(remaining_ms(deadline), 100)) <= 0) continue;
        if (fds[0].revents) {
            const ssize_t n = ::read(master, buf, sizeof buf);
            // EIO: every slave descriptor is closed (the child is gone).
            if (n > 0)
                run.terminal.append(buf, static_cast<std::size_t>(n));
            else if (n == 0 || errno != EINTR)
                terminal_open = false;
        }
        if (fds[1].revents) {
            const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
            if (n > 0)
                run.err_pipe.append(buf, static_cast<std::size_t>(n));
            else if (n == 0 || errno != EINTR)
                pipe_open = false;
        }
    }
    int wstatus = 0;
    if (!eventually([&] { return ::waitpid(pid, &wstatus, WNOHANG) == pid; }, 2s)) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &wstatus, 0);
        run.status.timed_out = true;
    }
    if (WIFEXITED(wstatus)) {
        run.status.exited = true;
        run.status.code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        run.status.signal = WTERMSIG(wstatus);
    }
    ::close(master);
    ::close(err_pipe[0]);
    return run;
}

constexpr std::string_view kErase = "\r\x1b[K";

bool has_progress(std::string_view text) {
    return text.find(" responses, ") != std::string_view::npos ||
           text.find("\x1b[K") != std::string_view::npos;
}

}  // namespace

TEST_CASE("progress on a terminal: a line a second, rewritten, erased before the summary",
          "[loadgen][progress]") {
    auto server = start_epoll();
    // About 2.5 s: -n at a rate, so two or three lines.
    const TerminalRun run = run_on_terminal(
        {"-t1", "-c2", "-n", "2500", "--rate", "1000", url_of(*server, "/plaintext")}, true);
    INFO(run.describe());
    CHECK(run.status.clean());
    const std::string& out = run.terminal;
    CHECK_THAT(out, Catch::Matchers::Contains("[1s] "));
    CHECK_THAT(out, Catch::Matchers::Contains("/2500 responses, "));
    CHECK_THAT(out, Catch::Matchers::Contains(" req/s, 0 errors"));
    // Each line starts with a carriage return and ends erasing the rest of
    // the row; the last thing before the summary erases the line itself.
    CHECK_THAT(out, Catch::Matchers::Contains("\r[1s] "));
    const auto last_line = out.rfind(" responses, ");
    const auto erase = out.rfind(kErase);
    const auto summary = out.find("Requests/sec:");
    REQUIRE(last_line != std::string::npos);
    REQUIRE(erase != std::string::npos);
    REQUIRE(summary != std::string::npos);
    CHECK(last_line < erase);
    CHECK(erase < summary);
    CHECK(out.find(" responses, ", erase) == std::string::npos);
}

TEST_CASE("progress of a -d run shows the elapsed and the total time", "[loadgen][progress]") {
    auto server = start_epoll();
    const TerminalRun run = run_on_terminal(
        {"-t1", "-c2", "-d", "3s", "--rate", "500", url_of(*server, "/plaintext")}, true);
    INFO(run.describe());
    CHECK(run.status.clean());
    CHECK_THAT(run.terminal, Catch::Matchers::Contains("\r[1s/3s] "));
    CHECK_THAT(run.terminal, Catch::Matchers::Contains(" responses, "));
}

TEST_CASE("progress is not shown with --quiet, with stderr a pipe, or for a short run",
          "[loadgen][progress]") {
    struct Case {
        const char* what;
        std::vector<std::string> args;  // the URL follows
        bool stderr_on_terminal;
    };
    const auto c =
        GENERATE(Case{"--quiet", {"-q", "-t1", "-c2", "-n", "1500", "--rate", "1000"}, true},
                 Case{"stderr a pipe", {"-t1", "-c2", "-n", "1500", "--rate", "1000"}, false},
                 Case{"a 2 s run", {"-t1", "-c2", "-d", "2s", "--rate", "500"}, true});
    auto server = start_epoll();
    std::vector<std::string> args = c.args;
    args.push_back(url_of(*server, "/plaintext"));
    const TerminalRun run = run_on_terminal(args, c.stderr_on_terminal);
    INFO(c.what << "\n" << run.describe());
    CHECK(run.status.clean());
    CHECK_FALSE(has_progress(run.terminal));
    CHECK_FALSE(has_progress(run.err_pipe));
    // The summary itself is there unless --quiet.
    CHECK((run.terminal.find("Requests/sec:") != std::string::npos) ==
          (std::string_view(c.what) != "--quiet"));
}
