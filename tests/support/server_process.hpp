// A server binary run as a child process: started with arguments, ready once
// it prints its "listening on http://HOST:PORT ..." line, stopped with a signal
// and reaped. Every wait is bounded; the destructor kills and reaps a server
// that is still running, so a failing test never leaves one behind. Also any
// command run to completion (run_to_exit) or in the background
// (BackgroundProcess: signalled and collected, e.g. a load generator).
// A Windows program (a name ending in .exe: server-iocp.exe) is run under
// Wine (SM_WINE, default `wine`); see ServerProcess::signal for its stop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sm::test {

using namespace std::chrono_literals;

// Resource limits set in a child between fork and exec (so the limit is the
// server's own, and its pid is the one the test watches).
struct ChildLimits {
    // RLIMIT_NOFILE, soft and hard: the child cannot open descriptor number
    // `open_files` or above (EMFILE). Nothing: inherited from the test.
    std::optional<unsigned long> open_files;
};

// How a child process ended.
struct ExitStatus {
    bool exited = false;  // exit() or return from main: `code` is valid
    int code = -1;
    int signal = 0;          // killed by this signal
    bool timed_out = false;  // did not end in time: it was killed with SIGKILL

    // Exited by itself with code 0.
    [[nodiscard]] bool clean() const noexcept { return exited && code == 0 && !timed_out; }
    [[nodiscard]] std::string describe() const;
};

// The output of a command run to completion (--help, a bad option).
struct RunResult {
    ExitStatus status;
    std::string out;
    std::string err;
};

// Runs `binary args...` with stdin on /dev/null and returns what it printed
// and how it ended; killed (status.timed_out) if it runs longer than `timeout`.
RunResult run_to_exit(const std::string& binary, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = 10s);

// A command run in the background (a load generator, say) while the test does
// other things: stdin on /dev/null, stdout and stderr kept in memory (so the
// child never blocks writing), signalled at will and collected with a bounded
// wait. The destructor kills and reaps a command that is still running.
class BackgroundProcess {
  public:
    // Starts `binary args...`; throws std::runtime_error if it cannot be run.
    BackgroundProcess(const std::string& binary, const std::vector<std::string>& args);
    ~BackgroundProcess();
    BackgroundProcess(const BackgroundProcess&) = delete;
    BackgroundProcess& operator=(const BackgroundProcess&) = delete;

    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    // "loadgen -d 10s ..." for messages.
    [[nodiscard]] const std::string& command_line() const noexcept { return command_line_; }

    // Sends `sig`; throws if the process is already reaped.
    void signal(int sig) const;
    // Waits up to `timeout` for the process to end; if it is still running
    // then it is killed with SIGKILL (status.timed_out). Returns how it ended
    // and everything it printed; once reaped, the same status again.
    RunResult wait(std::chrono::milliseconds timeout);
    [[nodiscard]] bool running();

    // What the command printed so far.
    [[nodiscard]] std::string stdout_text() const;
    [[nodiscard]] std::string stderr_text() const;

  private:
    pid_t pid_ = -1;
    std::optional<ExitStatus> status_;  // set once reaped
    int stdout_fd_ = -1;                // memfds holding the child's output
    int stderr_fd_ = -1;
    std::string command_line_;
};

// The server side of the TCP connections on a local port, from the kernel's
// tables (/proc/net/tcp and tcp6): what a server under Wine is checked by,
// whose sockets are wineserver's descriptors, not its own.
struct PortSockets {
    std::size_t held = 0;     // ESTABLISHED or CLOSE_WAIT with this local port: not closed yet
    std::size_t backlog = 0;  // established, waiting in the listener's accept queue
    std::string describe;     // the matching lines, for messages
};
PortSockets port_sockets(std::uint16_t port);

// Resident memory of a process, KiB (VmRSS in /proc/PID/status). Throws if
// there is no such process.
std::size_t rss_kib(pid_t pid);

class ServerProcess {
  public:
    // Starts the server and waits up to `ready_timeout` for the ready line.
    // Throws std::runtime_error, with the server's stderr, when it cannot be
    // started, exits early, prints something else or is not ready in time.
    // `limits` apply to the server process only.
    ServerProcess(const std::string& binary, const std::vector<std::string>& args,
                  std::chrono::milliseconds ready_timeout = 10s, const ChildLimits& limits = {});
    ~ServerProcess();
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    // From the ready line: "127.0.0.1" or "::1" (without brackets) and the port.
    [[nodiscard]] const std::string& host() const noexcept { return host_; }
    [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
    // The ready line without its newline.
    [[nodiscard]] const std::string& ready_line() const noexcept { return ready_line_; }
    // "server-epoll --port 0 ..." for messages.
    [[nodiscard]] const std::string& command_line() const noexcept { return command_line_; }
    // A Windows program run under Wine.
    [[nodiscard]] bool windows() const noexcept { return windows_; }

    // Sends `sig`; throws if the process is already reaped. To a Windows
    // program under Wine, SIGTERM is sent as SIGINT (see the .cpp).
    void signal(int sig) const;
    // Waits up to `timeout` for the process to end and reaps it; nothing if it
    // is still running then. Once reaped, returns the same status again.
    std::optional<ExitStatus> wait_exit(std::chrono::milliseconds timeout);
    // Sends `sig` and waits up to `timeout`; if the process is still running
    // it is killed with SIGKILL and the status says timed_out.
    ExitStatus stop(int sig = SIGTERM, std::chrono::milliseconds timeout = 10s);
    [[nodiscard]] bool running();

    // Entries in /proc/PID/fd: the server's open descriptors, all threads.
    // Throws if the process has been reaped or /proc cannot be read.
    [[nodiscard]] std::size_t open_fd_count() const;
    // The descriptors with their targets ("5 -> socket:[1234]"), for messages.
    [[nodiscard]] std::string describe_fds() const;
    // CPU time the server has used so far, user + system, all threads
    // (utime + stime from /proc/PID/stat, in clock ticks of usually 10 ms).
    // Throws if the process has been reaped or /proc cannot be read.
    [[nodiscard]] std::chrono::milliseconds cpu_time() const;

    // Everything the server wrote to stderr so far / to stdout after the ready line.
    [[nodiscard]] std::string stderr_text() const;
    [[nodiscard]] std::string stdout_text() const;

  private:
    void wait_ready(std::chrono::milliseconds timeout);
    void kill_and_reap() noexcept;
    [[noreturn]] void fail_start(const std::string& what);

    pid_t pid_ = -1;
    std::optional<ExitStatus> status_;  // set once reaped
    int stdout_fd_ = -1;                // read end of the child's stdout pipe
    int stderr_fd_ = -1;                // unlinked temp file holding the child's stderr
    std::string host_;
    std::uint16_t port_ = 0;
    std::string ready_line_;
    std::string command_line_;
    // A Windows program run under Wine (its name ends in .exe): SIGTERM is
    // sent as SIGINT, and "\r" is dropped from its output.
    bool windows_ = false;
    // Drains stdout after the ready line so the child never blocks writing to it.
    mutable std::mutex out_mutex_;
    std::string out_rest_;
    std::jthread drain_;
};

}  // namespace sm::test
