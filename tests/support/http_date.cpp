#include "support/http_date.hpp"

#include <array>
#include <cstdio>

namespace sm::test {
namespace {

constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Exactly `n` ASCII digits at text[pos..pos+n).
std::optional<int> digits(std::string_view text, std::size_t pos, std::size_t n) {
    int v = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        const char c = text[i];
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    return v;
}

template <std::size_t N>
std::optional<unsigned> index_of(const std::array<std::string_view, N>& names, std::string_view s) {
    for (std::size_t i = 0; i < N; ++i) {
        if (names[i] == s) return static_cast<unsigned>(i);
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::chrono::sys_seconds> parse_imf_fixdate(std::string_view text) {
    using namespace std::chrono;
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    //  0123456789012345678901234567 8
    if (text.size() != 29) return std::nullopt;
    if (text.substr(3, 2) != ", " || text[7] != ' ' || text[11] != ' ' || text[16] != ' ' ||
        text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT") {
        return std::nullopt;
    }
    const auto wday_i = index_of(kDays, text.substr(0, 3));
    const auto mon_i = index_of(kMonths, text.substr(8, 3));
    const auto day_n = digits(text, 5, 2);
    const auto year_n = digits(text, 12, 4);
    const auto hh = digits(text, 17, 2);
    const auto mm = digits(text, 20, 2);
    const auto ss = digits(text, 23, 2);
    if (!wday_i || !mon_i || !day_n || !year_n || !hh || !mm || !ss) return std::nullopt;
    // 60 would be a leap second: IMF-fixdate allows it, a server clock never renders it.
    if (*hh > 23 || *mm > 59 || *ss > 60) return std::nullopt;
    const year_month_day ymd{year{*year_n}, month{*mon_i + 1}, day{static_cast<unsigned>(*day_n)}};
    if (!ymd.ok()) return std::nullopt;
    const sys_days d{ymd};
    if (weekday{d}.c_encoding() != *wday_i) return std::nullopt;
    return d + hours{*hh} + minutes{*mm} + seconds{*ss};
}

std::string format_imf_fixdate(std::chrono::sys_seconds t) {
    using namespace std::chrono;
    const sys_days d = floor<days>(t);
    const year_month_day ymd{d};
    const hh_mm_ss<seconds> tod{t - d};
    std::array<char, 40> buf{};
    std::snprintf(buf.data(), buf.size(), "%s, %02u %s %04d %02d:%02d:%02d GMT",
                  kDays[weekday{d}.c_encoding()].data(), static_cast<unsigned>(ymd.day()),
                  kMonths[static_cast<unsigned>(ymd.month()) - 1].data(),
                  static_cast<int>(ymd.year()), static_cast<int>(tod.hours().count()),
                  static_cast<int>(tod.minutes().count()), static_cast<int>(tod.seconds().count()));
    return buf.data();
}

}  // namespace sm::test
