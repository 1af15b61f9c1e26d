#include "reactor.hpp"
#include "runtime/server.hpp"

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kModel{
        "epoll",
        "one edge-triggered epoll reactor per thread, each with its own SO_REUSEPORT listener",
        &sm::epoll::run_worker};
    return sm::runtime::serve(kModel, argc, argv);
}
