#include "http/fields.hpp"

#include "http/chars.hpp"

namespace sm::http {
namespace {

using chars::is;
using chars::is_ws;
using chars::kHex;
using chars::kRegName;

bool is_hex(char c) noexcept {
    return is(c, kHex);
}
bool is_reg_name_char(char c) noexcept {
    return is(c, kRegName);
}

// dec-octet = DIGIT / %x31-39 DIGIT / "1" 2DIGIT / "2" %x30-34 DIGIT / "25" %x30-35
bool is_dec_octet(const char* p, std::size_t n) noexcept {
    if (n == 0 || n > 3) return false;
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] < '0' || p[i] > '9') return false;
    if (n > 1 && p[0] == '0') return false;
    int v = 0;
    for (std::size_t i = 0; i < n; ++i)
        v = v * 10 + (p[i] - '0');
    return v <= 255;
}

bool is_ipv4_address(const char* p, std::size_t n) noexcept {
    std::size_t parts = 0, start = 0;
    for (std::size_t i = 0; i <= n; ++i) {
        if (i == n || p[i] == '.') {
            if (!is_dec_octet(p + start, i - start)) return false;
            ++parts;
            start = i + 1;
        }
    }
    return parts == 4;
}

// Groups of a run of "h16 *( ':' h16 )" with an IPv4address allowed as the
// last group (counted as two); -1 if malformed. An empty run has none.
int count_groups(const char* p, std::size_t n, bool ipv4_last) noexcept {
    if (n == 0) return 0;
    int groups = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= n; ++i) {
        if (i == n || p[i] == ':') {
            const std::size_t len = i - start;
            bool h16 = len >= 1 && len <= 4;
            for (std::size_t k = start; h16 && k < i; ++k)
                h16 = is_hex(p[k]);
            if (h16) {
                ++groups;
            } else if (i == n && ipv4_last && is_ipv4_address(p + start, len)) {
                groups += 2;
            } else {
                return -1;
            }
            start = i + 1;
        }
    }
    return groups;
}

}  // namespace

bool is_ipv6_address(const char* p, std::size_t n) noexcept {
    // Without "::" exactly eight groups; with one "::" (standing for at
    // least one group) at most seven around it. An IPv4address may only be
    // the last group (ls32).
    const char* gap = nullptr;
    for (std::size_t i = 0; i + 1 < n; ++i) {
        if (p[i] == ':' && p[i + 1] == ':') {
            gap = p + i;
            break;
        }
    }
    if (gap == nullptr) return count_groups(p, n, true) == 8;
    const auto before = static_cast<std::size_t>(gap - p);
    const char* rest = gap + 2;
    const std::size_t after = n - before - 2;
    const int a = count_groups(p, before, false);
    const int b = count_groups(rest, after, true);
    return a >= 0 && b >= 0 && a + b <= 7;
}

void HostCheck::feed(const char* p, std::size_t n) noexcept {
    const char* const end = p + n;
    while (p < end && state_ != State::invalid) {
        // The common cases in bulk (a Host value is almost all of one or
        // both): a run of reg-name bytes, a run of port
        // digits. step() takes the byte that ends the run.
        if (state_ == State::reg_name || (state_ == State::start && *p != '[')) {
            state_ = State::reg_name;
            while (p < end && is_reg_name_char(*p))
                ++p;
        } else if (state_ == State::port) {
            while (p < end && *p >= '0' && *p <= '9')
                ++p;
        }
        if (p < end) step(*p++);
    }
}

void HostCheck::step(char c) noexcept {
    using enum State;
    const bool ws = is_ws(c);
    switch (state_) {
        case start:
            if (c == '[') {
                state_ = ipv6;
                return;
            }
            [[fallthrough]];
        case reg_name:
            if (is_reg_name_char(c)) {
                state_ = reg_name;
            } else if (c == '%') {
                state_ = pct1;
            } else if (c == ':') {
                state_ = port;
            } else {
                state_ = ws ? trailing_ws : invalid;
            }
            return;
        case pct1: state_ = is_hex(c) ? pct2 : invalid; return;
        case pct2: state_ = is_hex(c) ? reg_name : invalid; return;
        case ipv6:
            if (literal_len_ == 0 && (c == 'v' || c == 'V')) {
                state_ = future_hex1;
            } else if (c == ']') {
                state_ = is_ipv6_address(literal_.data(), literal_len_) ? after_literal : invalid;
            } else if (literal_len_ < literal_.size() && (is_hex(c) || c == ':' || c == '.')) {
                literal_[literal_len_++] = c;
            } else {
                state_ = invalid;
            }
            return;
        case future_hex1: state_ = is_hex(c) ? future_hex : invalid; return;
        case future_hex:
            if (c == '.')
                state_ = future_rest1;
            else if (!is_hex(c))
                state_ = invalid;
            return;
        case future_rest1:
        case future_rest:
            if (is_reg_name_char(c) || c == ':')
                state_ = future_rest;
            else
                state_ = c == ']' && state_ == future_rest ? after_literal : invalid;
            return;
        case after_literal:
            if (c == ':')
                state_ = port;
            else
                state_ = ws ? trailing_ws : invalid;
            return;
        case port:
            if (c < '0' || c > '9') state_ = ws ? trailing_ws : invalid;
            return;
        case trailing_ws:
            if (!ws) state_ = invalid;
            return;
        case invalid: return;
    }
}

bool HostCheck::valid() const noexcept {
    switch (state_) {
        case State::start:
        case State::reg_name:
        case State::after_literal:
        case State::port:
        case State::trailing_ws: return true;
        default: return false;
    }
}

// --- Transfer-Encoding ------------------------------------------------------------

void TransferEncodingCheck::start_line() noexcept {
    state_ = State::list;
    in_coding_ = false;
}

void TransferEncodingCheck::end_coding() noexcept {
    if (!in_coding_) return;
    in_coding_ = false;
    ++codings_;
    last_chunked_ = name_match_ == 7;  // "chunked", case-insensitively
    if (last_chunked_) {
        ++chunked_;
        chunked_params_ = chunked_params_ || params_;
    }
}

void TransferEncodingCheck::feed(const char* p, std::size_t n) noexcept {
    using enum State;
    static constexpr char kChunked[] = "chunked";
    for (std::size_t i = 0; i < n && state_ != invalid; ++i) {
        const char c = p[i];
        switch (state_) {
            case list:
                if (is(c, chars::kTchar)) {
                    in_coding_ = true;
                    params_ = false;
                    name_match_ = chars::lower(c) == kChunked[0] ? 1 : 0xff;
                    state_ = coding;
                } else if (c != ',' && !is_ws(c)) {
                    state_ = invalid;
                }
                break;
            case coding:
                if (is(c, chars::kTchar)) {
                    name_match_ = name_match_ < 7 && chars::lower(c) == kChunked[name_match_]
                                      ? static_cast<std::uint8_t>(name_match_ + 1)
                                      : std::uint8_t{0xff};
                    break;
                }
                [[fallthrough]];
            case after_coding:
            case after_param:
                if (c == ',') {
                    end_coding();
                    state_ = list;
                } else if (c == ';') {
                    params_ = true;
                    state_ = param_start;
                } else if (is_ws(c)) {
                    if (state_ == coding) state_ = after_coding;
                } else {
                    state_ = invalid;
                }
                break;
            case param_start:
                if (is(c, chars::kTchar))
                    state_ = param_name;
                else if (!is_ws(c))
                    state_ = invalid;
                break;
            case param_name:
                if (c == '=')
                    state_ = param_value_start;
                else if (is_ws(c))
                    state_ = param_name_ws;
                else if (!is(c, chars::kTchar))
                    state_ = invalid;
                break;
            case param_name_ws:
                if (c == '=')
                    state_ = param_value_start;
                else if (!is_ws(c))
                    state_ = invalid;
                break;
            case param_value_start:
                if (is(c, chars::kTchar))
                    state_ = param_token;
                else if (c == '"')
                    state_ = param_quoted;
                else if (!is_ws(c))
                    state_ = invalid;
                break;
            case param_token:
                if (c == ',') {
                    end_coding();
                    state_ = list;
                } else if (c == ';') {
                    state_ = param_start;
                } else if (is_ws(c)) {
                    state_ = after_param;
                } else if (!is(c, chars::kTchar)) {
                    state_ = invalid;
                }
                break;
            case param_quoted:
                if (c == '"')
                    state_ = after_param;
                else if (c == '\\')
                    state_ = param_quoted_pair;
                else if (!is(c, chars::kQdtext))
                    state_ = invalid;
                break;
            case param_quoted_pair:
                state_ = is(c, chars::kPairable) ? param_quoted : invalid;
                break;
            case invalid: break;
        }
    }
}

void TransferEncodingCheck::end_line() noexcept {
    switch (state_) {
        case State::list:
        case State::coding:
        case State::after_coding:
        case State::param_token:
        case State::after_param: end_coding(); break;
        default: invalid_ = true; break;
    }
}

}  // namespace sm::http
