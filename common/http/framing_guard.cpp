#include "http/framing_guard.hpp"

namespace sm::http {
namespace {

constexpr bool is_ctl(unsigned char c) noexcept { return c < 0x20 || c == 0x7f; }

}  // namespace

const char* FramingGuard::scan(const char* p, const char* end) noexcept {
    bytes_ += static_cast<std::size_t>(end - p);
    auto fail = [this](const char* why) {
        state_ = State::failed;
        return why;
    };
    for (; p < end; ++p) {
        const auto c = static_cast<unsigned char>(*p);
        switch (state_) {
            case State::request_start:
                if (c == '\r') {
                    state_ = State::request_start_lf;
                    break;
                }
                if (c == '\n') return fail("bare LF line end");
                if (c == ' ') return fail("malformed request line");
                state_ = State::request_line;
                spaces_ = 0;
                prev_space_ = false;
                [[fallthrough]];
            case State::request_line:
                if (c == ' ') {
                    if (prev_space_) return fail("repeated space in the request line");
                    prev_space_ = true;
                    if (++spaces_ > 2) return fail("malformed request line");
                    break;
                }
                prev_space_ = false;
                if (c == '\r') {
                    if (spaces_ != 2) return fail("malformed request line");
                    state_ = State::line_lf;
                    break;
                }
                if (c == '\n') return fail("bare LF line end");
                if (is_ctl(c)) return fail("control character in the request line");
                break;
            case State::request_start_lf:
                if (c != '\n') return fail("CR without LF");
                state_ = State::request_start;
                break;
            case State::line_lf:
                if (c != '\n') return fail("CR without LF");
                state_ = State::line_start;
                break;
            case State::line_start:
                if (c == '\r') {
                    state_ = State::end_lf;
                    break;
                }
                if (c == '\n') return fail("bare LF line end");
                if (c == ' ' || c == '\t') return fail("whitespace at the start of a header line");
                if (c == ':') return fail("empty header name");
                state_ = State::name;
                break;
            case State::name:
                if (c == ':') {
                    state_ = State::value;
                    break;
                }
                if (c == ' ' || c == '\t') return fail("whitespace before the colon of a header");
                if (c == '\r' || c == '\n') return fail("header line without a colon");
                break;
            case State::value:
                if (c == '\r') state_ = State::line_lf;
                else if (c == '\n') return fail("bare LF line end");
                break;
            case State::end_lf:
                if (c != '\n') return fail("CR without LF");
                state_ = State::head_done;
                break;
            case State::head_done:
                return fail("data after the end of the head");
            case State::framing_line_start:
                if (c == ' ' || c == '\t') return fail("whitespace at the start of a chunk or trailer line");
                state_ = State::framing_line;
                [[fallthrough]];
            case State::framing_line:
                if (c == '\r') state_ = State::framing_lf;
                else if (c == '\n') return fail("bare LF line end in chunked framing");
                break;
            case State::framing_lf:
                if (c != '\n') return fail("CR without LF in chunked framing");
                state_ = State::framing_line_start;
                break;
            case State::failed:
                return "invalid framing (an earlier violation)";
        }
    }
    return nullptr;
}

}  // namespace sm::http
