// One parameter after its ";", the shape RFC 9110 5.6.6 (parameters, as in
// a transfer-coding, RFC 9112 7) and RFC 9112 7.1.1 (chunk extensions) share:
//
//   BWS name [ BWS "=" BWS ( token / quoted-string ) ] [ BWS ]
//
// name is a token; quoted-string is RFC 9110 5.6.4 with quoted-pair. The
// caller owns the delimiters (";", ",", CR): take() refuses the first byte
// that is not part of the parameter, and the caller asks whether the
// parameter could end there.
#pragma once

#include <cstdint>

#include "http/chars.hpp"

namespace sm::http {

class ParameterCheck {
  public:
    // Right after the ";".
    void start() noexcept { state_ = State::before_name; }

    // Consumes `c` if it belongs to the parameter; false leaves `c` to the
    // caller (a delimiter, or a byte the grammar has no place for).
    bool take(char c) noexcept {
        using chars::is;
        const bool ws = chars::is_ws(c);
        switch (state_) {
            case State::before_name:
                if (is(c, chars::kTchar)) state_ = State::name;
                return ws || state_ == State::name;
            case State::name:
                if (is(c, chars::kTchar)) return true;
                [[fallthrough]];
            case State::name_ws:
                if (c == '=') {
                    state_ = State::value_start;
                    return true;
                }
                if (ws) state_ = State::name_ws;
                return ws;
            case State::value_start:
                if (is(c, chars::kTchar)) {
                    state_ = State::token;
                } else if (c == '"') {
                    state_ = State::quoted;
                } else {
                    return ws;
                }
                return true;
            case State::token:
                if (is(c, chars::kTchar)) return true;
                [[fallthrough]];
            case State::value_end:
            case State::value_ws:
                if (ws) state_ = State::value_ws;
                return ws;
            case State::quoted:
                if (c == '"') {
                    state_ = State::value_end;
                } else if (c == '\\') {
                    state_ = State::quoted_pair;
                } else {
                    return is(c, chars::kQdtext);
                }
                return true;
            case State::quoted_pair:
                if (!is(c, chars::kPairable)) return false;
                state_ = State::quoted;
                return true;
        }
        return false;
    }

    // At a byte take() refused: is the parameter complete? A chunk
    // extension may be a bare name; a transfer-parameter needs its value.
    [[nodiscard]] bool complete(bool value_required) const noexcept {
        switch (state_) {
            case State::name:
            case State::name_ws: return !value_required;
            case State::token:
            case State::value_end:
            case State::value_ws: return true;
            default: return false;
        }
    }
    // It ended in BWS (allowed before a ";" but, in a chunk line, not before
    // its CR).
    [[nodiscard]] bool trailing_ws() const noexcept {
        return state_ == State::name_ws || state_ == State::value_ws;
    }

  private:
    enum class State : std::uint8_t {
        before_name,  // BWS, then the name's first tchar
        name,
        name_ws,      // BWS after the name: "=" or the caller's delimiter
        value_start,  // after "=": BWS, then a token or a quoted-string
        token,
        quoted,       // inside a quoted-string
        quoted_pair,  // after its backslash
        value_end,    // after the closing DQUOTE
        value_ws,     // BWS after the value
    };
    State state_ = State::before_name;
};

}  // namespace sm::http
