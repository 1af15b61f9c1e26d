// HdrHistogram's standard formats for loadgen's histograms, as Java
// HdrHistogram (2.1.x) writes them, so its own tools read loadgen's files:
// - the V2 encoding of a histogram (compressed: zlib, then base64), one per
//   line of the interval log ("hlog", HistogramLogWriter's format 1.3) that
//   HistogramLogProcessor and the plotters read;
// - the percentile distribution text ("hgrm", outputPercentileDistribution),
//   as wrk2 --latency prints it.
// Histogram has HdrHistogram's layout for (1000, 60e9, 3 digits): its counts
// array is Java's, index for index, so the encoding is Java's byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "histogram.hpp"

namespace sm::loadgen::hdr {

// The V2 encoding's cookies (Java: V2EncodingCookieBase | 0x10, and the
// compressed one).
inline constexpr std::uint32_t kEncodingCookie = 0x1c849313;
inline constexpr std::uint32_t kCompressedEncodingCookie = 0x1c849314;

// RFC 4648 base64 with padding, no line breaks.
std::string base64(std::span<const std::uint8_t> bytes);

// HdrHistogram's ZigZagEncoding.putLong: ZigZag, then LEB128 with at most 9
// bytes (the ninth carries 8 bits).
void put_zigzag(std::vector<std::uint8_t>& out, std::int64_t value);

// The uncompressed V2 encoding (big-endian): cookie, payload length,
// normalizing index offset (0), significant digits, lowest discernible value,
// highest trackable value, integer-to-double ratio (1.0), then the counts
// array up to the maximum's index, each count ZigZag-encoded and a run of N > 1
// zero counts as -N (Java: encodeIntoByteBuffer).
std::vector<std::uint8_t> encode(const Histogram& h);

// The compressed V2 encoding: cookie, length of what follows, then encode()
// deflated with a zlib header at the best compression (Java's
// HistogramLogWriter: encodeIntoCompressedByteBuffer(buffer, 9)).
std::vector<std::uint8_t> encode_compressed(const Histogram& h);

// "12.345": `ns` in milliseconds to 3 decimals, rounded half up (Java's %.3f
// of ns / 1e6).
std::string format_ms(std::int64_t ns);

// "1764907200.250": `ns` in seconds to 3 decimals, rounded half up (the
// log's times, Java's %.3f of seconds).
std::string format_seconds(std::int64_t ns);

// Java's String.format("%.<decimals>f", value): the shortest decimal digits
// that read back as `value` (Double.toString's), rounded half up, so a tie
// in those digits rounds up where printf's exact binary value may not.
std::string java_fixed(double value, int decimals);

// What Java's h.outputPercentileDistribution(out, ticks, unit_ratio) prints:
// the "Value Percentile TotalCount 1/(1-Percentile)" table, a row per
// percentile level reached (HdrHistogram's percentile iteration), and the
// #[Mean ...], #[Max ...], #[Buckets ...] footer; values divided by
// `unit_ratio` (1e6: nanoseconds to milliseconds).
std::string percentile_distribution(const Histogram& h, int ticks_per_half_distance = 5,
                                    double unit_ratio = 1e6);

// The counts one load thread recorded in one interval of one series of the
// interval log: its non-zero buckets, (index in the counts array, count).
struct IntervalCounts {
    std::uint64_t interval = 0;
    std::uint8_t series = 0;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> counts;
};

// Takes what `h` holds as interval `interval` of `series` and empties it;
// one allocation.
IntervalCounts take_interval(Histogram& h, std::uint64_t interval, std::uint8_t series);

// What the interval log covers.
struct LogSpec {
    std::int64_t base_time_ns = 0;  // CLOCK_REALTIME, ns since the epoch: StartTime and BaseTime
    std::int64_t interval_ns = 1'000'000'000;
    std::int64_t window_ns = 0;     // the measured window: intervals cover [0, window_ns)
    std::vector<std::string> tags;  // one per series, in line order; "" writes untagged lines
};

// The interval log: the #[Histogram log format version 1.3], #[StartTime],
// #[BaseTime] and legend lines, then a line per interval and series (by time,
// then series): [Tag=T,]StartTimestamp,Interval_Length,Interval_Max,histogram.
// Interval i covers [i * interval_ns, (i + 1) * interval_ns) relative to
// BaseTime, the last one cut at window_ns; an interval without counts still
// gets its line (an empty histogram). The counts of `intervals` with the same
// interval and series (from several threads) are added.
std::string interval_log(const LogSpec& spec, std::vector<IntervalCounts> intervals);

}  // namespace sm::loadgen::hdr
