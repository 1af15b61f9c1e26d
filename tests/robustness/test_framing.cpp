// Message framing: Content-Length and Transfer-Encoding that disagree or do
// not parse (request smuggling), broken chunked framing, a request split at
// every byte, what follows "Connection: close" or an error, and clients that
// half-close or reset in the middle of a request.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "robustness.hpp"

using namespace sm::test;
using namespace sm::test::robustness;
using namespace std::string_literals;

namespace {

const std::string kChunkedHead =
    "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";

}  // namespace

// --- Content-Length and Transfer-Encoding -----------------------------------------

TEST_CASE("Content-Length together with Transfer-Encoding gets 400", "[robustness][framing]") {
    // RFC 9112 6.1: a server MAY reject such a request (which smells of
    // smuggling) and MUST close the connection after responding. Both orders.
    check_each_rejected({"POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                         "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
                         "Content-Length: 5\r\n\r\n0\r\n\r\n"},
                        400);
}

TEST_CASE("two equal Content-Length fields get 400", "[robustness][framing]") {
    // RFC 9112 6.3: reject, or fold equal values into one; this server rejects.
    check_rejected(
        "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
        "hello",
        400);
}

TEST_CASE("two different Content-Length fields get 400", "[robustness][framing]") {
    // RFC 9112 6.3: an invalid message; 400 and close.
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
         "hello!",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 6\r\nContent-Length: 0\r\n\r\n"
         "hello!"},
        400);
}

TEST_CASE("a negative or signed Content-Length gets 400", "[robustness][framing]") {
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\nhello",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: +5\r\n\r\nhello"},
        400);
}

TEST_CASE("an overflowing Content-Length gets 400", "[robustness][framing]") {
    // Larger than any integer: must not wrap around to a small length.
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
         "99999999999999999999999\r\n\r\n",
         // 2^64: wraps to 0 in a 64-bit counter that does not check.
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 18446744073709551616\r\n\r\n" +
             make_request("GET", "/plaintext")},
        400);
}

TEST_CASE("a non-numeric Content-Length gets 400", "[robustness][framing]") {
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0x10\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5 5\r\n\r\nhello"},
        400);
}

TEST_CASE("Transfer-Encoding that does not end in chunked gets 400", "[robustness][framing]") {
    // RFC 9112 6.3: the length of such a request body cannot be determined;
    // the server MUST respond with 400 and close.
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
         "0\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\nhello"},
        400);
}

// --- chunked framing ------------------------------------------------------------

TEST_CASE("a non-hex chunk size gets 400", "[robustness][framing]") {
    check_each_rejected(
        {kChunkedHead + "zz\r\nhello\r\n0\r\n\r\n", kChunkedHead + "-5\r\nhello\r\n0\r\n\r\n",
         kChunkedHead + "\r\nhello\r\n0\r\n\r\n"},
        400);
}

TEST_CASE("an overflowing chunk size gets 400", "[robustness][framing]") {
    // 2^68 - 1 and 2^64: neither may wrap to a small size.
    check_each_rejected(
        {kChunkedHead + "fffffffffffffffff\r\nhello\r\n0\r\n\r\n",
         kChunkedHead + "10000000000000000\r\n\r\n0\r\n\r\n" + make_request("GET", "/plaintext")},
        400);
}

TEST_CASE("a lone CR or a bare LF in chunked framing gets 400", "[robustness][framing]") {
    // llhttp 8.1.0 takes "5\rX" as a line end (CVE-2023-30589).
    check_each_rejected(
        {kChunkedHead + "5\rXhello\r\n0\r\n\r\n", kChunkedHead + "5\r\nhello\rX0\r\n\r\n",
         kChunkedHead + "5\nhello\r\n0\r\n\r\n", kChunkedHead + "0\r\n\n"},
        400);
}

TEST_CASE("chunk data not followed by CRLF gets 400 and what follows is never answered",
          "[robustness][framing]") {
    // The desync of CVE-2025-43859 (h11) and CVE-2023-40175 (Puma): llhttp
    // 8.1.0 built loose skips any two bytes after chunk data, so "XX" here
    // ended the body at "0\r\n\r\n" and /smuggled was answered as a
    // request of its own on a connection kept open. RFC 9112 7.1: chunk =
    // chunk-size [ chunk-ext ] CRLF chunk-data CRLF.
    const std::string smuggled = make_request("GET", "/smuggled");
    check_each_rejected({kChunkedHead + "5\r\nhelloXX0\r\n\r\n" + smuggled,
                         kChunkedHead + "5\r\nhello\0\0"s + "0\r\n\r\n" + smuggled,
                         kChunkedHead + "5\r\nhello;;0\r\n\r\n" + smuggled,
                         kChunkedHead + "3\r\nhello\r\n0\r\n\r\n" + smuggled},
                        400);
}

TEST_CASE("BWS around a chunk extension is accepted, whitespace alone after a size is not",
          "[robustness][framing]") {
    // RFC 9112 7.1.1: chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "="
    // BWS chunk-ext-val ] ), and RFC 9110 5.6.3: a recipient MUST parse and
    // remove BWS (llhttp 8.1.0 answered 400). Whitespace that does not lead
    // to an extension is not in the grammar.
    check_accepted(kChunkedHead + "5 ; a = b\r\nhello\r\n6\t;\tc=\"d e\"\r\n world\r\n0 ;z\r\n\r\n",
                   {404});
    check_each_rejected(
        {kChunkedHead + "5 \r\nhello\r\n0\r\n\r\n", kChunkedHead + "5;a \r\nhello\r\n0\r\n\r\n",
         kChunkedHead + "5;a=b \r\nhello\r\n0\r\n\r\n"},
        400);
}

TEST_CASE("trailing whitespace after a framing field value is accepted", "[robustness][framing]") {
    // RFC 9112 5.1: OWS after a field value is not part of it, SP and HTAB
    // alike. llhttp 8.1.0 took "Content-Length: 5 " but answered 400 to
    // "Content-Length: 5<HTAB>" and "Transfer-Encoding: chunked<HTAB>". The
    // bodies look like requests: framed wrongly, they would be answered.
    const std::string inner = make_request("GET", "/json");
    const std::string length = std::to_string(inner.size());
    check_accepted(
        "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + length + "\t\r\n\r\n" +
            inner + "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + length +
            " \t \r\n\r\n" + inner +
            "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\t\r\n"
            "\r\n5\r\nhello\r\n0\r\n\r\n"
            "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip,\tchunked "
            "\t\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        {404, 404, 404, 404});
}

TEST_CASE("Connection: close with trailing whitespace closes the connection",
          "[robustness][framing]") {
    // llhttp 8.1.0 did not take "close<HTAB>" for the close option, so the
    // connection stayed open.
    auto server = start_server();
    const FdBaseline fds(*server);
    for (const std::string& ws : {" "s, "\t"s, "\t \t"s}) {
        Connection c = connect(*server);
        c.send(make_request("GET", "/plaintext", "Connection: close" + ws + "\r\n") +
               make_request("GET", "/json"));
        const Response r = c.read_response();
        INFO(r.describe());
        CHECK(r.status == 200);
        CHECK(has_token(r.header("Connection").value_or(""), "close"));
        require_closed_cleanly(c);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("an HTTP/1.0 request with Transfer-Encoding is answered, then the connection closed",
          "[robustness][framing]") {
    // RFC 9112 6.1: a server that receives an HTTP/1.0 message with
    // Transfer-Encoding MUST treat the message as if the framing is faulty
    // and close the connection after processing it, keep-alive or not. The
    // pipelined request after it is not answered.
    auto server = start_server();
    const FdBaseline fds(*server);
    for (const std::string& keep_alive : {""s, "Connection: keep-alive\r\n"s}) {
        Connection c = connect(*server);
        c.send("POST /nope HTTP/1.0\r\n" + keep_alive +
               "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
               make_request("GET", "/plaintext"));
        const Response r = c.read_response();
        INFO(r.describe());
        CHECK(r.status == 404);
        conformance::check_common_headers(r);
        CHECK(has_token(r.header("Connection").value_or(""), "close"));
        CHECK_FALSE(r.keep_alive);
        require_closed_cleanly(c);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("an empty Transfer-Encoding gets 400", "[robustness][framing]") {
    // Present but naming no coding, so chunked is not the final one: the
    // length cannot be determined (RFC 9112 6.3). llhttp 8.1.0 does not flag
    // an empty value, and a Content-Length beside it framed the body.
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding:\r\n\r\n",
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: \r\nContent-Length: 5\r\n"
         "\r\nhello" +
             make_request("GET", "/plaintext")},
        400);
}

TEST_CASE("empty Transfer-Encoding list elements are ignored, a value that is not a list is not",
          "[robustness][framing]") {
    // RFC 9110 5.6.1: a recipient MUST accept and ignore empty list elements
    // (llhttp 8.1.0's own check refused "chunked,"). A value that is not a
    // list of codings cannot frame a body, even beside a valid one.
    check_accepted(
        "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked,\r\n\r\n"
        "5\r\nhello\r\n0\r\n\r\n"
        "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: , gzip,,chunked ,"
        "\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        {404, 404});
    check_each_rejected(
        {"POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked elloPKST / "
         "HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" +
             make_request("GET", "/plaintext"),
         "POST /nope HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip;q, chunked\r\n\r\n"
         "0\r\n\r\n" +
             make_request("GET", "/plaintext")},
        400);
}

// --- splitting and what follows the end ---------------------------------------------

TEST_CASE("a valid pipeline split at every byte boundary is answered", "[robustness][framing]") {
    // Each byte its own send() on a TCP_NODELAY socket, a short pause between,
    // so the server reads (almost always) one byte at a time: every boundary
    // of the request line, headers, a Content-Length body, chunked framing
    // with an extension and a trailer, and a HEAD.
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        const std::string bytes =
            make_request("GET", "/plaintext") +
            make_request("POST", "/nope", "Content-Length: 11\r\n") + "hello world" +
            "POST /json HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n" +
            make_request("HEAD", "/json") + make_request("GET", "/json");
        Connection c = connect(*server);
        for (const char ch : bytes) {
            c.send(std::string_view(&ch, 1));
            std::this_thread::sleep_for(1ms);
        }
        const std::vector<Expect> expect = {Expect::body, Expect::body, Expect::body,
                                            Expect::no_body, Expect::body};
        const std::vector<Response> r = c.read_responses(expect);
        const std::vector<int> statuses = {200, 404, 405, 200, 200};
        for (std::size_t i = 0; i < r.size(); ++i) {
            INFO("response " << i << ": " << r[i].describe());
            CHECK(r[i].status == statuses[i]);
            conformance::check_common_headers(r[i], expect[i]);
            CHECK(r[i].keep_alive);
        }
        CHECK(r[0].body == conformance::kPlaintextBody);
        CHECK(r[4].body == conformance::kJsonBody);
        CHECK(c.buffered() == 0);
    }
    fds.require_back();
}

TEST_CASE("data after Connection: close is not answered and the close is clean",
          "[robustness][framing]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        // In the same write: more requests, garbage, and 64 KiB more.
        Connection c = connect(*server);
        std::string after = make_request("GET", "/json") + "\x01\x02 not http\r\n\r\n";
        while (after.size() < 64 * 1024)
            after += make_request("GET", "/plaintext");
        c.send(make_request("GET", "/plaintext", "Connection: close\r\n") + after);
        const Response r = c.read_response();
        INFO(r.describe());
        CHECK(r.status == 200);
        CHECK(has_token(r.header("Connection").value_or(""), "close"));
        CHECK_FALSE(r.keep_alive);
        require_closed_cleanly(c);
    }
    {
        // Sent after the response arrived, while the server drains the
        // connection before closing it: not answered either.
        Connection c = connect(*server);
        const Response r = c.request(make_request("GET", "/json", "Connection: close\r\n"));
        CHECK(r.status == 200);
        CHECK_FALSE(r.keep_alive);
        c.send(make_request("GET", "/plaintext") + std::string(32 * 1024, 'x'));
        require_closed_cleanly(c);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("an error response arrives intact however much data follows the bad request",
          "[robustness][framing]") {
    // The server stops reading at the error: closing with 256 KiB unread
    // would make the kernel send a reset that can destroy the 400 before the
    // client reads it. A lingering close drains instead.
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        std::string bytes = "GET /plaintext HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n";
        while (bytes.size() < 256 * 1024)
            bytes += make_request("GET", "/plaintext");
        require_rejected(*server, bytes, 400);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("a request cut short by the client's half-close gets a clean close",
          "[robustness][framing]") {
    // Nothing complete arrived, so there is nothing to answer: the server
    // closes its side (EOF) without a response and without a reset.
    auto server = start_server();
    const FdBaseline fds(*server);
    for (const std::string& partial :
         {"GET /plaintext HTTP/1.1\r\nHost: loc"s,
          "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\npartial"s,
          kChunkedHead + "10\r\nnot sixteen"s}) {
        INFO("sent: \"" << printable(partial) << "\", then shutdown(SHUT_WR)");
        Connection c = connect(*server);
        c.send(partial);
        c.shutdown_write();
        require_closed_cleanly(c);
    }
    require_serving(*server);
    fds.require_back();
}

TEST_CASE("clients that reset in the middle of a request leave nothing behind",
          "[robustness][framing]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    for (int round = 0; round < 4; ++round) {
        for (const std::string& partial :
             {"GET /plaintext HTTP/1.1\r\nHost: loc"s,
              "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\npartial"s,
              kChunkedHead + "10\r\nnot sixteen"s,
              make_request("GET", "/json") + make_request("GET", "/json") + "GET /pl"s}) {
            Connection c = connect(*server);
            c.send(partial);
            c.abort();  // SO_LINGER 0: a reset, not a FIN
        }
    }
    require_serving(*server);
    fds.require_back();
    CHECK(server->running());
}
