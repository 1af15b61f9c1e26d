#include "blocking.hpp"
#include "runtime/server.hpp"

int main(int argc, char** argv) {
    static constexpr sm::runtime::Model kModel{
        "blocking",
        "a thread per connection from a bounded pool (--threads started, up to "
        "--max-connections), blocking reads and writes",
        &sm::blocking::run_server,
        {},
        sm::runtime::ListenerLayout::one};
    return sm::runtime::serve(kModel, argc, argv);
}
