// db::RandomIds: the World ids of /db and /queries (no database needed).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <vector>

#include "db/random_id.hpp"

using sm::db::RandomIds;

TEST_CASE("RandomIds covers 1..10000 and nothing else", "[db][random]") {
    RandomIds ids;
    std::vector<unsigned> seen(sm::http::kWorldRows + 2, 0);
    std::array<unsigned, 10> buckets{};
    constexpr int kDraws = 1'000'000;
    int outside = 0;
    for (int i = 0; i < kDraws; ++i) {
        const std::int32_t id = ids.next();
        if (id < 1 || id > sm::http::kWorldRows) {
            ++outside;
            continue;
        }
        ++seen[static_cast<std::size_t>(id)];
        ++buckets[static_cast<std::size_t>((id - 1) / 1000)];
    }
    REQUIRE(outside == 0);
    CHECK(seen[0] == 0);
    CHECK(seen[sm::http::kWorldRows + 1] == 0);
    // 100 draws per id on average: missing one has odds of e^-100.
    CHECK(std::count(seen.begin() + 1, seen.end() - 1, 0u) == 0);
    CHECK(seen[1] > 0);
    CHECK(seen[sm::http::kWorldRows] > 0);
    // Each tenth of the range within 2% of its 100,000 (about 6.7 standard deviations).
    for (const unsigned b : buckets) {
        CHECK(b > 98'000);
        CHECK(b < 102'000);
    }
}

TEST_CASE("RandomIds bounds any range without bias", "[db][random]") {
    RandomIds ids(42);
    // 3 does not divide 2^32: a plain modulo would favour 0.
    std::array<unsigned, 3> counts{};
    for (int i = 0; i < 300'000; ++i) ++counts[ids.below(3)];
    for (const unsigned c : counts) {
        CHECK(c > 98'000);
        CHECK(c < 102'000);
    }
    for (int i = 0; i < 1000; ++i) CHECK(ids.below(1) == 0);
}

TEST_CASE("RandomIds: clients seeded from the device draw different sequences", "[db][random]") {
    RandomIds a;
    RandomIds b;
    std::vector<std::int32_t> from_a;
    std::vector<std::int32_t> from_b;
    for (int i = 0; i < 8; ++i) {
        from_a.push_back(a.next());
        from_b.push_back(b.next());
    }
    CHECK(from_a != from_b);
    // The same seed, the same sequence.
    RandomIds c(7);
    RandomIds d(7);
    for (int i = 0; i < 100; ++i) CHECK(c.next() == d.next());
}
