// The contract between the shared runtime and a server model. A model's
// main() is one call:
//
//   int main(int argc, char** argv) { return sm::runtime::serve(kEpollModel, argc, argv); }
//
// serve() parses the options, opens one SO_REUSEPORT listener per thread,
// starts the threads (pinned when --cpus is given), prints the ready line,
// waits for SIGINT/SIGTERM, signals the workers to stop and joins them.
#pragma once

#include <string_view>

#include "runtime/options.hpp"
#include "runtime/unique_fd.hpp"

namespace sm::runtime {

struct WorkerContext {
    const ServerOptions& options;
    unsigned index;  // 0 .. threads-1
    // This thread's non-blocking listening socket. The worker closes it (reset())
    // when it stops, so new connections are refused rather than left queued.
    UniqueFd& listener;
    // An eventfd that becomes readable (and stays so: never drain it) when
    // the server must stop: close the listener, finish responses in flight
    // within options.shutdown_timeout, close every connection, return.
    int stop_fd;
};

struct Model {
    std::string_view name;         // "epoll": the binary is server-<name>
    std::string_view description;  // one line for --help
    // Runs one thread's share of the server until stop_fd fires. Throwing
    // std::exception stops the whole server with exit code 1.
    void (*worker)(const WorkerContext&);
    // The binary's name when it is not "server-<name>" (bench/floor).
    std::string_view program = {};
};

int serve(const Model& model, int argc, const char* const* argv);

}  // namespace sm::runtime
