#include "http/framing_guard.hpp"

#include <array>

#include "http/chars.hpp"

namespace sm::http {
namespace {

using S = FramingGuard::State;

// kOther and the classes after it are "any other visible byte" everywhere but
// in the HTTP-version, whose name is spelled out: "HTTP".
enum Class : std::uint8_t {
    kCr,
    kLf,
    kSp,
    kHt,
    kColon,
    kCtl,
    kOther,  // obs-text (>= 0x80) included
    kH,
    kT,
    kP,
    kClassCount,
};
// A row per state, a column per class. The table holds row offsets (state *
// kRowSize), so a step is one class lookup, one add and one byte load, the
// same as the power-of-two rows x86's scaled addressing takes. (Rows of 16,
// for "HTTP/" DIGIT "." DIGIT spelled out, cost a shift and an add more per
// byte and measured 10% slower for a whole session; llhttp checks what
// follows "HTTP" exactly, so the guard need not.)
constexpr std::size_t kRowSize = kClassCount;
static_assert(FramingGuard::kStateCount * kRowSize <= 256, "offsets must fit in a byte");

constexpr std::array<std::uint8_t, 256> make_classes() {
    std::array<std::uint8_t, 256> t{};
    for (std::size_t c = 0; c < 256; ++c)
        t[c] = kOther;
    for (std::size_t c = 0; c < 0x20; ++c)
        t[c] = kCtl;
    t[0x7f] = kCtl;
    t['\r'] = kCr;
    t['\n'] = kLf;
    t[' '] = kSp;
    t['\t'] = kHt;
    t[':'] = kColon;
    t['H'] = kH;
    t['T'] = kT;
    t['P'] = kP;
    return t;
}
constexpr std::array<std::uint8_t, 256> kClassOf = make_classes();

using Row = std::array<std::uint8_t, kRowSize>;

// The next state for (state, class); kFailed is absorbing. The letter, digit
// and punctuation classes go where kOther goes.
constexpr Row row(S cr, S lf, S sp, S ht, S colon, S ctl, S other) {
    Row r{};
    r.fill(S::kFailed);
    r[kCr] = cr;
    r[kLf] = lf;
    r[kSp] = sp;
    r[kHt] = ht;
    r[kColon] = colon;
    r[kCtl] = ctl;
    for (std::size_t c = kOther; c < kClassCount; ++c)
        r[c] = other;
    return r;
}

// A row in which only `cls` leads on (to `next`).
constexpr Row only(Class cls, S next) {
    Row r{};
    r.fill(S::kFailed);
    r[cls] = next;
    return r;
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
    t[S::kSpace2]         = only(kH,     S::kVersionH);
    t[S::kVersionH]       = only(kT,     S::kVersionT1);
    t[S::kVersionT1]      = only(kT,     S::kVersionT2);
    t[S::kVersionT2]      = only(kP,     S::kVersion);
    t[S::kVersion]        = row(S::kLineLf,         F,                  F,            F,  S::kVersion, F,  S::kVersion);
    t[S::kLineLf]         = row(F,                  S::kLineStart,      F,            F,  F,           F,  F);
    t[S::kLineStart]      = row(S::kEndLf,          F,                  F,            F,  F,           F,  S::kName);
    t[S::kName]           = row(F,                  F,                  F,            F,  S::kValue,   F,  S::kName);
    t[S::kValue]          = row(S::kLineLf,         F,                  S::kValue, S::kValue, S::kValue, F,  S::kValue);
    t[S::kEndLf]          = row(F,                  S::kHeadDone,       F,            F,  F,           F,  F);
    t[S::kHeadDone]       = row(F,                  F,                  F,            F,  F,           F,  F);
    t[S::kFailed]         = row(F,                  F,                  F,            F,  F,           F,  F);
    return t;
}
// clang-format on

// The transitions flattened, each entry the next state's row offset.
using Offset = std::uint8_t;
constexpr std::array<Offset, S::kStateCount * kRowSize> make_offsets() {
    constexpr std::array<Row, S::kStateCount> rows = make_transitions();
    std::array<Offset, S::kStateCount * kRowSize> t{};
    for (std::size_t st = 0; st < S::kStateCount; ++st)
        for (std::size_t c = 0; c < kRowSize; ++c)
            t[st * kRowSize + c] = static_cast<Offset>(rows[st][c] * kRowSize);
    return t;
}
constexpr std::array<Offset, S::kStateCount* kRowSize> kNext = make_offsets();
constexpr Offset kFailedOffset = S::kFailed * kRowSize;

std::uint8_t next_state(std::uint8_t state, std::uint8_t cls) noexcept {
    return static_cast<std::uint8_t>(kNext[state * kRowSize + cls] / kRowSize);
}

// Why (state, class) failed: only looked up once a violation was found.
const char* reason(std::uint8_t state, std::uint8_t cls) noexcept {
    if (cls == kLf) return "bare LF line end";
    switch (state) {
        case S::kRequestStartLf:
        case S::kLineLf:
        case S::kEndLf: return "CR without LF";
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
            if (cls == kSp) return "repeated space in the request line";
            return "malformed request line";
        case S::kSpace2:
            if (cls == kSp) return "repeated space in the request line";
            [[fallthrough]];
        case S::kVersionH:
        case S::kVersionT1:
        case S::kVersionT2:
            if (cls == kCtl || cls == kHt) return "control character in the request line";
            return "malformed HTTP version (RFC 9112 2.3: HTTP/DIGIT.DIGIT)";
        case S::kVersion:
            if (cls == kSp) return "space after the HTTP version";
            return "control character in the request line";
        default:  // request line states
            if (cls == kCtl || cls == kHt) return "control character in the request line";
            return "malformed request line";
    }
}

// Runs: in the method, the target, the version, a field name and a field
// value most bytes leave the state as it is. There the guard looks at eight
// bytes at once (SWAR) for the first that may not, and steps only that one
// through the table: the table walk is a chain of dependent loads, one per
// byte, and measured as costly as llhttp's own parse. A byte is a stop when
// its class could lead elsewhere from the run's state: below 0x21 (SP, HTAB,
// CR, LF, controls; in a value below 0x20, so SP and ':' stay), DEL, and in a
// name ':'. Bytes from 0x80 (obs-text) are kOther and never stops.
using chars::swar::below;
using chars::swar::equal;
using chars::swar::load8;

constexpr std::size_t kMethodAt = S::kMethod * kRowSize;
constexpr std::size_t kTargetAt = S::kTarget * kRowSize;
constexpr std::size_t kVersionAt = S::kVersion * kRowSize;
constexpr std::size_t kNameAt = S::kName * kRowSize;
constexpr std::size_t kValueAt = S::kValue * kRowSize;

// How many of the eight bytes at p leave the run state `at` as it is (8: all
// of them), or -1 when `at` is not a run state.
int run_length(std::size_t at, const char* p) noexcept {
    std::uint64_t stops;
    switch (at) {
        case kMethodAt:
        case kTargetAt:
        case kVersionAt: {
            const std::uint64_t w = load8(p);
            stops = below(w, 0x21) | equal(w, 0x7f);
            break;
        }
        case kNameAt: {
            const std::uint64_t w = load8(p);
            stops = below(w, 0x21) | equal(w, 0x7f) | equal(w, ':');
            break;
        }
        case kValueAt: {
            const std::uint64_t w = load8(p);
            stops = below(w, 0x20) | equal(w, 0x7f);
            break;
        }
        default: return -1;
    }
    return chars::swar::before_stop(stops);
}

}  // namespace

const char* FramingGuard::scan(const char* p, const char* end) noexcept {
    bytes_ += static_cast<std::size_t>(end - p);
    if (state_ == kFailed) return "invalid framing (an earlier violation)";
    const std::uint8_t start = state_;
    std::size_t at = start * kRowSize;
    const char* q = p;
    while (q < end) {
        if (end - q >= 8) {
            const int run = run_length(at, q);
            if (run == 8) {
                q += 8;
                continue;
            }
            if (run > 0) q += run;
        }
        at = kNext[at + kClassOf[static_cast<unsigned char>(*q)]];
        ++q;
    }
    state_ = static_cast<std::uint8_t>(at / kRowSize);
    if (at != kFailedOffset) return nullptr;
    // Slow path: find the first violation and say what it was.
    std::uint8_t st = start;
    for (const char* r = p; r < end; ++r) {
        const std::uint8_t cls = kClassOf[static_cast<unsigned char>(*r)];
        if (next_state(st, cls) == kFailed) return reason(st, cls);
        st = next_state(st, cls);
    }
    return "invalid framing";
}

}  // namespace sm::http
