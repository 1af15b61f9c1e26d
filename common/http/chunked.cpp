#include "http/chunked.hpp"

#include <algorithm>
#include <limits>

#include "http/chars.hpp"

namespace sm::http {
namespace {

using chars::is;
using chars::is_ws;
using chars::kFieldChar;
using chars::kHex;
using chars::kTchar;

std::uint64_t hex_value(char c) noexcept {
    if (c <= '9') return static_cast<std::uint64_t>(c - '0');
    return static_cast<std::uint64_t>((c | 0x20) - 'a' + 10);
}

}  // namespace

void ChunkedDecoder::start(std::uint64_t max_bytes) noexcept {
    state_ = State::size_start;
    size_ = 0;
    left_ = max_bytes;
}

ChunkedDecoder::Step ChunkedDecoder::fail(std::size_t used, Status status,
                                          const char* why) noexcept {
    state_ = State::finished;
    return {used, status, why};
}

ChunkedDecoder::Step ChunkedDecoder::feed(const char* p, const char* end) noexcept {
    using enum State;
    if (state_ == finished) return {0, Status::invalid, "chunked body already ended"};
    const char* q = p;
    auto used = [&] { return static_cast<std::size_t>(q - p); };
    auto bad = [&](const char* why) { return fail(used(), Status::invalid, why); };
    for (; q < end; ++q) {
        const char c = *q;
        switch (state_) {
            case size_start:
                if (!is(c, kHex)) {
                    if (is_ws(c)) return bad("whitespace before a chunk size");
                    if (c == '\r' || c == '\n') return bad("empty chunk size");
                    return bad("invalid character in a chunk size");
                }
                size_ = hex_value(c);
                state_ = size;
                break;
            case size:
                if (is(c, kHex)) {
                    if (size_ > (std::numeric_limits<std::uint64_t>::max() >> 4))
                        return bad("chunk size does not fit in 64 bits");
                    size_ = (size_ << 4) | hex_value(c);
                } else if (c == ';') {
                    state_ = ext;
                    ext_.start();
                } else if (c == '\r') {
                    state_ = size_lf;
                } else if (is_ws(c)) {
                    state_ = size_ws;
                } else if (c == '\n') {
                    return bad("bare LF line end in chunked framing");
                } else {
                    return bad("invalid character in a chunk size");
                }
                break;
            case size_ws:
                if (c == ';') {
                    state_ = ext;
                    ext_.start();
                } else if (!is_ws(c)) {
                    return bad("whitespace after a chunk size without an extension");
                }
                break;
            case ext:
                if (ext_.take(c)) break;
                if (c == ';' && ext_.complete(false)) {
                    ext_.start();
                } else if (c == '\r' && ext_.complete(false) && !ext_.trailing_ws()) {
                    state_ = size_lf;
                } else if (c == '\n') {
                    return bad("bare LF line end in chunked framing");
                } else if (ext_.complete(false) && ext_.trailing_ws()) {
                    return bad("whitespace in a chunk extension not followed by ;");
                } else {
                    return bad("invalid chunk extension (RFC 9112 7.1.1)");
                }
                break;
            case size_lf:
                if (c != '\n') return bad("CR without LF in chunked framing");
                if (size_ == 0) {
                    state_ = trailer_start;
                } else {
                    // The data alone would pass the limit: say so now rather
                    // than after reading it.
                    const std::uint64_t taken = used() + 1;
                    if (taken > left_ || size_ > left_ - taken)
                        return fail(used() + 1, Status::too_large,
                                    "request body larger than the limit");
                    state_ = data;
                }
                break;
            case data: {
                const auto take = static_cast<std::size_t>(
                    std::min<std::uint64_t>(size_, static_cast<std::uint64_t>(end - q)));
                size_ -= take;
                q += take - 1;  // the loop's ++q steps past the last byte taken
                if (size_ == 0) state_ = data_cr;
                break;
            }
            case data_cr:
                // The desync: llhttp 8.1.0 (loose) skips any two bytes here.
                if (c != '\r') {
                    if (c == '\n') return bad("bare LF line end in chunked framing");
                    return bad("chunk data longer than its chunk size (no CRLF after it)");
                }
                state_ = data_lf;
                break;
            case data_lf:
                if (c != '\n') return bad("CR without LF in chunked framing");
                state_ = size_start;
                break;
            case trailer_start:
                if (c == '\r') {
                    state_ = end_lf;
                } else if (is(c, kTchar)) {
                    state_ = trailer_name;
                } else if (is_ws(c)) {
                    return bad("whitespace at the start of a trailer line");
                } else if (c == '\n') {
                    return bad("bare LF line end in chunked framing");
                } else if (c == ':') {
                    return bad("empty trailer field name");
                } else {
                    return bad("invalid character in a trailer field name");
                }
                break;
            case trailer_name:
                if (c == ':') {
                    state_ = trailer_value;
                } else if (is_ws(c)) {
                    return bad("whitespace before the colon of a trailer field");
                } else if (c == '\r' || c == '\n') {
                    return bad("trailer line without a colon");
                } else if (!is(c, kTchar)) {
                    return bad("invalid character in a trailer field name");
                }
                break;
            case trailer_value:
                if (c == '\r') {
                    state_ = trailer_lf;
                } else if (c == '\n') {
                    return bad("bare LF line end in chunked framing");
                } else if (!is(c, kFieldChar)) {
                    return bad("control character in a trailer field value");
                }
                break;
            case trailer_lf:
                if (c != '\n') return bad("CR without LF in chunked framing");
                state_ = trailer_start;
                break;
            case end_lf:
                if (c != '\n') return bad("CR without LF in chunked framing");
                ++q;
                state_ = finished;
                if (used() > left_)
                    return {used(), Status::too_large, "request body larger than the limit"};
                left_ -= used();
                return {used(), Status::done, nullptr};
            case finished: break;  // not reached: checked on entry
        }
    }
    if (used() > left_)
        return fail(used(), Status::too_large, "request body larger than the limit");
    left_ -= used();
    return {used(), Status::more, nullptr};
}

}  // namespace sm::http
