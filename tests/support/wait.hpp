// Time-bounded polling: tests wait for a condition, never for a fixed time,
// and never loop without a deadline.
#pragma once

#include <chrono>
#include <thread>

namespace sm::test {

using namespace std::chrono_literals;

// Calls `pred` until it returns true or `timeout` has passed; returns whether
// it became true. `pred` runs at least once, and once more at the deadline.
template <typename Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = 10ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (pred()) return true;
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) return false;
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(interval, deadline - now));
    }
}

// Milliseconds left until `deadline` (0 once it has passed), for poll() and friends.
inline int remaining_ms(std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return left.count() <= 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace sm::test
