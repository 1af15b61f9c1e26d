// The random World ids of /db and /queries: uniform in 1..kWorldRows, from a
// small fast generator per client (no locks, no shared state): PCG32
// (XSH-RR, 64-bit state) with Lemire's unbiased multiply-and-reject bound.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

#include "http/work.hpp"

namespace sm::db {

class RandomIds {
  public:
    // Seeded from std::random_device (or, if it has no source, the clock).
    RandomIds() noexcept : RandomIds(seed_from_device()) {}
    explicit RandomIds(std::uint64_t seed) noexcept {
        state_ = 0;
        step();
        state_ += seed;
        step();
    }

    // Uniform in 1..kWorldRows.
    std::int32_t next() noexcept { return static_cast<std::int32_t>(below(kRange)) + 1; }

    // Uniform in 0..range-1 (range > 0), without modulo bias.
    std::uint32_t below(std::uint32_t range) noexcept {
        std::uint64_t m = std::uint64_t{next32()} * range;
        auto low = static_cast<std::uint32_t>(m);
        if (low < range) {
            const std::uint32_t threshold = (0u - range) % range;
            while (low < threshold) {
                m = std::uint64_t{next32()} * range;
                low = static_cast<std::uint32_t>(m);
            }
        }
        return static_cast<std::uint32_t>(m >> 32);
    }

    std::uint32_t next32() noexcept {
        const std::uint64_t old = state_;
        step();
        const auto xorshifted = static_cast<std::uint32_t>(((old >> 18u) ^ old) >> 27u);
        const auto rot = static_cast<std::uint32_t>(old >> 59u);
        return (xorshifted >> rot) | (xorshifted << ((0u - rot) & 31u));
    }

  private:
    static constexpr std::uint32_t kRange = static_cast<std::uint32_t>(http::kWorldRows);
    static constexpr std::uint64_t kMultiplier = 6364136223846793005ULL;
    static constexpr std::uint64_t kIncrement = 1442695040888963407ULL;

    void step() noexcept { state_ = state_ * kMultiplier + kIncrement; }

    static std::uint64_t seed_from_device() noexcept {
        try {
            std::random_device device;
            return (std::uint64_t{device()} << 32) ^ device();
        } catch (...) {
            return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        }
    }

    std::uint64_t state_;
};

}  // namespace sm::db
