// IMF-fixdate (RFC 9110 section 5.6.7), the only Date format a server may send:
//   Sun, 06 Nov 1994 08:49:37 GMT
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace sm::test {

// The instant an IMF-fixdate names, or nothing when `text` is not exactly one
// (wrong length, separators, names or ranges, or a day name that does not
// match the date).
std::optional<std::chrono::sys_seconds> parse_imf_fixdate(std::string_view text);

// Renders `t` as an IMF-fixdate (for messages and round-trip checks).
std::string format_imf_fixdate(std::chrono::sys_seconds t);

}  // namespace sm::test
