// The chunked transfer coding of a request body (RFC 9112 7.1), decoded by the
// core itself, every byte of its framing checked against the grammar:
//
//   chunked-body    = *chunk last-chunk trailer-section CRLF
//   chunk           = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//   chunk-size      = 1*HEXDIG
//   last-chunk      = 1*("0") [ chunk-ext ] CRLF
//   chunk-ext       = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//   chunk-ext-name  = token
//   chunk-ext-val   = token / quoted-string
//   trailer-section = *( field-line CRLF )
//
// llhttp 8.1.0 built without LLHTTP_STRICT_MODE (as distributions ship it)
// consumes any two bytes after chunk data as its CRLF: "5\r\nhelloXX0\r\n\r\n"
// then ends the body where no conforming parser would, and the bytes after
// it are answered as a second request (the class of CVE-2025-43859 and
// CVE-2023-40175). It also refuses BWS in chunk extensions, which RFC 9110
// 5.6.3 says a recipient MUST accept. So llhttp parses only request heads;
// bodies are framed here, the same whatever mode llhttp was built in.
//
// Sans-I/O and allocation-free: the decoder is fed whatever bytes arrived
// and says how many belong to the body. Chunk data is skipped in bulk; the
// framing, a few bytes per chunk, goes through one switch per byte.
#pragma once

#include <cstddef>
#include <cstdint>

#include "http/parameter.hpp"

namespace sm::http {

class ChunkedDecoder {
  public:
    enum class Status : std::uint8_t {
        more,       // every byte given belongs to the body, which goes on
        done,       // the body ended after `used` bytes
        invalid,    // the framing broke the grammar (400)
        too_large,  // the body is longer than its limit (413)
    };
    struct Step {
        std::size_t used;  // bytes of the input that belong to the body
        Status status;
        const char* why;  // for invalid and too_large
    };

    // Start of a body of at most `max_bytes` bytes, every byte of the coding
    // counted (framing, extensions and trailers too: CVE-2024-22019).
    void start(std::uint64_t max_bytes) noexcept;
    // Decodes [p, end). After done, invalid or too_large, start() again.
    Step feed(const char* p, const char* end) noexcept;

    enum class State : std::uint8_t {
        size_start,  // first HEXDIG of a chunk-size
        size,        // more HEXDIG, BWS, ";" or CR
        size_ws,     // BWS after the size: ";" must follow
        ext,         // a chunk extension after its ";" (ext_)
        size_lf,     // CR of the chunk-size line seen
        data,        // chunk-data
        data_cr,     // CR must follow the chunk-data
        data_lf,
        trailer_start,  // start of a trailer field line, or of the final CRLF
        trailer_name,
        trailer_value,
        trailer_lf,
        end_lf,  // CR of the final CRLF seen
        finished,
    };

  private:
    Step fail(std::size_t used, Status status, const char* why) noexcept;

    State state_ = State::size_start;
    ParameterCheck ext_;
    std::uint64_t size_ = 0;  // of the chunk in progress; data still to come in `data`
    std::uint64_t left_ = 0;  // bytes the coding may still take before it is too large
};

}  // namespace sm::http
