// runtime::parse_cpu_list: the --cpus list ("0-3,6"), and its error messages,
// which the operator reads.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/cpu.hpp"

using sm::runtime::kMaxCpus;
using sm::runtime::parse_cpu_list;

namespace {

std::string malformed(const std::string& list) {
    return "invalid CPU list '" + list + "' (expected numbers and ranges such as 0-3,6)";
}

}  // namespace

TEST_CASE("cpu parses ranges and single CPUs in order", "[cpu]") {
    CHECK(parse_cpu_list("0-3,6") == std::vector{0, 1, 2, 3, 6});
    CHECK(parse_cpu_list("6,0-1") == std::vector{6, 0, 1});  // in the order given
    CHECK(parse_cpu_list("5-5,7") == std::vector{5, 7});
}

TEST_CASE("cpu parses a single CPU", "[cpu]") {
    CHECK(parse_cpu_list("0") == std::vector{0});
    CHECK(parse_cpu_list("12") == std::vector{12});
}

TEST_CASE("cpu accepts CPUs up to kMaxCpus - 1", "[cpu]") {
    const std::string last = std::to_string(kMaxCpus - 1);
    CHECK(parse_cpu_list(last) == std::vector{kMaxCpus - 1});
    CHECK(parse_cpu_list("1020-" + last).size() == static_cast<std::size_t>(kMaxCpus - 1020));
}

TEST_CASE("cpu rejects a reversed range, naming it", "[cpu]") {
    CHECK_THROWS_MATCHES(parse_cpu_list("0,3-1"), std::invalid_argument,
                         Catch::Message("invalid CPU list '0,3-1': range 3-1 is reversed"));
}

TEST_CASE("cpu rejects junk", "[cpu]") {
    const std::string list = GENERATE(as<std::string>{}, "", "a", "1,a", "1,", ",1", "1,,2", " 1",
                                      "1 ", "+1", "-1", "1-", "-", "1-2-3", "0x1", "1.5", "1;2");
    CAPTURE(list);
    CHECK_THROWS_MATCHES(parse_cpu_list(list), std::invalid_argument,
                         Catch::Message(malformed(list)));
}

TEST_CASE("cpu rejects CPUs from kMaxCpus on", "[cpu]") {
    const std::string list = GENERATE(as<std::string>{}, std::to_string(kMaxCpus),
                                      "0-" + std::to_string(kMaxCpus), "99999999999999");
    CAPTURE(list);
    CHECK_THROWS_MATCHES(parse_cpu_list(list), std::invalid_argument,
                         Catch::Message(malformed(list)));
}
