#include "http/framing_guard.hpp"

#include <array>

namespace sm::http {
namespace {

// Byte classes: a state only stops on the classes it cares about and skips
// everything else in a tight loop (most head bytes are names and values).
enum : std::uint8_t { kCr = 1, kLf = 2, kSp = 4, kHt = 8, kColon = 16, kCtl = 32 };

constexpr std::array<std::uint8_t, 256> make_classes() {
    std::array<std::uint8_t, 256> t{};
    for (int c = 0; c < 0x20; ++c) t[static_cast<std::size_t>(c)] = kCtl;
    t[0x7f] = kCtl;
    t['\r'] = kCr;
    t['\n'] = kLf;
    t[' '] = kSp;
    t['\t'] = kHt;
    t[':'] = kColon;
    return t;
}
constexpr std::array<std::uint8_t, 256> kClass = make_classes();

}  // namespace

std::uint8_t FramingGuard::stop_mask(State s) noexcept {
    switch (s) {
        case State::request_line: return kCr | kLf | kSp | kHt | kCtl;
        case State::name: return kCr | kLf | kSp | kHt | kColon | kCtl;
        // Field values may hold HT and obs-text; llhttp checks the rest.
        case State::value: return kCr | kLf | kCtl;
        case State::framing_line: return kCr | kLf;
        default: return 0xff;  // every byte matters in the other states
    }
}

const char* FramingGuard::scan(const char* p, const char* end) noexcept {
    bytes_ += static_cast<std::size_t>(end - p);
    auto fail = [this](const char* why) {
        state_ = State::failed;
        return why;
    };
    while (p < end) {
        // Fast path: skip the bytes this state does not care about.
        if (const std::uint8_t mask = stop_mask(state_); mask != 0xff) {
            const char* q = p;
            while (q < end && (kClass[static_cast<unsigned char>(*q)] & mask) == 0) ++q;
            if (q != p) {
                prev_space_ = false;
                p = q;
            }
            if (p == end) break;
        }
        const auto c = static_cast<unsigned char>(*p++);
        switch (state_) {
            case State::request_start:
                if (c == '\r') {
                    state_ = State::request_start_lf;
                    break;
                }
                if (c == '\n') return fail("bare LF line end");
                if (c == ' ') return fail("malformed request line");
                if (kClass[c] & kCtl || c == '\t') return fail("control character in the request line");
                state_ = State::request_line;
                spaces_ = 0;
                prev_space_ = false;
                break;
            case State::request_line:
                if (c == ' ') {
                    if (prev_space_) return fail("repeated space in the request line");
                    prev_space_ = true;
                    if (++spaces_ > 2) return fail("malformed request line");
                    break;
                }
                if (c == '\r') {
                    if (spaces_ != 2 || prev_space_) return fail("malformed request line");
                    state_ = State::line_lf;
                    break;
                }
                if (c == '\n') return fail("bare LF line end");
                return fail("control character in the request line");
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
                return fail("control character in a header name");
            case State::value:
                if (c == '\r') {
                    state_ = State::line_lf;
                    break;
                }
                if (c == '\n') return fail("bare LF line end");
                return fail("control character in a header value");
            case State::end_lf:
                if (c != '\n') return fail("CR without LF");
                state_ = State::head_done;
                break;
            case State::head_done:
                return fail("data after the end of the head");
            case State::framing_line_start:
                if (c == ' ' || c == '\t')
                    return fail("whitespace at the start of a chunk or trailer line");
                if (c == '\n') return fail("bare LF line end in chunked framing");
                state_ = c == '\r' ? State::framing_lf : State::framing_line;
                break;
            case State::framing_line:
                if (c == '\r') {
                    state_ = State::framing_lf;
                    break;
                }
                return fail("bare LF line end in chunked framing");
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
