// HdrHistogram's formats (bench/loadgen/hdr.hpp) against what Java
// HdrHistogram 2.1.11 writes for the same values: the V2 encoding byte for
// byte (decoded back here with zlib's uncompress), ZigZag LEB128, base64, the
// percentile distribution text character for character, and the interval
// log's lines. The Java vectors were made with /usr/share/java/hdrhistogram.jar
// (Histogram(1000, 60e9, 3), encodeIntoByteBuffer, HistogramLogWriter,
// outputPercentileDistribution(out, 5, 1e6)).
#include <zlib.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "hdr.hpp"
#include "histogram.hpp"

using sm::loadgen::Histogram;
namespace hdr = sm::loadgen::hdr;

namespace {

std::vector<std::uint8_t> from_hex(std::string_view hex) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(
            static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    return out;
}

std::string to_hex(const std::vector<std::uint8_t>& bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (const std::uint8_t b : bytes) {
        out += kDigits[b >> 4];
        out += kDigits[b & 15];
    }
    return out;
}

std::vector<std::uint8_t> from_base64(std::string_view text) {
    const std::string_view alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<std::uint8_t> out;
    std::uint32_t acc = 0;
    int bits = 0;
    for (const char ch : text) {
        if (ch == '=') break;
        const auto v = alphabet.find(ch);
        REQUIRE(v != std::string_view::npos);
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<std::uint8_t>(acc >> bits));
        }
    }
    return out;
}

std::uint64_t be(const std::vector<std::uint8_t>& b, std::size_t at, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
        v = (v << 8) | b[at + i];
    return v;
}

// The uncompressed V2 encoding inside a compressed one (cookie, length, zlib).
std::vector<std::uint8_t> uncompressed(const std::vector<std::uint8_t>& compressed) {
    REQUIRE(compressed.size() > 8);
    CHECK(be(compressed, 0, 4) == hdr::kCompressedEncodingCookie);
    REQUIRE(be(compressed, 4, 4) == compressed.size() - 8);
    CHECK(compressed[8] == 0x78);  // a zlib header (Java's Deflater), best compression
    CHECK(compressed[9] == 0xda);
    std::vector<std::uint8_t> out(1 << 20);
    uLongf size = out.size();
    REQUIRE(::uncompress(out.data(), &size, compressed.data() + 8,
                         static_cast<uLong>(compressed.size() - 8)) == Z_OK);
    out.resize(size);
    return out;
}

// The counts array a V2 encoding carries, after checking its header.
std::vector<std::uint64_t> decode_counts(const std::vector<std::uint8_t>& raw) {
    REQUIRE(raw.size() >= 40);
    CHECK(be(raw, 0, 4) == hdr::kEncodingCookie);
    CHECK(be(raw, 4, 4) == raw.size() - 40);  // payload length
    CHECK(be(raw, 8, 4) == 0);                // normalizingIndexOffset
    CHECK(be(raw, 12, 4) == 3);               // significant digits
    CHECK(be(raw, 16, 8) == 1000);            // lowestDiscernibleValue
    CHECK(be(raw, 24, 8) == 60'000'000'000);  // highestTrackableValue
    double ratio = 0;
    const std::uint64_t ratio_bits = be(raw, 32, 8);
    std::memcpy(&ratio, &ratio_bits, sizeof ratio);
    CHECK(ratio == 1.0);
    std::vector<std::uint64_t> counts;
    for (std::size_t i = 40; i < raw.size();) {
        std::uint64_t v = 0;
        int shift = 0;
        for (int n = 0; n < 9; ++n) {
            const std::uint8_t b = raw[i++];
            if (n == 8) {
                v |= std::uint64_t{b} << 56;
                break;
            }
            v |= std::uint64_t{b & 0x7fu} << shift;
            shift += 7;
            if (!(b & 0x80)) break;
        }
        const auto value = static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
        if (value < 0)
            counts.insert(counts.end(), static_cast<std::size_t>(-value), 0);
        else
            counts.push_back(static_cast<std::uint64_t>(value));
    }
    return counts;
}

// The histogram of the Java vectors.
Histogram known() {
    Histogram h;
    for (const std::int64_t v :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{511}, std::int64_t{512},
          std::int64_t{1000}, std::int64_t{2047 * 512}, std::int64_t{123456}, std::int64_t{123456},
          std::int64_t{1'000'000}, std::int64_t{5'000'000'000}, std::int64_t{60'000'000'000}})
        h.record(v);
    h.record_n(777'777, 300);
    return h;
}

constexpr std::string_view kKnownEncoding =
    "1c84931300000016000000000000000300000000000003e80000000df84758003ff00000000000000604dd0304"
    "f913d804e10602b90102cfc20102a53902";

// Java: known().outputPercentileDistribution(System.out, 5, 1e6).
constexpr std::string_view kKnownDistribution =
    R"(       Value     Percentile TotalCount 1/(1-Percentile)

       0.001 0.000000000000          3           1.00
       0.778 0.100000000000        307           1.11
       0.778 0.200000000000        307           1.25
       0.778 0.300000000000        307           1.43
       0.778 0.400000000000        307           1.67
       0.778 0.500000000000        307           2.00
       0.778 0.550000000000        307           2.22
       0.778 0.600000000000        307           2.50
       0.778 0.650000000000        307           2.86
       0.778 0.700000000000        307           3.33
       0.778 0.750000000000        307           4.00
       0.778 0.775000000000        307           4.44
       0.778 0.800000000000        307           5.00
       0.778 0.825000000000        307           5.71
       0.778 0.850000000000        307           6.67
       0.778 0.875000000000        307           8.00
       0.778 0.887500000000        307           8.89
       0.778 0.900000000000        307          10.00
       0.778 0.912500000000        307          11.43
       0.778 0.925000000000        307          13.33
       0.778 0.937500000000        307          16.00
       0.778 0.943750000000        307          17.78
       0.778 0.950000000000        307          20.00
       0.778 0.956250000000        307          22.86
       0.778 0.962500000000        307          26.67
       0.778 0.968750000000        307          32.00
       0.778 0.971875000000        307          35.56
       0.778 0.975000000000        307          40.00
       0.778 0.978125000000        307          45.71
       0.778 0.981250000000        307          53.33
       0.778 0.984375000000        307          64.00
       0.778 0.985937500000        307          71.11
       1.000 0.987500000000        308          80.00
       1.000 0.989062500000        308          91.43
       1.049 0.990625000000        309         106.67
       1.049 0.992187500000        309         128.00
       1.049 0.992968750000        309         142.22
    5003.805 0.993750000000        310         160.00
    5003.805 0.994531250000        310         182.86
    5003.805 0.995312500000        310         213.33
    5003.805 0.996093750000        310         256.00
    5003.805 0.996484375000        310         284.44
   60028.879 0.996875000000        311         320.00
   60028.879 1.000000000000        311
#[Mean    =      209.805, StdDeviation   =     3408.322]
#[Max     =    60028.879, Total count    =          311]
#[Buckets =           17, SubBuckets     =         2048]
)";

}  // namespace

TEST_CASE("hdr base64 is RFC 4648's, with padding", "[hdr]") {
    const auto b64 = [](std::string_view s) {
        return hdr::base64({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
    };
    CHECK(b64("") == "");
    CHECK(b64("f") == "Zg==");
    CHECK(b64("fo") == "Zm8=");
    CHECK(b64("foo") == "Zm9v");
    CHECK(b64("foob") == "Zm9vYg==");
    CHECK(b64("fooba") == "Zm9vYmE=");
    CHECK(b64("foobar") == "Zm9vYmFy");
    const std::vector<std::uint8_t> high = {0xff, 0xfe, 0xfd, 0x00};
    CHECK(hdr::base64(high) == "//79AA==");
    // The compressed cookie is what makes every hlog histogram start "HISTF".
    CHECK(hdr::base64(from_hex("1c849314")).substr(0, 5) == "HISTF");
}

TEST_CASE("hdr ZigZag LEB128 is HdrHistogram's ZigZagEncoding.putLong", "[hdr]") {
    // Java's bytes for each value.
    const std::pair<std::int64_t, std::string_view> cases[] = {
        {0, "00"},
        {-1, "01"},
        {1, "02"},
        {63, "7e"},
        {-64, "7f"},
        {64, "8001"},
        {8191, "fe7f"},
        {-8192, "ff7f"},
        {-4292, "8743"},
        {std::int64_t{1} << 55, "808080808080808001"},
        {std::int64_t{1} << 56, "808080808080808002"},
        {INT64_MAX, "feffffffffffffffff"},  // the ninth byte carries 8 bits
        {INT64_MIN, "ffffffffffffffffff"},
    };
    for (const auto& [value, hex] : cases) {
        INFO(value);
        std::vector<std::uint8_t> out;
        hdr::put_zigzag(out, value);
        CHECK(to_hex(out) == hex);
    }
}

TEST_CASE("hdr encode writes Java's V2 encoding byte for byte", "[hdr]") {
    CHECK(to_hex(hdr::encode(known())) == kKnownEncoding);
    // Empty: the counts up to index 0, one zero count.
    CHECK(to_hex(hdr::encode(Histogram{})) ==
          "1c84931300000001000000000000000300000000000003e80000000df84758003ff000000000000000");
    // A count past 2^35 after a run of 4292 zeros.
    Histogram big;
    big.record_n(5'000'000, std::uint64_t{1} << 40);
    CHECK(to_hex(hdr::encode(big)) ==
          "1c84931300000008000000000000000300000000000003e80000000df84758003ff00000000000008743"
          "808080808040");
}

TEST_CASE("hdr encode_compressed inflates to the V2 encoding, and its counts are the histogram's",
          "[hdr]") {
    const Histogram h = known();
    const auto compressed = hdr::encode_compressed(h);
    const auto raw = uncompressed(compressed);
    CHECK(to_hex(raw) == kKnownEncoding);
    const auto counts = decode_counts(raw);
    const auto mine = h.counts();
    REQUIRE(counts.size() == h.index_for(h.max()) + 1);
    for (std::size_t i = 0; i < mine.size(); ++i) {
        INFO(i);
        CHECK(mine[i] == (i < counts.size() ? counts[i] : 0));
    }
    // As HistogramLogWriter writes it (Java's own zlib, level 9): "HISTF" and
    // the same inflated bytes (the deflate stream itself may differ by zlib).
    const std::string java =
        "HISTFAAAADh42pNpmSzMwMAgxgABzFDqBZDg/eEewWD/ASLCxnKXmeWn8A2Wh2xMOxmZzh9iZFpqyQQAIN4MDQ==";
    CHECK(to_hex(uncompressed(from_base64(java))) == kKnownEncoding);
    CHECK(hdr::base64(compressed).substr(0, 5) == "HISTF");
}

TEST_CASE("hdr java_fixed rounds as Java's %.Nf: half up on the shortest digits", "[hdr]") {
    CHECK(hdr::java_fixed(0.0005, 3) == "0.001");
    CHECK(hdr::java_fixed(1.0005, 3) == "1.001");  // printf: 1.000 (the binary value is below)
    CHECK(hdr::java_fixed(9.9996, 3) == "10.000");
    CHECK(hdr::java_fixed(0.0, 3) == "0.000");
    CHECK(hdr::java_fixed(0.0, 12) == "0.000000000000");
    CHECK(hdr::java_fixed(123456.789, 2) == "123456.79");
    CHECK(hdr::java_fixed(123456.789, 0) == "123457");
    CHECK(hdr::java_fixed(1e-7, 12) == "0.000000100000");
    CHECK(hdr::java_fixed(99.97802734375 / 100.0, 12) == "0.999780273438");
    CHECK(hdr::java_fixed(2.675, 2) == "2.68");
    CHECK(hdr::java_fixed(1e20 / 3, 3) == "33333333333333330000.000");
}

TEST_CASE("hdr format_ms and format_seconds round half up to 3 decimals", "[hdr]") {
    CHECK(hdr::format_ms(0) == "0.000");
    CHECK(hdr::format_ms(499) == "0.000");
    CHECK(hdr::format_ms(500) == "0.001");
    CHECK(hdr::format_ms(60'028'878'847) == "60028.879");
    CHECK(hdr::format_seconds(0) == "0.000");
    CHECK(hdr::format_seconds(499'999) == "0.000");
    CHECK(hdr::format_seconds(500'000) == "0.001");
    CHECK(hdr::format_seconds(1'764'907'200'250'000'000) == "1764907200.250");
    CHECK(hdr::format_seconds(1'764'907'200'999'600'000) == "1764907201.000");
}

TEST_CASE("hdr percentile_distribution prints what Java's outputPercentileDistribution does",
          "[hdr]") {
    CHECK(hdr::percentile_distribution(known(), 5, 1e6) == kKnownDistribution);
    // Empty: the header and the footer.
    CHECK(hdr::percentile_distribution(Histogram{}, 5, 1e6) ==
          "       Value     Percentile TotalCount 1/(1-Percentile)\n\n"
          "#[Mean    =        0.000, StdDeviation   =        0.000]\n"
          "#[Max     =        0.000, Total count    =            0]\n"
          "#[Buckets =           17, SubBuckets     =         2048]\n");
    // One value: its row at 0% and at 100%.
    Histogram one;
    one.record(1'000'000);
    CHECK(hdr::percentile_distribution(one, 5, 1e6) ==
          "       Value     Percentile TotalCount 1/(1-Percentile)\n\n"
          "       1.000 0.000000000000          1           1.00\n"
          "       1.000 1.000000000000          1\n"
          "#[Mean    =        1.000, StdDeviation   =        0.000]\n"
          "#[Max     =        1.000, Total count    =            1]\n"
          "#[Buckets =           17, SubBuckets     =         2048]\n");
}

TEST_CASE("hdr take_interval keeps the non-zero buckets and empties the histogram", "[hdr]") {
    Histogram h = known();
    const auto taken = hdr::take_interval(h, 7, 1);
    CHECK(taken.interval == 7);
    CHECK(taken.series == 1);
    CHECK(h.count() == 0);
    CHECK(h.max() == 0);
    for (const std::uint64_t c : h.counts())
        REQUIRE(c == 0);
    const Histogram k = known();
    std::uint64_t total = 0;
    std::size_t nonzero = 0;
    for (const std::uint64_t c : k.counts())
        nonzero += c ? 1 : 0;
    CHECK(taken.counts.size() == nonzero);
    for (const auto& [index, count] : taken.counts) {
        CHECK(k.counts()[index] == count);
        total += count;
    }
    CHECK(total == k.count());
    // An empty histogram gives an empty interval, no allocation.
    Histogram empty;
    CHECK(hdr::take_interval(empty, 0, 0).counts.empty());
}

namespace {

struct LogLine {
    std::string tag;
    std::string start, length, max;
    std::vector<std::uint64_t> counts;
};

// The histogram lines of an interval log, after checking its 4 header lines.
std::vector<LogLine> parse_log(const std::string& log, std::string_view base_time) {
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < log.size();) {
        const auto eol = log.find('\n', at);
        REQUIRE(eol != std::string::npos);
        lines.push_back(log.substr(at, eol - at));
        at = eol + 1;
    }
    REQUIRE(lines.size() >= 4);
    CHECK(lines[0] == "#[Histogram log format version 1.3]");
    CHECK(lines[1].rfind("#[StartTime: " + std::string(base_time) + " (seconds since epoch), ",
                         0) == 0);
    CHECK(lines[2] == "#[BaseTime: " + std::string(base_time) + " (seconds since epoch)]");
    CHECK(lines[3] ==
          "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_"
          "Histogram\"");
    std::vector<LogLine> out;
    for (std::size_t i = 4; i < lines.size(); ++i) {
        std::string_view rest = lines[i];
        LogLine l;
        if (rest.substr(0, 4) == "Tag=") {
            const auto comma = rest.find(',');
            l.tag = std::string(rest.substr(4, comma - 4));
            rest.remove_prefix(comma + 1);
        }
        std::vector<std::string> fields;
        for (std::size_t f = 0; f < 3; ++f) {
            const auto comma = rest.find(',');
            REQUIRE(comma != std::string_view::npos);
            fields.emplace_back(rest.substr(0, comma));
            rest.remove_prefix(comma + 1);
        }
        l.start = fields[0];
        l.length = fields[1];
        l.max = fields[2];
        l.counts = decode_counts(uncompressed(from_base64(rest)));
        out.push_back(std::move(l));
    }
    return out;
}

std::uint64_t sum(const std::vector<std::uint64_t>& v) {
    std::uint64_t n = 0;
    for (const auto c : v)
        n += c;
    return n;
}

}  // namespace

TEST_CASE("hdr interval_log has Java's header, a line per interval, empty ones too", "[hdr]") {
    hdr::LogSpec spec;
    spec.base_time_ns = 1'764'907'200'250'000'000;
    spec.interval_ns = 500'000'000;
    spec.window_ns = 1'800'000'000;  // 4 intervals, the last one 0.3 s
    spec.tags = {""};
    // Two threads' counts of interval 0, one thread's of interval 2.
    Histogram a, b, c;
    a.record_n(100'000, 10);
    a.record(2'000'000);
    b.record_n(100'000, 5);
    c.record_n(50'000'000, 3);
    std::vector<hdr::IntervalCounts> intervals;
    intervals.push_back(hdr::take_interval(c, 2, 0));
    intervals.push_back(hdr::take_interval(a, 0, 0));
    intervals.push_back(hdr::take_interval(b, 0, 0));
    const std::string log = hdr::interval_log(spec, intervals);
    CHECK(log.find("#[StartTime: 1764907200.250 (seconds since epoch), Fri Dec 05 04:00:00 UTC "
                   "2025]\n") != std::string::npos);
    const auto lines = parse_log(log, "1764907200.250");
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].start == "0.000");
    CHECK(lines[1].start == "0.500");
    CHECK(lines[2].start == "1.000");
    CHECK(lines[3].start == "1.500");
    CHECK(lines[0].length == "0.500");
    CHECK(lines[3].length == "0.300");  // cut at the window's end
    for (const auto& l : lines)
        CHECK(l.tag.empty());
    CHECK(sum(lines[0].counts) == 16);
    CHECK(sum(lines[1].counts) == 0);  // an empty interval: an empty histogram
    CHECK(sum(lines[2].counts) == 3);
    CHECK(sum(lines[3].counts) == 0);
    const Histogram h;
    CHECK(lines[0].counts[h.index_for(100'000)] == 15);
    CHECK(lines[0].max == hdr::format_ms(h.highest_equivalent(2'000'000)));  // Java: getMaxValue()
    CHECK(lines[1].max == "0.000");
    CHECK(lines[2].max == hdr::format_ms(h.highest_equivalent(50'000'000)));
}

TEST_CASE("hdr interval_log orders tagged series by time, then tag", "[hdr]") {
    hdr::LogSpec spec;
    spec.base_time_ns = 1'764'907'200'000'000'000;
    spec.interval_ns = 1'000'000'000;
    spec.window_ns = 2'000'000'000;
    spec.tags = {"corrected", "uncorrected"};
    Histogram h;
    std::vector<hdr::IntervalCounts> intervals;
    h.record(3'000'000);
    intervals.push_back(hdr::take_interval(h, 1, 1));
    h.record_n(1'000'000, 2);
    intervals.push_back(hdr::take_interval(h, 1, 0));
    h.record(9'000'000);
    intervals.push_back(hdr::take_interval(h, 0, 0));
    const auto lines = parse_log(hdr::interval_log(spec, intervals), "1764907200.000");
    REQUIRE(lines.size() == 4);
    const char* tags[] = {"corrected", "uncorrected", "corrected", "uncorrected"};
    const char* starts[] = {"0.000", "0.000", "1.000", "1.000"};
    const std::uint64_t counts[] = {1, 0, 2, 1};
    for (std::size_t i = 0; i < 4; ++i) {
        INFO(i);
        CHECK(lines[i].tag == tags[i]);
        CHECK(lines[i].start == starts[i]);
        CHECK(sum(lines[i].counts) == counts[i]);
    }
}

TEST_CASE("hdr interval_log extends the timeline to every interval with counts", "[hdr]") {
    // -n: a response at the window's very end falls into interval N.
    hdr::LogSpec spec;
    spec.interval_ns = 1'000'000'000;
    spec.window_ns = 1'000'000'000;
    spec.tags = {""};
    Histogram h;
    h.record(1'000);
    const auto lines = parse_log(hdr::interval_log(spec, {hdr::take_interval(h, 1, 0)}), "0.000");
    REQUIRE(lines.size() == 2);
    CHECK(sum(lines[1].counts) == 1);
    CHECK(lines[1].length == "0.000");
    // No window, no counts: the header alone.
    CHECK(
        parse_log(hdr::interval_log(hdr::LogSpec{0, 1'000'000'000, 0, {""}}, {}), "0.000").empty());
}
