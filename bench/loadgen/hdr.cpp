#include "hdr.hpp"

#include <fmt/core.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <ctime>
#include <stdexcept>

namespace sm::loadgen::hdr {
namespace {

void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(v >> shift));
}

void put_be64(std::vector<std::uint8_t>& out, std::uint64_t v) {
    for (int shift = 56; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(v >> shift));
}

void set_be32(std::vector<std::uint8_t>& out, std::size_t at, std::uint32_t v) {
    for (std::size_t i = 0; i < 4; ++i)
        out[at + i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

// "Fri Dec 05 04:00:00 UTC 2025": Java's Date.toString() in UTC, without
// the locale's names.
std::string java_date_utc(std::int64_t epoch_ns) {
    static constexpr std::array<const char*, 7> kDays = {"Sun", "Mon", "Tue", "Wed",
                                                         "Thu", "Fri", "Sat"};
    static constexpr std::array<const char*, 12> kMonths = {
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const std::int64_t s =
        epoch_ns >= 0 ? epoch_ns / 1'000'000'000 : -((-epoch_ns + 999'999'999) / 1'000'000'000);
    const auto t = static_cast<std::time_t>(s);
    std::tm tm{};
    if (!::gmtime_r(&t, &tm)) return "?";
    return fmt::format("{} {} {:02} {:02}:{:02}:{:02} UTC {}",
                       kDays[static_cast<std::size_t>(tm.tm_wday) % 7],
                       kMonths[static_cast<std::size_t>(tm.tm_mon) % 12], tm.tm_mday, tm.tm_hour,
                       tm.tm_min, tm.tm_sec, tm.tm_year + 1900);
}

// Java PercentileIterator's next level: ticks_per_half_distance steps in
// each half of the distance left to 100%. floor(log2(100 / (100 - level)))
// made exact at the powers of two, where Java's log(x) / log(2) is exact.
double next_percentile_level(double level, int ticks_per_half_distance) {
    const double x = 100.0 / (100.0 - level);
    auto k = static_cast<std::int64_t>(std::floor(std::log(x) / std::log(2.0)));
    k = std::clamp<std::int64_t>(k, 0, 60);
    if (k < 60 && std::ldexp(1.0, static_cast<int>(k + 1)) <= x) ++k;
    if (k > 0 && std::ldexp(1.0, static_cast<int>(k)) > x) --k;
    const std::int64_t ticks = ticks_per_half_distance * (std::int64_t{1} << (k + 1));
    return level + 100.0 / static_cast<double>(ticks);
}

}  // namespace

std::string java_fixed(double value, int decimals) {
    // The shortest digits that read back as `value` ("d.ddde-XX"), rounded
    // half up at `decimals` as decimal digits.
    char buf[64];
    const auto [end, ec] =
        std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    if (ec != std::errc{}) return fmt::format("{:.{}f}", value, decimals);
    std::string_view text(buf, static_cast<std::size_t>(end - buf));
    const bool negative = !text.empty() && text.front() == '-';
    if (negative) text.remove_prefix(1);
    const auto e = text.find('e');
    if (e == std::string_view::npos) return fmt::format("{:.{}f}", value, decimals);
    std::string digits;
    for (const char ch : text.substr(0, e))
        if (ch != '.') digits += ch;
    int exponent = 0;
    std::string_view exp_text = text.substr(e + 1);
    if (!exp_text.empty() && exp_text.front() == '+') exp_text.remove_prefix(1);
    std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
    // digits = d1 d2 ... with the point after `point` of them.
    int point = exponent + 1;
    if (point < 0) {  // leading zeros after the point
        digits.insert(0, static_cast<std::size_t>(-point), '0');
        point = 0;
    }
    const auto keep = static_cast<std::size_t>(point + decimals);
    if (digits.size() < keep) digits.append(keep - digits.size(), '0');
    if (digits.size() > keep) {
        const bool up = digits[keep] >= '5';
        digits.resize(keep);
        if (up) {
            std::size_t i = keep;
            while (i > 0 && digits[i - 1] == '9')
                digits[--i] = '0';
            if (i == 0) {
                digits.insert(0, 1, '1');
                ++point;
            } else {
                ++digits[i - 1];
            }
        }
    }
    const auto whole = static_cast<std::size_t>(point);
    std::string out;
    out.reserve(digits.size() + 3);
    if (negative) out += '-';
    if (whole)
        out.append(digits, 0, whole);
    else
        out += '0';
    if (decimals > 0) {
        out += '.';
        out.append(digits, whole);
    }
    return out;
}

std::string base64(std::span<const std::uint8_t> bytes) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t v =
            (std::uint32_t{bytes[i]} << 16) | (std::uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (const std::size_t left = bytes.size() - i; left > 0) {
        std::uint32_t v = std::uint32_t{bytes[i]} << 16;
        if (left == 2) v |= std::uint32_t{bytes[i + 1]} << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

void put_zigzag(std::vector<std::uint8_t>& out, std::int64_t value) {
    auto v = (static_cast<std::uint64_t>(value) << 1) ^ static_cast<std::uint64_t>(value >> 63);
    for (int i = 0; i < 8; ++i) {
        if ((v >> 7) == 0) {
            out.push_back(static_cast<std::uint8_t>(v));
            return;
        }
        out.push_back(static_cast<std::uint8_t>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(v));  // the ninth byte: the last 8 bits
}

std::vector<std::uint8_t> encode(const Histogram& h) {
    std::vector<std::uint8_t> out;
    out.reserve(64);
    put_be32(out, kEncodingCookie);
    put_be32(out, 0);  // the payload's length, set below
    put_be32(out, 0);  // normalizingIndexOffset
    put_be32(out, static_cast<std::uint32_t>(Histogram::kSignificantDigits));
    put_be64(out, static_cast<std::uint64_t>(Histogram::kLowestNs));
    put_be64(out, static_cast<std::uint64_t>(Histogram::kHighestNs));
    put_be64(out, std::bit_cast<std::uint64_t>(1.0));  // integerToDoubleValueConversionRatio
    const std::size_t payload = out.size();
    const auto counts = h.counts();
    // Up to the maximum's bucket (an empty histogram: the first, 0).
    const std::size_t limit = std::min(h.index_for(h.max()) + 1, counts.size());
    for (std::size_t i = 0; i < limit;) {
        const std::uint64_t count = counts[i++];
        if (count == 0) {
            std::int64_t zeros = 1;
            while (i < limit && counts[i] == 0) {
                ++zeros;
                ++i;
            }
            put_zigzag(out, zeros > 1 ? -zeros : 0);
        } else {
            put_zigzag(out, static_cast<std::int64_t>(count));
        }
    }
    set_be32(out, 4, static_cast<std::uint32_t>(out.size() - payload));
    return out;
}

std::vector<std::uint8_t> encode_compressed(const Histogram& h) {
    const std::vector<std::uint8_t> raw = encode(h);
    uLongf size = ::compressBound(static_cast<uLong>(raw.size()));
    std::vector<std::uint8_t> out(8 + size);
    if (::compress2(out.data() + 8, &size, raw.data(), static_cast<uLong>(raw.size()),
                    Z_BEST_COMPRESSION) != Z_OK)
        throw std::runtime_error("zlib compress2 failed");
    out.resize(8 + size);
    set_be32(out, 0, kCompressedEncodingCookie);
    set_be32(out, 4, static_cast<std::uint32_t>(size));
    return out;
}

std::string format_ms(std::int64_t ns) {
    const bool negative = ns < 0;
    const auto a = static_cast<std::uint64_t>(negative ? -ns : ns);
    const std::uint64_t us = (a + 500) / 1000;  // half up, as Java's %.3f
    return fmt::format("{}{}.{:03}", negative ? "-" : "", us / 1000, us % 1000);
}

std::string format_seconds(std::int64_t ns) {
    // Half up at the millisecond: (ns / 1000 + 500) / 1000 rounds as (ns + 500000) / 1e6.
    return format_ms(ns / 1000);
}

std::string percentile_distribution(const Histogram& h, int ticks_per_half_distance,
                                    double unit_ratio) {
    ticks_per_half_distance = std::max(ticks_per_half_distance, 1);
    std::string out = fmt::format("{:>12} {:>14} {:>10} {:>14}\n\n", "Value", "Percentile",
                                  "TotalCount", "1/(1-Percentile)");
    const std::uint64_t total = h.count();
    // Java's PercentileIterator: at each non-empty bucket, a row for every
    // level its cumulative percentile reaches; once every count is reached,
    // one row for that level and a last one at 100%.
    double level = 0;
    std::uint64_t cumulative = 0;
    // Java's "%12.3f %2.12f %10d %14.2f" (the last row without the last column).
    const auto row = [&](std::int64_t value, double at) {
        const double fraction = at / 100.0;
        out += fmt::format("{:>12} {:>2} {:>10}",
                           java_fixed(static_cast<double>(value) / unit_ratio, 3),
                           java_fixed(fraction, 12), cumulative);
        if (at != 100.0) out += fmt::format(" {:>14}", java_fixed(1.0 / (1.0 - fraction), 2));
        out += '\n';
    };
    for (const Histogram::Bucket& b : h.buckets()) {
        cumulative += b.count;
        const double reached = 100.0 * static_cast<double>(cumulative) / static_cast<double>(total);
        bool last = false;
        while (reached >= level) {
            row(b.highest_ns, level);
            if (cumulative == total) {
                last = true;
                break;
            }
            const double next = next_percentile_level(level, ticks_per_half_distance);
            if (next <= level) break;  // a double's resolution: never loops forever
            level = next;
        }
        if (last) {
            row(b.highest_ns, 100.0);
            break;
        }
    }
    const std::int64_t max = total ? h.highest_equivalent(h.max()) : 0;
    out +=
        fmt::format("#[Mean    = {:>12}, StdDeviation   = {:>12}]\n",
                    java_fixed(h.mean() / unit_ratio, 3), java_fixed(h.stddev() / unit_ratio, 3));
    out += fmt::format("#[Max     = {:>12}, Total count    = {:>12}]\n",
                       java_fixed(static_cast<double>(max) / unit_ratio, 3), total);
    out += fmt::format("#[Buckets = {:12}, SubBuckets     = {:12}]\n", h.bucket_count(),
                       h.sub_bucket_count());
    return out;
}

IntervalCounts take_interval(Histogram& h, std::uint64_t interval, std::uint8_t series) {
    IntervalCounts taken{interval, series, {}};
    if (h.count() == 0) return taken;
    const auto counts = h.counts();
    const std::size_t first = h.index_for(h.min());
    const std::size_t last = h.index_for(h.max());
    std::size_t nonzero = 0;
    for (std::size_t i = first; i <= last; ++i)
        nonzero += counts[i] ? 1 : 0;
    taken.counts.reserve(nonzero);
    for (std::size_t i = first; i <= last; ++i)
        if (counts[i]) taken.counts.emplace_back(static_cast<std::uint32_t>(i), counts[i]);
    h.reset();
    return taken;
}

std::string interval_log(const LogSpec& spec, std::vector<IntervalCounts> intervals) {
    const std::int64_t length = std::max<std::int64_t>(spec.interval_ns, 1);
    const std::int64_t window = std::max<std::int64_t>(spec.window_ns, 0);
    std::uint64_t n = static_cast<std::uint64_t>((window + length - 1) / length);
    for (const IntervalCounts& c : intervals)
        if (!c.counts.empty()) n = std::max(n, c.interval + 1);
    std::sort(intervals.begin(), intervals.end(), [](const auto& a, const auto& b) {
        return a.interval != b.interval ? a.interval < b.interval : a.series < b.series;
    });
    std::string out = "#[Histogram log format version 1.3]\n";
    out += fmt::format("#[StartTime: {} (seconds since epoch), {}]\n",
                       format_seconds(spec.base_time_ns), java_date_utc(spec.base_time_ns));
    out +=
        fmt::format("#[BaseTime: {} (seconds since epoch)]\n", format_seconds(spec.base_time_ns));
    out +=
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_"
        "Histogram\"\n";
    Histogram h;
    auto next = intervals.begin();
    for (std::uint64_t i = 0; i < n; ++i) {
        const auto start = static_cast<std::int64_t>(i) * length;
        const std::int64_t span =
            std::max<std::int64_t>(std::min(start + length, window) - start, 0);
        for (std::size_t s = 0; s < spec.tags.size(); ++s) {
            h.reset();
            for (; next != intervals.end() && next->interval == i && next->series == s; ++next)
                for (const auto& [index, count] : next->counts)
                    h.record_n(h.value_at_index(index), count);
            const std::int64_t max = h.count() ? h.highest_equivalent(h.max()) : 0;
            if (!spec.tags[s].empty()) out += fmt::format("Tag={},", spec.tags[s]);
            out += fmt::format("{},{},{},{}\n", format_seconds(start), format_seconds(span),
                               format_ms(max), base64(encode_compressed(h)));
        }
        // Counts of a series beyond the tags (none by construction) are dropped.
        while (next != intervals.end() && next->interval == i)
            ++next;
    }
    return out;
}

}  // namespace sm::loadgen::hdr
