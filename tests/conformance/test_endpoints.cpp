// The endpoints: TechEmpower's verification rules for /plaintext and /json,
// the / endpoint, HEAD, 404 and 405.
#include <simdjson.h>
#include <catch2/catch.hpp>

#include <string>
#include <thread>

#include "conformance.hpp"
#include "support/http_date.hpp"
#include "support/wait.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

namespace {

// TechEmpower's /json rule: a JSON object whose only key is "message" with
// the value "Hello, World!".
void check_json_message(const std::string& body) {
    INFO("body: " << body);
    simdjson::dom::parser parser;
    simdjson::dom::object object;
    REQUIRE(parser.parse(body).get_object().get(object) == simdjson::SUCCESS);
    CHECK(object.size() == 1);
    std::string_view message;
    REQUIRE(object["message"].get_string().get(message) == simdjson::SUCCESS);
    CHECK(message == "Hello, World!");
}

}  // namespace

TEST_CASE("plaintext meets the TechEmpower rules", "[conformance][endpoints]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        // Twice on one connection: the second proves keep-alive.
        for (int i = 0; i < 2; ++i) {
            const Response r = c.request(techempower_request("/plaintext"));
            INFO(r.describe());
            REQUIRE(r.status == 200);
            CHECK(r.version() == "HTTP/1.1");
            check_common_headers(r);
            CHECK(r.header_count("Content-Type") == 1);
            CHECK(r.header("Content-Type").value_or("(none)") == "text/plain");
            CHECK(r.header("Content-Length").value_or("(none)") == "13");
            CHECK(r.body == kPlaintextBody);
            CHECK(r.keep_alive);
        }
    }
    fds.require_back();
}

TEST_CASE("json meets the TechEmpower rules", "[conformance][endpoints]") {
    auto mode = GENERATE(as<std::string>{}, "composed", "cached");
    INFO("--mode " << mode);
    auto server = start_server({"--mode", mode});
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        for (int i = 0; i < 2; ++i) {
            const Response r = c.request(techempower_request("/json"));
            INFO(r.describe());
            REQUIRE(r.status == 200);
            CHECK(r.version() == "HTTP/1.1");
            check_common_headers(r);
            CHECK(r.header_count("Content-Type") == 1);
            CHECK(r.header("Content-Type").value_or("(none)") == "application/json");
            CHECK(r.header("Content-Length").value_or("(none)") ==
                  std::to_string(kJsonBody.size()));
            CHECK(r.body == kJsonBody);
            check_json_message(r.body);
            CHECK(r.keep_alive);
        }
    }
    fds.require_back();
}

TEST_CASE("date changes after a second", "[conformance][endpoints]") {
    auto mode = GENERATE(as<std::string>{}, "composed", "cached");
    INFO("--mode " << mode);
    auto server = start_server({"--mode", mode});
    Connection c = connect(*server);
    const Response first = c.request(make_request("GET", "/plaintext"));
    REQUIRE(first.status == 200);
    check_common_headers(first);
    const std::string date1 = first.header("Date").value_or("");

    // A wait, not a timing assertion: the Date must move on within a few
    // seconds (it changes once a second; 3 s leaves room for a slow machine).
    std::string date2 = date1;
    const bool changed = eventually(
        [&] {
            const Response r = c.request(make_request("GET", "/plaintext"));
            REQUIRE(r.status == 200);
            date2 = r.header("Date").value_or("");
            return date2 != date1;
        },
        3s, 100ms);
    INFO("first Date: " << date1 << ", last Date: " << date2);
    REQUIRE(changed);
    const auto t1 = parse_imf_fixdate(date1);
    const auto t2 = parse_imf_fixdate(date2);
    REQUIRE(t1.has_value());
    REQUIRE(t2.has_value());
    CHECK(*t2 > *t1);
}

TEST_CASE("date is current after the server was idle", "[conformance][endpoints]") {
    // A model that refreshes its Date only while busy (or on a timer that an
    // idle loop never runs) answers the first request after a quiet spell
    // with a stale Date. The rule: never more than a second stale.
    auto composed = start_server({"--mode", "composed"});
    auto cached = start_server({"--mode", "cached"});
    Connection a = connect(*composed);
    Connection b = connect(*cached);
    REQUIRE(a.request(make_request("GET", "/plaintext")).status == 200);
    REQUIRE(b.request(make_request("GET", "/json")).status == 200);
    // Both servers idle for more than two Date seconds (a wait, not a measurement).
    std::this_thread::sleep_for(2500ms);
    for (Connection* c : {&a, &b}) {
        const auto before =
            std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
        const Response r = c->request(make_request("GET", c == &a ? "/plaintext" : "/json"));
        const auto after =
            std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
        INFO((c == &a ? "--mode composed" : "--mode cached")
             << "\nsent at " << format_imf_fixdate(before) << ", answered by "
             << format_imf_fixdate(after) << "\n"
             << r.describe());
        REQUIRE(r.status == 200);
        const auto date = parse_imf_fixdate(r.header("Date").value_or(""));
        REQUIRE(date.has_value());
        CHECK(*date >= before - 1s);
        CHECK(*date <= after);
    }
}

TEST_CASE("root answers Hello World", "[conformance][endpoints]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        const Response r = c.request(make_request("GET", "/"));
        INFO(r.describe());
        REQUIRE(r.status == 200);
        CHECK(r.version() == "HTTP/1.1");
        check_common_headers(r);
        CHECK(r.header("Content-Type").value_or("(none)") == "text/plain; charset=utf-8");
        CHECK(r.header("Content-Length").value_or("(none)") == "12");
        CHECK(r.body == kRootBody);
        CHECK(r.keep_alive);
    }
    fds.require_back();
}

TEST_CASE("head answers without a body", "[conformance][endpoints]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        for (const char* path : {"/plaintext", "/json", "/"}) {
            INFO("path " << path);
            const Response get = c.request(make_request("GET", path));
            REQUIRE(get.status == 200);
            // A stray body after the HEAD response would be parsed as the
            // start of the next response and fail the GET that follows.
            const Response head = c.request(make_request("HEAD", path), Expect::no_body);
            INFO(head.describe());
            CHECK(head.status == 200);
            check_common_headers(head, Expect::no_body);
            CHECK(head.header("Content-Length") == get.header("Content-Length"));
            CHECK(head.header("Content-Type") == get.header("Content-Type"));
            const Response again = c.request(make_request("GET", path));
            CHECK(again.status == 200);
            CHECK(again.body == get.body);
        }
    }
    fds.require_back();
}

TEST_CASE("unknown path gets 404", "[conformance][endpoints]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        for (const char* path : {"/nope", "/plaintext/extra", "/jsonx", "/PLAINTEXT", "//"}) {
            INFO("path " << path);
            const Response r = c.request(make_request("GET", path));
            INFO(r.describe());
            CHECK(r.status == 404);
            CHECK(r.version() == "HTTP/1.1");
            check_common_headers(r);
        }
        const Response head = c.request(make_request("HEAD", "/nope"), Expect::no_body);
        INFO(head.describe());
        CHECK(head.status == 404);
        check_common_headers(head, Expect::no_body);
        // A 404 keeps the connection.
        const Response ok = c.request(make_request("GET", "/plaintext"));
        CHECK(ok.status == 200);
        CHECK(ok.body == kPlaintextBody);
    }
    fds.require_back();
}

TEST_CASE("other methods get 405 with Allow", "[conformance][endpoints]") {
    auto server = start_server();
    const FdBaseline fds(*server);
    {
        Connection c = connect(*server);
        for (const char* path : {"/plaintext", "/json", "/"}) {
            for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
                INFO(method << " " << path);
                const Response r = c.request(make_request(method, path, "Content-Length: 0\r\n"));
                INFO(r.describe());
                CHECK(r.status == 405);
                check_common_headers(r);
                CHECK(r.header_count("Allow") == 1);
                CHECK(r.header("Allow").value_or("(none)") == "GET, HEAD");
            }
        }
        // A body sent with the refused request is consumed, not taken for the next request.
        const Response post =
            c.request(make_request("POST", "/json", "Content-Length: 5\r\n") + "hello");
        INFO(post.describe());
        CHECK(post.status == 405);
        const Response ok = c.request(make_request("GET", "/json"));
        CHECK(ok.status == 200);
        CHECK(ok.body == kJsonBody);
    }
    fds.require_back();
}
