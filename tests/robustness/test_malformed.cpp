// Malformed request heads: line ends, control bytes, header syntax, the
// request line, versions, Host, and input that is not HTTP/1 at all. Each is
// answered with its exact status, "Connection: close" and a clean close (EOF,
// not a reset), and the server goes on serving with no descriptor left behind.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <string>

#include "robustness.hpp"

using namespace sm::test;
using namespace sm::test::robustness;
using namespace std::string_literals;

// --- line ends ----------------------------------------------------------------

TEST_CASE("bare LF line ends get 400", "[robustness][malformed]") {
    check_rejected("GET /plaintext HTTP/1.1\nHost: localhost\n\n", 400);
}

TEST_CASE("a bare LF after the request line or ending the head gets 400",
          "[robustness][malformed]") {
    // llhttp 8.1.0 accepts both; the framing guard must not.
    check_each_rejected({"GET /plaintext HTTP/1.1\nHost: localhost\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\nX-A: b\r\n\r\n"},
                        400);
}

TEST_CASE("a lone CR gets 400", "[robustness][malformed]") {
    check_each_rejected({"GET /plaintext HTTP/1.1\rHost: localhost\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-A: b\rc\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\r\n"},
                        400);
}

// --- control bytes ------------------------------------------------------------

TEST_CASE("NUL and other control bytes in the head get 400", "[robustness][malformed]") {
    // Every control byte a parser might pass through, in each part of the head.
    constexpr std::array<char, 8> kControls = {'\0',   '\x01', '\x08', '\x0b',
                                               '\x0c', '\x1b', '\x1f', '\x7f'};
    std::vector<std::string> inputs;
    for (const char ctl : kControls) {
        const std::string c(1, ctl);
        inputs.push_back("GET /plain" + c + "text HTTP/1.1\r\nHost: localhost\r\n\r\n");
        inputs.push_back("GET" + c + " /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n");
        inputs.push_back("GET /plaintext HTTP/1.1" + c + "\r\nHost: localhost\r\n\r\n");
        inputs.push_back("GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-" + c + "A: b\r\n\r\n");
        inputs.push_back("GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-A: b" + c + "c\r\n\r\n");
        inputs.push_back("GET /plaintext HTTP/1.1\r\nHost: local" + c + "host\r\n\r\n");
    }
    check_each_rejected(inputs, 400);
}

// --- header syntax ------------------------------------------------------------

TEST_CASE("a header line without a colon gets 400", "[robustness][malformed]") {
    check_rejected("GET /plaintext HTTP/1.1\r\nHost: localhost\r\nNo-Colon-Here\r\n\r\n", 400);
}

TEST_CASE("whitespace before a header colon gets 400", "[robustness][malformed]") {
    // RFC 9112 5.1: MUST be rejected with 400 (a proxy might strip it).
    check_each_rejected(
        {"GET /plaintext HTTP/1.1\r\nHost : localhost\r\n\r\n",
         "GET /plaintext HTTP/1.1\r\nHost\t: localhost\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length : 5\r\n\r\nhello"},
        400);
}

TEST_CASE("obs-fold (a line starting with whitespace) gets 400", "[robustness][malformed]") {
    // RFC 9112 5.2: a server MUST reject obs-fold with 400 (or replace it,
    // which this server does not). Folding hides a Content-Length from a
    // proxy that does not fold (CVE-2024-27982).
    check_each_rejected(
        {"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n b\r\n\r\n",
         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n\tb\r\n\r\n",
         "GET /plaintext HTTP/1.1\r\n Host: localhost\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n Content-Length: 5\r\n\r\nhello"},
        400);
}

TEST_CASE("an empty or invalid header name gets 400", "[robustness][malformed]") {
    check_each_rejected({"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n: v\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX(Y): z\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX Y: z\r\n\r\n"},
                        400);
}

TEST_CASE("obs-text and tabs in header values are accepted", "[robustness][malformed]") {
    // Not everything unusual is malformed: RFC 9110 5.5 allows HTAB and
    // obs-text (0x80-0xff) inside a field value.
    check_accepted(
        "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nX-A: caf\xc3\xa9\tau\xff lait\r\n"
        "X-Empty:\r\n\r\n",
        {200});
}

// --- the request line -----------------------------------------------------------

TEST_CASE("an invalid method token gets 400", "[robustness][malformed]") {
    check_each_rejected({"GE(T /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
                         "@GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
                         "GET, /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
                         "\"GET\" /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n"},
                        400);
}

TEST_CASE("a well-formed but unknown method gets 501", "[robustness][malformed][method]") {
    // RFC 9110 9.1: an origin server that receives a request method that is
    // unrecognized SHOULD respond with 501 (Not Implemented); 15.6.2: 501 "is
    // the appropriate response when the server does not recognize the request
    // method". These are valid method tokens (methods are case-sensitive, so
    // "get" is not GET), not malformed requests: 400 would be wrong. The
    // connection still closes: the request was not parsed any further.
    check_each_rejected({"FOO /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
                         "get /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n"},
                        501);
}

TEST_CASE("a method llhttp knows only for RTSP gets 501 in an HTTP request",
          "[robustness][malformed][method]") {
    // llhttp 8.1.0 parses RTSP's methods and refused them here with 400; to
    // an HTTP/1.1 server they are tokens it does not implement (RFC 9110 9.1).
    check_each_rejected({"DESCRIBE /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
                         "SETUP /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n"},
                        501);
}

TEST_CASE("a protocol other than HTTP in the request line gets 400",
          "[robustness][malformed][version]") {
    // RFC 9112 2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive.
    // llhttp 8.1.0 parses RTSP/1.0 and ICE/1.0 as version 1.0: they were
    // served as HTTP/1.0.
    check_each_rejected({"GET /plaintext RTSP/1.0\r\n\r\n", "SOURCE /plaintext ICE/1.0\r\n\r\n",
                         "GET /plaintext http/1.1\r\nHost: localhost\r\n\r\n",
                         "GET /plaintext HTTPS/1.1\r\nHost: localhost\r\n\r\n"},
                        400);
}

TEST_CASE("a request line that is not method SP target SP version gets 400",
          "[robustness][malformed]") {
    check_each_rejected(
        {"GET  /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
         "GET /plaintext  HTTP/1.1\r\nHost: localhost\r\n\r\n",
         " GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
         "GET /plaintext HTTP/1.1 \r\nHost: localhost\r\n\r\n",
         "GET\t/plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
         "GET /plain\ttext HTTP/1.1\r\nHost: localhost\r\n\r\n",
         "GET /plain text HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET /plaintext\r\n\r\n",
         "GET /plaintext FTP/1.1\r\nHost: localhost\r\n\r\n",
         "GET /plaintext HTTP/1.1x\r\nHost: localhost\r\n\r\n",
         "GET /plaintext HTTP/11\r\nHost: localhost\r\n\r\n",
         // RFC 9112 2.3: HTTP-version is "HTTP/" DIGIT "." DIGIT.
         "GET /plaintext HTTP/1.10\r\nHost: localhost\r\n\r\n",
         "GET /plaintext HTTP/01.1\r\nHost: localhost\r\n\r\n"},
        400);
}

TEST_CASE("empty lines before the request line are ignored", "[robustness][malformed]") {
    // RFC 9112 2.2: a server SHOULD ignore at least one empty line (CRLF)
    // received before the request line.
    check_accepted(
        "\r\n" + make_request("GET", "/plaintext") + "\r\n\r\n" + make_request("GET", "/json"),
        {200, 200});
}

// --- versions -------------------------------------------------------------------

TEST_CASE("an HTTP/1.2 request is answered as HTTP/1.1", "[robustness][malformed][version]") {
    // RFC 9110 2.5: a recipient of a higher minor version of a major version
    // it implements SHOULD process the message as the highest minor version
    // it conforms to; the response carries that version (HTTP/1.1).
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        const Response r = c.request(make_request("GET", "/plaintext", {}, "HTTP/1.2"));
        INFO(r.describe());
        CHECK(r.status == 200);
        CHECK(r.version() == "HTTP/1.1");
        conformance::check_common_headers(r);
        CHECK(r.body == conformance::kPlaintextBody);
        // Treated as HTTP/1.1: persistent unless told otherwise.
        CHECK(r.keep_alive);
        if (r.keep_alive) CHECK(c.request(make_request("GET", "/json")).status == 200);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("major versions other than 1 get 505", "[robustness][malformed][version]") {
    // RFC 9110 15.6.6: 505 (HTTP Version Not Supported) for a major version
    // the server does not support. "HTTP/2.0" and "HTTP/3.0" in an HTTP/1
    // request line are well-formed requests in a version this server does
    // not speak, not malformed HTTP/1.1. (nginx answers these with 505 too.)
    check_each_rejected({make_request("GET", "/plaintext", {}, "HTTP/3.0"),
                         make_request("GET", "/plaintext", {}, "HTTP/2.0")},
                        505);
}

// --- Host -----------------------------------------------------------------------

TEST_CASE("an HTTP/1.1 request without Host gets 400", "[robustness][malformed]") {
    // RFC 9112 3.2: MUST respond with 400.
    check_rejected("GET /plaintext HTTP/1.1\r\nAccept: */*\r\n\r\n", 400);
}

TEST_CASE("two Host fields get 400", "[robustness][malformed]") {
    // RFC 9112 3.2: MUST respond with 400 to more than one Host field line,
    // equal or not.
    check_each_rejected({"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nhost: evil.example\r\n\r\n",
                         "GET /plaintext HTTP/1.0\r\nHost: a\r\nHOST: b\r\n\r\n"},
                        400);
}

TEST_CASE("a Host field with an invalid value gets 400", "[robustness][malformed]") {
    // RFC 9112 3.2: MUST respond with 400 to a Host header field with an
    // invalid field value (Host = uri-host [ ":" port ], RFC 3986 3.2.2).
    check_each_rejected({"GET /plaintext HTTP/1.1\r\nHost: local host\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost/plaintext\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: user@localhost\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: localhost:http\r\n\r\n",
                         "GET /plaintext HTTP/1.1\r\nHost: [::1\r\n\r\n"},
                        400);
}

TEST_CASE("every form of Host is accepted", "[robustness][malformed]") {
    check_accepted(
        "GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\n\r\n"
        "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        "GET /plaintext HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"
        "GET /plaintext HTTP/1.1\r\nHost:\r\n\r\n"
        "GET /plaintext HTTP/1.1\r\nHost: localhost\t\r\n\r\n",
        {200, 200, 200, 200, 200});
}

// --- not HTTP/1 at all ------------------------------------------------------------

TEST_CASE("binary garbage gets 400", "[robustness][malformed]") {
    // Deterministic pseudo-random bytes (a 64-bit LCG), 1 KiB of them; the
    // first byte cannot begin a method or an empty line.
    std::string garbage(1024, '\0');
    std::uint64_t x = 0x9e3779b97f4a7c15u;
    for (char& ch : garbage) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        ch = static_cast<char>(x >> 56);
    }
    garbage[0] = '\xff';
    check_each_rejected({garbage, "\x01\x02\x03garbage\r\n\r\n", std::string(64, '\0')}, 400);
}

TEST_CASE("a TLS ClientHello gets 400", "[robustness][malformed]") {
    // A client speaking TLS to the plain HTTP port: the start of a real
    // ClientHello record (handshake, TLS 1.0 record version, TLS 1.2 hello).
    std::string hello = "\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03"s;
    for (int i = 0; i < 32; ++i)
        hello += static_cast<char>(i * 7 + 1);  // client random
    hello += "\x00\x00\x04\x13\x01\x13\x02\x01\x00"s;
    hello.resize(5 + 200, '\0');
    check_rejected(hello, 400);
}

TEST_CASE("the HTTP/2 connection preface gets 400", "[robustness][malformed]") {
    // What an HTTP/2 client with prior knowledge sends: the preface and an
    // empty SETTINGS frame. This server speaks HTTP/1.1 only.
    const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"s;
    const std::string settings = "\x00\x00\x00\x04\x00\x00\x00\x00\x00"s;
    check_each_rejected({preface, preface + settings}, 400);
}
