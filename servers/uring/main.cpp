#include "probe.hpp"
#include "runtime/server.hpp"
#include "worker.hpp"

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kModel{
        "uring",
        "one io_uring per thread: multishot accept, multishot recv into provided buffers, one "
        "send per connection per submission",
        &sm::uring::run_worker,
        {},
        sm::runtime::ListenerLayout::per_thread,
        &sm::uring::probe,
        sm::runtime::ModelOptions{.uring_buffers = true}};
    return sm::runtime::serve(kModel, argc, argv);
}
