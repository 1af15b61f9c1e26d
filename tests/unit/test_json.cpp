// http::serialize and http::write_json_string against nlohmann::json::dump()
// (the reference serializer, DESIGN.md), and parsed back with nlohmann's
// parser (header-only: the suite builds for Windows too).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "http/json.hpp"
#include "http_test_support.hpp"

using sm::http::json_max_size;
using sm::http::json_string_max_size;
using sm::http::Message;
using sm::http::serialize;
using sm::http::write_json_string;

namespace {

constexpr char kCanary = '\x5a';
constexpr std::size_t kSlack = 64;

// serialize() into a buffer of exactly json_max_size() bytes followed by
// canaries, so a write past the promised size is caught even without ASan.
std::string ours(std::string_view s) {
    const Message m{s};
    const std::size_t max = json_max_size(m);
    std::vector<char> buf(max + kSlack, kCanary);
    const std::size_t n = serialize(m, std::span<char>(buf.data(), max));
    REQUIRE(n <= max);
    CHECK(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(max), buf.end(),
                      [](char c) { return c == kCanary; }));
    return {buf.data(), n};
}

std::string reference(std::string_view s) {
    return nlohmann::json{{"message", std::string(s)}}.dump();
}

std::string string_ours(std::string_view s) {
    std::vector<char> buf(json_string_max_size(s.size()) + kSlack, kCanary);
    char* end = write_json_string(buf.data(), s);
    const auto n = static_cast<std::size_t>(end - buf.data());
    REQUIRE(n <= json_string_max_size(s.size()));
    return {buf.data(), n};
}

std::string all_control_bytes() {
    std::string s;
    for (int c = 0; c < 0x20; ++c)
        s += static_cast<char>(c);
    return s;
}

}  // namespace

TEST_CASE("json serialize matches nlohmann for the hello-world message", "[json]") {
    CHECK(ours(sm::http::kHelloWorld) == reference("Hello, World!"));
    CHECK(ours(sm::http::kHelloWorld) == sm::test::kJsonBody);
}

TEST_CASE("json serialize matches nlohmann for strings that need escaping", "[json]") {
    using namespace std::string_literals;
    const std::vector<std::string> strings = {
        "",
        "Hello, World!",
        "\"",
        "say \"hi\"",
        "\\",
        "C:\\path\\to\\file",
        "\\\"",
        "/slashes/are/not/escaped",
        "\b\f\n\r\t",
        "line1\nline2\r\n",
        all_control_bytes(),
        "\x7f",
        "del\x7f"
        "del",
        "caf\xc3\xa9",                           // 2-byte UTF-8
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",  // 3-byte UTF-8
        "\xf0\x9f\x98\x80 grin",                 // 4-byte UTF-8
        "\xe2\x80\xa8\xe2\x80\xa9",              // U+2028/U+2029 pass through
        "\xef\xbb\xbf"
        "bom",
        "mixed \"\\\x01\xc3\xa9\n\x1f end",
        std::string(1000, 'a'),
        std::string(300, '\x01'),  // every byte needs the longest escape
        std::string(300, '"'),
    };
    for (const auto& s : strings) {
        INFO("string: " << Catch::Detail::stringify(s));
        CHECK(ours(s) == reference(s));
        CHECK(string_ours(s) == nlohmann::json(s).dump());
    }
}

TEST_CASE("json serialize matches nlohmann for every single control byte", "[json]") {
    for (int c = 0; c <= 0x7f; ++c) {
        if (c >= 0x20 && c < 0x7f) continue;
        const std::string s{'<', static_cast<char>(c), '>'};
        INFO("byte 0x" << std::hex << c);
        CHECK(ours(s) == reference(s));
        CHECK(ours(std::string(1, static_cast<char>(c))) ==
              reference(std::string(1, static_cast<char>(c))));
    }
}

TEST_CASE("json serialize matches nlohmann for random UTF-8 strings", "[json]") {
    std::mt19937 rng(20240521);
    // Code points from every UTF-8 length class, controls and JSON specials.
    const std::vector<std::string> pieces = {"a",
                                             "Z",
                                             " ",
                                             "\"",
                                             "\\",
                                             "/",
                                             "\n",
                                             "\t",
                                             "\x01",
                                             "\x1f",
                                             "\x7f",
                                             "\xc3\xa9",
                                             "\xe2\x82\xac",
                                             "\xf0\x9f\x8d\x95",
                                             "\xc2\x80",
                                             "{}"};
    std::uniform_int_distribution<std::size_t> pick(0, pieces.size() - 1);
    std::uniform_int_distribution<int> len(0, 40);
    for (int i = 0; i < 2000; ++i) {
        std::string s;
        for (int n = len(rng); n > 0; --n)
            s += pieces[pick(rng)];
        if (ours(s) != reference(s)) {
            FAIL_CHECK("differs for " << Catch::Detail::stringify(s));
            break;
        }
    }
}

TEST_CASE("json serialize output parses back to the original string", "[json]") {
    for (const std::string s : {"", "Hello, World!", "quote \" back \\ slash", "\x01\x02\x1f\n",
                                "caf\xc3\xa9 \xf0\x9f\x98\x80"}) {
        const std::string json = ours(s);
        INFO("json: " << json);
        const auto doc = nlohmann::json::parse(json, nullptr, false);
        REQUIRE(doc.is_object());
        CHECK(doc.size() == 1);
        REQUIRE(doc.contains("message"));
        REQUIRE(doc["message"].is_string());
        CHECK(doc["message"].get<std::string>() == s);
    }
}

TEST_CASE("json sizes bound the output", "[json]") {
    CHECK(json_string_max_size(0) == 2);
    CHECK(json_string_max_size(3) == 2 + 18);  // "\u0001\u0002\u0003"
    CHECK(json_max_size(Message{""}) == std::string_view(R"({"message":""})").size());
    CHECK(string_ours(std::string(5, '\x02')).size() == json_string_max_size(5));
}

// The writer copies runs of bytes that need no escape eight at a time and
// escapes the byte that ends a run: every length around that step, with a
// byte at a class boundary (controls, '"', '\\', and the bytes that are never
// escaped next to them) at every position, against nlohmann.
TEST_CASE("json serialize matches nlohmann with an escape at every position of every length",
          "[json]") {
    const std::string boundary = std::string("\x00\x1f\"\\\n\x20\x21\x5b\x5d\x7f", 10) + "\xc3\xa9";
    std::size_t cases = 0;
    for (std::size_t n = 1; n <= 26; ++n) {
        for (std::size_t i = 0; i < n; ++i) {
            for (const char b : boundary) {
                std::string s(n, 'x');
                s[i] = b;
                if (static_cast<unsigned char>(b) >= 0x80) {  // a whole two-byte character
                    if (i + 1 == n) continue;
                    s[i + 1] = '\xa9';
                    s[i] = '\xc3';
                }
                INFO("length " << n << ", byte 0x" << std::hex
                               << static_cast<int>(static_cast<unsigned char>(b)) << std::dec
                               << " at " << i);
                CHECK(ours(s) == reference(s));
                CHECK(string_ours(s) == nlohmann::json(s).dump());
                ++cases;
            }
        }
    }
    CHECK(cases > 3000);
}
