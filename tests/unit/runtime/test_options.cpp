// runtime::parse_server_options and ServerOptions::model_option: the shared
// command line, and the options a model declares for itself (ModelOption).
// What the parser prints (--help, errors) is read from stdout and stderr.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "capture.hpp"
#include "runtime/options.hpp"

using namespace std::chrono_literals;
using sm::runtime::ModelOption;
using sm::runtime::ParsedOptions;

namespace {

constexpr ModelOption kModelOptions[] = {
    {.name = "queue-size",
     .help = "Entries in the hand-off queue",
     .value = 64,
     .min = 2,
     .max = 4096,
     .power_of_two = true},
    {.name = "spin", .help = "Spins before sleeping", .value = 3},
};

struct Parsed {
    ParsedOptions result;
    std::string out;  // stdout
    std::string err;  // stderr
};

// The command line "server-test <args>", as a model's main() passes it.
Parsed parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv{"server-test"};
    for (const std::string& a : args)
        argv.push_back(a.c_str());
    Parsed p;
    p.err = sm::test::capture_stderr([&] {
        p.out = sm::test::capture_stdout([&] {
            p.result =
                sm::runtime::parse_server_options("server-test", "a test model", kModelOptions,
                                                  static_cast<int>(argv.size()), argv.data());
        });
    });
    return p;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// An option's entry in --help: its line, and the lines of its help text up
// to the next option's line or a blank one.
std::string help_entry(const std::string& help, const std::string& name) {
    std::string entry;
    std::size_t at = 0;
    while (at < help.size()) {
        const std::size_t eol = std::min(help.find('\n', at), help.size());
        const std::string line = help.substr(at, eol - at);
        at = eol + 1;
        const std::size_t text = line.find_first_not_of(' ');
        if (text == std::string::npos || line[text] == '-') {
            if (!entry.empty()) break;  // the entry ended
            if (text != std::string::npos && line.compare(text, name.size() + 1, name + " ") == 0)
                entry = line;
        } else if (!entry.empty()) {
            entry += "\n" + line;
        }
    }
    return entry;
}

}  // namespace

TEST_CASE("options a model's option appears in --help with its default", "[options]") {
    const Parsed p = parse({"--help"});
    CHECK_FALSE(p.result.options);
    CHECK(p.result.exit_code == 0);
    CAPTURE(p.out);
    CHECK(contains(p.out, "server-test: a test model"));
    // "--queue-size UINT:UINT in [2 - 4096]:POW2=64", then its help text.
    const std::string queue = help_entry(p.out, "--queue-size");
    CAPTURE(queue);
    REQUIRE_FALSE(queue.empty());
    CHECK_FALSE(contains(queue, "--spin"));  // just its own entry
    CHECK(contains(queue, "[2 - 4096]"));
    CHECK(contains(queue, "=64"));
    CHECK(contains(queue, "Entries in the hand-off queue"));
    CHECK(contains(help_entry(p.out, "--spin"), "=3"));
    CHECK(p.err.empty());
}

TEST_CASE("options a model's option takes its default", "[options]") {
    const Parsed p = parse({});
    REQUIRE(p.result.options);
    CHECK(p.result.exit_code == 0);
    CHECK(p.result.options->model_option("queue-size") == 64);
    CHECK(p.result.options->model_option("spin") == 3);
}

TEST_CASE("options a model's option takes a value within its range", "[options]") {
    const std::string value = GENERATE(as<std::string>{}, "2", "128", "4096");
    const Parsed p = parse({"--queue-size", value, "--spin", "9"});
    REQUIRE(p.result.options);
    CHECK(p.result.options->model_option("queue-size") == std::stoul(value));
    CHECK(p.result.options->model_option("spin") == 9);
}

TEST_CASE("options a model's option out of its range is an error, exit code 2", "[options]") {
    const std::string value = GENERATE(as<std::string>{}, "1", "8192", "0", "-4", "many");
    CAPTURE(value);
    const Parsed p = parse({"--queue-size", value});
    CHECK_FALSE(p.result.options);
    CHECK(p.result.exit_code == 2);
    CAPTURE(p.err);
    CHECK(contains(p.err, "--queue-size"));
}

TEST_CASE("options power_of_two rejects other values, exit code 2", "[options]") {
    const std::string value = GENERATE(as<std::string>{}, "3", "48", "4095");
    CAPTURE(value);
    const Parsed p = parse({"--queue-size", value});
    CHECK_FALSE(p.result.options);
    CHECK(p.result.exit_code == 2);
    CAPTURE(p.err);
    CHECK(contains(p.err, "must be a power of two"));
}

TEST_CASE("options model_option of an unknown name throws std::out_of_range", "[options]") {
    const Parsed p = parse({});
    REQUIRE(p.result.options);
    CHECK_THROWS_MATCHES(p.result.options->model_option("queue"), std::out_of_range,
                         Catch::Message("no model option --queue"));
    CHECK_THROWS_AS(sm::runtime::ServerOptions{}.model_option("queue-size"), std::out_of_range);
}

TEST_CASE("options timeouts are given in seconds and kept in milliseconds", "[options]") {
    const Parsed p = parse({"--idle-timeout", "0.25", "--header-timeout", "2", "--linger-timeout",
                            "0", "--shutdown-timeout", "1.5"});
    REQUIRE(p.result.options);
    CHECK(p.result.options->idle_timeout == 250ms);
    CHECK(p.result.options->header_timeout == 2000ms);
    CHECK(p.result.options->linger_timeout == 0ms);  // no lingering close
    CHECK(p.result.options->shutdown_timeout == 1500ms);
}

TEST_CASE("options a malformed --cpus list is an error, exit code 2", "[options]") {
    const Parsed p = parse({"--cpus", "3-1"});
    CHECK_FALSE(p.result.options);
    CHECK(p.result.exit_code == 2);
    CHECK(p.err == "server-test: --cpus: invalid CPU list '3-1': range 3-1 is reversed\n");
}

TEST_CASE("options --address takes only a numeric IP address", "[options]") {
    CHECK(parse({"--address", "::1"}).result.options);
    const Parsed p = parse({"--address", "localhost"});
    CHECK_FALSE(p.result.options);
    CHECK(p.result.exit_code == 2);
    CHECK(contains(p.err, "'localhost' is not an IPv4 or IPv6 address"));
}
