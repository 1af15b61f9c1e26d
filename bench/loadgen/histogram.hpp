// A latency histogram in HdrHistogram's log-linear layout: values from 1 us to
// 60 s (stored in nanoseconds) kept to 3 significant decimal digits. Recording
// is a few shifts and an increment, no allocation; histograms of the same
// layout merge by adding counts, so each thread records into its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sm::loadgen {

class Histogram {
  public:
    // kLowestNs sets the resolution (values below it share its 512 ns
    // buckets); values above kHighestNs are recorded as kHighestNs and counted
    // in saturated(), negative ones as 0.
    static constexpr std::int64_t kLowestNs = 1'000;            // 1 us
    static constexpr std::int64_t kHighestNs = 60'000'000'000;  // 60 s
    static constexpr int kSignificantDigits = 3;

    Histogram();

    void record(std::int64_t value_ns) noexcept { record_n(value_ns, 1); }
    void record_n(std::int64_t value_ns, std::uint64_t n) noexcept;
    // Adds every count of `other` (same layout by construction).
    void merge(const Histogram& other) noexcept;
    void reset() noexcept;

    [[nodiscard]] std::uint64_t count() const noexcept { return total_; }
    // Recorded values that were above kHighestNs and clamped to it.
    [[nodiscard]] std::uint64_t saturated() const noexcept { return saturated_; }
    // Exact minimum and maximum of what was recorded (after clamping); 0 if empty.
    [[nodiscard]] std::int64_t min() const noexcept { return total_ ? min_ : 0; }
    [[nodiscard]] std::int64_t max() const noexcept { return max_; }
    // Mean and standard deviation from bucket midpoints, as HdrHistogram does.
    [[nodiscard]] double mean() const noexcept;
    [[nodiscard]] double stddev() const noexcept;

    // The value at `percentile` (0..100): the highest value equivalent to the
    // recorded value below which `percentile` percent of the counts fall
    // (HdrHistogram's getValueAtPercentile). 0 if empty.
    [[nodiscard]] std::int64_t value_at_percentile(double percentile) const noexcept;

    // Bucket arithmetic, exposed for tests: all values v with
    // lowest_equivalent(v) <= v <= highest_equivalent(v) share a counter.
    [[nodiscard]] std::int64_t lowest_equivalent(std::int64_t value_ns) const noexcept;
    [[nodiscard]] std::int64_t highest_equivalent(std::int64_t value_ns) const noexcept;
    [[nodiscard]] std::int64_t median_equivalent(std::int64_t value_ns) const noexcept;

    // One step of the percentile spectrum (HdrHistogram's percentile
    // iteration): `value_ns` is the highest equivalent value reached when the
    // cumulative count first covers `percentile`.
    struct Step {
        double percentile;
        std::int64_t value_ns;
        std::uint64_t cumulative;
    };
    // The whole spectrum with `ticks_per_half_distance` steps per halving of
    // the distance to 100% (HdrHistogram uses 5), ending with the maximum.
    [[nodiscard]] std::vector<Step> spectrum(int ticks_per_half_distance = 5) const;

    // Non-empty buckets in value order, for exact merging elsewhere.
    struct Bucket {
        std::int64_t lowest_ns;
        std::int64_t highest_ns;
        std::uint64_t count;
    };
    [[nodiscard]] std::vector<Bucket> buckets() const;

    // HdrHistogram's counts array, for its encodings (hdr.hpp): counts()[i]
    // counts the values of the bucket whose lowest value is value_at_index(i);
    // index_for(v) is the index of v's bucket (v clamped to 0..kHighestNs).
    // The array, bucket_count() and sub_bucket_count() are Java HdrHistogram's
    // for Histogram(kLowestNs, kHighestNs, kSignificantDigits).
    [[nodiscard]] std::span<const std::uint64_t> counts() const noexcept { return counts_; }
    [[nodiscard]] std::size_t index_for(std::int64_t value_ns) const noexcept;
    [[nodiscard]] std::int64_t value_at_index(std::size_t index) const noexcept {
        return value_from_index(index);
    }
    [[nodiscard]] int bucket_count() const noexcept { return bucket_count_; }
    [[nodiscard]] std::int64_t sub_bucket_count() const noexcept { return sub_bucket_count_; }

  private:
    [[nodiscard]] std::size_t index_of(std::int64_t value) const noexcept;
    [[nodiscard]] std::int64_t value_from_index(std::size_t index) const noexcept;
    [[nodiscard]] std::int64_t size_of_range(std::int64_t value) const noexcept;

    int unit_magnitude_;
    int sub_bucket_half_count_magnitude_;
    std::int64_t sub_bucket_count_;
    std::int64_t sub_bucket_half_count_;
    std::int64_t sub_bucket_mask_;
    int bucket_count_;
    std::vector<std::uint64_t> counts_;
    std::uint64_t total_ = 0;
    std::uint64_t saturated_ = 0;
    std::int64_t min_ = 0;
    std::int64_t max_ = 0;
};

}  // namespace sm::loadgen
