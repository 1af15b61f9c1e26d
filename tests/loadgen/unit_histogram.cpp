// loadgen's Histogram (HdrHistogram's log-linear layout, 1 us..60 s in ns, 3
// significant digits). Percentiles are checked against a brute-force sort of
// the recorded values, with HdrHistogram's definition written out here, never
// against output captured from the code under test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "histogram.hpp"

using sm::loadgen::Histogram;

namespace {

constexpr std::int64_t kUnitNs = 512;  // the bucket width below kLowestNs (2^floor(log2(1000)))
constexpr std::int64_t kLinearEndNs =
    1024 * kUnitNs;  // from here on, widths are at most 1/1024 of the value
constexpr double kPercentiles[] = {0.1, 1, 50, 75, 90, 99, 99.9, 99.99, 100};

struct DataSet {
    std::string name;
    std::vector<std::int64_t> values;
};

// Data sets of several shapes, all within [0, kHighestNs], from a fixed seed.
std::vector<DataSet> data_sets() {
    std::mt19937_64 rng(20261130);
    std::vector<DataSet> sets;
    // draw() returns a double, clamped into range before it becomes an integer.
    const auto fill = [&](std::string name, std::size_t n, auto&& draw) {
        DataSet s{std::move(name), {}};
        s.values.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            const double v = std::clamp(static_cast<double>(draw()), 0.0,
                                        static_cast<double>(Histogram::kHighestNs));
            s.values.push_back(static_cast<std::int64_t>(v));
        }
        sets.push_back(std::move(s));
    };
    std::uniform_int_distribution<std::int64_t> uniform(1'000, 10'000'000);
    fill("uniform 1us..10ms", 20'000, [&] { return uniform(rng); });
    std::exponential_distribution<double> exponential(1.0 / 200'000.0);
    fill("exponential, mean 200us", 20'000, [&] { return exponential(rng) + 20'000.0; });
    // A long tail: mostly ~100 us, a few up to seconds (Pareto, alpha 1.1).
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    fill("pareto long tail", 20'000,
         [&] { return 100'000.0 / std::pow(1.0 - unit(rng), 1.0 / 1.1); });
    fill("constant", 5'000, [] { return 123'456; });
    // Uniform in log space over the whole range: every decade from 1 us to 60 s.
    std::uniform_real_distribution<double> log_range(std::log(1'000.0), std::log(60e9));
    fill("log-uniform 1us..60s", 20'000, [&] { return std::exp(log_range(rng)); });
    std::uniform_int_distribution<std::int64_t> tiny(0, 3'000);
    fill("below and around 1us", 5'000, [&] { return tiny(rng); });
    // Few values: the rounding of the percentile's rank matters most here.
    for (std::size_t n : {1u, 2u, 3u, 7u, 10u, 999u}) {
        std::uniform_int_distribution<std::int64_t> spread(1'000, 2'000'000'000);
        fill("uniform, n=" + std::to_string(n), n, [&] { return spread(rng); });
    }
    return sets;
}

Histogram record_all(const std::vector<std::int64_t>& values) {
    Histogram h;
    for (const auto v : values)
        h.record(v);
    return h;
}

// HdrHistogram's value at percentile p of n sorted values: the highest value
// equivalent to the k-th smallest, k = max(1, round-half-up(p/100 * n)).
std::int64_t expected_at_percentile(const Histogram& h, const std::vector<std::int64_t>& sorted,
                                    double p) {
    const auto n = static_cast<double>(sorted.size());
    const auto k = std::max<long long>(1, std::llround(p / 100.0 * n));
    return h.highest_equivalent(sorted[static_cast<std::size_t>(k - 1)]);
}

void require_same(const Histogram& a, const Histogram& b) {
    REQUIRE(a.count() == b.count());
    REQUIRE(a.saturated() == b.saturated());
    REQUIRE(a.min() == b.min());
    REQUIRE(a.max() == b.max());
    REQUIRE(a.mean() == Approx(b.mean()).epsilon(1e-12));
    REQUIRE(a.stddev() == Approx(b.stddev()).epsilon(1e-9));
    for (const double p : kPercentiles) {
        INFO("p" << p);
        REQUIRE(a.value_at_percentile(p) == b.value_at_percentile(p));
    }
    const auto ba = a.buckets(), bb = b.buckets();
    REQUIRE(ba.size() == bb.size());
    for (std::size_t i = 0; i < ba.size(); ++i) {
        REQUIRE(ba[i].lowest_ns == bb[i].lowest_ns);
        REQUIRE(ba[i].count == bb[i].count);
    }
    const auto sa = a.spectrum(), sb = b.spectrum();
    REQUIRE(sa.size() == sb.size());
    for (std::size_t i = 0; i < sa.size(); ++i) {
        REQUIRE(sa[i].value_ns == sb[i].value_ns);
        REQUIRE(sa[i].cumulative == sb[i].cumulative);
    }
}

// The percentile levels of HdrHistogram's percentile iteration, written out:
// 0, then `ticks` evenly spaced levels per halving of the distance to 100
// (0 10 20 30 40 | 50 55 60 65 70 | 75 77.5 ... for 5 ticks).
std::vector<double> hdr_levels(int ticks) {
    std::vector<double> levels;
    for (int m = 0; m <= 40; ++m) {
        const double distance = 100.0 / std::exp2(m);
        for (int j = 0; j < ticks; ++j)
            levels.push_back(100.0 - distance + j * (distance / 2.0 / ticks));
    }
    return levels;
}

}  // namespace

TEST_CASE("histogram buckets tile the range with 3 significant digits", "[histogram]") {
    const Histogram h;
    // Walk every bucket from 0 to the top: contiguous, power-of-two widths,
    // 512 ns wide below 0.52 ms and at most 1/1024 of the value above.
    std::int64_t v = 0;
    std::size_t buckets = 0;
    while (v <= Histogram::kHighestNs) {
        const std::int64_t low = h.lowest_equivalent(v);
        const std::int64_t high = h.highest_equivalent(v);
        INFO("value " << v);
        REQUIRE(low == v);
        REQUIRE(high >= low);
        const std::int64_t width = high - low + 1;
        REQUIRE((width & (width - 1)) == 0);
        if (low < kLinearEndNs) {
            REQUIRE(width == kUnitNs);
        } else {
            REQUIRE(static_cast<double>(width) / static_cast<double>(low) <= 1.0 / 1024.0);
            // 3 significant decimal digits: every value of the bucket rounds to the same 3 digits
            // +-1.
            REQUIRE(static_cast<double>(width) / static_cast<double>(low) < 1e-3);
        }
        REQUIRE(h.median_equivalent(v) == low + width / 2);
        REQUIRE(h.lowest_equivalent(high) == low);
        REQUIRE(h.highest_equivalent(high) == high);
        if (high < Histogram::kHighestNs)
            REQUIRE(h.lowest_equivalent(high + 1) ==
                    high + 1);  // the next bucket starts right after
        v = high + 1;
        ++buckets;
    }
    // 2048 buckets of 512 ns below 2^20 ns, 1024 per doubling up to 2^35 ns,
    // then buckets of 2^25 ns up to the one that holds 60 s.
    const auto last_doubling =
        (Histogram::kHighestNs - (std::int64_t{1} << 35)) / (std::int64_t{1} << 25) + 1;
    CHECK(buckets == static_cast<std::size_t>(2048 + 1024 * 15 + last_doubling));
    CHECK(h.highest_equivalent(Histogram::kHighestNs) >= Histogram::kHighestNs);
}

TEST_CASE("histogram records each value into the bucket that holds it", "[histogram]") {
    Histogram h;
    const std::vector<std::int64_t> values = {0,
                                              1,
                                              511,
                                              512,
                                              999,
                                              1'000,
                                              1'023,
                                              1'024,
                                              524'287,
                                              524'288,
                                              1'048'575,
                                              1'048'576,
                                              1'234'567,
                                              999'999'999,
                                              Histogram::kHighestNs - 1,
                                              Histogram::kHighestNs};
    for (const auto v : values)
        h.record(v);
    REQUIRE(h.count() == values.size());
    std::uint64_t total = 0;
    for (const auto& b : h.buckets()) {
        REQUIRE(b.lowest_ns == h.lowest_equivalent(b.lowest_ns));
        REQUIRE(b.highest_ns == h.highest_equivalent(b.lowest_ns));
        const auto inside = std::count_if(values.begin(), values.end(), [&](std::int64_t v) {
            return v >= b.lowest_ns && v <= b.highest_ns;
        });
        REQUIRE(b.count == static_cast<std::uint64_t>(inside));
        total += b.count;
    }
    REQUIRE(total == values.size());
    REQUIRE(h.min() == 0);
    REQUIRE(h.max() == Histogram::kHighestNs);
    REQUIRE(h.saturated() == 0);
}

TEST_CASE("histogram percentiles match a brute-force sort", "[histogram]") {
    for (const auto& set : data_sets()) {
        INFO(set.name);
        const Histogram h = record_all(set.values);
        auto sorted = set.values;
        std::sort(sorted.begin(), sorted.end());
        REQUIRE(h.count() == sorted.size());
        REQUIRE(h.min() == sorted.front());
        REQUIRE(h.max() == sorted.back());
        for (const double p : kPercentiles) {
            INFO("p" << p);
            REQUIRE(h.value_at_percentile(p) == expected_at_percentile(h, sorted, p));
        }
        // Every rank, for the small sets.
        if (sorted.size() <= 10) {
            for (int p = 1; p <= 100; ++p) {
                INFO("p" << p);
                REQUIRE(h.value_at_percentile(p) == expected_at_percentile(h, sorted, p));
            }
        }
        // 0 is the lowest equivalent of the minimum; out-of-range percentiles are clamped.
        REQUIRE(h.value_at_percentile(0) == h.lowest_equivalent(sorted.front()));
        REQUIRE(h.value_at_percentile(-5) == h.value_at_percentile(0));
        REQUIRE(h.value_at_percentile(250) == h.highest_equivalent(sorted.back()));
    }
}

TEST_CASE("histogram percentiles of a constant are that value's bucket", "[histogram]") {
    Histogram h;
    h.record_n(123'456, 1'000);
    for (const double p : kPercentiles)
        REQUIRE(h.value_at_percentile(p) == h.highest_equivalent(123'456));
    REQUIRE(h.min() == 123'456);
    REQUIRE(h.max() == 123'456);
    REQUIRE(h.stddev() == 0.0);
    REQUIRE(h.mean() == static_cast<double>(h.median_equivalent(123'456)));
}

TEST_CASE("histogram merge equals recording everything into one", "[histogram]") {
    for (const auto& set : data_sets()) {
        INFO(set.name);
        Histogram a, b, all;
        for (std::size_t i = 0; i < set.values.size(); ++i) {
            // Uneven split: a gets the first third and every fifth value after it.
            (i < set.values.size() / 3 || i % 5 == 0 ? a : b).record(set.values[i]);
            all.record(set.values[i]);
        }
        a.merge(b);
        require_same(a, all);
    }
}

TEST_CASE("histogram merge keeps min, max and saturation of both sides", "[histogram]") {
    Histogram low, high, empty;
    low.record(2'000);
    high.record_n(Histogram::kHighestNs + 1, 3);
    high.record(50'000);

    Histogram merged;
    merged.merge(empty);  // empty into empty
    REQUIRE(merged.count() == 0);
    merged.merge(high);  // into an empty histogram: takes the other's min
    REQUIRE(merged.min() == 50'000);
    merged.merge(low);
    merged.merge(empty);  // empty into a non-empty one changes nothing
    REQUIRE(merged.count() == 5);
    REQUIRE(merged.saturated() == 3);
    REQUIRE(merged.min() == 2'000);
    REQUIRE(merged.max() == Histogram::kHighestNs);

    Histogram reference;
    reference.record(2'000);
    reference.record(50'000);
    reference.record_n(Histogram::kHighestNs + 1, 3);
    require_same(merged, reference);
}

TEST_CASE("histogram record_n counts n equal values", "[histogram]") {
    Histogram bulk, one_by_one;
    const std::vector<std::pair<std::int64_t, std::uint64_t>> recordings = {
        {1'500, 7}, {250'000, 1}, {3'000'000, 40}, {2'000'000'000, 2}, {999, 3}};
    for (const auto& [v, n] : recordings) {
        bulk.record_n(v, n);
        for (std::uint64_t i = 0; i < n; ++i)
            one_by_one.record(v);
    }
    require_same(bulk, one_by_one);
    REQUIRE(bulk.count() == 53);

    // n = 0 records nothing, not even min and max.
    Histogram none;
    none.record_n(5'000, 0);
    REQUIRE(none.count() == 0);
    REQUIRE(none.min() == 0);
    REQUIRE(none.max() == 0);
    REQUIRE(none.buckets().empty());
}

TEST_CASE("histogram clamps values above 60 s and counts them as saturated", "[histogram]") {
    Histogram h;
    h.record(1'000'000);
    h.record(Histogram::kHighestNs);  // the top itself is in range
    REQUIRE(h.saturated() == 0);
    h.record(Histogram::kHighestNs + 1);
    h.record_n(std::int64_t{3'600} * 1'000'000'000, 4);  // an hour
    h.record(INT64_MAX);
    REQUIRE(h.count() == 8);
    REQUIRE(h.saturated() == 6);
    REQUIRE(h.max() == Histogram::kHighestNs);
    REQUIRE(h.value_at_percentile(100) == h.highest_equivalent(Histogram::kHighestNs));
    REQUIRE(h.value_at_percentile(50) == h.highest_equivalent(Histogram::kHighestNs));
    REQUIRE(h.value_at_percentile(10) == h.highest_equivalent(1'000'000));
    REQUIRE(h.lowest_equivalent(INT64_MAX) == h.lowest_equivalent(Histogram::kHighestNs));
}

TEST_CASE("histogram records negative values as 0", "[histogram]") {
    Histogram h;
    h.record(-1);
    h.record(INT64_MIN);
    REQUIRE(h.count() == 2);
    REQUIRE(h.saturated() == 0);
    REQUIRE(h.min() == 0);
    REQUIRE(h.max() == 0);
    REQUIRE(h.value_at_percentile(100) == kUnitNs - 1);
    REQUIRE(h.lowest_equivalent(-42) == 0);
}

TEST_CASE("histogram mean and stddev are exact within the bucket resolution", "[histogram]") {
    for (const auto& set : data_sets()) {
        INFO(set.name);
        const Histogram h = record_all(set.values);
        const auto n = static_cast<double>(set.values.size());
        double sum = 0;
        for (const auto v : set.values)
            sum += static_cast<double>(v);
        const double mean = sum / n;
        double squares = 0;
        for (const auto v : set.values)
            squares += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
        const double stddev = std::sqrt(squares / n);
        // Each value is stood for by its bucket's midpoint, at most half a
        // bucket away: the mean moves by at most that, and so (triangle
        // inequality in L2) does the standard deviation.
        const std::int64_t top = *std::max_element(set.values.begin(), set.values.end());
        const double half_bucket =
            static_cast<double>(h.highest_equivalent(top) - h.lowest_equivalent(top) + 1) / 2.0;
        const double slack = half_bucket * (1 + 1e-9) + 1e-6 * mean;
        REQUIRE(std::abs(h.mean() - mean) <= slack);
        REQUIRE(std::abs(h.stddev() - stddev) <= slack);
    }
}

TEST_CASE("histogram spectrum is monotonic and ends at 100% with every count", "[histogram]") {
    for (const auto& set : data_sets()) {
        INFO(set.name);
        const Histogram h = record_all(set.values);
        auto sorted = set.values;
        std::sort(sorted.begin(), sorted.end());
        for (const int ticks : {5, 1, 2}) {
            INFO("ticks " << ticks);
            const auto steps = h.spectrum(ticks);
            REQUIRE(!steps.empty());
            REQUIRE(steps.size() <= h.buckets().size());
            for (std::size_t i = 0; i < steps.size(); ++i) {
                const auto& s = steps[i];
                INFO("step " << i << ": " << s.percentile << "% " << s.value_ns << " ns, "
                             << s.cumulative);
                REQUIRE(s.value_ns == h.highest_equivalent(s.value_ns));
                // The cumulative count is the number of recorded values up to that bucket's top.
                const auto at_or_below =
                    std::upper_bound(sorted.begin(), sorted.end(), s.value_ns) - sorted.begin();
                REQUIRE(s.cumulative == static_cast<std::uint64_t>(at_or_below));
                REQUIRE(s.percentile == Approx(100.0 * static_cast<double>(s.cumulative) /
                                               static_cast<double>(h.count())));
                // The value at that percentile is the step's value.
                REQUIRE(h.value_at_percentile(s.percentile) == s.value_ns);
                if (i > 0) {
                    REQUIRE(s.percentile > steps[i - 1].percentile);
                    REQUIRE(s.value_ns > steps[i - 1].value_ns);
                    REQUIRE(s.cumulative > steps[i - 1].cumulative);
                }
            }
            REQUIRE(steps.back().percentile == 100.0);
            REQUIRE(steps.back().cumulative == h.count());
            REQUIRE(steps.back().value_ns == h.highest_equivalent(h.max()));
            REQUIRE(steps.front().value_ns == h.highest_equivalent(h.min()));
        }
    }
}

TEST_CASE("histogram spectrum steps where HdrHistogram's percentile levels are crossed",
          "[histogram]") {
    // The steps are exactly: for each level, the first bucket whose cumulative
    // percentage reaches it; and the last bucket.
    for (const auto& set : data_sets()) {
        INFO(set.name);
        const Histogram h = record_all(set.values);
        const auto buckets = h.buckets();
        for (const int ticks : {5, 1, 4}) {
            INFO("ticks " << ticks);
            std::vector<std::int64_t> expected;
            for (const double level : hdr_levels(ticks)) {
                std::uint64_t cumulative = 0;
                for (const auto& b : buckets) {
                    cumulative += b.count;
                    if (100.0 * static_cast<double>(cumulative) / static_cast<double>(h.count()) >=
                        level) {
                        expected.push_back(b.highest_ns);
                        break;
                    }
                }
            }
            expected.push_back(buckets.back().highest_ns);
            std::sort(expected.begin(), expected.end());
            expected.erase(std::unique(expected.begin(), expected.end()), expected.end());

            std::vector<std::int64_t> got;
            for (const auto& s : h.spectrum(ticks))
                got.push_back(s.value_ns);
            REQUIRE(got == expected);
        }
    }
}

TEST_CASE("histogram spectrum of a single bucket is one step at 100%", "[histogram]") {
    for (const std::uint64_t n : {1u, 2u, 1'000'000u}) {
        Histogram h;
        h.record_n(7'777'777, n);
        const auto steps = h.spectrum();
        REQUIRE(steps.size() == 1);
        REQUIRE(steps[0].percentile == 100.0);
        REQUIRE(steps[0].cumulative == n);
        REQUIRE(steps[0].value_ns == h.highest_equivalent(7'777'777));
    }
}

TEST_CASE("histogram spectrum terminates when a step before the last rounds to 100%",
          "[histogram]") {
    // 10^16 values in one bucket and one above: the first bucket already
    // reaches 100% in doubles, where the percentile levels stop advancing.
    Histogram h;
    h.record_n(1'000'000, 10'000'000'000'000'000);
    h.record(2'000'000);
    const auto steps = h.spectrum();
    REQUIRE(steps.size() == 2);
    REQUIRE(steps.front().value_ns == h.highest_equivalent(1'000'000));
    REQUIRE(steps.back().percentile == 100.0);
    REQUIRE(steps.back().cumulative == h.count());
    REQUIRE(steps.back().value_ns == h.highest_equivalent(2'000'000));
}

TEST_CASE("histogram when empty reports zeros and no spectrum", "[histogram]") {
    const Histogram h;
    REQUIRE(h.count() == 0);
    REQUIRE(h.saturated() == 0);
    REQUIRE(h.min() == 0);
    REQUIRE(h.max() == 0);
    REQUIRE(h.mean() == 0.0);
    REQUIRE(h.stddev() == 0.0);
    for (const double p : kPercentiles)
        REQUIRE(h.value_at_percentile(p) == 0);
    REQUIRE(h.value_at_percentile(0) == 0);
    REQUIRE(h.spectrum().empty());
    REQUIRE(h.buckets().empty());
}

TEST_CASE("histogram reset empties it for reuse", "[histogram]") {
    Histogram h;
    h.record(5'000);
    h.record_n(Histogram::kHighestNs * 2, 2);
    h.reset();
    REQUIRE(h.count() == 0);
    REQUIRE(h.saturated() == 0);
    REQUIRE(h.min() == 0);
    REQUIRE(h.max() == 0);
    REQUIRE(h.mean() == 0.0);
    REQUIRE(h.value_at_percentile(100) == 0);
    REQUIRE(h.buckets().empty());
    REQUIRE(h.spectrum().empty());

    // Reused, it is indistinguishable from a fresh one (min is not stuck at 0 or 5000).
    h.record(90'000);
    h.record(70'000);
    Histogram fresh;
    fresh.record(90'000);
    fresh.record(70'000);
    require_same(h, fresh);
    REQUIRE(h.min() == 70'000);
}
