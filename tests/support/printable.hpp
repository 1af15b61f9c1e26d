// Bytes made readable for a failure message: CR, LF, backslash and other
// controls escaped, input longer than `max` cut (its length said). Header
// only, so the fuzz harnesses use it without the socket client.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace sm::test {

inline std::string printable(std::string_view bytes, std::size_t max = 1500) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s;
    const std::size_t n = std::min(bytes.size(), max);
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '\r') {
            s += "\\r";
        } else if (c == '\n') {
            s += "\\n";
        } else if (c == '\\') {
            s += "\\\\";
        } else if (c < 0x20 || c >= 0x7f) {
            s += "\\x";
            s += kHex[c >> 4];
            s += kHex[c & 15];
        } else {
            s += static_cast<char>(c);
        }
    }
    if (bytes.size() > max) s += "... (" + std::to_string(bytes.size()) + " bytes)";
    return s;
}

}  // namespace sm::test
