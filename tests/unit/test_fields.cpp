// The field values the session checks itself (http/fields.hpp): Host (RFC
// 9112 3.2: uri-host [ ":" port ], RFC 3986 3.2.2) with the IPv6address
// grammar, and Transfer-Encoding (RFC 9110 5.6.1 lists of RFC 9112 7
// transfer-codings over every field line), whole and split at every byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "http/fields.hpp"
#include "support/rfc9112.hpp"

using sm::http::HostCheck;
using sm::http::Ipv6Check;
using sm::http::TransferEncodingCheck;

namespace {

bool valid_whole(std::string_view v) {
    HostCheck h;
    h.start();
    h.feed(v.data(), v.size());
    return h.valid();
}

bool valid_split(std::string_view v, std::size_t cut) {
    HostCheck h;
    h.start();
    const std::string a(v.substr(0, cut)), b(v.substr(cut));
    h.feed(a.data(), a.size());
    h.feed(b.data(), b.size());
    return h.valid();
}

}  // namespace

TEST_CASE("fields host accepts every form of uri-host with or without a port", "[fields]") {
    const std::vector<std::string> good = {
        "",  // RFC 9112 3.2: empty when the target URI has no authority
        "localhost",
        "localhost:8080",
        "example.com",
        "EXAMPLE.com:80",
        "a-b_c~d.e",
        "xn--caf-dma.example",
        "127.0.0.1",
        "127.0.0.1:0",
        "999.1.1.1",  // not an IPv4address, but a reg-name
        "host:",      // port = *DIGIT: may be empty
        "%41b%7e",    // pct-encoded
        "!$&'()*+,;=",
        "[::1]",
        "[::1]:8080",
        "[2001:db8::7]",
        "[2001:DB8:0:0:8:800:200C:417A]",
        "[::ffff:192.0.2.1]:443",
        "[1:2:3:4:5:6:7:8]",
        "[v1.fe80::a+en1]",
        "[V7.x:y]",
        "example.com ",  // trailing whitespace is not part of the value
        "example.com:80 \t",
        "[::1] ",
    };
    for (const auto& v : good) {
        INFO("Host: " << Catch::Detail::stringify(v));
        CHECK(valid_whole(v));
        for (std::size_t cut = 0; cut <= v.size(); ++cut) {
            if (!valid_split(v, cut)) FAIL_CHECK("refused when split at byte " << cut);
        }
    }
}

TEST_CASE("fields host refuses values that are not uri-host [ \":\" port ]", "[fields]") {
    const std::vector<std::string> bad = {
        "a b",
        "a/b",
        "user@host",
        "host:port",
        "host:80:80",
        "host:8 0",
        "a?b",
        "a#b",
        "\"quoted\"",
        "%4",
        "%zz",
        "caf\xc3\xa9",  // obs-text: pct-encode it
        "[::1",
        "[::1]x",
        "[::1]]",
        "[]",
        "[1:2:3:4:5:6:7]",  // seven groups, no "::"
        "[1:2:3:4:5:6:7:8:9]",
        "[1::2::3]",
        "[:1:2:3:4:5:6:7]",
        "[12345::]",
        "[::1.2.3]",
        "[::256.1.1.1]",
        "[::01.1.1.1]",  // dec-octet has no leading zeros
        "[1.2.3.4::]",   // an IPv4address only last
        "[g::1]",
        "[v.x]",
        "[v1.]",
        "[v1x]",
        "a\tb",
    };
    for (const auto& v : bad) {
        INFO("Host: " << Catch::Detail::stringify(v));
        CHECK_FALSE(valid_whole(v));
        for (std::size_t cut = 0; cut <= v.size(); ++cut) {
            if (valid_split(v, cut)) FAIL_CHECK("accepted when split at byte " << cut);
        }
    }
}

namespace {

bool ipv6(std::string_view s) {
    Ipv6Check v;
    v.start();
    for (const char c : s)
        if (!v.step(c)) return false;
    return v.finish();
}

}  // namespace

TEST_CASE("fields host IPv6address follows RFC 3986 exactly", "[fields]") {
    auto ok = [](std::string_view s) { return ipv6(s); };
    CHECK(ok("::"));
    CHECK(ok("::1"));
    CHECK(ok("1::"));
    CHECK(ok("1:2:3:4:5:6:7::"));
    CHECK(ok("::2:3:4:5:6:7:8"));
    CHECK(ok("1:2:3:4:5:6:1.2.3.4"));
    CHECK(ok("::1.2.3.4"));
    CHECK(ok("1::255.255.255.255"));
    CHECK(ok("abcd:ef01:2345:6789:abcd:ef01:2345:6789"));
    CHECK_FALSE(ok(""));
    CHECK_FALSE(ok(":"));
    CHECK_FALSE(ok(":::"));
    CHECK_FALSE(ok("1:2:3:4:5:6:7:8:9"));
    CHECK_FALSE(ok("1:2:3:4:5:6:7:8::"));
    CHECK_FALSE(ok("1:2:3:4:5:6:7:1.2.3.4"));
    CHECK_FALSE(ok("1:"));
    CHECK_FALSE(ok(":1"));
    CHECK_FALSE(ok("1:::2"));
    CHECK_FALSE(ok("1.2.3.4"));
    CHECK_FALSE(ok("::1.2.3.4:1"));
}

namespace {

// The verdict on a request whose Transfer-Encoding lines are `lines`, each
// fed split at `cut` (clamped to its length).
struct Coding {
    bool valid;
    bool chunked;
};

Coding te(const std::vector<std::string>& lines, std::size_t cut = 0) {
    TransferEncodingCheck t;
    t.start();
    for (const auto& line : lines) {
        t.start_line();
        const std::size_t at = std::min(cut, line.size());
        const std::string a = line.substr(0, at), b = line.substr(at);
        t.feed(a.data(), a.size());
        t.feed(b.data(), b.size());
        t.end_line();
    }
    return {t.valid(), t.chunked()};
}

}  // namespace

TEST_CASE("fields transfer-encoding frames by chunked only when it is the one final coding",
          "[fields]") {
    struct Case {
        std::vector<std::string> lines;
        bool valid;
        bool chunked;
    };
    const std::vector<Case> cases = {
        {{"chunked"}, true, true},
        {{"Chunked"}, true, true},  // coding names are case-insensitive
        {{"CHUNKED "}, true, true},
        {{"gzip, chunked"}, true, true},
        {{"gzip,chunked"}, true, true},
        {{"gzip ,  chunked"}, true, true},
        {{", gzip,, chunked,"}, true, true},  // empty list elements are ignored
        {{"gzip;level=1, chunked"}, true, true},
        {{"gzip ; q = \"a, chunked\" , chunked"}, true, true},
        {{"gzip", "chunked"}, true, true},  // two lines, one list
        {{"chunked", ""}, true, true},
        {{"gzip"}, true, false},
        {{"chunked, gzip"}, true, false},
        {{"chunked", "gzip"}, true, false},
        {{""}, true, false},  // no coding at all
        {{" , "}, true, false},
        {{"chunked, chunked"}, true, false},  // RFC 9112 7: MUST NOT twice
        {{"chunked", "chunked"}, true, false},
        {{"chunked;a=b"}, true, false},  // chunked has no parameters
        {{"chunkedx"}, true, false},
        {{"xchunked"}, true, false},
        {{"chunk"}, true, false},
        // Not lists of transfer-codings: 400 whatever the other lines say.
        {{"chunked elloPKST / HTTP/1.1", "gzip, chunked"}, false, false},
        {{"chunked x"}, false, false},
        {{"gzip chunked"}, false, false},
        {{"chunked;"}, false, false},
        {{"gzip;a"}, false, false},
        {{"gzip;a="}, false, false},
        {{"gzip;a=\"b"}, false, false},
        {{"gzip;a=b c, chunked"}, false, false},
        {{"\"chunked\""}, false, false},
        {{"chunked/1"}, false, false},
    };
    for (const Case& c : cases) {
        std::string all;
        for (const auto& l : c.lines)
            all += "[" + l + "]";
        INFO("Transfer-Encoding lines " << all);
        std::size_t longest = 0;
        for (const auto& l : c.lines)
            longest = std::max(longest, l.size());
        for (std::size_t cut = 0; cut <= longest; ++cut) {
            const Coding got = te(c.lines, cut);
            if (got.valid != c.valid || got.chunked != c.chunked) {
                FAIL_CHECK("split at " << cut << ": valid " << got.valid << ", chunked "
                                       << got.chunked);
                break;
            }
        }
    }
}

TEST_CASE("fields IPv6address agrees with the RFC 9112 reference on random literals", "[fields]") {
    // The reference (tests/support/rfc9112.cpp) parses the whole literal by
    // RFC 3986's grammar; the core checks it a byte at a time.
    std::mt19937 rng(9112);
    const std::string alphabet = "0123456789abcdefABCDEF::..g";
    std::size_t valid = 0;
    for (int i = 0; i < 200000; ++i) {
        std::string s;
        const std::size_t n = rng() % 46;
        for (std::size_t k = 0; k < n; ++k)
            s += alphabet[rng() % alphabet.size()];
        // Bias toward plausible ones: replace runs with known-good pieces.
        if (rng() % 2 == 0) s = std::string(rng() % 2 ? "::" : "1:2:") + s.substr(0, n / 2);
        if (rng() % 4 == 0) s += rng() % 2 ? ":1.2.3.4" : "::";
        const bool expected = sm::test::rfc9112::grammar::is_ipv6_address(s);
        valid += expected ? 1 : 0;
        if (ipv6(s) != expected) {
            FAIL_CHECK("literal " << s << ": reference " << expected);
            break;
        }
    }
    INFO("valid literals generated: " << valid);
    CHECK(valid > 100);  // the generator reaches both outcomes
}
