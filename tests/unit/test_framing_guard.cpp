// http::FramingGuard on its own: the line discipline of RFC 9112 sections 2.2,
// 3 and 5 (CRLF line ends, no obs-fold, no whitespace before a colon, a request
// line of exactly three parts ending in HTTP/DIGIT.DIGIT) over request heads,
// whole and split across two scan() calls at every byte. Chunked framing has
// its own decoder (test_chunked.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "http/framing_guard.hpp"

using namespace std::string_literals;
using sm::http::FramingGuard;

namespace {

struct Outcome {
    bool rejected = false;
    bool head_complete = false;
    std::size_t bytes = 0;
};

Outcome scan_whole(std::string_view in) {
    FramingGuard g;
    g.start_head();
    const bool rejected = g.scan(in.data(), in.data() + in.size()) != nullptr;
    return {rejected, g.head_complete(), g.bytes()};
}

// Scans [0, cut) and [cut, end) separately; copies make each piece its own allocation.
Outcome scan_split(std::string_view in, std::size_t cut) {
    FramingGuard g;
    g.start_head();
    const std::string first(in.substr(0, cut));
    const std::string second(in.substr(cut));
    bool rejected = g.scan(first.data(), first.data() + first.size()) != nullptr;
    if (!rejected) rejected = g.scan(second.data(), second.data() + second.size()) != nullptr;
    return {rejected, g.head_complete(), g.bytes()};
}

const std::vector<std::string> kGoodHeads = {
    "GET / HTTP/1.1\r\n\r\n",
    "GET /plaintext HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "GET /json?a=b&c=%20 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nX-Empty:\r\nX-No-Space:v\r\n\r\n",
    "GET http://example.com:8080/json HTTP/1.1\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\n\r\n",
    "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "GET / HTTP/1.1\r\nX: a value\twith tabs,  spaces: and colons \r\n\r\n",
    "GET / HTTP/1.1\r\nX: caf\xc3\xa9 \x80\xff\r\n\r\n",  // obs-text in a value
    "\r\nGET / HTTP/1.1\r\n\r\n",  // RFC 9112 2.2: an empty line first is ignored
    "\r\n\r\nPOST /json HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
    // Any version after "HTTP" gets past the guard: llhttp checks the rest,
    // and the session decides what a version means (HTTP/1.2 is served as
    // 1.1, HTTP/2.0 gets 505).
    "GET / HTTP/0.9\r\n\r\n",
    "GET / HTTP/1.9\r\n\r\n",
    "GET / HTTP/9.9\r\n\r\n",
    // Letters and digits of "HTTP/1.1" are ordinary bytes outside the version.
    "PUT /HTTP/1.1 HTTP/1.1\r\nHTTP: 1.1\r\nX-T: HTTP/1.1\r\n\r\n",
};

struct Bad {
    const char* what;
    std::string bytes;
};

const std::vector<Bad> kBadHeads = {
    {"lone CR ending the request line", "GET / HTTP/1.1\rHost: x\r\n\r\n"},
    {"lone CR inside the request line", "GET /\rx HTTP/1.1\r\n\r\n"},
    {"lone CR after a header value", "GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n"},
    {"lone CR in the final empty line", "GET / HTTP/1.1\r\nHost: x\r\n\rX"},
    {"CR CR LF as the final empty line", "GET / HTTP/1.1\r\n\r\r\n"},
    {"lone CR before the request line", "\rGET / HTTP/1.1\r\n\r\n"},
    {"bare LF after the request line", "GET / HTTP/1.1\nHost: x\r\n\r\n"},
    {"bare LF as the final empty line", "GET / HTTP/1.1\r\nHost: x\r\n\n"},
    {"bare LF after a header value", "GET / HTTP/1.1\r\nHost: x\n\r\n"},
    {"bare LF before the request line", "\nGET / HTTP/1.1\r\n\r\n"},
    {"space before a colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n"},
    {"tab before a colon", "GET / HTTP/1.1\r\nHost\t: x\r\n\r\n"},
    {"space inside a field name", "GET / HTTP/1.1\r\nHo st: x\r\n\r\n"},
    {"obs-fold with a space", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"},
    {"obs-fold with a tab", "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n"},
    {"folded Content-Length", "POST / HTTP/1.1\r\nHost: x\r\n Content-Length: 5\r\n\r\n"},
    {"empty header name", "GET / HTTP/1.1\r\n: v\r\n\r\n"},
    {"header line without a colon", "GET / HTTP/1.1\r\nNoColon\r\n\r\n"},
    {"double space after the method", "GET  / HTTP/1.1\r\n\r\n"},
    {"double space after the target", "GET /  HTTP/1.1\r\n\r\n"},
    {"space after the version", "GET / HTTP/1.1 \r\n\r\n"},
    {"space before the method", " GET / HTTP/1.1\r\n\r\n"},
    {"four parts in the request line", "GET / x HTTP/1.1\r\n\r\n"},
    {"HTTP/0.9 request line", "GET /\r\n\r\n"},
    {"request line of one word", "GET\r\n\r\n"},
    {"tab in the target", "GET /a\tb HTTP/1.1\r\n\r\n"},
    {"tab as a request-line separator", "GET\t/ HTTP/1.1\r\n\r\n"},
    {"NUL in the request line", "GET /"s + '\0' + " HTTP/1.1\r\n\r\n"},
    {"control byte in the request line", "GET /\x1b HTTP/1.1\r\n\r\n"},
    {"DEL in the request line", "GET /\x7f HTTP/1.1\r\n\r\n"},
    // RFC 9110 5.5: field values are VCHAR, SP, HTAB and obs-text; names are tokens.
    {"NUL in a header value", "GET / HTTP/1.1\r\nX: a"s + '\0' + "b\r\n\r\n"},
    {"control byte in a header value", "GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n"},
    {"ESC in a header value", "GET / HTTP/1.1\r\nX: \x1b[0m\r\n\r\n"},
    {"DEL in a header value", "GET / HTTP/1.1\r\nX: a\x7fz\r\n\r\n"},
    {"control byte in a header name", "GET / HTTP/1.1\r\nX\x01Y: z\r\n\r\n"},
    {"NUL starting a header line", "GET / HTTP/1.1\r\n"s + '\0' + "X: z\r\n\r\n"},
    {"bytes after the end of the head", "GET / HTTP/1.1\r\n\r\nX"},
    // RFC 9112 2.3: HTTP-name is "HTTP", case-sensitive. llhttp 8.1.0 also
    // parses RTSP/1.0 and ICE/1.0 as version 1.0. (What follows the name,
    // "/" DIGIT "." DIGIT, llhttp checks exactly: test_session.cpp.)
    {"RTSP version", "GET / RTSP/1.0\r\n\r\n"},
    {"ICE version", "SOURCE / ICE/1.0\r\n\r\n"},
    {"lower-case http", "GET / http/1.1\r\n\r\n"},
    {"HTTX", "GET / HTTX/1.1\r\n\r\n"},
    {"a version that is only part of HTTP", "GET / HTT\r\n\r\n"},
    {"version with a trailing tab", "GET / HTTP/1.1\t\r\n\r\n"},
    {"version with a trailing space", "GET / HTTP/1.1 \r\n\r\n"},
};

}  // namespace

TEST_CASE("framing_guard accepts well-formed heads", "[framing_guard]") {
    for (const auto& in : kGoodHeads) {
        INFO("head: " << Catch::Detail::stringify(in));
        const Outcome whole = scan_whole(in);
        CHECK_FALSE(whole.rejected);
        CHECK(whole.head_complete);
        CHECK(whole.bytes == in.size());
        for (std::size_t cut = 0; cut <= in.size(); ++cut) {
            const Outcome split = scan_split(in, cut);
            if (split.rejected || !split.head_complete || split.bytes != in.size())
                FAIL_CHECK("split at byte " << cut << " rejected or incomplete");
        }
    }
}

TEST_CASE("framing_guard reports a head as complete only after its empty line", "[framing_guard]") {
    const std::string in = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    for (std::size_t n = 0; n < in.size(); ++n) {
        FramingGuard g;
        g.start_head();
        INFO("prefix of " << n << " bytes");
        CHECK(g.scan(in.data(), in.data() + n) == nullptr);
        CHECK_FALSE(g.head_complete());
        CHECK(g.bytes() == n);
    }
}

TEST_CASE("framing_guard rejects malformed heads", "[framing_guard]") {
    for (const auto& bad : kBadHeads) {
        INFO("case: " << bad.what);
        const Outcome whole = scan_whole(bad.bytes);
        CHECK(whole.rejected);
        CHECK_FALSE(whole.head_complete);
        for (std::size_t cut = 0; cut <= bad.bytes.size(); ++cut) {
            const Outcome split = scan_split(bad.bytes, cut);
            if (!split.rejected || split.head_complete)
                FAIL_CHECK("accepted when split at byte " << cut);
        }
    }
}

TEST_CASE("framing_guard describes each violation", "[framing_guard]") {
    for (const auto& bad : kBadHeads) {
        FramingGuard g;
        g.start_head();
        const char* why = g.scan(bad.bytes.data(), bad.bytes.data() + bad.bytes.size());
        INFO("case: " << bad.what);
        REQUIRE(why != nullptr);
        CHECK_FALSE(std::string_view(why).empty());
    }
}

TEST_CASE("framing_guard stays failed after a violation", "[framing_guard]") {
    FramingGuard g;
    g.start_head();
    const std::string bad = "GET / HTTP/1.1\nHost: x\r\n";
    REQUIRE(g.scan(bad.data(), bad.data() + bad.size()) != nullptr);
    const std::string good = "X: y\r\n\r\n";
    CHECK(g.scan(good.data(), good.data() + good.size()) != nullptr);
    CHECK_FALSE(g.head_complete());

    SECTION("until it is started again") {
        g.start_head();
        const std::string head = "GET / HTTP/1.1\r\n\r\n";
        CHECK(g.scan(head.data(), head.data() + head.size()) == nullptr);
        CHECK(g.head_complete());
        CHECK(g.bytes() == head.size());
    }
}

TEST_CASE("framing_guard accepts empty scans", "[framing_guard]") {
    FramingGuard g;
    g.start_head();
    const std::string head = "GET / HTTP/1.1\r\n\r\n";
    CHECK(g.scan(head.data(), head.data()) == nullptr);
    CHECK(g.bytes() == 0);
    CHECK(g.scan(head.data(), head.data() + head.size()) == nullptr);
    CHECK(g.scan(head.data() + head.size(), head.data() + head.size()) == nullptr);
    CHECK(g.head_complete());
}

// scan() looks at eight bytes at once inside runs (the method, the target,
// the version, a name, a value) and walks the table a byte at a time
// elsewhere; a scan of one byte always walks the table. So whole scans must
// agree with one-byte scans on every input: the verdict, the reason and
// whether the head is complete. The inputs are heads with one byte changed
// to a value at a class boundary (controls, SP, '!', ':', '~', DEL, obs-text)
// at every position, and runs of every length around the eight-byte step.
TEST_CASE("framing_guard's eight-byte runs agree with scanning a byte at a time",
          "[framing_guard]") {
    struct Verdict {
        std::string reason;  // empty: accepted
        bool head_complete = false;
        bool operator==(const Verdict&) const = default;
    };
    auto whole = [](std::string_view in) {
        FramingGuard g;
        g.start_head();
        const char* why = g.scan(in.data(), in.data() + in.size());
        return Verdict{why ? why : "", g.head_complete()};
    };
    auto bytewise = [](std::string_view in) {
        FramingGuard g;
        g.start_head();
        const char* why = nullptr;
        for (std::size_t i = 0; i < in.size() && why == nullptr; ++i)
            why = g.scan(in.data() + i, in.data() + i + 1);
        return Verdict{why ? why : "", g.head_complete()};
    };
    std::vector<std::string> heads;
    for (std::size_t n = 0; n <= 19; ++n) {
        const std::string run(n, 'a');
        heads.push_back("GET" + run + " /" + run + " HTTP/1.1" + run + "\r\nHost: h" + run +
                        "\r\nX" + run + ": v" + run + " w:\t" + run + "\x80\r\n\r\n");
    }
    heads.push_back("GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:19125\r\n\r\n");
    const std::vector<char> boundary = {'\0', '\t', '\n', '\r', '\x1f', ' ',   '!',   ':',
                                        '~',  '\x7f', '\x80', '\xff', 'H', 'T', 'P', '/'};
    std::size_t cases = 0;
    for (const std::string& head : heads) {
        REQUIRE(whole(head) == Verdict{"", true});
        for (std::size_t i = 0; i < head.size(); ++i) {
            for (const char b : boundary) {
                std::string in = head;
                in[i] = b;
                const Verdict w = whole(in);
                const Verdict s = bytewise(in);
                INFO("input with byte " << i << " = " << static_cast<int>(static_cast<unsigned char>(b))
                                        << ": whole '" << w.reason << "', bytewise '" << s.reason << "'");
                CHECK(w == s);
                ++cases;
            }
        }
    }
    CHECK(cases > 10'000);
}
