// loadgen's RequestMix (the requests laid out once, any batch one slice) and
// RequestBudget (-n: never more than N taken, however many threads race).
// Checked against requests rendered one by one, and against counts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "budget.hpp"
#include "config.hpp"
#include "mix.hpp"

using sm::loadgen::Config;
using sm::loadgen::Request;
using sm::loadgen::RequestBudget;
using sm::loadgen::RequestMix;

namespace {

Config mix_of(const std::vector<std::pair<std::string, std::string>>& requests, unsigned pipeline) {
    Config c;
    c.pipeline = pipeline;
    for (const auto& [method, url] : requests)
        c.requests.push_back(Request{sm::loadgen::parse_url(url), method, {}});
    c.target = c.requests.front().target;
    return c;
}

}  // namespace

TEST_CASE("mix any batch of up to the pipeline depth is its requests in order", "[mix]") {
    const std::vector<std::pair<std::string, std::string>> requests = {
        {"GET", "http://h:1/a"}, {"HEAD", "http://h:1/bb"}, {"GET", "http://h:1/ccc"}};
    for (const unsigned depth : {1u, 2u, 3u, 5u, 16u}) {
        const Config c = mix_of(requests, depth);
        const RequestMix mix(c);
        REQUIRE(mix.size() == 3);
        for (std::size_t first = 0; first < mix.size(); ++first) {
            for (std::uint32_t n = 1; n <= depth; ++n) {
                std::string expected;
                for (std::uint32_t i = 0; i < n; ++i)
                    expected += render_request(c, c.requests[(first + i) % 3]);
                INFO("depth " << depth << ", first " << first << ", n " << n);
                CHECK(mix.batch(first, n) == expected);
            }
        }
        CHECK_FALSE(mix.head(0));
        CHECK(mix.head(1));
        CHECK(mix.mixed_head());
        CHECK_FALSE(mix.all_head());
    }
}

TEST_CASE("mix of one request is the request repeated", "[mix]") {
    const Config c = mix_of({{"GET", "http://h:1/plaintext"}}, 4);
    const RequestMix mix(c);
    const std::string one = render_request(c);
    CHECK(mix.size() == 1);
    CHECK(mix.batch(0, 1) == one);
    CHECK(mix.batch(0, 4) == one + one + one + one);
    CHECK_FALSE(mix.mixed_head());
    CHECK(RequestMix(mix_of({{"HEAD", "http://h:1/"}}, 1)).all_head());
}

TEST_CASE("mix budget gives out exactly its total, in pieces up to the ask", "[mix][count]") {
    RequestBudget budget(10);
    CHECK(budget.take(4) == 4);
    CHECK(budget.take(4) == 4);
    CHECK_FALSE(budget.exhausted());
    CHECK(budget.take(4) == 2);
    CHECK(budget.exhausted());
    CHECK(budget.take(1) == 0);
    CHECK(budget.taken() == 10);
}

TEST_CASE("mix budget: racing threads take exactly the total between them", "[mix][count]") {
    constexpr std::uint64_t kTotal = 100'003;
    RequestBudget budget(kTotal);
    std::vector<std::uint64_t> got(4, 0);
    {
        std::vector<std::jthread> threads;
        for (std::size_t t = 0; t < got.size(); ++t)
            threads.emplace_back([&, t] {
                const auto want = static_cast<std::uint32_t>(t + 1);
                while (const std::uint32_t n = budget.take(want))
                    got[t] += n;
            });
    }
    std::uint64_t sum = 0;
    for (const auto g : got)
        sum += g;
    CHECK(sum == kTotal);
    CHECK(budget.exhausted());
}
