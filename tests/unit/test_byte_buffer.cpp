// http::ByteBuffer: append at the back, consume from the front, prepare/commit
// for direct reads, growth that keeps the content, compaction instead of growth
// when the consumed prefix makes room, and release() for idle connections.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "http/byte_buffer.hpp"

using sm::http::ByteBuffer;

TEST_CASE("byte_buffer starts empty", "[byte_buffer]") {
    ByteBuffer b;
    CHECK(b.empty());
    CHECK(b.size() == 0);
    CHECK(b.view().empty());
    CHECK(b.readable().empty());
    ByteBuffer sized(100);
    CHECK(sized.empty());
    CHECK(sized.capacity() >= 100);
}

TEST_CASE("byte_buffer append and consume keep bytes in order", "[byte_buffer]") {
    ByteBuffer b;
    b.append("hello");
    b.append(", ");
    b.append("world");
    CHECK(b.view() == "hello, world");
    CHECK(b.size() == 12);
    CHECK_FALSE(b.empty());
    CHECK(std::string_view(b.readable().data(), b.readable().size()) == "hello, world");
    b.consume(7);
    CHECK(b.view() == "world");
    b.append("!");
    CHECK(b.view() == "world!");
    b.consume(6);
    CHECK(b.empty());
    CHECK(b.view().empty());
}

TEST_CASE("byte_buffer keeps bytes that are not text", "[byte_buffer]") {
    ByteBuffer b;
    std::string all;
    for (int c = 0; c < 256; ++c)
        all += static_cast<char>(c);
    b.append(all);
    CHECK(b.view() == all);
}

TEST_CASE("byte_buffer prepare and commit expose written bytes", "[byte_buffer]") {
    ByteBuffer b;
    b.append("ab");
    char* w = b.prepare(100);
    REQUIRE(w != nullptr);
    CHECK(b.capacity() - b.size() >= 100);
    CHECK(b.view() == "ab");  // prepare alone adds nothing
    std::memcpy(w, "cdefg", 5);
    b.commit(3);  // only part of what was written
    CHECK(b.view() == "abcde");
    // The next prepare starts right after the committed bytes.
    char* w2 = b.prepare(1);
    *w2 = 'X';
    b.commit(1);
    CHECK(b.view() == "abcdeX");
}

TEST_CASE("byte_buffer growth preserves content", "[byte_buffer]") {
    ByteBuffer b(16);
    std::string expected;
    for (int i = 0; i < 1000; ++i) {
        const std::string piece = std::to_string(i) + ",";
        b.append(piece);
        expected += piece;
    }
    CHECK(b.view() == expected);
    CHECK(b.capacity() >= expected.size());

    SECTION("with a consumed prefix") {
        b.consume(100);
        expected.erase(0, 100);
        const std::string big(b.capacity() * 3, 'z');
        b.append(big);
        expected += big;
        CHECK(b.view() == expected);
    }
    SECTION("through reserve") {
        b.consume(5);
        expected.erase(0, 5);
        b.reserve(b.capacity() * 4);
        CHECK(b.view() == expected);
        const std::size_t cap = b.capacity();
        b.reserve(10);  // smaller than the capacity: nothing changes
        CHECK(b.capacity() == cap);
        CHECK(b.view() == expected);
    }
}

TEST_CASE("byte_buffer slides live bytes to the front instead of growing", "[byte_buffer]") {
    ByteBuffer b(64);
    const std::size_t cap = b.capacity();
    b.append(std::string(48, 'a'));
    b.append("12345678");
    b.consume(48);
    REQUIRE(b.view() == "12345678");
    // 8 live bytes; 48 more fit once the consumed prefix is reclaimed.
    const std::string more(cap - 8, 'b');
    b.append(more);
    CHECK(b.capacity() == cap);
    CHECK(b.view() == "12345678" + more);
}

TEST_CASE("byte_buffer stops allocating at its working size", "[byte_buffer]") {
    // A connection's steady state: a request in, consumed, the next one in.
    ByteBuffer b;
    const std::string request(300, 'r');
    b.append(request);
    b.append(request);
    const std::size_t cap = b.capacity();
    const char* storage = b.data();
    for (int i = 0; i < 1000; ++i) {
        b.consume(request.size());
        b.append(request);
        REQUIRE(b.view() == request + request);
    }
    CHECK(b.capacity() == cap);
    b.clear();
    CHECK(b.empty());
    CHECK(b.capacity() == cap);
    b.append("x");
    CHECK(b.data() == storage);  // same storage, reused from the front
}

TEST_CASE("byte_buffer consuming everything rewinds to the front", "[byte_buffer]") {
    ByteBuffer b(32);
    const char* front = b.prepare(0);
    b.append("0123456789");
    b.consume(10);
    CHECK(b.empty());
    b.append("abc");
    CHECK(b.data() == front);
    CHECK(b.view() == "abc");
}

TEST_CASE("byte_buffer release frees storage and the buffer stays usable", "[byte_buffer]") {
    ByteBuffer b;
    b.append(std::string(5000, 'q'));
    REQUIRE(b.capacity() >= 5000);
    b.consume(5000);
    b.release();
    CHECK(b.capacity() == 0);
    CHECK(b.empty());
    b.append("again");
    CHECK(b.view() == "again");
    b.clear();
    b.release();
    CHECK(b.capacity() == 0);
}

TEST_CASE("byte_buffer moves its content", "[byte_buffer]") {
    ByteBuffer a;
    a.append("moved bytes");
    a.consume(6);
    ByteBuffer b(std::move(a));
    CHECK(b.view() == "bytes");
    ByteBuffer c;
    c.append("old");
    c = std::move(b);
    CHECK(c.view() == "bytes");
    c.append("!");
    CHECK(c.view() == "bytes!");
}

TEST_CASE("byte_buffer appending nothing leaves it unchanged", "[byte_buffer]") {
    ByteBuffer b;
    b.append(std::string_view{});
    CHECK(b.empty());
    b.append("x");
    b.append("");
    CHECK(b.view() == "x");
}

TEST_CASE("byte_buffer matches a string model under random operations", "[byte_buffer]") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> op(0, 9);
    std::uniform_int_distribution<std::size_t> len(0, 700);
    ByteBuffer b;
    std::string model;
    char next = 'a';
    for (int i = 0; i < 5000; ++i) {
        const int o = op(rng);
        if (o < 4) {
            std::string s(len(rng), next);
            next = next == 'z' ? 'a' : static_cast<char>(next + 1);
            b.append(s);
            model += s;
        } else if (o < 7) {
            const std::size_t n = std::min(model.size(), len(rng));
            b.consume(n);
            model.erase(0, n);
        } else if (o < 9) {
            const std::size_t n = len(rng);
            char* w = b.prepare(n);
            const std::size_t k = n / 2;
            for (std::size_t j = 0; j < k; ++j)
                w[j] = static_cast<char>('0' + j % 10);
            b.commit(k);
            for (std::size_t j = 0; j < k; ++j)
                model += static_cast<char>('0' + j % 10);
        } else if (model.empty()) {
            b.release();
        }
        if (b.view() != model) {
            FAIL_CHECK("differs after operation " << i);
            break;
        }
    }
}
