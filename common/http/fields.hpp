// The two field values the session reads itself, checked against their
// grammar as llhttp hands them over (in pieces when a read ended inside one;
// leading whitespace already skipped, trailing whitespace possibly not):
//
// Host (RFC 9112 3.2: "A server MUST respond with a 400 (Bad Request) status
// code to any request message that contains ... a Host header field with an
// invalid field-value"):
//
//   Host     = uri-host [ ":" port ]                  RFC 9110 7.2
//   uri-host = IP-literal / IPv4address / reg-name    RFC 3986 3.2.2
//   reg-name = *( unreserved / pct-encoded / sub-delims )
//   port     = *DIGIT
//
// An IPv4address is also a reg-name, so only IP-literals ("[...]") need
// their own grammar. An empty value is valid (a target URI without an
// authority).
//
// Transfer-Encoding, which decides how a request body is framed (RFC 9112
// 6.1, 6.3), over all its field lines (RFC 9110 5.3: one list):
//
//   Transfer-Encoding  = #transfer-coding              (RFC 9110 5.6.1 lists)
//   transfer-coding    = token *( OWS ";" OWS transfer-parameter )
//   transfer-parameter = token BWS "=" BWS ( token / quoted-string )
//
// llhttp 8.1.0 only looks for "chunked" at the end of each line: it frames
// "chunked<junk>" followed by a "gzip, chunked" line as chunked, where a
// recipient that reads the value by its grammar sees a broken list. The
// session frames by this parse instead.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "http/parameter.hpp"

namespace sm::http {

// RFC 3986 3.2.2 IPv6address (no brackets, no zone), checked a byte at a
// time in eight bytes of state, so that a Host literal split across reads
// needs no copy: parts of 1-4 HEXDIG separated by ":", at most one "::"
// (standing for at least one part), an IPv4address allowed as the last
// part (counted as two); eight parts without "::", at most seven with it.
class Ipv6Check {
  public:
    void start() noexcept { *this = Ipv6Check{}; }
    // A byte of the literal; false once it cannot be an IPv6address.
    bool step(char c) noexcept;
    // The literal ended: is it an IPv6address?
    [[nodiscard]] bool finish() const noexcept;

  private:
    std::uint8_t parts_ = 0;   // completed parts (an IPv4address counts two)
    std::uint8_t len_ = 0;     // bytes of the part in progress
    std::uint8_t colons_ = 0;  // ":" just seen: 0, 1 or 2 ("::")
    bool gap_ = false;         // "::" seen
    bool decimal_ = true;      // the part in progress could be a dec-octet
    bool in_ipv4_ = false;     // past the first "." of a trailing IPv4address
    std::uint8_t octets_ = 0;  // IPv4 octets completed
    std::uint16_t value_ = 0;  // decimal value of the part or octet in progress
};

class HostCheck {
  public:
    void start() noexcept { state_ = State::start; }
    void feed(const char* p, std::size_t n) noexcept;
    // The whole value has been fed: is it a valid Host?
    [[nodiscard]] bool valid() const noexcept;

  private:
    enum class State : std::uint8_t {
        start,
        reg_name,
        pct1,  // after "%": two HEXDIG follow
        pct2,
        ipv6_start,     // after "[": "v" for IPvFuture, or an IPv6address
        ipv6,           // inside an IPv6address, until "]"
        future_hex1,    // "[v": HEXDIG follows
        future_hex,     // more HEXDIG, then "."
        future_rest1,   // after "v<hex>.": at least one unreserved / sub-delims / ":"
        future_rest,    // more of them, then "]"
        after_literal,  // "]" seen: ":" or the end
        port,
        trailing_ws,
        invalid,
    };
    void step(char c) noexcept;

    State state_ = State::start;
    Ipv6Check ipv6_;
};

class TransferEncodingCheck {
  public:
    // A new request.
    void start() noexcept {
        codings_ = chunked_ = 0;
        last_chunked_ = chunked_params_ = invalid_ = false;
    }
    // A Transfer-Encoding field line: its value in pieces, then its end.
    void start_line() noexcept;
    void feed(const char* p, std::size_t n) noexcept;
    void end_line() noexcept;

    // Every line parsed as a list of transfer-codings.
    [[nodiscard]] bool valid() const noexcept { return !invalid_; }
    // The body is framed by chunked: the list is valid, its final coding is
    // chunked, which appears only there and without parameters (RFC 9112 7:
    // a sender MUST NOT apply chunked more than once; it has none defined).
    [[nodiscard]] bool chunked() const noexcept {
        return !invalid_ && last_chunked_ && chunked_ == 1 && !chunked_params_;
    }
    // How many codings the lines named (an empty value names none).
    // (Counts saturate at 255: only "none" and "once" matter.)
    [[nodiscard]] std::uint8_t codings() const noexcept { return codings_; }

  private:
    enum class State : std::uint8_t {
        list,          // before an element: OWS and empty elements (",") allowed
        coding,        // the coding's name
        after_coding,  // OWS after it: ";" or "," or the end
        param,         // a transfer-parameter after its ";" (param_)
        invalid,
    };
    void end_coding() noexcept;
    // The byte after a coding or a parameter: "," ends the element, ";"
    // starts a parameter, anything else is not a list.
    void after_element(char c) noexcept;

    State state_ = State::list;
    ParameterCheck param_;
    std::uint8_t name_match_ = 0;  // letters of "chunked" the coding's name matched; 0xff: no
    bool params_ = false;          // the coding in progress has parameters
    bool in_coding_ = false;
    std::uint8_t codings_ = 0;
    std::uint8_t chunked_ = 0;
    bool last_chunked_ = false;
    bool chunked_params_ = false;
    bool invalid_ = false;
};

}  // namespace sm::http
