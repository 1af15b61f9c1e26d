#include "http/framing_guard.hpp"

#include <array>

namespace sm::http {
namespace {

using S = FramingGuard::State;

enum Class : std::uint8_t { kCr, kLf, kSp, kHt, kColon, kCtl, kOther, kClassCount };
// Rows padded to a power of two: the index is a shift, not a multiply.
constexpr std::size_t kRowSize = 8;

constexpr std::array<std::uint8_t, 256> make_classes() {
    std::array<std::uint8_t, 256> t{};
    for (std::size_t c = 0; c < 256; ++c)
        t[c] = kOther;  // obs-text (>= 0x80) included
    for (std::size_t c = 0; c < 0x20; ++c)
        t[c] = kCtl;
    t[0x7f] = kCtl;
    t['\r'] = kCr;
    t['\n'] = kLf;
    t[' '] = kSp;
    t['\t'] = kHt;
    t[':'] = kColon;
    return t;
}
constexpr std::array<std::uint8_t, 256> kClassOf = make_classes();

using Row = std::array<std::uint8_t, kRowSize>;

// The next state for (state, class); kFailed is absorbing.
constexpr Row row(S cr, S lf, S sp, S ht, S colon, S ctl, S other) {
    return {cr, lf, sp, ht, colon, ctl, other, S::kFailed};
}

// One row per state, one column per class.
// clang-format off
constexpr std::array<Row, S::kStateCount> make_transitions() {
    constexpr S F = S::kFailed;
    std::array<Row, S::kStateCount> t{};
    //                             CR                   LF                  SP            HT  ':'          CTL other
    t[S::kRequestStart]   = row(S::kRequestStartLf, F,                  F,            F,  S::kMethod,  F,  S::kMethod);
    t[S::kRequestStartLf] = row(F,                  S::kRequestStart,   F,            F,  F,           F,  F);
    t[S::kMethod]         = row(F,                  F,                  S::kSpace1,   F,  S::kMethod,  F,  S::kMethod);
    t[S::kSpace1]         = row(F,                  F,                  F,            F,  S::kTarget,  F,  S::kTarget);
    t[S::kTarget]         = row(F,                  F,                  S::kSpace2,   F,  S::kTarget,  F,  S::kTarget);
    t[S::kSpace2]         = row(F,                  F,                  F,            F,  S::kVersion, F,  S::kVersion);
    t[S::kVersion]        = row(S::kLineLf,         F,                  F,            F,  S::kVersion, F,  S::kVersion);
    t[S::kLineLf]         = row(F,                  S::kLineStart,      F,            F,  F,           F,  F);
    t[S::kLineStart]      = row(S::kEndLf,          F,                  F,            F,  F,           F,  S::kName);
    t[S::kName]           = row(F,                  F,                  F,            F,  S::kValue,   F,  S::kName);
    t[S::kValue]          = row(S::kLineLf,         F,                  S::kValue, S::kValue, S::kValue, F,  S::kValue);
    t[S::kEndLf]          = row(F,                  S::kHeadDone,       F,            F,  F,           F,  F);
    t[S::kHeadDone]       = row(F,                  F,                  F,            F,  F,           F,  F);
    // Chunk-size lines and trailers: llhttp checks their characters; the
    // guard checks line ends and line starts.
    t[S::kFramingLineStart] = row(S::kFramingLf,    F,                  F,            F,  S::kFramingLine, S::kFramingLine, S::kFramingLine);
    t[S::kFramingLine]    = row(S::kFramingLf,      F,                  S::kFramingLine, S::kFramingLine, S::kFramingLine, S::kFramingLine, S::kFramingLine);
    t[S::kFramingLf]      = row(F,                  S::kFramingLineStart, F,          F,  F,           F,  F);
    t[S::kFailed]         = row(F,                  F,                  F,            F,  F,           F,  F);
    return t;
}
// clang-format on
constexpr std::array<Row, S::kStateCount> kNext = make_transitions();

// Why (state, class) failed: only looked up once a violation was found.
const char* reason(std::uint8_t state, std::uint8_t cls) noexcept {
    const bool framing = state >= S::kFramingLineStart && state <= S::kFramingLf;
    if (cls == kLf) return framing ? "bare LF line end in chunked framing" : "bare LF line end";
    switch (state) {
        case S::kRequestStartLf:
        case S::kLineLf:
        case S::kEndLf: return "CR without LF";
        case S::kFramingLf: return "CR without LF in chunked framing";
        case S::kFramingLineStart: return "whitespace at the start of a chunk or trailer line";
        case S::kLineStart:
            if (cls == kSp || cls == kHt) return "whitespace at the start of a header line";
            if (cls == kColon) return "empty header name";
            return "control character at the start of a header line";
        case S::kName:
            if (cls == kSp || cls == kHt) return "whitespace before the colon of a header";
            if (cls == kCr) return "header line without a colon";
            return "control character in a header name";
        case S::kValue: return "control character in a header value";
        case S::kHeadDone: return "data after the end of the head";
        case S::kSpace1:
        case S::kSpace2:
            if (cls == kSp) return "repeated space in the request line";
            return "malformed request line";
        default:  // request line states
            if (cls == kCtl || cls == kHt) return "control character in the request line";
            return "malformed request line";
    }
}

}  // namespace

const char* FramingGuard::scan(const char* p, const char* end) noexcept {
    bytes_ += static_cast<std::size_t>(end - p);
    if (state_ == kFailed) return "invalid framing (an earlier violation)";
    const std::uint8_t start = state_;
    std::uint8_t st = start;
    auto step = [&st](char c) { st = kNext[st][kClassOf[static_cast<unsigned char>(c)]]; };
    const char* q = p;
    for (; end - q >= 4; q += 4) {  // unrolled: the loop overhead was half the work
        step(q[0]);
        step(q[1]);
        step(q[2]);
        step(q[3]);
    }
    for (; q < end; ++q)
        step(*q);
    state_ = st;
    if (st != kFailed) return nullptr;
    // Slow path: find the first violation and say what it was.
    st = start;
    for (const char* r = p; r < end; ++r) {
        const std::uint8_t cls = kClassOf[static_cast<unsigned char>(*r)];
        if (kNext[st][cls] == kFailed) return reason(st, cls);
        st = kNext[st][cls];
    }
    return "invalid framing";
}

}  // namespace sm::http
