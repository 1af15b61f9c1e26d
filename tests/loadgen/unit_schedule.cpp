// loadgen's RateSchedule: the open-loop (--rate) due times. Checked against
// brute-force counts and exact integer arithmetic, never against itself alone.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "schedule.hpp"

using sm::loadgen::RateSchedule;

namespace {

// Rates with integer and non-integer intervals (ns): 1e9/rate.
constexpr double kRates[] = {1,           3,           7,           1'000,   3'333,     12'345.678,
                             50'000,      100'000,     173'452.1,   999'999, 1'000'000, 3'000'000,
                             123'456'789, 333'333'333, 999'999'999, 1e9,     0.5,       2.5};
constexpr std::int64_t kStart =
    1'700'000'000'123'456'789;  // far from 0, as clock readings in ns are

// How many j in [0, limit) have due_time(j) <= now, by looking at each one.
std::uint64_t brute_due_count(const RateSchedule& s, std::int64_t now, std::uint64_t limit) {
    std::uint64_t n = 0;
    for (std::uint64_t j = 0; j < limit; ++j)
        if (s.due_time(j) <= now) ++n;
    return n;
}

}  // namespace

TEST_CASE("schedule due times are evenly spaced from the start", "[schedule]") {
    const RateSchedule s(1'000, 4, kStart);
    REQUIRE(s.interval_ns() == 1'000'000.0);
    REQUIRE(s.connections() == 4);
    REQUIRE(s.due_time(0) == kStart);
    REQUIRE(s.due_time(1) == kStart + 1'000'000);
    REQUIRE(s.due_time(1'000) == kStart + 1'000'000'000);
    // A non-integer interval rounds each due time to the nearest ns, without accumulating.
    const RateSchedule third(3, 1, 0);
    REQUIRE(third.due_time(1) == 333'333'333);
    REQUIRE(third.due_time(2) == 666'666'667);
    REQUIRE(third.due_time(3) == 1'000'000'000);
    // No connections is treated as one.
    REQUIRE(RateSchedule(10, 0, 0).connections() == 1);
}

TEST_CASE("schedule due_count agrees exactly with due_time", "[schedule]") {
    for (const double rate : kRates) {
        INFO("rate " << rate);
        const RateSchedule s(rate, 8, kStart);
        REQUIRE(s.due_count(kStart - 1) == 0);
        REQUIRE(s.due_count(INT64_MIN) == 0);
        REQUIRE(s.due_count(kStart) == 1);  // request 0 is due at the start
        // Around the first due times and around far ones (hours into a run at
        // a high rate): due_count(t) is one past the last j due at or before t.
        for (const std::uint64_t base :
             {std::uint64_t{0}, std::uint64_t{1'000'003}, std::uint64_t{3'600'000'000}}) {
            if (static_cast<double>(base) * s.interval_ns() > 1e16) continue;  // beyond ~4 months
            for (std::uint64_t j = base; j < base + 300; ++j) {
                const std::int64_t t = s.due_time(j);
                INFO("j " << j << " due at start + " << t - kStart);
                REQUIRE(s.due_count(t) == j + 1);
                REQUIRE(s.due_count(t - 1) == j);
                if (s.due_time(j + 1) > t + 1) REQUIRE(s.due_count(t + 1) == j + 1);
            }
        }
    }
}

TEST_CASE("schedule due_count matches a brute-force count at arbitrary times", "[schedule]") {
    std::mt19937_64 rng(42);
    for (const double rate : kRates) {
        INFO("rate " << rate);
        const RateSchedule s(rate, 3, kStart);
        const std::uint64_t limit = 2'000;
        const std::int64_t horizon = s.due_time(limit - 1);
        std::uniform_int_distribution<std::int64_t> when(kStart - 10, horizon);
        for (int i = 0; i < 200; ++i) {
            const std::int64_t now = when(rng);
            INFO("now start + " << now - kStart);
            REQUIRE(s.due_count(now) == brute_due_count(s, now, limit));
        }
    }
}

TEST_CASE("schedule intended time of a connection's k-th request is due_time(c + k*C)",
          "[schedule]") {
    for (const double rate : kRates) {
        for (const std::size_t connections :
             {std::size_t{1}, std::size_t{3}, std::size_t{64}, std::size_t{1'000}}) {
            INFO("rate " << rate << ", " << connections << " connections");
            const RateSchedule s(rate, connections, kStart);
            for (std::size_t c = 0; c < connections; c += 1 + connections / 10) {
                for (std::uint64_t k = 0; k < 50; ++k) {
                    REQUIRE(s.intended(c, k) == s.due_time(c + k * connections));
                    if (k > 0) REQUIRE(s.intended(c, k) > s.intended(c, k - 1));
                }
            }
        }
    }
}

TEST_CASE("schedule due_for splits the due requests over the connections", "[schedule]") {
    for (const std::size_t connections :
         {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}}) {
        const RateSchedule s(50'000, connections, kStart);
        std::vector<std::uint64_t> brute(connections, 0);
        for (std::uint64_t total = 0; total <= 1'000; ++total) {
            INFO(connections << " connections, " << total << " due");
            // Request j is sent on connection j mod C: count them one by one.
            if (total > 0) ++brute[(total - 1) % connections];
            std::uint64_t sum = 0;
            for (std::size_t c = 0; c < connections; ++c) {
                REQUIRE(s.due_for(c, total) == brute[c]);
                sum += s.due_for(c, total);
            }
            REQUIRE(sum == total);
        }
    }
    // With due_count: connection c's k-th request is due once due_for(c, ...) exceeds k.
    const RateSchedule s(12'345.678, 5, kStart);
    for (std::size_t c = 0; c < 5; ++c) {
        for (std::uint64_t k = 0; k < 100; ++k) {
            const std::int64_t t = s.intended(c, k);
            REQUIRE(s.due_for(c, s.due_count(t)) == k + 1);
            REQUIRE(s.due_for(c, s.due_count(t - 1)) == k);
        }
    }
}

TEST_CASE("schedule does not drift over many requests", "[schedule]") {
    // Due times are computed from j, not accumulated: request j is due within
    // half a ns of start + j * 1e9 / rate (exact integer arithmetic here).
    for (const std::uint64_t rate :
         {std::uint64_t{3}, std::uint64_t{7}, std::uint64_t{1'000}, std::uint64_t{48'611},
          std::uint64_t{1'000'000}, std::uint64_t{999'999'937}}) {
        INFO("rate " << rate);
        const RateSchedule s(static_cast<double>(rate), 16, kStart);
        for (const std::uint64_t j :
             {std::uint64_t{1}, std::uint64_t{1'000}, std::uint64_t{123'456'789},
              std::uint64_t{1'000'000'000}, std::uint64_t{3'600} * rate,
              std::uint64_t{86'400} * rate - 1}) {
            if (static_cast<double>(j) / static_cast<double>(rate) > 100'000)
                continue;  // over 28 hours
            INFO("j " << j);
            // round(j * 1e9 / rate), half up, in 64-bit integers: with
            // j = q rate + r, it is q 1e9 + (2 r 1e9 + rate) / (2 rate).
            const std::uint64_t q = j / rate, r = j % rate;
            const auto exact = static_cast<std::int64_t>(
                q * 1'000'000'000 + (2 * r * 1'000'000'000 + rate) / (2 * rate));
            REQUIRE(std::llabs(s.due_time(j) - kStart - exact) <= 1);
            REQUIRE(s.due_count(s.due_time(j)) == j + 1);
        }
        // Whole seconds land exactly on the second.
        REQUIRE(s.due_time(rate * 3'600) == kStart + std::int64_t{3'600} * 1'000'000'000);
    }
}
