// http::ChunkedDecoder on its own: the chunked transfer coding of RFC 9112
// 7.1 (chunk-size, chunk-ext with BWS, the CRLF after the size line and
// after the data, the last chunk, trailers, the final CRLF), fed whole, split
// in two at every byte and one byte at a time, with the body limit.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/chunked.hpp"

using namespace std::string_literals;
using sm::http::ChunkedDecoder;
using Status = ChunkedDecoder::Status;

namespace {

constexpr std::uint64_t kNoLimit = UINT64_MAX;

struct Outcome {
    Status status = Status::more;
    std::size_t used = 0;  // bytes of the input taken, over all feeds
};

// Feeds `in` in pieces of at most `piece` bytes (each its own allocation),
// stopping at the first status other than more.
Outcome decode(std::string_view in, std::size_t piece, std::uint64_t limit = kNoLimit) {
    ChunkedDecoder d;
    d.start(limit);
    Outcome o;
    for (std::size_t at = 0; at < in.size(); at += piece) {
        const std::string part(in.substr(at, piece));
        const ChunkedDecoder::Step s = d.feed(part.data(), part.data() + part.size());
        o.used += s.used;
        o.status = s.status;
        if (s.status != Status::more) break;
    }
    return o;
}

// Two feeds: [0, cut) and [cut, end).
Outcome decode_split(std::string_view in, std::size_t cut, std::uint64_t limit = kNoLimit) {
    ChunkedDecoder d;
    d.start(limit);
    Outcome o;
    for (const std::string& part : {std::string(in.substr(0, cut)), std::string(in.substr(cut))}) {
        const ChunkedDecoder::Step s = d.feed(part.data(), part.data() + part.size());
        o.used += s.used;
        o.status = s.status;
        if (s.status != Status::more) break;
    }
    return o;
}

const std::vector<std::string> kGoodBodies = {
    "0\r\n\r\n",
    "000\r\n\r\n",  // last-chunk = 1*("0")
    "5\r\nhello\r\n0\r\n\r\n",
    "5\r\nhe\r\nl\r\n0\r\n\r\n",  // data is opaque: CRLF inside it is data
    "A\r\n0123456789\r\nf\r\n0123456789abcde\r\n0\r\n\r\n",
    "0005\r\nhello\r\n0\r\n\r\n",  // leading zeros
    "5;name=value;other\r\nhello\r\n0;last\r\n\r\n",
    "5;q=\"quoted ; \\\" = value\"\r\nhello\r\n0\r\n\r\n",  // quoted-string with a quoted-pair
    "5;q=\"\"\r\nhello\r\n0\r\n\r\n",
    // RFC 9110 5.6.3: BWS around ";" and "=" MUST be accepted.
    "5 ; a = b\r\nhello\r\n0\r\n\r\n", "5\t;\ta\t=\tb ;c\r\nhello\r\n0\r\n\r\n",
    "5 ;a\r\nhello\r\n0 ; last = \"x\"\r\n\r\n", "5;a=\"x\" ;b\r\nhello\r\n0\r\n\r\n",
    "5\r\nhello\r\n0\r\nX-Trailer: v\r\nX-Other:w\r\nEmpty:\r\n\r\n",
    "5\r\nhello\r\n0\r\nX: a value\twith tabs  and caf\xc3\xa9 \r\n\r\n",
    "5\r\n\x00\r\n\xff\t\r\n0\r\n\r\n"s,  // any octet is data
};

struct Bad {
    const char* what;
    std::string bytes;
};

const std::vector<Bad> kBadBodies = {
    // The desync: llhttp 8.1.0 (loose) takes any two bytes after the data as
    // CRLF, so "0\r\n\r\n" after them would end the body and what follows
    // would be answered as a request of its own.
    {"data followed by XX instead of CRLF", "5\r\nhelloXX0\r\n\r\n"},
    {"data followed by NUL NUL",
     "5\r\nhello\x00\x00"s
     "0\r\n\r\n"},
    {"data followed by ;;", "5\r\nhello;;0\r\n\r\n"},
    {"data longer than its size", "3\r\nhello\r\n0\r\n\r\n"},
    {"data followed by CR and another byte", "5\r\nhello\rX0\r\n\r\n"},
    {"data followed by a bare LF", "5\r\nhello\n0\r\n\r\n"},
    {"data followed by LF CR", "5\r\nhello\n\r0\r\n\r\n"},
    // The size line.
    {"empty chunk size", "\r\nhello\r\n0\r\n\r\n"},
    {"non-hex chunk size", "zz\r\nhello\r\n0\r\n\r\n"},
    {"negative chunk size", "-5\r\nhello\r\n0\r\n\r\n"},
    {"chunk size with 0x", "0x5\r\nhello\r\n0\r\n\r\n"},
    {"space before a chunk size", " 5\r\nhello\r\n0\r\n\r\n"},
    {"tab before a chunk size", "\t5\r\nhello\r\n0\r\n\r\n"},
    // chunk-ext = *( BWS ";" ...): whitespace must lead to a ";".
    {"space after a chunk size", "5 \r\nhello\r\n0\r\n\r\n"},
    {"space inside a chunk size", "5 5\r\nhello\r\n0\r\n\r\n"},
    {"chunk size overflowing 64 bits", "10000000000000000\r\n\r\n0\r\n\r\n"},
    {"chunk size of 2^68 - 1", "fffffffffffffffff\r\nhello\r\n0\r\n\r\n"},
    {"lone CR in a size line (CVE-2023-30589)", "5\rXhello\r\n0\r\n\r\n"},
    {"CR CR LF after a chunk size", "5\r\r\nhello\r\n0\r\n\r\n"},
    {"bare LF after a chunk size", "5\nhello\r\n0\r\n\r\n"},
    {"bare LF after the last chunk", "0\n\r\n"},
    // Extensions.
    {"extension without a name", "5;\r\nhello\r\n0\r\n\r\n"},
    {"extension name that is not a token", "5;a(b)\r\nhello\r\n0\r\n\r\n"},
    {"extension with an empty value", "5;a=\r\nhello\r\n0\r\n\r\n"},
    {"extension value that is not a token", "5;a=b(c)\r\nhello\r\n0\r\n\r\n"},
    {"whitespace after an extension name", "5;a \r\nhello\r\n0\r\n\r\n"},
    {"whitespace after an extension value", "5;a=b \r\nhello\r\n0\r\n\r\n"},
    {"whitespace inside an extension value", "5;a=b c\r\nhello\r\n0\r\n\r\n"},
    {"unterminated quoted value", "5;a=\"b\r\nhello\r\n0\r\n\r\n"},
    {"control byte in a quoted value", "5;a=\"b\x01\"\r\nhello\r\n0\r\n\r\n"},
    {"byte after a quoted value", "5;a=\"b\"c\r\nhello\r\n0\r\n\r\n"},
    {"bare LF in an extension", "5;a=b\nhello\r\n0\r\n\r\n"},
    {"lone CR in an extension", "5;a=b\rXhello\r\n0\r\n\r\n"},
    {"NUL in an extension", "5;a\x00\r\nhello\r\n0\r\n\r\n"s},
    // Trailers: field lines as in a head.
    {"obs-fold in the trailers", "0\r\nX: v\r\n w\r\n\r\n"},
    {"whitespace at the start of a trailer line", "0\r\n\tX: v\r\n\r\n"},
    {"whitespace before a trailer colon", "0\r\nX : v\r\n\r\n"},
    {"trailer without a colon", "0\r\nX\r\n\r\n"},
    {"empty trailer name", "0\r\n: v\r\n\r\n"},
    {"trailer name that is not a token", "0\r\nX(Y): v\r\n\r\n"},
    {"control byte in a trailer value", "0\r\nX: a\x01z\r\n\r\n"},
    {"DEL in a trailer value", "0\r\nX: a\x7fz\r\n\r\n"},
    {"bare LF after a trailer", "0\r\nX: v\n\r\n"},
    {"bare LF ending the trailers", "0\r\nX: v\r\n\n"},
    {"bare LF ending an empty trailer section", "0\r\n\n"},
    {"lone CR ending the body", "0\r\n\rX"},
};

}  // namespace

TEST_CASE("chunked decodes well-formed bodies to their last byte, however they are split",
          "[chunked]") {
    for (const auto& body : kGoodBodies) {
        INFO("body: " << Catch::Detail::stringify(body));
        // Whatever follows the body is not taken.
        const std::string in = body + "GET / HTTP/1.1\r\n\r\n";
        for (std::size_t piece : {in.size(), std::size_t{1}, std::size_t{3}}) {
            INFO("pieces of " << piece);
            const Outcome o = decode(in, piece);
            CHECK(o.status == Status::done);
            CHECK(o.used == body.size());
        }
        for (std::size_t cut = 0; cut <= body.size(); ++cut) {
            const Outcome o = decode_split(in, cut);
            if (o.status != Status::done || o.used != body.size())
                FAIL_CHECK("split at byte " << cut << ": not done after exactly the body");
        }
    }
}

TEST_CASE("chunked waits for the final CRLF", "[chunked]") {
    const std::string body = "5;a=b\r\nhello\r\n0\r\nX: v\r\n\r\n";
    for (std::size_t n = 0; n < body.size(); ++n) {
        INFO("prefix of " << n << " bytes");
        const Outcome o = decode(body.substr(0, n), body.size());
        CHECK(o.status == Status::more);
        CHECK(o.used == n);
    }
}

TEST_CASE("chunked rejects every break of the grammar, however it is split", "[chunked]") {
    for (const auto& bad : kBadBodies) {
        INFO("case: " << bad.what);
        CHECK(decode(bad.bytes, bad.bytes.size()).status == Status::invalid);
        CHECK(decode(bad.bytes, 1).status == Status::invalid);
        for (std::size_t cut = 0; cut <= bad.bytes.size(); ++cut) {
            if (decode_split(bad.bytes, cut).status != Status::invalid)
                FAIL_CHECK("not rejected when split at byte " << cut);
        }
    }
}

TEST_CASE("chunked says what broke the grammar", "[chunked]") {
    ChunkedDecoder d;
    d.start(kNoLimit);
    const std::string in = "5\r\nhelloXX0\r\n\r\n";
    const ChunkedDecoder::Step s = d.feed(in.data(), in.data() + in.size());
    REQUIRE(s.status == Status::invalid);
    REQUIRE(s.why != nullptr);
    CHECK_THAT(s.why, Catch::Matchers::Contains("CRLF"));
}

TEST_CASE("chunked counts every byte of the coding toward the limit", "[chunked][limits]") {
    const std::string body = "4;ext=1\r\nabcd\r\n0\r\nX: v\r\n\r\n";
    SECTION("a body of exactly the limit is accepted") {
        const Outcome o = decode(body, 1, body.size());
        CHECK(o.status == Status::done);
        CHECK(o.used == body.size());
        CHECK(decode(body, body.size(), body.size()).status == Status::done);
    }
    SECTION("one byte more is too large, however it is fed") {
        for (std::size_t piece : {std::size_t{1}, std::size_t{7}, body.size()})
            CHECK(decode(body, piece, body.size() - 1).status == Status::too_large);
    }
    SECTION("a chunk size beyond the limit is too large before its data arrives") {
        const Outcome o = decode("100\r\n", 5, 64);
        CHECK(o.status == Status::too_large);
    }
    SECTION("extensions alone cannot make a body unbounded (CVE-2024-22019)") {
        ChunkedDecoder d;
        d.start(64);
        const std::string start = "0;ext=";
        REQUIRE(d.feed(start.data(), start.data() + start.size()).status == Status::more);
        const std::string more(8, 'e');
        Status s = Status::more;
        for (int i = 0; i < 20 && s == Status::more; ++i)
            s = d.feed(more.data(), more.data() + more.size()).status;
        CHECK(s == Status::too_large);
    }
    SECTION("trailers count too") {
        const std::string trailers = "0\r\n" + std::string(60, 'X') + ": v\r\n\r\n";
        CHECK(decode(trailers, 3, 64).status == Status::too_large);
    }
}

TEST_CASE("chunked starts afresh after start()", "[chunked]") {
    ChunkedDecoder d;
    d.start(kNoLimit);
    const std::string body = "5\r\nhello\r\n0\r\n\r\n";
    REQUIRE(d.feed(body.data(), body.data() + body.size()).status == Status::done);
    CHECK(d.feed(body.data(), body.data() + body.size()).status == Status::invalid);
    d.start(kNoLimit);
    const ChunkedDecoder::Step s = d.feed(body.data(), body.data() + body.size());
    CHECK(s.status == Status::done);
    CHECK(s.used == body.size());
}
