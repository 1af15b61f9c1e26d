// The open-loop schedule of one load thread (--rate): request j of the thread
// is due at start + j / rate and is sent on connection j mod connections, so
// every connection carries an even share at evenly staggered times. Latency
// is measured from a request's due time, not from when it could be sent: a
// stalled server is charged for every request it delayed (no coordinated
// omission). The intended time of any request is computed, never stored.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace sm::loadgen {

class RateSchedule {
  public:
    // `rate` requests per second over `connections` connections, from start_ns.
    RateSchedule(double rate, std::size_t connections, std::int64_t start_ns) noexcept
        : interval_ns_(1e9 / rate),
          connections_(std::max<std::size_t>(connections, 1)),
          start_ns_(start_ns) {}

    [[nodiscard]] double interval_ns() const noexcept { return interval_ns_; }
    [[nodiscard]] std::size_t connections() const noexcept { return connections_; }

    // When request j of the thread is due.
    [[nodiscard]] std::int64_t due_time(std::uint64_t j) const noexcept {
        return start_ns_ +
               static_cast<std::int64_t>(std::llround(static_cast<double>(j) * interval_ns_));
    }
    // When the k-th request (from 0) of connection c is due.
    [[nodiscard]] std::int64_t intended(std::size_t c, std::uint64_t k) const noexcept {
        return due_time(static_cast<std::uint64_t>(c) + k * connections_);
    }
    // How many of the thread's requests are due at now_ns (j with due_time(j) <= now_ns).
    [[nodiscard]] std::uint64_t due_count(std::int64_t now_ns) const noexcept {
        if (now_ns < start_ns_) return 0;
        auto j = static_cast<std::uint64_t>(static_cast<double>(now_ns - start_ns_) / interval_ns_);
        // Correct the float estimate so the answer is exact for due_time().
        while (due_time(j + 1) <= now_ns)
            ++j;
        while (j > 0 && due_time(j) > now_ns)
            --j;
        return j + 1;
    }
    // How many of connection c's requests are due when `total` of the thread's are.
    [[nodiscard]] std::uint64_t due_for(std::size_t c, std::uint64_t total) const noexcept {
        return total > c ? (total - c - 1) / connections_ + 1 : 0;
    }

  private:
    double interval_ns_;
    std::size_t connections_;
    std::int64_t start_ns_;
};

}  // namespace sm::loadgen
