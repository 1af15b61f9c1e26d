#include "pool.hpp"
#include "runtime/server.hpp"

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kModel{
        "threadpool",
        "half-sync/half-async: one epoll reactor hands ready connections to --threads workers "
        "through a bounded queue",
        &sm::threadpool::run_pool,
        {},
        sm::runtime::ListenerLayout::one,
        nullptr,
        sm::runtime::ModelOptions{.queue_size = true}};
    return sm::runtime::serve(kModel, argc, argv);
}
