#include "runtime/log.hpp"
#include "runtime/server.hpp"
#include "uring/probe.hpp"
#include "worker.hpp"

namespace {

// The shared probe, with this model's way out; a fallback from the preferred
// ring setup goes to the log, which says how the server runs.
std::optional<std::string> probe(const sm::runtime::ServerOptions& /*options*/) {
    return sm::uring::probe({.alternative = "server-epoll serves the same endpoints without it",
                             .note = &sm::runtime::log});
}

}  // namespace

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kModel{
        "uring",
        "one io_uring per thread: multishot accept, multishot recv into provided buffers, one "
        "send per connection per submission",
        &sm::uring::run_worker,
        {},
        sm::runtime::ListenerLayout::per_thread,
        &probe,
        sm::runtime::ModelOptions{.uring_buffers = true}};
    return sm::runtime::serve(kModel, argc, argv);
}
