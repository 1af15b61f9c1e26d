// Character classes of the HTTP grammar (RFC 9110 5.5, 5.6.2, 5.6.4; RFC 3986
// 2.2, 2.3), one 256-entry table, for the parts of the core that check
// grammar byte by byte beside llhttp: chunked framing, Host and
// Transfer-Encoding values, unknown methods.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sm::http::chars {

enum Class : std::uint8_t {
    kTchar = 1,       // token: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
                      // "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    kHex = 2,         // HEXDIG
    kQdtext = 4,      // HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
    kPairable = 8,    // after "\" in a quoted-string: HTAB / SP / VCHAR / obs-text
    kFieldChar = 16,  // in a field value: VCHAR / obs-text / SP / HTAB
    kRegName = 32,    // RFC 3986 unreserved / sub-delims
};

constexpr std::array<std::uint8_t, 256> make_table() {
    std::array<std::uint8_t, 256> t{};
    constexpr std::string_view kTokenPunct = "!#$%&'*+-.^_`|~";
    constexpr std::string_view kRegNamePunct = "-._~!$&'()*+,;=";
    for (std::size_t c = 0; c < 256; ++c) {
        std::uint8_t f = 0;
        const bool alnum =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (alnum || kTokenPunct.find(static_cast<char>(c)) != std::string_view::npos) f |= kTchar;
        if (alnum || kRegNamePunct.find(static_cast<char>(c)) != std::string_view::npos)
            f |= kRegName;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) f |= kHex;
        const bool ws = c == '\t' || c == ' ';
        const bool vchar = c >= 0x21 && c <= 0x7e;
        const bool obs = c >= 0x80;
        if (ws || c == 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) || obs)
            f |= kQdtext;
        if (ws || vchar || obs) f |= kPairable | kFieldChar;
        t[c] = f;
    }
    return t;
}
inline constexpr std::array<std::uint8_t, 256> kTable = make_table();

[[nodiscard]] constexpr bool is(char c, Class cls) noexcept {
    return (kTable[static_cast<unsigned char>(c)] & cls) != 0;
}
[[nodiscard]] constexpr bool is_ws(char c) noexcept {
    return c == ' ' || c == '\t';
}
[[nodiscard]] constexpr bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}
// s without the optional whitespace (OWS: SP / HTAB, RFC 9110 5.6.3) at either end.
[[nodiscard]] constexpr std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && is_ws(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_ws(s.back()))
        s.remove_suffix(1);
    return s;
}
// Lower-cases an ASCII letter (and leaves other bytes as they are).
[[nodiscard]] constexpr char lower(char c) noexcept {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c | 0x20) : c;
}

// Eight bytes at a time (SWAR), for runs of ordinary bytes: each function
// sets the high bit of every byte of w that is a stop. Exact for the lowest
// such byte, the one std::countr_zero(stops) / 8 finds (a borrow can mark
// bytes above it, never below): the first stop of the eight.
namespace swar {
inline constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
inline constexpr std::uint64_t kHigh = 0x8080808080808080ULL;

// Bytes below n (n <= 0x80; bytes from 0x80 are never below it).
[[nodiscard]] constexpr std::uint64_t below(std::uint64_t w, std::uint8_t n) noexcept {
    return (w - kOnes * n) & ~w & kHigh;
}
// Bytes equal to c.
[[nodiscard]] constexpr std::uint64_t equal(std::uint64_t w, std::uint8_t c) noexcept {
    const std::uint64_t y = w ^ (kOnes * c);
    return (y - kOnes) & ~y & kHigh;
}
// The eight bytes at p, the one at p lowest.
[[nodiscard]] inline std::uint64_t load8(const char* p) noexcept {
    std::uint64_t w;
    std::memcpy(&w, p, sizeof w);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    return w;
}
// How many bytes before the first stop (8: none of them is one).
[[nodiscard]] constexpr int before_stop(std::uint64_t stops) noexcept {
    return stops == 0 ? 8 : std::countr_zero(stops) / 8;
}
}  // namespace swar

}  // namespace sm::http::chars
