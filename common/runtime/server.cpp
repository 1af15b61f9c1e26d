#include "runtime/server.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "runtime/log.hpp"
#include "runtime/models.hpp"
#include "runtime/tsan.hpp"

#ifdef SM_TSAN
// Read by ThreadSanitizer at start-up (in every server: this file holds
// serve()). A data race ends the server at once with exit code 66, so the
// conformance case that ran into it fails, instead of a report on stderr that
// nothing reads. TSAN_OPTIONS still overrides.
extern "C" const char* __tsan_default_options();
extern "C" const char* __tsan_default_options() {
    // history_size=7 (the most): a race report that TSan cannot give a
    // stack for cannot be matched by a suppression (the thread pool's
    // kernel-ordered hand-off, see servers/threadpool) and ended the server.
    return "halt_on_error=1:exitcode=66:history_size=7";
}
#endif

namespace sm::runtime {

namespace {

std::string_view description_of(const Model& model) {
    if (!model.description.empty()) return model.description;
    for (const ListedModel& m : kListedModels)
        if (m.name == model.name) return m.shows;
    return {};
}

constinit DatabaseLoader database_loader = nullptr;

// servers/models.json says which models have a database client.
bool has_database(const Model& model) {
    for (const ListedModel& m : kListedModels)
        if (m.name == model.name) return m.database;
    return false;
}

}  // namespace

void register_database_loader(DatabaseLoader loader) noexcept { database_loader = loader; }

void pin_worker_thread(const ServerOptions& opts, unsigned i) {
    if (!opts.cpus.empty()) pin_current_thread(opts.cpus[i % opts.cpus.size()]);
}

int serve(const Model& model, int argc, const char* const* argv) {
    const std::string program =
        model.program.empty() ? fmt::format("server-{}", model.name) : std::string(model.program);
    set_program_name(program);
    ParsedOptions parsed =
        parse_server_options(program, description_of(model), model.options, argc, argv);
    if (!parsed.options) return parsed.exit_code;
    const ServerOptions& opts = *parsed.options;
    if (!opts.db.empty() && (!has_database(model) || database_loader == nullptr)) {
        log("--db: this build of the model has no database client (libpq); /fortunes is served "
            "from memory without --db");
        return 2;
    }
    if (model.probe) {
        if (const auto why = model.probe(opts)) {
            log(*why);
            return 1;
        }
    }
    if (!opts.db.empty()) {
        if (const auto why = database_loader()) {
            log(fmt::format("--db: {}", *why));
            return 1;
        }
    }
    const unsigned workers = model.listeners == ListenerLayout::one ? 1u : opts.threads;

    Listeners listeners;
    std::optional<StopSignal> stop;
    try {
        prepare_process();
        listeners = open_listeners(opts.address, opts.port, workers, opts.backlog);
        stop.emplace();
    } catch (const std::exception& e) {
        log(e.what());
        return 1;
    }

    ConnectionLimit connections(opts.max_connections);
    std::atomic<int> failures{0};
    // Threads that have not started yet. Not a std::latch: libstdc++ 12
    // builds its wait on atomics, whose wake-up is lost with mingw-w64's
    // threads (server-iocp.exe under Wine never got past it).
    std::mutex start_mutex;
    std::condition_variable start_cv;
    unsigned starting = workers;
    std::vector<std::jthread> threads;
    threads.reserve(workers);
    for (unsigned i = 0; i < workers; ++i) {
        threads.emplace_back([&, i] {
            bool ok = true;
            try {
                pin_worker_thread(opts, i);
            } catch (const std::exception& e) {
                log(e.what());
                ok = false;
                ++failures;
            }
            {
                const std::scoped_lock lock(start_mutex);
                --starting;
            }
            start_cv.notify_one();
            if (!ok) return;
            try {
                model.worker(WorkerContext{opts, i, listeners.sockets[i], *stop, connections});
            } catch (const std::exception& e) {
                log(fmt::format("thread {}: {}", i, e.what()));
                ++failures;
                request_stop_from_thread();
            }
        });
    }
    {
        std::unique_lock lock(start_mutex);
        start_cv.wait(lock, [&] { return starting == 0; });
    }
    if (failures.load() != 0) {
        stop->request();
        threads.clear();  // joins
        return 1;
    }

    fmt::print("listening on {} model={} threads={} mode={}\n", listeners.url, model.name,
               opts.threads, http::to_string(opts.mode));
    std::fflush(stdout);

    const std::string_view why = wait_for_stop();
    if (failures.load() == 0)
        log(fmt::format("{}: finishing responses in flight, then exiting", why));
    stop->request();
    threads.clear();  // joins every worker
    return failures.load() == 0 ? 0 : 1;
}

}  // namespace sm::runtime
