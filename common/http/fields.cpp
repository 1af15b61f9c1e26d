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

}  // namespace

bool Ipv6Check::step(char c) noexcept {
    if (chars::is_digit(c) || is(c, kHex)) {
        // A leading single ":" must be half of "::".
        if (colons_ == 1 && parts_ == 0 && !gap_ && len_ == 0) return false;
        colons_ = 0;
        if (in_ipv4_) {
            // dec-octet: 1-3 DIGIT, no leading zero, at most 255.
            if (!chars::is_digit(c) || len_ == 3 || (len_ == 1 && value_ == 0)) return false;
            value_ = static_cast<std::uint16_t>(value_ * 10 + (c - '0'));
            ++len_;
            return value_ <= 255;
        }
        if (len_ == 4) return false;  // h16 = 1*4HEXDIG
        decimal_ = decimal_ && chars::is_digit(c) && len_ < 3 && !(len_ == 1 && value_ == 0);
        if (decimal_) value_ = static_cast<std::uint16_t>(value_ * 10 + (c - '0'));
        ++len_;
        return true;
    }
    if (c == ':') {
        if (in_ipv4_) return false;  // an IPv4address only last
        if (len_ > 0) {
            if (++parts_ > 7) return false;  // no room for a part after this ":"
            len_ = 0;
            decimal_ = true;
            value_ = 0;
            colons_ = 1;
            return true;
        }
        if (colons_ == 0) {  // ":" first
            if (parts_ != 0 || gap_) return false;
            colons_ = 1;
            return true;
        }
        if (colons_ == 1 && !gap_) {  // "::"
            gap_ = true;
            colons_ = 2;
            return true;
        }
        return false;  // ":::" or a second "::"
    }
    if (c == '.') {
        if (len_ == 0) return false;
        if (!in_ipv4_) {
            if (!decimal_ || value_ > 255) return false;
            in_ipv4_ = true;
        }
        if (++octets_ > 3) return false;
        len_ = 0;
        value_ = 0;
        return true;
    }
    return false;
}

bool Ipv6Check::finish() const noexcept {
    unsigned parts = parts_;
    if (in_ipv4_) {
        if (octets_ != 3 || len_ == 0) return false;
        parts += 2;
    } else if (len_ > 0) {
        parts += 1;
    } else if (colons_ != 2) {
        return false;  // empty, or ending in a single ":"
    }
    return gap_ ? parts <= 7 : parts == 8;
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
                state_ = ipv6_start;
                ipv6_.start();
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
        case ipv6_start:
            if (c == 'v' || c == 'V') {
                state_ = future_hex1;
                return;
            }
            [[fallthrough]];
        case ipv6:
            if (c == ']')
                state_ = ipv6_.finish() ? after_literal : invalid;
            else
                state_ = ipv6_.step(c) ? ipv6 : invalid;
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
    if (codings_ < 0xff) ++codings_;
    last_chunked_ = name_match_ == 7;  // "chunked", case-insensitively
    if (last_chunked_) {
        if (chunked_ < 0xff) ++chunked_;
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
                if (is_ws(c)) {
                    state_ = after_coding;
                    break;
                }
                [[fallthrough]];
            case after_coding:
                if (is_ws(c)) break;
                after_element(c);
                break;
            case param:
                // transfer-parameter = token BWS "=" BWS ( token / quoted-string )
                if (param_.take(c)) break;
                if (param_.complete(true))
                    after_element(c);
                else
                    state_ = invalid;
                break;
            case invalid: break;
        }
    }
}

void TransferEncodingCheck::after_element(char c) noexcept {
    if (c == ',') {
        end_coding();
        state_ = State::list;
    } else if (c == ';') {
        params_ = true;
        param_.start();
        state_ = State::param;
    } else {
        state_ = State::invalid;
    }
}

void TransferEncodingCheck::end_line() noexcept {
    const bool ends = state_ == State::list || state_ == State::coding ||
                      state_ == State::after_coding ||
                      (state_ == State::param && param_.complete(true));
    if (ends)
        end_coding();
    else
        invalid_ = true;
}

}  // namespace sm::http
