// The contract between the shared runtime and a server model. A model's
// main() is one call:
//
//   int main(int argc, char** argv) { return sm::runtime::serve(kEpollModel, argc, argv); }
//
// serve() parses the options, runs the model's probe, opens the listeners
// (one SO_REUSEPORT listener per thread, or one for the whole model), starts
// the threads (pinned when --cpus is given), prints the ready line, waits for
// SIGINT/SIGTERM, signals the workers to stop and joins them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/connection_limit.hpp"
#include "runtime/options.hpp"
#include "runtime/unique_fd.hpp"

namespace sm::runtime {

struct WorkerContext {
    const ServerOptions& options;
    unsigned index;  // 0 .. threads-1 (always 0 with ListenerLayout::one)
    // This thread's non-blocking listening socket. The worker closes it (reset())
    // when it stops, so new connections are refused rather than left queued.
    UniqueFd& listener;
    // An eventfd that becomes readable (and stays so: never drain it) when
    // the server must stop: close the listener, finish responses in flight
    // within options.shutdown_timeout, close every connection, return.
    int stop_fd;
    // --max-connections over all threads: acquire before accepting, release
    // when the connection is closed.
    ConnectionLimit& connections;
};

enum class ListenerLayout {
    per_thread,  // --threads workers, each with its own listener (epoll, libuv, uring)
    one,         // one listener and one worker call; the model starts its own threads
};

struct Model {
    std::string_view name;         // "epoll": the binary is server-<name>
    std::string_view description;  // one line for --help
    // Runs one thread's share of the server (per_thread), or the whole server
    // (one), until stop_fd fires. Throwing std::exception stops the whole
    // server with exit code 1.
    void (*worker)(const WorkerContext&);
    // The binary's name when it is not "server-<name>" (bench/floor).
    std::string_view program = {};
    ListenerLayout listeners = ListenerLayout::per_thread;
    // Called before anything is opened: why this model cannot run on this
    // machine, or nothing. serve() prints the reason and exits 1.
    std::optional<std::string> (*probe)(const ServerOptions&) = nullptr;
    ModelOptions options = {};
};

// Pins the calling thread for worker i when --cpus was given (cpus[i % n]);
// models with ListenerLayout::one call it for the threads they start.
void pin_worker_thread(const ServerOptions& opts, unsigned i);

int serve(const Model& model, int argc, const char* const* argv);

}  // namespace sm::runtime
