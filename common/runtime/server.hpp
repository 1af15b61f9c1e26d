// The contract between the shared runtime and a server model, platform-
// neutral (the platform's part is runtime/platform.hpp). A model's main() is
// one call:
//
//   int main(int argc, char** argv) { return sm::runtime::serve(kEpollModel, argc, argv); }
//
// serve() parses the options (the shared ones and the model's own), runs the
// model's probe, opens the listeners (one per thread, or one for the whole
// model), starts the threads (pinned when --cpus is given), prints the ready
// line, waits for SIGINT/SIGTERM, signals the workers to stop and joins them.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/connection_limit.hpp"
#include "runtime/options.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {

struct WorkerContext {
    const ServerOptions& options;
    unsigned index;  // 0 .. threads-1 (always 0 with ListenerLayout::one)
    // This thread's listening socket (non-blocking). The worker closes it
    // when it stops, so new connections are refused rather than left queued.
    Listener& listener;
    // Set when the server must stop: close the listener, finish responses in
    // flight within options.shutdown_timeout, close every connection, return.
    const StopSignal& stop;
    // --max-connections over all threads (see AcceptGate).
    ConnectionLimit& connections;
};

enum class ListenerLayout {
    per_thread,  // --threads workers, each with its own listener (epoll, libuv, uring)
    one,         // one listener and one worker call; the model starts its own threads
};

struct Model {
    std::string_view name;  // "epoll": the binary is server-<name>
    // Runs one thread's share of the server (per_thread), or the whole server
    // (one), until the stop signal. Throwing std::exception stops the whole
    // server with exit code 1.
    void (*worker)(const WorkerContext&);
    ListenerLayout listeners = ListenerLayout::per_thread;
    // Called before anything is opened: why this model cannot run on this
    // machine, or nothing. serve() prints the reason and exits 1.
    std::optional<std::string> (*probe)(const ServerOptions&) = nullptr;
    // The options only this model takes (read with ServerOptions::model_option).
    std::span<const ModelOption> options = {};
    // One line for --help; empty: what servers/models.json says the model
    // shows. For a program the list does not hold (bench/floor).
    std::string_view description = {};
    // The binary's name when it is not "server-<name>" (bench/floor).
    std::string_view program = {};
};

// Model::worker for a model whose worker is a class: T(ctx).run().
template <typename T>
void run(const WorkerContext& ctx) {
    T(ctx).run();
}

// Pins the calling thread for worker i when --cpus was given (cpus[i % n]);
// models with ListenerLayout::one call it for the threads they start.
void pin_worker_thread(const ServerOptions& opts, unsigned i);

// The database client's loader (common/db registers db::load_libpq when a
// model links it): with --db, serve() calls it before anything is opened;
// why the client cannot be used, or nothing (then serve() prints the reason
// and exits 1). No loader registered: the build has no database client.
using DatabaseLoader = std::optional<std::string> (*)();
void register_database_loader(DatabaseLoader loader) noexcept;

int serve(const Model& model, int argc, const char* const* argv);

}  // namespace sm::runtime
