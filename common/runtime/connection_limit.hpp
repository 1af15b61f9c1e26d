// --max-connections, shared by every thread of a server: one atomic counter,
// touched once per connection opened or closed (never per request).
#pragma once

#include <atomic>
#include <cstddef>

namespace sm::runtime {

class ConnectionLimit {
  public:
    explicit ConnectionLimit(std::size_t max) noexcept : max_(max) {}

    // Takes a slot for a connection about to be accepted; false at the limit.
    bool try_acquire() noexcept {
        std::size_t n = open_.load(std::memory_order_relaxed);
        do {
            if (n >= max_) return false;
        } while (!open_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
        return true;
    }
    void release() noexcept { open_.fetch_sub(1, std::memory_order_relaxed); }

    [[nodiscard]] std::size_t open() const noexcept {
        return open_.load(std::memory_order_relaxed);
    }
    [[nodiscard]] std::size_t max() const noexcept { return max_; }

  private:
    std::atomic<std::size_t> open_{0};
    const std::size_t max_;
};

}  // namespace sm::runtime
