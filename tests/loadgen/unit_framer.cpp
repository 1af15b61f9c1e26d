// loadgen's ResponseFramer: bytes in, complete responses out. Every stream is
// checked against responses written out by hand, fed whole, split at every
// byte boundary and byte by byte: framing must not depend on how reads split it.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "framer.hpp"

using sm::loadgen::Response;
using sm::loadgen::ResponseFramer;
using Result = ResponseFramer::Result;

namespace Catch {
template <>
struct StringMaker<Result> {
    static std::string convert(Result r) {
        switch (r) {
            case Result::ok: return "ok";
            case Result::closed: return "closed";
            case Result::malformed: return "malformed";
        }
        return "?";
    }
};
}  // namespace Catch

namespace {

// A response as the callback saw it, copied out.
struct Got {
    int status = 0;
    bool close = false;
    std::uint64_t body_bytes = 0;
    std::string body;
    bool truncated = false;
    bool operator==(const Got&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Got& g) {
    return os << "{" << g.status << (g.close ? " close" : "") << " " << g.body_bytes << " bytes \""
              << g.body << "\"" << (g.truncated ? " truncated" : "") << "}";
}

// A response that is expected with its body captured whole.
Got ok(int status, std::string body, bool close = false) {
    const auto n = body.size();
    return Got{status, close, n, std::move(body), false};
}

struct Options {
    bool head = false;
    std::size_t capture = 1 << 20;  // 0: capture off
};

// What framing a sequence of reads gave.
struct Outcome {
    std::vector<Got> responses;
    Result result = Result::ok;  // the first result other than ok, else ok
    bool finished = false;       // finish() at EOF completed a response
    std::string error;
    bool operator==(const Outcome& o) const {
        return responses == o.responses && result == o.result && finished == o.finished &&
               error.empty() == o.error.empty();
    }
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
    os << "[";
    for (const auto& g : o.responses)
        os << g << " ";
    os << "] " << Catch::StringMaker<Result>::convert(o.result) << (o.finished ? " +finish" : "");
    if (!o.error.empty()) os << " error: " << o.error;
    return os;
}

// Feeds the pieces in order, each from a buffer that is scribbled over after
// the feed (the framer must keep nothing pointing into a read buffer), stops
// at the first result that is not ok, then calls finish() at "EOF".
Outcome frame(const std::vector<std::string_view>& pieces, Options options = {}) {
    ResponseFramer framer;
    framer.set_head_requests(options.head);
    if (options.capture) framer.set_capture(options.capture);
    Outcome out;
    const auto on_response = [&](const Response& r) {
        out.responses.push_back(
            Got{r.status, r.close, r.body_bytes, std::string(r.body), r.body_truncated});
    };
    std::string buffer;
    for (const auto piece : pieces) {
        buffer.assign(piece);
        out.result = framer.feed(buffer, on_response);
        buffer.assign(buffer.size(), '#');
        if (out.result != Result::ok) break;
    }
    if (out.result == Result::ok) out.finished = framer.finish(on_response);
    if (out.result == Result::malformed) {
        out.error = framer.error();
        if (out.error.empty()) out.error = "(malformed with an empty error())";
    }
    return out;
}

Outcome frame_whole(std::string_view stream, Options options = {}) {
    return frame({stream}, options);
}

std::vector<std::string_view> bytes_of(std::string_view stream) {
    std::vector<std::string_view> pieces;
    for (std::size_t i = 0; i < stream.size(); ++i)
        pieces.push_back(stream.substr(i, 1));
    return pieces;
}

std::vector<std::string_view> pieces_of(std::string_view stream, std::size_t size) {
    std::vector<std::string_view> pieces;
    for (std::size_t i = 0; i < stream.size(); i += size)
        pieces.push_back(stream.substr(i, size));
    return pieces;
}

// The stream gives `expected` fed whole, split in two at every byte, byte by
// byte and in random pieces.
void require_split_invariant(std::string_view stream, const Outcome& expected,
                             Options options = {}) {
    REQUIRE(frame_whole(stream, options) == expected);
    for (std::size_t i = 0; i <= stream.size(); ++i) {
        INFO("split at byte " << i << " of " << stream.size());
        REQUIRE(frame({stream.substr(0, i), stream.substr(i)}, options) == expected);
    }
    INFO("byte by byte");
    REQUIRE(frame(bytes_of(stream), options) == expected);
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        std::vector<std::string_view> pieces;
        std::size_t at = 0;
        while (at < stream.size()) {
            const std::size_t n = std::uniform_int_distribution<std::size_t>(0, 40)(rng);
            pieces.push_back(stream.substr(at, n));
            at += n;
        }
        INFO("random pieces, round " << round);
        REQUIRE(frame(pieces, options) == expected);
    }
}

// The outcome expected; a malformed one must come with some error().
Outcome outcome(std::vector<Got> got, Result result = Result::ok, bool finished = false) {
    return Outcome{std::move(got), result, finished,
                   result == Result::malformed ? "(any reason)" : ""};
}

std::string with_length(std::string head, std::string_view body) {
    return head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

// What the suite's servers send (common/http/response.cpp), Date and all.
constexpr std::string_view kDate = "Date: Mon, 30 Nov 2026 22:52:54 GMT\r\n";
const std::string kServerPlaintext =
    with_length("HTTP/1.1 200 OK\r\nServer: servermodels\r\n" + std::string(kDate) +
                    "Content-Type: text/plain\r\n",
                "Hello, World!");
const std::string kServerJson =
    with_length("HTTP/1.1 200 OK\r\nServer: servermodels\r\n" + std::string(kDate) +
                    "Content-Type: application/json\r\n",
                R"({"message":"Hello, World!"})");
const std::string kServerNotFound =
    with_length("HTTP/1.1 404 Not Found\r\nServer: servermodels\r\n" + std::string(kDate) +
                    "Content-Type: text/plain\r\n",
                "Not Found");

// Keep-alive responses of every framing, back to back.
const std::string kKeepAliveStream =
    kServerPlaintext +
    // 100 Continue, then the final response with an empty body.
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n" +
    // Chunked with extensions (with and without whitespace) and trailers.
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
    "5;name=value\r\nHello\r\n8 ; a=\"b\"\r\n, World!\r\n0\r\nX-Checksum: 1\r\nX-Other: "
    "two\r\n\r\n" +
    "HTTP/1.1 204 No Content\r\nServer: servermodels\r\n\r\n" +
    // A 304's Content-Length describes the representation, not a body.
    "HTTP/1.1 304 Not Modified\r\nContent-Length: 42\r\nETag: \"x\"\r\n\r\n" +
    // Zero-length chunked.
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + kServerNotFound +
    // 103 Early Hints, then an HTTP/1.0 keep-alive response.
    "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 4\r\n\r\nhttp" +
    // Multi-chunk, hex sizes in both cases, after a coding list ending in chunked.
    "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
    "1A\r\nabcdefghijklmnopqrstuvwxyz\r\na\r\n0123456789\r\n1\r\n!\r\n0\r\n\r\n" +
    // Field names in any case; the same Content-Length twice is fine.
    "HTTP/1.1 200 OK\r\ncontent-LENGTH: 3\r\nContent-Length:3\r\nCONNECTION: "
    "keep-alive\r\n\r\nabc" +
    kServerJson;

const std::vector<Got> kKeepAliveResponses = {
    ok(200, "Hello, World!"),
    ok(201, ""),
    ok(200, "Hello, World!"),
    ok(204, ""),
    ok(304, ""),
    ok(200, ""),
    ok(404, "Not Found"),
    ok(200, "http"),
    ok(500, "abcdefghijklmnopqrstuvwxyz0123456789!"),
    ok(200, "abc"),
    ok(200, R"({"message":"Hello, World!"})"),
};

template <class... Gots>
std::vector<Got> plus(std::vector<Got> v, Gots... more) {
    (v.push_back(std::move(more)), ...);
    return v;
}

}  // namespace

TEST_CASE("framer frames the suite's server responses", "[framer]") {
    REQUIRE(frame_whole(kServerPlaintext) == outcome({ok(200, "Hello, World!")}));
    REQUIRE(frame_whole(kServerJson) == outcome({ok(200, R"({"message":"Hello, World!"})")}));
    REQUIRE(frame_whole(kServerNotFound) == outcome({ok(404, "Not Found")}));
    // 16 pipelined answers in one read, as with --pipeline 16.
    std::string pipelined;
    for (int i = 0; i < 16; ++i)
        pipelined += kServerPlaintext;
    const auto out = frame_whole(pipelined);
    REQUIRE(out.result == Result::ok);
    REQUIRE(out.responses == std::vector<Got>(16, ok(200, "Hello, World!")));
}

TEST_CASE("framer gives the same responses however a keep-alive stream is split", "[framer]") {
    require_split_invariant(kKeepAliveStream, outcome(kKeepAliveResponses));
}

TEST_CASE("framer gives the same responses however a stream ending in Connection: close is split",
          "[framer]") {
    // Bytes after the closing response are ignored, even garbage.
    const std::string stream =
        kKeepAliveStream + "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye" +
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nGARBAGE";
    require_split_invariant(
        stream, outcome(plus(kKeepAliveResponses, ok(200, "bye", true)), Result::closed));
}

TEST_CASE("framer gives the same responses however a stream ending in a body until close is split",
          "[framer]") {
    const std::string stream =
        kKeepAliveStream +
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end\r\n\r\nHTTP/1.1";
    require_split_invariant(
        stream, outcome(plus(kKeepAliveResponses, ok(200, "until the end\r\n\r\nHTTP/1.1", true)),
                        Result::ok, true));
}

TEST_CASE("framer frames Content-Length bodies", "[framer]") {
    REQUIRE(frame_whole("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHello") ==
            outcome({ok(200, "Hello")}));
    REQUIRE(frame_whole("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") == outcome({ok(200, "")}));
    // Whitespace around the value; no reason phrase; an empty reason phrase.
    REQUIRE(frame_whole("HTTP/1.1 200\r\nContent-Length: \t 2 \r\n\r\nhi") ==
            outcome({ok(200, "hi")}));
    REQUIRE(frame_whole("HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nhi") ==
            outcome({ok(200, "hi")}));

    // A body larger than any read: counted whole, in pieces.
    const std::string body(1'000'000, 'x');
    const std::string big = with_length("HTTP/1.1 200 OK\r\n", body) + kServerPlaintext;
    REQUIRE(frame(pieces_of(big, 65'536)) == outcome({ok(200, body), ok(200, "Hello, World!")}));

    // An incomplete body is no response, and not an error either.
    ResponseFramer framer;
    int seen = 0;
    REQUIRE(framer.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345",
                        [&](const Response&) { ++seen; }) == Result::ok);
    REQUIRE(seen == 0);
    REQUIRE(framer.in_response());
    REQUIRE_FALSE(framer.finish([&](const Response&) { ++seen; }));  // EOF mid-body: no response
    REQUIRE(seen == 0);
}

TEST_CASE("framer frames chunked bodies", "[framer]") {
    const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    SECTION("one chunk") {
        REQUIRE(frame_whole(head + "5\r\nHello\r\n0\r\n\r\n") == outcome({ok(200, "Hello")}));
    }
    SECTION("many chunks, one byte each") {
        std::string stream = head;
        for (char c : std::string_view("chunks"))
            stream += std::string("1\r\n") + c + "\r\n";
        stream += "0\r\n\r\n";
        REQUIRE(frame_whole(stream) == outcome({ok(200, "chunks")}));
    }
    SECTION("zero length") {
        REQUIRE(frame_whole(head + "0\r\n\r\n") == outcome({ok(200, "")}));
        // Leading zeros are still a number.
        REQUIRE(frame_whole(head + "0005\r\nHello\r\n000\r\n\r\n") == outcome({ok(200, "Hello")}));
    }
    SECTION("extensions on data chunks and on the last chunk") {
        REQUIRE(frame_whole(head + "5;a=1;b=\"x y\"\r\nHello\r\n0;last\r\n\r\n") ==
                outcome({ok(200, "Hello")}));
        REQUIRE(frame_whole(head + "5 \t;a\r\nHello\r\n0 ;z\r\n\r\n") ==
                outcome({ok(200, "Hello")}));
    }
    SECTION("trailers") {
        REQUIRE(
            frame_whole(head + "5\r\nHello\r\n0\r\nX-A: 1\r\nX-B:2\r\n\r\n" + kServerPlaintext) ==
            outcome({ok(200, "Hello"), ok(200, "Hello, World!")}));
    }
    SECTION("chunked wins over Content-Length") {
        REQUIRE(frame_whole(
                    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "2\r\nok\r\n0\r\n\r\n") == outcome({ok(200, "ok")}));
    }
    SECTION("a chunk line may be long up to the limit") {
        const std::string ext(ResponseFramer::kMaxLine - 3,
                              'e');  // "5;" + ext + "\r" is kMaxLine bytes
        const std::string stream = head + "5;" + ext + "\r\nHello\r\n0\r\n\r\n";
        REQUIRE(frame_whole(stream) == outcome({ok(200, "Hello")}));
        REQUIRE(frame(pieces_of(stream, 1'000)) == outcome({ok(200, "Hello")}));
    }
}

TEST_CASE("framer reads a body whose end is the connection's close", "[framer]") {
    SECTION("no Content-Length, no Transfer-Encoding") {
        ResponseFramer framer;
        framer.set_capture(1024);
        std::vector<Got> got;
        const auto on = [&](const Response& r) {
            got.push_back(
                Got{r.status, r.close, r.body_bytes, std::string(r.body), r.body_truncated});
        };
        REQUIRE(framer.feed("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nabc", on) ==
                Result::ok);
        REQUIRE(framer.feed("HTTP/1.1 200 OK\r\n\r\n", on) ==
                Result::ok);  // body bytes, not a head
        REQUIRE(got.empty());
        REQUIRE(framer.in_response());
        REQUIRE(framer.finish(on));
        REQUIRE(got == std::vector<Got>{ok(200, "abcHTTP/1.1 200 OK\r\n\r\n", true)});
        REQUIRE_FALSE(framer.in_response());
        REQUIRE_FALSE(framer.finish(on));  // once only
    }
    SECTION("an empty body until close") {
        REQUIRE(frame_whole("HTTP/1.1 200 OK\r\n\r\n") ==
                outcome({ok(200, "", true)}, Result::ok, true));
    }
    SECTION("HTTP/1.0 without Content-Length, even with keep-alive") {
        REQUIRE(frame_whole("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nold") ==
                outcome({ok(200, "old", true)}, Result::ok, true));
    }
    SECTION("a transfer coding other than chunked last") {
        REQUIRE(frame_whole(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nzzz") ==
                outcome({ok(200, "zzz", true)}, Result::ok, true));
        REQUIRE(
            frame_whole("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n") ==
            outcome({ok(200, "0\r\n\r\n", true)}, Result::ok, true));
    }
    SECTION("finish() completes nothing else") {
        ResponseFramer framer;
        int seen = 0;
        const auto on = [&](const Response&) { ++seen; };
        REQUIRE_FALSE(framer.finish(on));  // idle
        REQUIRE(framer.feed("HTTP/1.1 200 OK\r\nContent-", on) == Result::ok);
        REQUIRE_FALSE(framer.finish(on));  // mid-head
        framer.reset();
        REQUIRE(framer.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", on) ==
                Result::ok);
        REQUIRE_FALSE(framer.finish(on));  // mid-chunk
        framer.reset();
        REQUIRE(framer.feed(kServerPlaintext, on) == Result::ok);
        REQUIRE_FALSE(framer.finish(on));  // after a complete response
        REQUIRE(seen == 1);
    }
}

TEST_CASE("framer frames responses to HEAD without bodies", "[framer]") {
    const Options head{true, 1024};
    // Whatever the headers say: a length, chunked, nothing (not until close).
    const std::string stream =
        std::string("HTTP/1.1 200 OK\r\nServer: servermodels\r\n") + std::string(kDate) +
        "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n"
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "HTTP/1.1 200 OK\r\n\r\n"
        "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n"
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
        "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    require_split_invariant(stream,
                            outcome({ok(200, ""), ok(200, ""), ok(200, ""), ok(404, ""),
                                     ok(200, ""), ok(200, "", true)},
                                    Result::closed),
                            head);
    // The same bytes framed as GET responses read bodies out of the next heads.
    REQUIRE(frame_whole("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\n\r\n") ==
            outcome({ok(200, "HTTP/")}, Result::malformed));
}

TEST_CASE("framer frames 204 and 304 without a body", "[framer]") {
    REQUIRE(frame_whole("HTTP/1.1 204 No Content\r\n\r\n" + kServerPlaintext) ==
            outcome({ok(204, ""), ok(200, "Hello, World!")}));
    // Even if they claim one.
    REQUIRE(frame_whole("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n" +
                        kServerPlaintext) == outcome({ok(204, ""), ok(200, "Hello, World!")}));
    REQUIRE(frame_whole("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n" +
                        kServerPlaintext) == outcome({ok(304, ""), ok(200, "Hello, World!")}));
    REQUIRE(frame_whole("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\ntrailing") ==
            outcome({ok(204, "", true)}, Result::closed));
}

TEST_CASE("framer skips 1xx interim responses", "[framer]") {
    REQUIRE(frame_whole(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") ==
            outcome({ok(200, "ok")}));
    // Several, with fields; a Connection: close on an interim one means nothing.
    REQUIRE(frame_whole("HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n"
                        "HTTP/1.1 102 Processing\r\n\r\n"
                        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") ==
            outcome({ok(200, "ok")}));
    // Only interim so far: nothing reported, a response is pending.
    ResponseFramer framer;
    int seen = 0;
    REQUIRE(framer.feed("HTTP/1.1 100 Continue\r\n\r\n", [&](const Response&) { ++seen; }) ==
            Result::ok);
    REQUIRE(seen == 0);
}

TEST_CASE("framer refuses 101 Switching Protocols", "[framer]") {
    const auto out = frame_whole(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
        "Upgrade\r\n\r\n\x81\x05hello");
    REQUIRE(out.result == Result::malformed);
    REQUIRE(out.responses.empty());
    REQUIRE_FALSE(out.error.empty());
}

TEST_CASE("framer marks responses after which the server closes", "[framer]") {
    const std::string after = kServerPlaintext;  // never reported
    SECTION("Connection: close") {
        REQUIRE(frame_whole("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok" +
                            after) == outcome({ok(200, "ok", true)}, Result::closed));
    }
    SECTION("close among other tokens, in any case") {
        REQUIRE(
            frame_whole(
                "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok" +
                after) == outcome({ok(200, "ok", true)}, Result::closed));
        REQUIRE(
            frame_whole("HTTP/1.1 200 OK\r\nconnection: TE ,close\r\nContent-Length: 2\r\n\r\nok" +
                        after) == outcome({ok(200, "ok", true)}, Result::closed));
    }
    SECTION("not a close token") {
        REQUIRE(frame_whole("HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 2\r\n\r\nok" +
                            after) == outcome({ok(200, "ok"), ok(200, "Hello, World!")}));
    }
    SECTION("close after a chunked body") {
        REQUIRE(
            frame_whole("HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "2\r\nok\r\n0\r\n\r\n" +
                        after) == outcome({ok(200, "ok", true)}, Result::closed));
    }
    SECTION("HTTP/1.0 without keep-alive") {
        REQUIRE(frame_whole("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok" + after) ==
                outcome({ok(200, "ok", true)}, Result::closed));
        REQUIRE(
            frame_whole("HTTP/1.0 404 Not Found\r\nConnection: other\r\nContent-Length: 0\r\n\r\n" +
                        after) == outcome({ok(404, "", true)}, Result::closed));
    }
    SECTION("HTTP/1.0 with keep-alive stays open") {
        const std::string one =
            "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok";
        REQUIRE(frame_whole(one + one) == outcome({ok(200, "ok"), ok(200, "ok")}));
        // ... unless it also says close.
        REQUIRE(frame_whole("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\n"
                            "Content-Length: 2\r\n\r\nok" +
                            after) == outcome({ok(200, "ok", true)}, Result::closed));
    }
    SECTION("the close response ends the read exactly") {
        REQUIRE(
            frame_whole("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok") ==
            outcome({ok(200, "ok", true)}, Result::closed));
    }
}

TEST_CASE("framer refuses malformed responses with a reason", "[framer]") {
    const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"garbage", "garbage\r\n\r\n"},
        {"HTML", "<html><body>hello</body></html>"},
        {"HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n"},
        {"lower-case protocol", "http/1.1 200 OK\r\n\r\n"},
        {"minor version not a digit", "HTTP/1.x 200 OK\r\nContent-Length: 0\r\n\r\n"},
        {"two-digit status", "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"},
        {"four-digit status", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"},
        {"two spaces before the status", "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n"},
        {"reason before status", "HTTP/1.1 OK 200\r\nContent-Length: 0\r\n\r\n"},
        {"status 600", "HTTP/1.1 600 Beyond\r\nContent-Length: 0\r\n\r\n"},
        {"status 099", "HTTP/1.1 099 Below\r\nContent-Length: 0\r\n\r\n"},
        {"status line ended by a bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n"},
        {"header ended by a bare LF", "HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n"},
        {"head ended by a bare LF", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n"},
        {"header without colon", "HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n"},
        {"header with an empty name", "HTTP/1.1 200 OK\r\n: value\r\nContent-Length: 0\r\n\r\n"},
        {"space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"},
        {"control character in a name",
         "HTTP/1.1 200 OK\r\nX\x01Y: 1\r\nContent-Length: 0\r\n\r\n"},
        {"obsolete line folding",
         "HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n"},
        {"Content-Length not a number", "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n"},
        {"Content-Length negative", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
        {"Content-Length with a sign", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nHello"},
        {"Content-Length empty", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n"},
        {"Content-Length in hex", "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n"},
        {"Content-Length with inner space", "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n"},
        {"Content-Length as a list", "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nHello"},
        {"Content-Length of 16 digits",
         "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n"},
        {"conflicting Content-Length",
         "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nHello!"},
        {"chunk size not hex", chunked + "zz\r\nHello\r\n0\r\n\r\n"},
        {"chunk size empty", chunked + "\r\nHello\r\n0\r\n\r\n"},
        {"chunk size negative", chunked + "-5\r\nHello\r\n0\r\n\r\n"},
        {"chunk size followed by junk", chunked + "5x\r\nHello\r\n0\r\n\r\n"},
        {"chunk extension without a size", chunked + ";ext\r\nHello\r\n0\r\n\r\n"},
        {"chunk size of 17 hex digits", chunked + "10000000000000000\r\nHello\r\n0\r\n\r\n"},
        {"chunk size line ended by a bare LF", chunked + "5\nHello\r\n0\r\n\r\n"},
        {"chunk data longer than its size", chunked + "5\r\nHelloX\r\n0\r\n\r\n"},
        {"chunk data followed by a bare LF", chunked + "5\r\nHello\n0\r\n\r\n"},
        {"chunk data followed by CR only", chunked + "5\r\nHello\r0\r\n\r\n"},
        {"trailer without colon", chunked + "0\r\nnot a field\r\n\r\n"},
        {"101 Switching Protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"},
        {"chunk size line over the limit", chunked + "5;" +
                                               std::string(ResponseFramer::kMaxLine - 2, 'e') +
                                               "\r\nHello\r\n0\r\n\r\n"},
        {"trailer line over the limit",
         chunked + "0\r\nX: " + std::string(ResponseFramer::kMaxLine - 3, 't') + "\r\n\r\n"},
    };
    for (const auto& [name, bytes] : cases) {
        INFO(name);
        const auto whole = frame_whole(bytes);
        REQUIRE(whole.result == Result::malformed);
        REQUIRE(whole.responses.empty());
        REQUIRE_FALSE(whole.error.empty());
        // However it arrives.
        REQUIRE(frame(bytes_of(bytes)) == whole);
        REQUIRE(frame(pieces_of(bytes, 7)) == whole);
        // A good response before it is still reported.
        const auto after_good = frame_whole(kServerPlaintext + bytes);
        REQUIRE(after_good == outcome({ok(200, "Hello, World!")}, Result::malformed));
        REQUIRE_FALSE(after_good.error.empty());
    }
}

TEST_CASE("framer keeps the bytes of a malformed head for diagnostics", "[framer]") {
    ResponseFramer framer;
    const auto ignore = [](const Response&) {};
    REQUIRE(framer.feed("HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", ignore) == Result::malformed);
    REQUIRE_FALSE(framer.error().empty());
    REQUIRE(framer.error_context().find("Bad Name") != std::string_view::npos);
    framer.reset();
    REQUIRE(framer.feed(std::string(100'000, 'x'), ignore) == Result::malformed);
    REQUIRE(framer.error_context().size() <= 256);
}

TEST_CASE("framer limits a head to 64 KiB however it arrives", "[framer]") {
    // A head of exactly `size` bytes, padded in one field.
    const auto head_of = [](std::size_t size) {
        const std::string start = "HTTP/1.1 200 OK\r\nX-Pad: ",
                          end = "\r\nContent-Length: 2\r\n\r\n";
        return start + std::string(size - start.size() - end.size(), 'p') + end;
    };
    const std::string fits = head_of(ResponseFramer::kMaxHead) + "ok";
    const std::string over = head_of(ResponseFramer::kMaxHead + 1) + "ok";
    const std::string far_over = head_of(70'000) + "ok";
    for (const std::size_t piece :
         {std::size_t{0}, std::size_t{1'000}, std::size_t{4'096}, std::size_t{65'535}}) {
        INFO("pieces of " << piece << " bytes (0: whole)");
        const auto split = [&](const std::string& s) {
            return piece ? pieces_of(s, piece) : std::vector<std::string_view>{s};
        };
        REQUIRE(frame(split(fits)) == outcome({ok(200, "ok")}));
        REQUIRE(frame(split(fits + fits)) == outcome({ok(200, "ok"), ok(200, "ok")}));
        REQUIRE(frame(split(over)).result == Result::malformed);
        REQUIRE(frame(split(far_over)).result == Result::malformed);
        REQUIRE(frame(split(kServerPlaintext + over)) ==
                outcome({ok(200, "Hello, World!")}, Result::malformed));
    }
    // An unfinished head refused as soon as it passes the limit.
    const std::string unfinished =
        "HTTP/1.1 200 OK\r\nX-Pad: " + std::string(ResponseFramer::kMaxHead, 'p');
    REQUIRE(frame_whole(unfinished).result == Result::malformed);
    REQUIRE(frame(pieces_of(unfinished, 4'096)).result == Result::malformed);
    // Each interim response's head counts on its own.
    REQUIRE(frame_whole(head_of(60'000).replace(9, 3, "100") + head_of(60'000) + "ok") ==
            outcome({ok(200, "ok")}));
}

TEST_CASE("framer captures bodies up to the limit", "[framer]") {
    const Options five{false, 5};
    REQUIRE(frame_whole(kServerPlaintext, five) == outcome({Got{200, false, 13, "Hello", true}}));
    REQUIRE(frame_whole("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHello", five) ==
            outcome({Got{200, false, 5, "Hello", false}}));
    // Across chunks, and the next response starts afresh.
    const std::string chunked =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
    const auto expected =
        outcome({Got{200, false, 6, "abcde", true}, Got{200, false, 2, "ok", false},
                 Got{200, true, 11, "until", true}},
                Result::ok, true);
    require_split_invariant(chunked + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" +
                                "HTTP/1.1 200 OK\r\n\r\nuntil close",
                            expected, five);
    // Capture off: bodies are counted, not kept.
    REQUIRE(frame_whole(kServerPlaintext, Options{false, 0}) ==
            outcome({Got{200, false, 13, "", false}}));
}

TEST_CASE("framer reset makes it reusable after every outcome", "[framer]") {
    ResponseFramer framer;
    framer.set_capture(64);
    std::vector<Got> got;
    const auto on = [&](const Response& r) {
        got.push_back(Got{r.status, r.close, r.body_bytes, std::string(r.body), r.body_truncated});
    };
    const auto fresh_response = [&] {
        got.clear();
        REQUIRE(framer.feed(kServerPlaintext, on) == Result::ok);
        REQUIRE(got == std::vector<Got>{ok(200, "Hello, World!")});
        REQUIRE_FALSE(framer.in_response());
    };

    REQUIRE_FALSE(framer.in_response());
    REQUIRE(framer.feed("garbage", on) == Result::malformed);
    framer.reset();
    REQUIRE(framer.error().empty());
    REQUIRE(framer.error_context().empty());
    fresh_response();

    REQUIRE(framer.feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\nleftover",
                        on) == Result::closed);
    framer.reset();
    fresh_response();

    // Mid-head, mid-body, mid-chunk line: the partial response is dropped.
    for (const std::string_view partial :
         {std::string_view("HTTP/1.1 200 OK\r\nContent-Len"),
          std::string_view("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"),
          std::string_view("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1"),
          std::string_view("HTTP/1.1 200 OK\r\n\r\nuntil close")}) {
        INFO(partial);
        REQUIRE(framer.feed(partial, on) == Result::ok);
        REQUIRE(framer.in_response());
        framer.reset();
        REQUIRE_FALSE(framer.in_response());
        fresh_response();
    }

    // The HEAD and capture settings survive a reset.
    framer.set_head_requests(true);
    framer.reset();
    got.clear();
    REQUIRE(framer.feed(kServerPlaintext, on) == Result::malformed);  // the body is not a head
    REQUIRE(got == std::vector<Got>{ok(200, "")});
}
