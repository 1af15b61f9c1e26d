// -n N: the requests the measured phase may send, shared by every load
// thread. A connection takes what it is about to send (a batch: up to
// --pipeline requests) before it writes, so however many threads and
// connections race for the last ones, no more than N are ever sent after
// the warm-up. One compare-and-swap per batch, none per response.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace sm::loadgen {

class RequestBudget {
  public:
    explicit RequestBudget(std::uint64_t total) noexcept : total_(total) {}

    // Takes up to `want` requests; returns how many it got (0: all are taken).
    std::uint32_t take(std::uint32_t want) noexcept {
        std::uint64_t taken = taken_.load(std::memory_order_relaxed);
        while (taken < total_) {
            const std::uint64_t n = std::min<std::uint64_t>(want, total_ - taken);
            if (taken_.compare_exchange_weak(taken, taken + n, std::memory_order_relaxed))
                return static_cast<std::uint32_t>(n);
        }
        return 0;
    }
    [[nodiscard]] bool exhausted() const noexcept {
        return taken_.load(std::memory_order_relaxed) >= total_;
    }
    [[nodiscard]] std::uint64_t taken() const noexcept {
        return std::min(taken_.load(std::memory_order_relaxed), total_);
    }
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }

  private:
    const std::uint64_t total_;
    std::atomic<std::uint64_t> taken_{0};
};

}  // namespace sm::loadgen
