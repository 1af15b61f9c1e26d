// An independent, test-only reference of HTTP/1.1 request message framing,
// written from the grammar of RFC 9112, RFC 9110 and RFC 3986 (not from the
// server's code, and without llhttp). A differential fuzzer feeds the same
// bytes to frame() and to the server and compares where each message ends,
// whether it is answered normally, and whether the connection may carry
// another request.
//
// Where the RFCs leave a choice to the recipient, the choice of this server
// is built in (bare LF and obs-fold are rejected, a repeated Content-Length
// is rejected rather than folded, Content-Length with Transfer-Encoding is
// rejected, ...); every Message says which rule decided it.
//
// When a fault is detected (the offset reported for a reject):
// - octet syntax (tokens, CTLs, CR/LF, chunk lines, chunk-data framing), the
//   HTTP major version, the field-line count and every size limit: at the
//   first octet after which no continuation of the input could be valid (the
//   chunked-body limit: once the octets so far plus the fewest octets that
//   could still complete the body exceed max_body_bytes);
// - the name-only rules (a second Host, a second Content-Length, both
//   Content-Length and Transfer-Encoding): at the colon of the field line
//   that breaks them;
// - the value of a single field line (Host, Content-Length, a Transfer-Encoding
//   line): at the CR that ends the value;
// - rules over the whole head (Host missing, the final transfer coding, the
//   method not implemented): at the LF that ends the head.
// An input that ends before the detection point of a fault is `incomplete`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace sm::test::rfc9112 {

struct Policy {
    std::size_t max_head_bytes = 16 * 1024;      // 431 beyond
    std::size_t max_uri_bytes = 8 * 1024;        // 414 beyond
    std::size_t max_header_count = 100;          // 431 beyond
    std::uint64_t max_body_bytes = 1024 * 1024;  // 413 beyond
    // Methods the server implements (case-sensitive); empty = default_methods().
    std::vector<std::string> methods;
};

enum class Verdict : std::uint8_t { accept, reject, either };

struct Message {
    Verdict verdict = Verdict::reject;
    // accept/either: offset one past the message's last octet.
    // reject: offset of the octet at which the input became invalid (diagnostic).
    std::size_t end = 0;
    // accept/either: the connection may carry another request after this one.
    bool persist = false;
    // Why: for reject and either always, and for persist == false; cites the RFC section.
    std::string rule;
};

struct Result {
    // In input order; stops after a reject or after a message with persist == false.
    std::vector<Message> messages;
    // The input ended inside a message that is not (yet) invalid; that message is
    // not listed. Leading empty lines already count as the inside of a message.
    bool incomplete = false;
    // With `incomplete`: why the unfinished message is already `either` (its
    // target is complete and out of form, say), so that a server may refuse
    // it before it ends; empty if nothing is known against it yet.
    std::string incomplete_either;
};

Result frame(std::string_view input, const Policy& policy);

// One line per message ("#0 accept end=37 persist=yes"), then "incomplete" if so.
std::string describe(const Result& result);

std::string_view to_string(Verdict verdict);
std::ostream& operator<<(std::ostream& out, Verdict verdict);

// The methods used when Policy::methods is empty.
const std::vector<std::string>& default_methods();

// Grammar predicates the framing uses, exposed for direct tests.
namespace grammar {
bool is_token(std::string_view s);                 // RFC 9110 5.6.2: 1*tchar
bool is_ipv4_address(std::string_view s);          // RFC 3986 3.2.2 IPv4address
bool is_ipv6_address(std::string_view s);          // RFC 3986 3.2.2 IPv6address
bool is_ip_literal(std::string_view s);            // "[" ( IPv6address / IPvFuture ) "]"
bool is_host_value(std::string_view s);            // uri-host [ ":" port ] (Host field value)
bool is_origin_form(std::string_view s);           // RFC 9112 3.2.1
bool is_absolute_uri(std::string_view s);          // RFC 3986 4.3
bool is_authority_form(std::string_view s);        // RFC 9112 3.2.3: uri-host ":" port
bool is_quoted_string(std::string_view s);         // RFC 9110 5.6.4, the whole of s
bool is_transfer_coding_list(std::string_view s);  // RFC 9110 5.6.1 #transfer-coding
}  // namespace grammar

}  // namespace sm::test::rfc9112
