#include "loop.hpp"
#include "runtime/server.hpp"

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kModel{
        "libuv", "one libuv loop per thread, each with its own SO_REUSEPORT listener",
        &sm::libuv::run_worker};
    return sm::runtime::serve(kModel, argc, argv);
}
