#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sm::loadgen {

Histogram::Histogram() {
    // HdrHistogram's layout: 2 * 10^digits values at unit resolution in the
    // first bucket, each later bucket doubling the range at half the resolution.
    const std::int64_t single_unit_range =
        2 * static_cast<std::int64_t>(std::pow(10, kSignificantDigits));
    const int sub_bucket_count_magnitude =
        static_cast<int>(std::ceil(std::log2(static_cast<double>(single_unit_range))));
    sub_bucket_half_count_magnitude_ = std::max(sub_bucket_count_magnitude, 1) - 1;
    unit_magnitude_ = static_cast<int>(std::floor(std::log2(static_cast<double>(kLowestNs))));
    sub_bucket_count_ = std::int64_t{1} << (sub_bucket_half_count_magnitude_ + 1);
    sub_bucket_half_count_ = sub_bucket_count_ / 2;
    sub_bucket_mask_ = (sub_bucket_count_ - 1) << unit_magnitude_;
    std::int64_t smallest_untrackable = sub_bucket_count_ << unit_magnitude_;
    int buckets = 1;
    while (smallest_untrackable <= kHighestNs) {
        smallest_untrackable <<= 1;
        ++buckets;
    }
    bucket_count_ = buckets;
    counts_.assign(static_cast<std::size_t>((bucket_count_ + 1) * sub_bucket_half_count_), 0);
}

std::size_t Histogram::index_of(std::int64_t value) const noexcept {
    const auto v = static_cast<std::uint64_t>(value);
    const int pow2_ceiling =
        64 - std::countl_zero(v | static_cast<std::uint64_t>(sub_bucket_mask_));
    const int bucket = pow2_ceiling - unit_magnitude_ - (sub_bucket_half_count_magnitude_ + 1);
    const std::int64_t sub_bucket = value >> (bucket + unit_magnitude_);
    const std::int64_t base = static_cast<std::int64_t>(bucket + 1)
                              << sub_bucket_half_count_magnitude_;
    return static_cast<std::size_t>(base + (sub_bucket - sub_bucket_half_count_));
}

std::int64_t Histogram::value_from_index(std::size_t index) const noexcept {
    const auto i = static_cast<std::int64_t>(index);
    int bucket = static_cast<int>(i >> sub_bucket_half_count_magnitude_) - 1;
    std::int64_t sub_bucket = (i & (sub_bucket_half_count_ - 1)) + sub_bucket_half_count_;
    if (bucket < 0) {
        sub_bucket -= sub_bucket_half_count_;
        bucket = 0;
    }
    return sub_bucket << (bucket + unit_magnitude_);
}

std::int64_t Histogram::size_of_range(std::int64_t value) const noexcept {
    const auto v = static_cast<std::uint64_t>(value);
    const int pow2_ceiling =
        64 - std::countl_zero(v | static_cast<std::uint64_t>(sub_bucket_mask_));
    const int bucket = pow2_ceiling - unit_magnitude_ - (sub_bucket_half_count_magnitude_ + 1);
    const std::int64_t sub_bucket = value >> (bucket + unit_magnitude_);
    const int adjusted = sub_bucket >= sub_bucket_count_ ? bucket + 1 : bucket;
    return std::int64_t{1} << (unit_magnitude_ + adjusted);
}

std::size_t Histogram::index_for(std::int64_t value_ns) const noexcept {
    return index_of(std::clamp<std::int64_t>(value_ns, 0, kHighestNs));
}

std::int64_t Histogram::lowest_equivalent(std::int64_t value_ns) const noexcept {
    return value_from_index(index_for(value_ns));
}

std::int64_t Histogram::highest_equivalent(std::int64_t value_ns) const noexcept {
    const std::int64_t low = lowest_equivalent(value_ns);
    return low + size_of_range(low) - 1;
}

std::int64_t Histogram::median_equivalent(std::int64_t value_ns) const noexcept {
    const std::int64_t low = lowest_equivalent(value_ns);
    return low + (size_of_range(low) >> 1);
}

void Histogram::record_n(std::int64_t value_ns, std::uint64_t n) noexcept {
    if (n == 0) return;
    if (value_ns < 0) value_ns = 0;
    if (value_ns > kHighestNs) {
        value_ns = kHighestNs;
        saturated_ += n;
    }
    counts_[index_of(value_ns)] += n;
    if (total_ == 0 || value_ns < min_) min_ = value_ns;
    if (value_ns > max_) max_ = value_ns;
    total_ += n;
}

void Histogram::merge(const Histogram& other) noexcept {
    if (other.total_ == 0) return;
    for (std::size_t i = 0; i < counts_.size(); ++i)
        counts_[i] += other.counts_[i];
    if (total_ == 0 || other.min_ < min_) min_ = other.min_;
    max_ = std::max(max_, other.max_);
    total_ += other.total_;
    saturated_ += other.saturated_;
}

void Histogram::reset() noexcept {
    // Only the buckets from the minimum's to the maximum's can hold counts:
    // an interval histogram (--hlog) is emptied at the cost of what it held.
    if (total_)
        std::fill(counts_.begin() + static_cast<std::ptrdiff_t>(index_of(min_)),
                  counts_.begin() + static_cast<std::ptrdiff_t>(index_of(max_)) + 1, 0);
    total_ = saturated_ = 0;
    min_ = max_ = 0;
}

double Histogram::mean() const noexcept {
    if (total_ == 0) return 0;
    double sum = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i)
        if (counts_[i])
            sum += static_cast<double>(median_equivalent(value_from_index(i))) *
                   static_cast<double>(counts_[i]);
    return sum / static_cast<double>(total_);
}

double Histogram::stddev() const noexcept {
    if (total_ == 0) return 0;
    const double m = mean();
    double sum = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        if (!counts_[i]) continue;
        const double d = static_cast<double>(median_equivalent(value_from_index(i))) - m;
        sum += d * d * static_cast<double>(counts_[i]);
    }
    return std::sqrt(sum / static_cast<double>(total_));
}

std::int64_t Histogram::value_at_percentile(double percentile) const noexcept {
    if (total_ == 0) return 0;
    const double p = std::clamp(percentile, 0.0, 100.0);
    auto wanted = static_cast<std::uint64_t>(p / 100.0 * static_cast<double>(total_) + 0.5);
    wanted = std::max<std::uint64_t>(wanted, 1);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        cumulative += counts_[i];
        if (cumulative >= wanted) {
            const std::int64_t v = value_from_index(i);
            return p == 0.0 ? lowest_equivalent(v) : highest_equivalent(v);
        }
    }
    return highest_equivalent(max_);
}

std::vector<Histogram::Step> Histogram::spectrum(int ticks_per_half_distance) const {
    std::vector<Step> steps;
    if (total_ == 0) return steps;
    ticks_per_half_distance = std::max(ticks_per_half_distance, 1);
    double level = 0;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        if (!counts_[i]) continue;
        cumulative += counts_[i];
        const double reached =
            100.0 * static_cast<double>(cumulative) / static_cast<double>(total_);
        if (reached < level && cumulative != total_) continue;
        steps.push_back({reached, highest_equivalent(value_from_index(i)), cumulative});
        if (cumulative == total_) break;
        // The next level to report: finer steps the closer it gets to 100%.
        // Some 250 levels from 0 the increment falls below a double's
        // resolution just under 100 and the level stops moving: stop there
        // (every later bucket becomes a step) instead of spinning forever. The
        // last bucket, at exactly 100%, never gets here.
        while (level <= reached && level < 100.0) {
            const double half_distance =
                std::exp2(std::floor(std::log2(100.0 / (100.0 - level))) + 1);
            const double next = level + 100.0 / (ticks_per_half_distance * half_distance);
            if (next <= level) break;
            level = next;
        }
    }
    return steps;
}

std::vector<Histogram::Bucket> Histogram::buckets() const {
    std::vector<Bucket> out;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        if (!counts_[i]) continue;
        const std::int64_t low = value_from_index(i);
        out.push_back({low, low + size_of_range(low) - 1, counts_[i]});
    }
    return out;
}

}  // namespace sm::loadgen
