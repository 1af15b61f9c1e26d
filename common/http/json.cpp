#include "http/json.hpp"

#include <cassert>
#include <cstring>

#include "http/chars.hpp"

namespace sm::http {

char* write_json_string(char* out, std::string_view s) noexcept {
    static constexpr char kHex[] = "0123456789abcdef";
    *out++ = '"';
    const char* p = s.data();
    const char* const end = p + s.size();
    while (p < end) {
        // Runs that need no escape (no control byte, '"' or '\\') are copied
        // eight bytes at a time; the byte that ends one is written below.
        if (end - p >= 8) {
            namespace swar = chars::swar;
            const std::uint64_t w = swar::load8(p);
            const int run = swar::before_stop(swar::below(w, 0x20) | swar::equal(w, '"') |
                                              swar::equal(w, '\\'));
            std::memcpy(out, p, 8);  // room: the output holds 6 bytes per input byte
            out += run;
            p += run;
            if (run == 8) continue;
        }
        const char ch = *p++;
        const auto c = static_cast<unsigned char>(ch);
        // clang-format off
        switch (c) {
            case '"': *out++ = '\\'; *out++ = '"'; break;
            case '\\': *out++ = '\\'; *out++ = '\\'; break;
            case '\b': *out++ = '\\'; *out++ = 'b'; break;
            case '\f': *out++ = '\\'; *out++ = 'f'; break;
            case '\n': *out++ = '\\'; *out++ = 'n'; break;
            case '\r': *out++ = '\\'; *out++ = 'r'; break;
            case '\t': *out++ = '\\'; *out++ = 't'; break;
            default:
                if (c < 0x20) {
                    std::memcpy(out, "\\u00", 4);
                    out[4] = kHex[c >> 4];
                    out[5] = kHex[c & 0xf];
                    out += 6;
                } else {
                    *out++ = ch;
                }
        }
        // clang-format on
    }
    *out++ = '"';
    return out;
}

std::size_t serialize(const Message& m, std::span<char> out) noexcept {
    assert(out.size() >= json_max_size(m));
    static constexpr std::string_view kOpen = R"({"message":)";
    char* p = out.data();
    std::memcpy(p, kOpen.data(), kOpen.size());
    p = write_json_string(p + kOpen.size(), m.message);
    *p++ = '}';
    return static_cast<std::size_t>(p - out.data());
}

}  // namespace sm::http
