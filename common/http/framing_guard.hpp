// Line-discipline checks that llhttp 8.1.0 lacks, run over every byte of a
// request head. (Chunked framing is checked, every byte of it, by
// ChunkedDecoder: the session frames bodies itself.)
//
//  - CR must be followed by LF (CVE-2023-30589: 8.1.0 takes "\rX" as a line
//    end in places).
//  - LF must follow CR: a bare LF line end is rejected (8.1.0 accepts it after
//    the request line and as the final empty line).
//  - No whitespace at the start of a header line: 8.1.0 folds such a line
//    into the previous value (obs-fold), so " Content-Length: 5" is not a
//    Content-Length to llhttp but may be one to a proxy (CVE-2024-27982).
//  - No whitespace between a field name and its colon (8.1.0 accepts
//    "Host : x" as a field named "Host "), no empty field name, no control
//    bytes in names and values.
//  - A request line of exactly "method SP target SP HTTP-version", no control
//    bytes (8.1.0 accepts "GET  /", a tab in the target, and HTTP/0.9's
//    "GET /"), its version starting "HTTP" (RFC 9112 2.3: HTTP-name is
//    case-sensitive "HTTP"; 8.1.0 also parses "RTSP/1.0" and "ICE/1.0" and
//    reports them as version 1.0; the "/" DIGIT "." DIGIT after it llhttp
//    checks itself, exactly).
//
// The guard sees bytes after llhttp has parsed them but before the session acts
// on the message: the session pauses llhttp at the end of the head, so a
// response is only written for a request the guard accepted.
//
// It is a deterministic automaton over byte classes: per byte one class lookup
// and one transition lookup, no branch (it runs on every head byte, so it was
// worth measuring: a switch per byte cost as much as llhttp's own parse).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sm::http {

class FramingGuard {
  public:
    // Start of a request head (also accepts empty lines before the request line).
    void start_head() noexcept {
        state_ = kRequestStart;
        bytes_ = 0;
    }

    // Scans [p, end). Returns nullptr when the bytes are acceptable so far,
    // otherwise a short description of the (first) violation.
    const char* scan(const char* p, const char* end) noexcept;

    // The empty line ending the head has been scanned.
    [[nodiscard]] bool head_complete() const noexcept { return state_ == kHeadDone; }
    // Bytes scanned since the last start_head().
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

    // States, public for the transition table.
    enum State : std::uint8_t {
        kRequestStart,    // before the request line; empty lines allowed
        kRequestStartLf,  // CR of an empty line before the request line
        kMethod,
        kSpace1,  // after the SP that ends the method
        kTarget,
        kSpace2,  // after the SP that ends the target: "HTTP" follows
        kVersionH,
        kVersionT1,
        kVersionT2,
        kVersion,    // after "HTTP": the rest of the version (llhttp checks it)
        kLineLf,     // CR at the end of a line; LF must follow
        kLineStart,  // start of a header line, or of the empty line
        kName,
        kValue,
        kEndLf,  // CR of the empty line ending the head
        kHeadDone,
        kFailed,
        kStateCount,
    };

  private:
    std::uint8_t state_ = kRequestStart;
    std::size_t bytes_ = 0;
};

}  // namespace sm::http
