// The test-only reference of RFC 9112 request framing (tests/support/rfc9112):
// every rule it implements, each with the input that breaks it and the one
// that does not, the exact message boundaries, the limits at their edges, and
// inputs cut short. Each assertion names the rule it checks.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/rfc9112.hpp"

using sm::test::rfc9112::describe;
using sm::test::rfc9112::frame;
using sm::test::rfc9112::Message;
using sm::test::rfc9112::Policy;
using sm::test::rfc9112::Result;
using sm::test::rfc9112::Verdict;
namespace grammar = sm::test::rfc9112::grammar;
using namespace std::string_literals;
using namespace std::string_view_literals;

namespace {

// What holds for every Result: offsets grow, a reject ends the list and is not
// followed by `incomplete`, every reject, either and closing message says why.
void check_invariants(const Result& r, std::string_view input) {
    std::size_t previous_end = 0;
    for (std::size_t i = 0; i < r.messages.size(); ++i) {
        const Message& m = r.messages[i];
        const bool last = i + 1 == r.messages.size();
        if (m.verdict == Verdict::reject) {
            CHECK(last);
            CHECK_FALSE(r.incomplete);
            CHECK_FALSE(m.rule.empty());
            CHECK(m.end >= previous_end);
            CHECK(m.end < input.size());
        } else {
            CHECK(m.end > previous_end);
            CHECK(m.end <= input.size());
            if (m.verdict == Verdict::either) CHECK_FALSE(m.rule.empty());
            if (!m.persist) {
                CHECK(last);
                CHECK_FALSE(m.rule.empty());
                CHECK_FALSE(r.incomplete);
            }
            previous_end = m.end;
        }
    }
}

Result run(std::string_view input, const Policy& policy = Policy{}) {
    Result r = frame(input, policy);
    INFO("input: " << input << "\nresult:\n" << describe(r));
    check_invariants(r, input);
    return r;
}

// `input` is exactly one complete message with this verdict, end and persist.
void expect_one(std::string_view input, Verdict verdict, std::size_t end, bool persist,
                const Policy& policy = Policy{}) {
    const Result r = run(input, policy);
    INFO("input: " << input << "\nresult:\n" << describe(r));
    REQUIRE(r.messages.size() == 1);
    CHECK(r.messages[0].verdict == verdict);
    CHECK(r.messages[0].end == end);
    CHECK(r.messages[0].persist == persist);
    CHECK_FALSE(r.incomplete);
}

void expect_accept(std::string_view input, const Policy& policy = Policy{}) {
    expect_one(input, Verdict::accept, input.size(), true, policy);
}

// The last message of `input` is a reject (at `at`, if given, and citing `rule_part`).
void expect_reject(std::string_view input, std::optional<std::size_t> at = std::nullopt,
                   std::string_view rule_part = {}, const Policy& policy = Policy{}) {
    const Result r = run(input, policy);
    INFO("input: " << input << "\nresult:\n" << describe(r));
    REQUIRE_FALSE(r.messages.empty());
    const Message& m = r.messages.back();
    CHECK(m.verdict == Verdict::reject);
    if (at) CHECK(m.end == *at);
    if (!rule_part.empty()) CHECK(m.rule.find(rule_part) != std::string::npos);
    CHECK_FALSE(r.incomplete);
}

void expect_incomplete(std::string_view input, std::size_t messages = 0,
                       const Policy& policy = Policy{}) {
    const Result r = run(input, policy);
    INFO("input: " << input << "\nresult:\n" << describe(r));
    CHECK(r.incomplete);
    CHECK(r.messages.size() == messages);
    for (const Message& m : r.messages)
        CHECK(m.verdict != Verdict::reject);
}

// An HTTP/1.1 request "GET / HTTP/1.1" with Host: x and more field lines (each
// ending in CRLF), then the empty line.
std::string get_with(std::string_view fields) {
    return "GET / HTTP/1.1\r\nHost: x\r\n"s + std::string(fields) + "\r\n";
}
// Any request line (without its CRLF) and field lines.
std::string request(std::string_view line, std::string_view fields) {
    return std::string(line) + "\r\n" + std::string(fields) + "\r\n";
}
// A chunked POST with this body.
std::string chunked_post(std::string_view body) {
    return "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"s + std::string(body);
}
constexpr std::size_t kChunkedHead =
    "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"sv.size();

const std::string kGet = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";  // 27 octets

}  // namespace

// ---------------------------------------------------------------------------
// Message boundaries

TEST_CASE("rfc9112 reference frames a pipeline of GET, HEAD and POST requests", "[rfc9112]") {
    // RFC 9112 6.3: no framing field -> no content; Content-Length -> that many
    // octets; chunked -> up to the CRLF after the trailer section.
    const std::string head = "HEAD /plaintext HTTP/1.1\r\nHost: example.com\r\n\r\n";
    const std::string post_length =
        "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    const std::string post_chunked =
        "POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    const std::string input = kGet + head + post_length + post_chunked + kGet;
    REQUIRE(kGet.size() == 27);
    const Result r = run(input);
    INFO(describe(r));
    REQUIRE(r.messages.size() == 5);
    const std::vector<std::size_t> ends = {
        27, 27 + head.size(), 27 + head.size() + post_length.size(),
        27 + head.size() + post_length.size() + post_chunked.size(), input.size()};
    for (std::size_t i = 0; i < ends.size(); ++i) {
        INFO("message " << i);
        CHECK(r.messages[i].verdict == Verdict::accept);
        CHECK(r.messages[i].end == ends[i]);
        CHECK(r.messages[i].persist);
        CHECK(r.messages[i].rule.empty());
    }
    CHECK_FALSE(r.incomplete);
}

TEST_CASE("rfc9112 reference takes body octets as content even when they look like a request",
          "[rfc9112]") {
    // RFC 9112 6.3 item 5: exactly Content-Length octets, whatever they hold.
    const std::string post = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n" + kGet;
    expect_accept(post);
    // chunk-data is opaque too (RFC 9112 7.1): a CRLF inside it ends nothing.
    expect_accept(chunked_post("4\r\n\r\n\r\n\r\n0\r\n\r\n"));
    // Content-Length: 0 and a GET with a body are ordinary messages.
    expect_accept(get_with("Content-Length: 0\r\n"));
    expect_accept(get_with("Content-Length: 3\r\n") + "abc");
}

TEST_CASE("rfc9112 reference skips empty lines before the request-line", "[rfc9112]") {
    // RFC 9112 2.2: empty lines (CRLF) before the request-line are ignored.
    expect_accept("\r\n\r\n" + kGet);
    const Result r = run(kGet + "\r\n" + kGet + "\r\n\r\n\r\n" + kGet);
    REQUIRE(r.messages.size() == 3);
    CHECK(r.messages[0].end == 27);
    CHECK(r.messages[1].end == 27 + 2 + 27);
    CHECK(r.messages[2].end == 27 + 2 + 27 + 6 + 27);
    CHECK_FALSE(r.incomplete);
    // Empty lines after the last message already begin the next one.
    expect_incomplete(kGet + "\r\n", 1);
    expect_incomplete(kGet + "\r", 1);
    expect_incomplete("\r\n\r\n");
    // ... and they must be CRLF (RFC 9112 2.2: no bare LF, no bare CR).
    expect_reject("\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, "bare LF");
    expect_reject("\r\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, "CR must be followed by LF");
    expect_reject(kGet + "\n" + kGet, 27, "bare LF");
    // An empty input holds no message and is not incomplete.
    const Result empty = run("");
    CHECK(empty.messages.empty());
    CHECK_FALSE(empty.incomplete);
}

TEST_CASE("rfc9112 reference rejects a bare LF or bare CR anywhere in the head", "[rfc9112]") {
    // RFC 9112 2.2: we do not accept a bare LF as a line terminator, and a CR
    // must be followed by LF.
    expect_reject("GET / HTTP/1.1\nHost: x\r\n\r\n", 14, "bare LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\n\r\n", 23, "bare LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\n\n", 25, "bare LF");
    expect_reject("GET / HTTP/1.1\r\r\nHost: x\r\n\r\n", 15, "CR must be followed by LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\r\n\r\n", 24, "CR must be followed by LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\n\rX", 26, "CR must be followed by LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\rA: b\r\n\r\n", 24, "CR must be followed by LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\nA: b\nc\r\n\r\n", 29, "bare LF");
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\nA\n: b\r\n\r\n", 26, "bare LF");
    // Mirror: the same heads with CRLF everywhere.
    expect_accept("GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n");
}

// ---------------------------------------------------------------------------
// Request-line (RFC 9112 3)

TEST_CASE("rfc9112 reference requires method SP request-target SP HTTP-version CRLF", "[rfc9112]") {
    expect_accept("GET /a/b?c=d HTTP/1.1\r\nHost: x\r\n\r\n");
    // method = token (RFC 9110 5.6.2)
    expect_reject("GE(T / HTTP/1.1\r\nHost: x\r\n\r\n", 2, "token");
    expect_reject(" GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, "token");
    expect_reject("G\xC3T / HTTP/1.1\r\nHost: x\r\n\r\n", 1, "token");
    // exactly one SP each, nothing else on the line
    expect_reject("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 4, "empty request-target");
    expect_reject("GET /  HTTP/1.1\r\nHost: x\r\n\r\n", 6, "HTTP-version");
    expect_reject("GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 3, "token");
    expect_reject("GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 14, "request-line ends with CRLF");
    expect_reject("GET /\r\nHost: x\r\n\r\n", 5, "request-target");
    expect_reject("GET / \r\nHost: x\r\n\r\n", 6, "HTTP-version");
    expect_reject("GET\r\n\r\n", 3, "token");
    // request-target: a CTL (DEL included) is rejected
    expect_reject("GET /a\x01z HTTP/1.1\r\nHost: x\r\n\r\n", 6, "CTL");
    expect_reject("GET /a\x7Fz HTTP/1.1\r\nHost: x\r\n\r\n", 6, "CTL");
    expect_reject("GET /a\tz HTTP/1.1\r\nHost: x\r\n\r\n", 6, "CTL");
    expect_reject("GET /a\0z HTTP/1.1\r\nHost: x\r\n\r\n"sv, 6, "CTL");
}

TEST_CASE("rfc9112 reference accepts only HTTP/1.x versions, case-sensitively", "[rfc9112]") {
    // RFC 9112 2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive.
    expect_reject("GET / HTTP/1.10\r\nHost: x\r\n\r\n", 14, "request-line ends with CRLF");
    expect_reject("GET / HTTP/1\r\nHost: x\r\n\r\n", 12, "HTTP-version");
    expect_reject("GET / HTTP/1.\r\nHost: x\r\n\r\n", 13, "HTTP-version");
    expect_reject("GET / RTSP/1.0\r\nHost: x\r\n\r\n", 6, "HTTP-version");
    expect_reject("GET / http/1.1\r\nHost: x\r\n\r\n", 6, "HTTP-version");
    expect_reject("GET / HTTP/1.a\r\nHost: x\r\n\r\n", 13, "HTTP-version");
    expect_reject("GET / HTTP/11\r\nHost: x\r\n\r\n", 12, "HTTP-version");
    // RFC 9110 15.6.6: major other than 1 -> 505
    expect_reject("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 11, "505");
    expect_reject("GET / HTTP/0.9\r\nHost: x\r\n\r\n", 11, "505");
    expect_reject("GET / HTTP/3", 11, "505");
    // HTTP/1.x with minor >= 1 follows the HTTP/1.1 rules: Host required, persistent.
    expect_accept("GET / HTTP/1.2\r\nHost: x\r\n\r\n");
    expect_accept("GET / HTTP/1.9\r\nHost: x\r\n\r\n");
    expect_reject("GET / HTTP/1.2\r\n\r\n", 17, "without Host");
    // HTTP/1.0: no Host needed, not persistent by default (RFC 9112 9.3).
    expect_one("GET / HTTP/1.0\r\n\r\n", Verdict::accept, 18, false);
}

TEST_CASE("rfc9112 reference rejects methods the server does not implement", "[rfc9112]") {
    // RFC 9110 9.1 / 15.6.2: a valid token that is not implemented -> 501, decided
    // when the head is complete.
    for (const std::string_view m :
         {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH", "M-SEARCH", "PURGE",
          "PROPFIND", "MKCALENDAR", "SOURCE", "UNLINK"}) {
        INFO("method " << m);
        expect_accept(request(std::string(m) + " / HTTP/1.1", "Host: x\r\n"));
    }
    const std::string foo = "FOO / HTTP/1.1\r\nHost: x\r\n\r\n";
    expect_reject(foo, foo.size() - 1, "501");
    expect_reject("get / HTTP/1.1\r\nHost: x\r\n\r\n", 26, "501");  // methods are case-sensitive
    expect_reject("Get / HTTP/1.1\r\nHost: x\r\n\r\n", 26, "501");
    // Not decided before the head is complete.
    expect_incomplete("FOO / HTTP/1.1\r\nHost: x\r\n");
    expect_incomplete("FOO / HTTP/1.1\r\nHost: x\r\n\r");
    // A head that is invalid in another way is a reject too.
    expect_reject("FOO / HTTP/1.1\r\n\r\n", std::nullopt);
    // Policy::methods replaces the default list.
    Policy custom;
    custom.methods = {"GET", "FOO"};
    expect_accept(foo, custom);
    expect_reject("POST / HTTP/1.1\r\nHost: x\r\n\r\n", 27, "501", custom);
}

// ---------------------------------------------------------------------------
// Field lines (RFC 9112 5)

TEST_CASE("rfc9112 reference parses field lines by the field-line grammar", "[rfc9112]") {
    // field-name ":" OWS field-value OWS CRLF
    expect_accept(get_with("A:b\r\n"));
    expect_accept(get_with("A:\r\n"));
    expect_accept(get_with("A: \t \r\n"));
    expect_accept(get_with("A: b c\td \r\n"));
    expect_accept(get_with("A: \x80\xFF\xC3\xA9\r\n"));  // obs-text
    expect_accept(get_with("!#$%&'*+-.^_`|~09AZaz: v\r\n"));
    // RFC 9112 5.1: no whitespace between field-name and colon (MUST reject).
    expect_reject(get_with("A : b\r\n"), 26, "between field-name and colon");
    expect_reject(get_with("A\t: b\r\n"), 26, "between field-name and colon");
    expect_reject("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 20, "between field-name and colon");
    // field-name = token, at least one octet
    expect_reject(get_with(": b\r\n"), 25, "field-name");
    expect_reject(get_with("A(B: c\r\n"), 26, "field-name");
    expect_reject(get_with("A\xC3: c\r\n"), 26, "field-name");
    expect_reject(get_with("AB\r\n"), 27, "field-name");  // no colon
    // RFC 9112 5.2: obs-fold is rejected (our choice) ...
    expect_reject(get_with("A: b\r\n c\r\n"), 31, "obs-fold");
    expect_reject(get_with("A: b\r\n\tc\r\n"), 31, "obs-fold");
    // ... and so is whitespace before the first field line (RFC 9112 2.2).
    expect_reject("GET / HTTP/1.1\r\n Host: x\r\n\r\n", 16, "first field line");
    // Field names are case-insensitive.
    const std::string mixed = "GET / HTTP/1.1\r\nhOsT: x\r\nconnection: CLOSE\r\n\r\n";
    expect_one(mixed, Verdict::accept, mixed.size(), false);
}

TEST_CASE("rfc9112 reference allows only VCHAR, obs-text, SP and HTAB in field values",
          "[rfc9112]") {
    // RFC 9110 5.5: NUL, CR, LF and the other CTLs are rejected.
    expect_reject(get_with("A: b\0c\r\n"s), 29, "field-value");
    expect_reject(get_with("A: b\x01\r\n"), 29, "field-value");
    expect_reject(get_with("A: b\x1F\r\n"), 29, "field-value");
    expect_reject(get_with("A: b\x7F\r\n"), 29, "field-value");
    expect_reject(get_with("A: b\x0B\r\n"), 29, "field-value");
    expect_reject(get_with("A: b\rc\r\n"), 30, "CR must be followed by LF");
    expect_reject(get_with("A: \0\r\n"s), 28, "field-value");
    // Mirror: the printable and obs-text octets.
    std::string all;
    for (int c = 0x20; c <= 0xFF; ++c) {
        if (c != 0x7F) all += static_cast<char>(c);
    }
    all += '\t';
    expect_accept(get_with("A: " + all + "\r\n"));
}

TEST_CASE("rfc9112 reference strips leading and trailing OWS from field values", "[rfc9112]") {
    // RFC 9112 5.1: OWS around the value is not part of it, SP and HTAB alike.
    expect_accept("POST / HTTP/1.1\r\nHost: \t x \t\r\nContent-Length: \t5\t \r\n\r\nhello");
    expect_accept("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\t\r\n\r\nhello");
    expect_accept("POST / HTTP/1.1\r\nHost: x\r\nContent-Length:5\r\n\r\nhello");
    expect_accept(chunked_post("0\r\n\r\n"));
    expect_accept("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n");
    expect_accept("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\t chunked \r\n\r\n0\r\n\r\n");
    const std::string close = "GET / HTTP/1.1\r\nHost: x\r\nConnection: \tclose\t\r\n\r\n";
    expect_one(close, Verdict::accept, close.size(), false);
}

// ---------------------------------------------------------------------------
// Host (RFC 9112 3.2, RFC 3986 3.2.2)

TEST_CASE("rfc9112 reference requires exactly one Host in HTTP/1.1 and at most one in HTTP/1.0",
          "[rfc9112]") {
    expect_reject("GET / HTTP/1.1\r\n\r\n", 17, "without Host");
    expect_reject("GET / HTTP/1.1\r\nA: b\r\n\r\n", 23, "without Host");
    expect_one("GET / HTTP/1.0\r\n\r\n", Verdict::accept, 18, false);
    // More than one Host field line, any version, even with equal values: at the
    // second colon.
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 29, "more than one Host");
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n", 29, "more than one Host");
    expect_reject("GET / HTTP/1.0\r\nHost: x\r\nHOST: x\r\n\r\n", 29, "more than one Host");
    // Decided at the colon: even an unfinished head is already invalid.
    expect_reject("GET / HTTP/1.1\r\nHost: x\r\nHost:", 29, "more than one Host");
    // Missing Host is decided at the end of the head only.
    expect_incomplete("GET / HTTP/1.1\r\nA: b\r\n");
}

TEST_CASE("rfc9112 reference checks the Host value against uri-host [ \":\" port ]", "[rfc9112]") {
    for (const std::string_view v : {"",
                                     "x",
                                     "example.com",
                                     "example.com:8080",
                                     "example.com:",
                                     ":80",
                                     "127.0.0.1",
                                     "127.0.0.1:80",
                                     "999.999.999.999",
                                     "[::1]",
                                     "[::1]:80",
                                     "[2001:db8::8:800:200c:417a]",
                                     "[::ffff:192.0.2.1]:443",
                                     "[v1.fe80::a+en1]",
                                     "[V7.x]",
                                     "ex%41mple",
                                     "a_b~c-d.e",
                                     "!$&'()*+,;=",
                                     "xn--nxasmq6b.example",
                                     "EXAMPLE.COM",
                                     "x:000"}) {
        INFO("Host: " << v);
        expect_accept("GET / HTTP/1.1\r\nHost: " + std::string(v) + "\r\n\r\n");
        CHECK(grammar::is_host_value(v));
    }
    for (const std::string_view v :
         {"a b",    "a/b",      "a@b",       "a:b",      "a:80:90",
          "[::1",   "[::1]x",   "[::1]:a",   "::1",      "[1:2:3:4:5:6:7:8:9]",
          "[g::1]", "ex%4mple", "ex%zzmple", "a?b",      "a#b",
          "[]",     "[v.x]",    "[vx.y]",    "[v1.]",    "[1::2::3]",
          "x\"y",   "a<b",      "a\\b",      "\xC3\xA9", "x:80 y"}) {
        INFO("Host: " << v);
        const std::string input = "GET / HTTP/1.1\r\nHost: " + std::string(v) + "\r\n\r\n";
        // Decided at the CR ending the value.
        expect_reject(input, 22 + v.size(), "Host must be uri-host");
        CHECK_FALSE(grammar::is_host_value(v));
    }
    // The same rule in HTTP/1.0.
    expect_reject("GET / HTTP/1.0\r\nHost: a b\r\n\r\n", 25, "Host must be uri-host");
}

TEST_CASE("rfc9112 reference recognises IPv4address and IPv6address exactly", "[rfc9112]") {
    for (const std::string_view a : {"0.0.0.0", "255.255.255.255", "1.2.3.4", "10.0.0.1"}) {
        INFO(a);
        CHECK(grammar::is_ipv4_address(a));
    }
    for (const std::string_view a : {"256.0.0.0", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1..3.4", "",
                                     "1.2.3.", "a.b.c.d", "300.1.1.1"}) {
        INFO(a);
        CHECK_FALSE(grammar::is_ipv4_address(a));
    }
    for (const std::string_view a :
         {"::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
          "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "1::1.2.3.4", "1:2:3:4:5::1.2.3.4", "fe80::1",
          "FFFF::ffff", "2001:db8::8:800:200c:417a", "::ffff:0:255.255.255.255", "1:2::7:8"}) {
        INFO(a);
        CHECK(grammar::is_ipv6_address(a));
    }
    for (const std::string_view a :
         {"1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", ":::", "1:::2", "1::2::3", ":1::", "1:", ":1",
          "12345::", "1.2.3.4", "::1.2.3", "::256.1.1.1", "::01.1.1.1", "1:2:3:4:5:6:7::8",
          "::1.2.3.4:5", "1.2.3.4::", "1:2:3:4:5:6:7:1.2.3.4", "g::", ""}) {
        INFO(a);
        CHECK_FALSE(grammar::is_ipv6_address(a));
    }
    CHECK(grammar::is_ip_literal("[::1]"));
    CHECK(grammar::is_ip_literal("[v1A.x:y]"));
    CHECK_FALSE(grammar::is_ip_literal("::1"));
    CHECK_FALSE(grammar::is_ip_literal("[v1.x/y]"));
}

// ---------------------------------------------------------------------------
// Content-Length (RFC 9112 6.3, RFC 9110 8.6)

TEST_CASE("rfc9112 reference reads Content-Length as 1*DIGIT", "[rfc9112]") {
    const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ";
    expect_accept(head + "5\r\n\r\nhello");
    expect_accept(head + "005\r\n\r\nhello");  // leading zeros are fine
    expect_accept(head + "5\t\r\n\r\nhello");  // trailing OWS
    expect_accept(head + "0\r\n\r\n");
    expect_accept(head + "00\r\n\r\n");
    for (const std::string_view v : {"5, 5", "5,5", "5,", ",5", "+5", "-5", "5 5", "0x5", "", " ",
                                     "five", "5;", "5.0", "\xD9\xA5"}) {
        INFO("Content-Length: " << v);
        expect_reject(head + std::string(v) + "\r\n\r\nhello", head.size() + v.size(), "8.6");
    }
    // More than one Content-Length field line, even with the same value: at the
    // second colon (we reject rather than fold).
    expect_reject(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 59,
        "more than one Content-Length");
    // The body is incomplete until its last octet.
    expect_incomplete(head + "5\r\n\r\nhell");
    expect_incomplete(head + "5\r\n\r\n");
    // Content-Length is decided at the CR that ends it.
    expect_incomplete(head + "5,");
}

TEST_CASE("rfc9112 reference rejects a Content-Length beyond 64 bits or max_body_bytes",
          "[rfc9112]") {
    const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ";
    Policy unlimited;
    unlimited.max_body_bytes = std::numeric_limits<std::uint64_t>::max();
    // 2^64 - 1 fits (and then the body is just not there yet); 2^64 does not.
    expect_incomplete(head + "18446744073709551615\r\n\r\n", 0, unlimited);
    expect_incomplete(head + "000018446744073709551615\r\n\r\n", 0, unlimited);
    expect_reject(head + "18446744073709551616\r\n\r\n", std::nullopt, "64 bits", unlimited);
    expect_reject(head + "99999999999999999999999\r\n\r\n", std::nullopt, "64 bits", unlimited);
    // max_body_bytes: at the edge and one past (413).
    Policy p;
    p.max_body_bytes = 10;
    expect_accept(head + "10\r\n\r\n0123456789", p);
    expect_reject(head + "11\r\n\r\n01234567890", head.size() + 2, "413", p);
    expect_reject(head + "18446744073709551615\r\n\r\n", std::nullopt, "413");
}

// ---------------------------------------------------------------------------
// Transfer-Encoding (RFC 9112 6.1, 6.3)

TEST_CASE("rfc9112 reference frames any Transfer-Encoding whose final coding is chunked",
          "[rfc9112]") {
    const std::string line = "POST / HTTP/1.1\r\nHost: x\r\n";
    const std::string body = "\r\n3\r\nabc\r\n0\r\n\r\n";
    for (const std::string_view te :
         {"Transfer-Encoding: chunked\r\n", "Transfer-Encoding: Chunked\r\n",
          "transfer-encoding: CHUNKED\r\n", "Transfer-Encoding: chunked\t\r\n",
          "Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: gzip,chunked\r\n",
          "Transfer-Encoding: , chunked ,\r\n", "Transfer-Encoding: ,,gzip,,chunked,,\r\n",
          "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
          "Transfer-Encoding:\r\nTransfer-Encoding: chunked\r\n",
          "Transfer-Encoding: gzip ; level=9 , chunked\r\n",
          "Transfer-Encoding: x;a=b;c=\"d,e\\\"f\", chunked\r\n",
          "Transfer-Encoding: x ;a = \"\" , chunked\r\n"}) {
        INFO(te);
        expect_accept(line + std::string(te) + body);
    }
}

TEST_CASE("rfc9112 reference rejects a Transfer-Encoding that does not end in a single chunked",
          "[rfc9112]") {
    const std::string line = "POST / HTTP/1.1\r\nHost: x\r\n";
    const std::string body = "\r\n3\r\nabc\r\n0\r\n\r\n";
    // Decided at the end of the head: the list is empty, or its final coding is not chunked.
    for (const std::string_view te :
         {"Transfer-Encoding:\r\n", "Transfer-Encoding: \r\n", "Transfer-Encoding: , ,\r\n",
          "Transfer-Encoding: gzip\r\n", "Transfer-Encoding: chunked, gzip\r\n",
          "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
          "Transfer-Encoding: identity\r\n", "Transfer-Encoding: chunkedx\r\n"}) {
        INFO(te);
        const std::string head = line + std::string(te) + "\r\n";
        expect_reject(head + body.substr(2), head.size() - 1, "6.");
    }
    // Decided at the CR of the offending line: chunked twice, chunked with
    // parameters, a value that is not a list of transfer-coding.
    for (const std::string_view v :
         {"chunked, chunked", "chunked;a=b", "chunked ; q=1", "chunked x", "chunked;", "chunked;a",
          "chunked;a=", "x;a=\"b, chunked", "ch@nked", "x;a=\"b\"c, chunked", "\"chunked\""}) {
        INFO(v);
        const std::string input = line + "Transfer-Encoding: " + std::string(v) + body;
        expect_reject(input, line.size() + 19 + v.size(), "Transfer-Encoding");
        CHECK(grammar::is_transfer_coding_list(v) ==
              (v == "chunked, chunked" || v == "chunked;a=b" || v == "chunked ; q=1"));
    }
    expect_reject(line + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked" + body,
                  line.size() + 28 + 26, "more than once");
    // Until the head ends, a later line may still make chunked the final coding.
    expect_incomplete(line + "Transfer-Encoding: gzip\r\n");
    expect_accept(line + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n" + body);
}

TEST_CASE("rfc9112 reference rejects Content-Length together with Transfer-Encoding", "[rfc9112]") {
    // RFC 9112 6.1 allows it (Transfer-Encoding wins); we reject, at the second colon.
    const std::string line = "POST / HTTP/1.1\r\nHost: x\r\n";
    expect_reject(
        line + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        line.size() + 19 + 17, "Transfer-Encoding with Content-Length");
    expect_reject(
        line + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        line.size() + 28 + 14, "Content-Length with Transfer-Encoding");
    // Even an empty Transfer-Encoding value means transfer codings are in use.
    expect_reject(line + "Transfer-Encoding:\r\nContent-Length: 0\r\n\r\n", line.size() + 20 + 14,
                  "Content-Length with Transfer-Encoding");
    // Mirror: either one alone.
    expect_accept(line + "Content-Length: 5\r\n\r\nhello");
    expect_accept(line + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
}

TEST_CASE("rfc9112 reference frames HTTP/1.0 with Transfer-Encoding as chunked and closes",
          "[rfc9112]") {
    // RFC 9112 6.1: MUST treat the framing as faulty and close after the message.
    const std::string req =
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    expect_one(req, Verdict::accept, req.size(), false);
    const Result r = run(req + kGet);
    REQUIRE(r.messages.size() == 1);
    CHECK(r.messages[0].rule.find("6.1") != std::string::npos);
    CHECK_FALSE(r.incomplete);
    // keep-alive does not change it.
    const std::string keep =
        "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    expect_one(keep + kGet, Verdict::accept, keep.size(), false);
    // The Transfer-Encoding rules still apply.
    expect_reject("POST / HTTP/1.0\r\nTransfer-Encoding: gzip\r\n\r\n", std::nullopt, "chunked");
    expect_reject("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX", std::nullopt,
                  "chunk-data");
    expect_incomplete("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
}

// ---------------------------------------------------------------------------
// Chunked bodies (RFC 9112 7.1)

TEST_CASE("rfc9112 reference frames chunked bodies with extensions and trailers", "[rfc9112]") {
    const std::vector<std::string_view> bodies = {
        "0\r\n\r\n",
        "000\r\n\r\n",
        "5\r\nhello\r\n0\r\n\r\n",
        "a\r\n0123456789\r\n0\r\n\r\n",
        "A\r\n0123456789\r\n0\r\n\r\n",
        "00005\r\nhello\r\n0\r\n\r\n",
        "000000000000000000000000000005\r\nhello\r\n0\r\n\r\n",  // leading zeros
        "1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n",
        // chunk-ext without BWS
        "5;a\r\nhello\r\n0\r\n\r\n",
        "5;a=b\r\nhello\r\n0\r\n\r\n",
        "5;a=b;c=d;e\r\nhello\r\n0;x=y\r\n\r\n",
        "5;a;b\r\nhello\r\n0\r\n\r\n",
        // chunk-ext with BWS (RFC 9110 5.6.3: MUST be accepted)
        "5 ;a=b\r\nhello\r\n0\r\n\r\n",
        "5 ; a = b\r\nhello\r\n0\r\n\r\n",
        "5\t;\ta\t=\tb\r\nhello\r\n0\r\n\r\n",
        "5  ;  a  ;  b  =  c\r\nhello\r\n0 ; last\r\n\r\n",
        // quoted-string values with quoted-pairs (RFC 9110 5.6.4)
        "5;a=\"\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x y\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"q\\\"x\\\\\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"\\\t\\ \\z\\\xFF\"\r\nhello\r\n0\r\n\r\n",
        "5;a = \"x;y=z,w\" ; b\r\nhello\r\n0\r\n\r\n",
        "5;a=\"\xC3\xA9\t!#[]~\"\r\nhello\r\n0\r\n\r\n",
        // trailers (RFC 9112 7.1.2)
        "0\r\nX-T: 1\r\n\r\n",
        "5\r\nhello\r\n0\r\nX-T: 1\r\nY:2\r\nZ:\r\n\r\n",
        "0\r\nContent-Length: 99\r\nHost: other\r\nTransfer-Encoding: gzip\r\n\r\n",
        // opaque chunk-data
        "3\r\n\0\r\n\r\n0\r\n\r\n"sv,
    };
    for (const std::string_view body : bodies) {
        INFO("body: " << body);
        expect_accept(chunked_post(body));
    }
}

TEST_CASE("rfc9112 reference requires the exact chunk-size line grammar", "[rfc9112]") {
    // chunk-size [ chunk-ext ] CRLF, BWS only where the grammar puts it.
    struct Case {
        std::string_view body;
        std::size_t at;  // offset of the fault inside the body
    };
    for (const Case c : {
             Case{"5 \r\nhello\r\n0\r\n\r\n", 2},  // whitespace without ";"
             Case{" 5\r\nhello\r\n0\r\n\r\n", 0},  // whitespace before the size
             Case{"\t5\r\nhello\r\n0\r\n\r\n", 0},
             Case{"5\t\r\nhello\r\n0\r\n\r\n", 2},
             Case{"5;\r\nhello\r\n0\r\n\r\n", 2},    // ";" without a name
             Case{"5;a \r\nhello\r\n0\r\n\r\n", 4},  // BWS after a name without "=" or ";"
             Case{"5;a=\r\nhello\r\n0\r\n\r\n", 4},  // "=" without a value
             Case{"5;a= \r\nhello\r\n0\r\n\r\n", 5},
             Case{"5;=b\r\nhello\r\n0\r\n\r\n", 2},
             Case{"5;a=b \r\nhello\r\n0\r\n\r\n", 6},
             Case{"5;a=b c\r\nhello\r\n0\r\n\r\n", 6},
             Case{"5;a=\"x\r\nhello\r\n0\r\n\r\n", 6},  // an unterminated quoted-string
             Case{"5;a=\"x\"y\r\nhello\r\n0\r\n\r\n", 7},
             Case{"5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n", 6},  // quoted-pair of a CTL
             Case{"5;a=\"\x7F\"\r\nhello\r\n0\r\n\r\n", 5},
             Case{"5;a=b=c\r\nhello\r\n0\r\n\r\n", 5},
             Case{"5;a@b\r\nhello\r\n0\r\n\r\n", 3},
             Case{"-5\r\nhello\r\n0\r\n\r\n", 0},
             Case{"x\r\nhello\r\n0\r\n\r\n", 0},
             Case{"0x5\r\nhello\r\n0\r\n\r\n", 1},
             Case{"\r\n5\r\nhello\r\n0\r\n\r\n", 0},  // no empty line before a chunk
             Case{"5\nhello\r\n0\r\n\r\n", 1},        // bare LF
             Case{"5\rxhello\r\n0\r\n\r\n", 2},       // bare CR
             Case{"5;a=b\nhello\r\n0\r\n\r\n", 5},
             Case{"0 \r\n\r\n", 2},
             Case{"0;\r\n\r\n", 2},
         }) {
        INFO("body: " << c.body);
        expect_reject(chunked_post(c.body), kChunkedHead + c.at);
    }
    CHECK(grammar::is_quoted_string("\"a\\\"b\""));
    CHECK(grammar::is_quoted_string("\"\""));
    CHECK_FALSE(grammar::is_quoted_string("\"a\\\""));
    CHECK_FALSE(grammar::is_quoted_string("\"a\"b"));
    CHECK_FALSE(grammar::is_quoted_string("a"));
}

TEST_CASE("rfc9112 reference requires CRLF right after chunk-data", "[rfc9112]") {
    // RFC 9112 7.1: chunk-data is exactly chunk-size octets, then CRLF.
    for (const std::string_view body :
         {"5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "5\r\nhello\r0\r\n\r\n",
          "5\r\nhello\r\r\n0\r\n\r\n", "5\r\nhello 0\r\n\r\n"}) {
        INFO("body: " << body);
        const std::size_t at = body == "5\r\nhello\r0\r\n\r\n" ? 9 : (body[8] == '\r' ? 9 : 8);
        expect_reject(chunked_post(body), kChunkedHead + at, "chunk-data must be followed by CRLF");
    }
    // A chunk-size larger than the data that follows: the CRLF lands inside the data.
    expect_reject(chunked_post("4\r\nhello\r\n0\r\n\r\n"), kChunkedHead + 7, "chunk-data");
    // A chunk-size smaller than the data: the size line's CRLF is data, then garbage.
    // (6 data octets "hello\r", then "\n" where CR must be.)
    expect_reject(chunked_post("6\r\nhello\r\n0\r\n\r\n"), kChunkedHead + 9, "chunk-data");
}

TEST_CASE("rfc9112 reference rejects the chunked desync input and frames nothing after it",
          "[rfc9112]") {
    // The request-smuggling case: 7 octets where 5 were announced.
    const std::string input =
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"
        "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    const Result r = run(input);
    INFO(describe(r));
    REQUIRE(r.messages.size() == 1);
    CHECK(r.messages[0].verdict == Verdict::reject);
    CHECK(r.messages[0].end == input.find("XX"));
    CHECK(r.messages[0].rule == "RFC 9112 7.1: chunk-data must be followed by CRLF");
    CHECK_FALSE(r.incomplete);
    // Cut anywhere before the first X it is incomplete; from the X on, a reject.
    for (std::size_t cut = 1; cut <= input.size(); ++cut) {
        const Result p = frame(std::string_view(input).substr(0, cut), Policy{});
        INFO("cut " << cut << ": " << describe(p));
        if (cut <= input.find("XX")) {
            CHECK(p.incomplete);
            CHECK(p.messages.empty());
        } else {
            REQUIRE(p.messages.size() == 1);
            CHECK(p.messages[0].verdict == Verdict::reject);
            CHECK(p.messages[0].end == input.find("XX"));
        }
    }
}

TEST_CASE("rfc9112 reference applies the field-line rules to trailers", "[rfc9112]") {
    // RFC 9112 7.1.2: trailer-section = *( field-line CRLF ), as in the head.
    struct Case {
        std::string_view body;
        std::size_t at;
    };
    for (const Case c : {
             Case{"0\r\nX: a\r\n b\r\n\r\n", 9},  // obs-fold
             Case{"0\r\n X: a\r\n\r\n", 3},
             Case{"0\r\nX : a\r\n\r\n", 4},  // whitespace before the colon
             Case{"0\r\n: a\r\n\r\n", 3},    // empty name
             Case{"0\r\nX(: a\r\n\r\n", 4},
             Case{"0\r\nX\r\n\r\n", 4},  // no colon
             Case{"0\r\nX: a\x01\r\n\r\n", 7},
             Case{"0\r\nX: a\x7F\r\n\r\n", 7},
             Case{"0\r\nX: a\n\r\n", 7},  // bare LF
             Case{"0\r\nX: a\rb\r\n\r\n", 8},
             Case{"0\r\n\n", 3},
             Case{"0\r\n\r\r\n", 4},
             Case{"0\r\n\rX", 4},
             Case{"0\r\nX: a\r\n\n", 9},
         }) {
        INFO("body: " << c.body);
        expect_reject(chunked_post(c.body), kChunkedHead + c.at);
    }
    expect_reject(chunked_post("0\r\nX: \0\r\n\r\n"s), kChunkedHead + 6, "field-value");
    // Mirror: valid trailers, with OWS and obs-text.
    expect_accept(chunked_post("0\r\nX:\ta \xFF\t\r\nY-Z: \r\n\r\n"));
}

TEST_CASE("rfc9112 reference rejects a chunk-size that does not fit in 64 bits", "[rfc9112]") {
    Policy unlimited;
    unlimited.max_body_bytes = std::numeric_limits<std::uint64_t>::max();
    // 16 hex digits fit (the data is then simply not there yet); a 17th does not.
    expect_incomplete(chunked_post("FFFFFFFFFFFFFFFF\r\n"), 0, unlimited);
    expect_incomplete(chunked_post("0000FFFFFFFFFFFFFFFF\r\nab"), 0, unlimited);
    expect_reject(chunked_post("10000000000000000\r\n"), kChunkedHead + 16, "64 bits", unlimited);
    expect_reject(chunked_post("FFFFFFFFFFFFFFFFF"), kChunkedHead + 16, "64 bits", unlimited);
}

// ---------------------------------------------------------------------------
// Connection, persistence, Upgrade (RFC 9110 7.6.1, 7.8; RFC 9112 9.3)

TEST_CASE("rfc9112 reference decides persistence from the version and Connection", "[rfc9112]") {
    struct Case {
        std::string_view version;
        std::string_view fields;
        bool persist;
    };
    for (const Case c : {
             Case{"1.1", "", true},
             Case{"1.1", "Connection: close\r\n", false},
             Case{"1.1", "Connection: CLOSE\r\n", false},
             Case{"1.1", "Connection: keep-alive, close\r\n", false},
             Case{"1.1", "Connection: foo\r\nConnection: close\r\n", false},
             Case{"1.1", "Connection: ,, close ,\r\n", false},
             Case{"1.1", "Connection: closed\r\n", true},
             Case{"1.1", "Connection: keep-alive\r\n", true},
             Case{"1.1", "Connection:\r\n", true},
             Case{"1.1", "Connection: te, foo\r\n", true},
             Case{"1.0", "", false},
             Case{"1.0", "Connection: keep-alive\r\n", true},
             Case{"1.0", "Connection: Keep-Alive\r\n", true},
             Case{"1.0", "Connection: foo, keep-alive\r\n", true},
             Case{"1.0", "Connection: keep-alive\r\nConnection: close\r\n", false},
             Case{"1.0", "Connection: keep-alive, close\r\n", false},
             Case{"1.0", "Connection: keepalive\r\n", false},
             Case{"1.0", "Connection: close\r\n", false},
         }) {
        INFO("HTTP/" << c.version << " " << c.fields);
        const std::string req =
            request("GET / HTTP/" + std::string(c.version), "Host: x\r\n" + std::string(c.fields));
        expect_one(req, Verdict::accept, req.size(), c.persist);
        // A persistent message is followed by the next; a closing one by nothing.
        const Result r = run(req + kGet);
        CHECK(r.messages.size() == (c.persist ? 2U : 1U));
        CHECK_FALSE(r.incomplete);
    }
}

TEST_CASE("rfc9112 reference stops after a message that closes the connection", "[rfc9112]") {
    // RFC 9112 9.6: nothing after the closing message is read, not even garbage.
    const std::string close = get_with("Connection: close\r\n");
    const Result r = run(close + "\x01\x02 not a request\n");
    REQUIRE(r.messages.size() == 1);
    CHECK(r.messages[0].verdict == Verdict::accept);
    CHECK(r.messages[0].end == close.size());
    CHECK_FALSE(r.messages[0].persist);
    CHECK(r.messages[0].rule.find("close") != std::string::npos);
    CHECK_FALSE(r.incomplete);
    // Nor a half request.
    const Result half = run(close + "GET / HT");
    CHECK(half.messages.size() == 1);
    CHECK_FALSE(half.incomplete);
}

TEST_CASE("rfc9112 reference treats a malformed Connection element as either", "[rfc9112]") {
    // RFC 9110 7.6.1 (connection-option = token) and 2.2 (a recipient may reject
    // or recover): the message keeps its boundaries.
    const std::string bad = get_with("Connection: a b\r\n");
    expect_one(bad, Verdict::either, bad.size(), true);
    const std::string bad_close = get_with("Connection: close, a/b\r\n");
    expect_one(bad_close, Verdict::either, bad_close.size(), false);
    const Result r = run(bad + kGet);
    REQUIRE(r.messages.size() == 2);
    CHECK(r.messages[1].verdict == Verdict::accept);
}

TEST_CASE("rfc9112 reference closes after an Upgrade request with Connection: upgrade",
          "[rfc9112]") {
    // RFC 9110 7.8: this server never switches protocols; it answers and closes.
    const std::string up =
        "POST / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Content-Length: 3\r\n\r\nabc";
    expect_one(up + kGet, Verdict::accept, up.size(), false);
    const std::string up_chunked =
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, upgrade\r\nupgrade: h2c\r\n"
        "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    expect_one(up_chunked + kGet, Verdict::accept, up_chunked.size(), false);
    // Mirror: Upgrade without the connection option, or the option without Upgrade.
    expect_accept(get_with("Upgrade: websocket\r\n"));
    expect_accept(get_with("Connection: upgrade\r\n"));
    expect_accept(get_with("Upgrade:\r\nConnection: upgraded\r\n"));
}

// ---------------------------------------------------------------------------
// CONNECT (RFC 9110 9.3.6)

TEST_CASE("rfc9112 reference ends CONNECT after its head and closes", "[rfc9112]") {
    const std::string connect = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    expect_one(connect + "\x16\x03\x01 tunnel bytes", Verdict::accept, connect.size(), false);
    const std::string literal = "CONNECT [::1]:8443 HTTP/1.1\r\nHost: x\r\n\r\n";
    expect_one(literal, Verdict::accept, literal.size(), false);
    // With framing fields: either, still ending after the head.
    const std::string with_length =
        "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n";
    expect_one(with_length + "hello", Verdict::either, with_length.size(), false);
    const std::string with_te =
        "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    expect_one(with_te + "0\r\n\r\n", Verdict::either, with_te.size(), false);
    // ... but invalid framing fields reject.
    expect_reject("CONNECT a:1 HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", std::nullopt,
                  "8.6");
    expect_reject(
        "CONNECT a:1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        std::nullopt, "more than one Content-Length");
    expect_reject("CONNECT a:1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
                  std::nullopt, "chunked");
    expect_reject(
        "CONNECT a:1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: "
        "chunked\r\n\r\n",
        std::nullopt, "Transfer-Encoding");
    expect_reject("CONNECT a:1 HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
                  std::nullopt, "413");
    // A target other than uri-host ":" port, both parts present: either.
    for (const std::string_view t :
         {"/", "example.com", "example.com:", ":443", "*", "http://example.com:443/", "a:b"}) {
        INFO("CONNECT " << t);
        const std::string req = "CONNECT " + std::string(t) + " HTTP/1.1\r\nHost: x\r\n\r\n";
        expect_one(req, Verdict::either, req.size(), false);
    }
}

// ---------------------------------------------------------------------------
// request-target forms (RFC 9112 3.2): content-level, so `either`

TEST_CASE("rfc9112 reference accepts the four request-target forms in their places", "[rfc9112]") {
    for (const std::string_view t :
         {"/", "/a/b?c=d&e", "/%41%2f", "/a:b@c!$&'()*+,;=", "/?/?", "//x", "/-._~", "/?",
          "/a?b?c/d", "http://example.com/x", "http://example.com", "https://[::1]:8080/a?b",
          "HTTP://X/", "http://example.com:/", "http://127.0.0.1/?q"}) {
        INFO("target " << t);
        expect_accept(request("GET " + std::string(t) + " HTTP/1.1", "Host: x\r\n"));
        CHECK((grammar::is_origin_form(t) || grammar::is_absolute_uri(t)));
    }
    // Absolute-URIs of other schemes are well-formed, but an origin server
    // may refuse a target URI it does not serve (RFC 9110 7.4): either.
    for (const std::string_view t :
         {"urn:isbn:0451450523", "mailto:a@b.c", "file:/etc", "x-y+z.1:a"}) {
        INFO("target " << t);
        CHECK(grammar::is_absolute_uri(t));
        const Result r = frame(request("GET " + std::string(t) + " HTTP/1.1", "Host: x\r\n"), {});
        REQUIRE(r.messages.size() == 1);
        CHECK(r.messages[0].verdict == Verdict::either);
        CHECK_THAT(r.messages[0].rule, Catch::Matchers::Contains("RFC 9110 7.4"));
    }
    expect_accept("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_accept("OPTIONS /a HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(grammar::is_authority_form("example.com:443"));
    CHECK(grammar::is_authority_form("[::1]:"));
    CHECK_FALSE(grammar::is_authority_form("example.com"));
    CHECK_FALSE(grammar::is_absolute_uri("1a:b"));
    CHECK_FALSE(grammar::is_absolute_uri("/a"));
    CHECK_FALSE(grammar::is_origin_form("a/b"));
}

TEST_CASE("rfc9112 reference answers a target of the wrong form with either", "[rfc9112]") {
    for (const std::string_view t : {"/a#f",
                                     "/#",
                                     "/a\"b",
                                     "/<",
                                     "/>",
                                     "/\\",
                                     "/^",
                                     "/`",
                                     "/{",
                                     "/|",
                                     "/}",
                                     "/%zz",
                                     "/%4",
                                     "/%",
                                     "/\xC3\xA9",
                                     "/a?b#c",
                                     "http://x/#f",
                                     "http:///x",
                                     "http:/x",
                                     "https:x",
                                     "http://u@x/",
                                     "http://u:p@x/",
                                     "http://x:y/",
                                     "http://[::1/",
                                     "1http://x/",
                                     "+a:b",
                                     "example.com:80",
                                     "localhost:",
                                     "x-y+z.1:",
                                     "*",
                                     "**",
                                     "a",
                                     "?x",
                                     "%2F",
                                     "http://x/<"}) {
        INFO("target " << t);
        const std::string req = request("GET " + std::string(t) + " HTTP/1.1", "Host: x\r\n");
        expect_one(req, Verdict::either, req.size(), true);
    }
    // After an either, framing continues as if the message was accepted.
    const std::string frag = "GET /a#f HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab";
    const Result r = run(frag + kGet);
    REQUIRE(r.messages.size() == 2);
    CHECK(r.messages[0].verdict == Verdict::either);
    CHECK(r.messages[0].end == frag.size());
    CHECK(r.messages[0].rule.find("fragment") != std::string::npos);
    CHECK(r.messages[1].verdict == Verdict::accept);
    CHECK(r.messages[1].end == frag.size() + kGet.size());
}

// ---------------------------------------------------------------------------
// Limits

TEST_CASE("rfc9112 reference limits the head to max_head_bytes", "[rfc9112]") {
    const std::string req = get_with("X-Pad: " + std::string(100, 'p') + "\r\n");
    Policy p;
    p.max_head_bytes = req.size();
    expect_accept(req, p);
    p.max_head_bytes = req.size() - 1;
    expect_reject(req, req.size() - 1, "431", p);
    // Leading empty lines count toward the limit.
    p.max_head_bytes = req.size() + 2;
    expect_accept("\r\n" + req, p);
    p.max_head_bytes = req.size() + 1;
    expect_reject("\r\n" + req, req.size() + 1, "431", p);
    p.max_head_bytes = 3;
    expect_reject("\r\n\r\n", 3, "431", p);
    // An unfinished head already holding more than the limit is a reject; holding
    // exactly the limit it is incomplete.
    p.max_head_bytes = 20;
    expect_incomplete(req.substr(0, 20), 0, p);
    expect_reject(req.substr(0, 21), 20, "431", p);
    // The limit is per message.
    p.max_head_bytes = kGet.size();
    const Result r = run(kGet + kGet + kGet, p);
    CHECK(r.messages.size() == 3);
    // The body does not count.
    expect_accept(get_with("Content-Length: 100\r\n") + std::string(100, 'b'));
}

TEST_CASE("rfc9112 reference limits the request-target to max_uri_bytes", "[rfc9112]") {
    Policy p;
    p.max_uri_bytes = 10;
    const std::string ten = "/123456789";
    expect_accept("GET " + ten + " HTTP/1.1\r\nHost: x\r\n\r\n", p);
    expect_reject("GET " + ten + "0 HTTP/1.1\r\nHost: x\r\n\r\n", 14, "414", p);
    expect_incomplete("GET " + ten, 0, p);
    expect_reject("GET " + ten + "0", 14, "414", p);
    // The default: 8 KiB.
    const std::string target = "/" + std::string(8 * 1024 - 1, 'a');
    expect_accept("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_reject("GET " + target + "a HTTP/1.1\r\nHost: x\r\n\r\n", 4 + 8 * 1024, "414");
}

TEST_CASE("rfc9112 reference limits the field lines to max_header_count", "[rfc9112]") {
    Policy p;
    p.max_header_count = 3;
    const std::string three = get_with("A: 1\r\nB: 2\r\n");  // Host, A, B
    expect_accept(three, p);
    const std::string four = get_with("A: 1\r\nB: 2\r\nC: 3\r\n");
    expect_reject(four, four.find("C:"), "max_header_count", p);
    // Decided as the fourth line begins.
    expect_reject(four.substr(0, four.find("C:") + 1), four.find("C:"), "max_header_count", p);
    expect_incomplete(four.substr(0, four.find("C:")), 0, p);
    // The default: 100.
    std::string fields;
    for (int i = 0; i < 99; ++i) {
        fields += 'F';  // not "F" + ...: g++ 12 -O3 -Wrestrict false positive
        fields += std::to_string(i);
        fields += ": v\r\n";
    }
    expect_accept(get_with(fields));
    expect_reject(get_with(fields + "G: v\r\n"), std::nullopt, "max_header_count");
}

TEST_CASE("rfc9112 reference limits the chunked body to max_body_bytes", "[rfc9112]") {
    // Every octet from the first chunk-size octet through the final CRLF counts.
    const std::string body = "5\r\nhello\r\n0\r\n\r\n";  // 15 octets
    Policy p;
    p.max_body_bytes = body.size();
    expect_accept(chunked_post(body), p);
    // One octet short: certain as soon as the chunk-size is read (5 + framing > 14).
    p.max_body_bytes = body.size() - 1;
    expect_reject(chunked_post(body), kChunkedHead, "413", p);
    expect_reject(chunked_post("5"), kChunkedHead, "413", p);
    // Extensions and trailers count too.
    const std::string ext = "5;name=value\r\nhello\r\n0\r\n\r\n";
    p.max_body_bytes = ext.size();
    expect_accept(chunked_post(ext), p);
    p.max_body_bytes = ext.size() - 1;
    expect_reject(chunked_post(ext), kChunkedHead + 11, "413", p);
    const std::string trailer = "0\r\nX-Trailer: " + std::string(40, 't') + "\r\n\r\n";
    p.max_body_bytes = trailer.size();
    expect_accept(chunked_post(trailer), p);
    p.max_body_bytes = trailer.size() - 1;
    // (certain once the last "t" is read: at least CRLF CRLF must follow)
    expect_reject(chunked_post(trailer), kChunkedHead + trailer.size() - 5, "413", p);
    // An unfinished body already beyond the limit is a reject.
    p.max_body_bytes = 20;
    expect_incomplete(chunked_post("1;" + std::string(8, 'e')), 0, p);
    expect_reject(chunked_post("1;" + std::string(9, 'e')), kChunkedHead + 10, "413", p);
}

TEST_CASE("rfc9112 reference rejects a chunk-size that alone exceeds max_body_bytes", "[rfc9112]") {
    // Default limit 1 MiB. With a 5-digit size s the shortest body is
    // 5 + 2 + s + 2 + 5 octets, so s = 0xFFFF2 is the largest that fits.
    const std::uint64_t largest = 0xFFFF2;
    const std::string fits =
        "FFFF2\r\n" + std::string(static_cast<std::size_t>(largest), 'd') + "\r\n0\r\n\r\n";
    REQUIRE(fits.size() == 1024 * 1024);
    expect_accept(chunked_post(fits));
    expect_incomplete(chunked_post("FFFF2\r\n"));
    expect_reject(chunked_post("FFFF3"), kChunkedHead + 4, "413");
    expect_reject(chunked_post("100000\r\n"), kChunkedHead + 5, "413");
    expect_reject(chunked_post("FFFFFFFFFFFFFFFF"), kChunkedHead + 4,
                  "413");  // "FFFFF" is too much
    // The body limit sums all chunks.
    const std::string two = "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n";
    Policy p;
    p.max_body_bytes = two.size();
    expect_accept(chunked_post(two), p);
    p.max_body_bytes = two.size() - 1;
    expect_reject(chunked_post(two), kChunkedHead + 13, "413", p);
}

// ---------------------------------------------------------------------------
// Incomplete inputs

TEST_CASE(
    "rfc9112 reference reports every cut of a pipeline as incomplete with the earlier "
    "messages",
    "[rfc9112]") {
    const std::vector<std::string> parts = {
        "\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody",
        "PUT /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        "7;e=\"v\\\"\"\r\nab\r\n0\r\n\r\n",  // chunk-data may hold anything
        "2\r\nde\r\n0\r\nT: 1\r\n\r\n",
        "GET /d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "DELETE /e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    };
    // The chunked message spans parts 2 and 3; fix the list of ends accordingly.
    std::string input;
    std::vector<std::size_t> ends;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        input += parts[i];
        if (i != 2) ends.push_back(input.size());
    }
    const Result full = run(input);
    INFO(describe(full));
    REQUIRE(full.messages.size() == ends.size());
    for (std::size_t i = 0; i < ends.size(); ++i) {
        CHECK(full.messages[i].verdict == Verdict::accept);
        CHECK(full.messages[i].end == ends[i]);
        CHECK(full.messages[i].persist == (i + 1 != ends.size()));
    }
    for (std::size_t cut = 0; cut <= input.size(); ++cut) {
        const std::string_view prefix = std::string_view(input).substr(0, cut);
        const Result r = frame(prefix, Policy{});
        INFO("cut " << cut << ":\n" << describe(r));
        std::size_t complete = 0;
        while (complete < ends.size() && ends[complete] <= cut)
            ++complete;
        REQUIRE(r.messages.size() == complete);
        for (std::size_t i = 0; i < complete; ++i) {
            CHECK(r.messages[i].verdict == full.messages[i].verdict);
            CHECK(r.messages[i].end == full.messages[i].end);
            CHECK(r.messages[i].persist == full.messages[i].persist);
        }
        const bool at_boundary = cut == 0 || (complete > 0 && ends[complete - 1] == cut);
        CHECK(r.incomplete == !at_boundary);
    }
}

TEST_CASE("rfc9112 reference lists the messages before an unfinished one", "[rfc9112]") {
    expect_incomplete(kGet + "G", 1);
    expect_incomplete(kGet + "GET / HTTP/1.1\r\nHost: x\r\n", 1);
    expect_incomplete(kGet + kGet + chunked_post("5\r\nhel"), 2);
    expect_incomplete(kGet + chunked_post("5\r\nhello\r\n0\r\nX: y"), 1);
    expect_incomplete(kGet + chunked_post("5;a=\"x\\"), 1);
    expect_incomplete(kGet + "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345", 1);
    // An either before the cut is listed as well.
    expect_incomplete("GET /# HTTP/1.1\r\nHost: x\r\n\r\nGET", 1);
}

// ---------------------------------------------------------------------------
// describe()

TEST_CASE("rfc9112 reference describes a result one line per message", "[rfc9112]") {
    const Result r =
        frame(kGet + "GET /a#b HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n", Policy{});
    const std::string text = describe(r);
    INFO(text);
    CHECK(text.rfind("#0 accept end=27 persist=yes\n#1 either end=57 persist=yes (", 0) == 0);
    CHECK(text.find("#2 reject at=74 (RFC 9112 3.2: an HTTP/1.1 request without Host (400))\n") !=
          std::string::npos);
    CHECK(describe(frame(kGet + "GET", Policy{})) == "#0 accept end=27 persist=yes\nincomplete\n");
    CHECK(describe(frame("", Policy{})) == "(no messages)\n");
}

TEST_CASE("rfc9112 reference says when an unfinished message is already either", "[rfc9112]") {
    // A server may refuse it before it ends (the differential fuzzer allows it).
    Result r = frame("GET /a#frag HTTP/1.1\r\nHo", {});
    CHECK(r.incomplete);
    CHECK_THAT(r.incomplete_either, Catch::Matchers::Contains("fragment"));
    r = frame("POST /a#frag HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel", {});
    CHECK(r.incomplete);
    CHECK_FALSE(r.incomplete_either.empty());
    // Nothing known against it yet: the target is not complete, or is fine.
    r = frame("GET /a#frag", {});
    CHECK(r.incomplete);
    CHECK(r.incomplete_either.empty());
    r = frame("GET /a HTTP/1.1\r\nHo", {});
    CHECK(r.incomplete);
    CHECK(r.incomplete_either.empty());
}

TEST_CASE("rfc9112 reference takes an empty Upgrade with Connection: upgrade as an upgrade",
          "[rfc9112]") {
    // The server answers and closes any request that asks for an upgrade.
    expect_one("GET / HTTP/1.1\r\nHost: a\r\nUpgrade:\r\nConnection: upgrade\r\n\r\n",
               Verdict::accept, 58, false);
}
