// Response modes: `cached` pre-renders whole responses, `composed` builds
// them per request; a client must not be able to tell them apart except by
// the Date.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "conformance.hpp"

using namespace sm::test;
using namespace sm::test::conformance;

namespace {

struct Exchange {
    std::string request;
    Expect expect = Expect::body;
    bool closes = false;  // the server closes after this one
};

// Every exchange on its own connection, in order; the raw responses.
std::vector<std::string> run(const ServerProcess& server, const std::vector<Exchange>& script) {
    std::vector<std::string> raw;
    Connection c = connect(server);
    for (const Exchange& e : script) {
        raw.push_back(c.request(e.request, e.expect).raw);
        if (e.closes) c = connect(server);
    }
    return raw;
}

}  // namespace

TEST_CASE("modes composed and cached answer identically except the Date", "[conformance][modes]") {
    auto composed = start_server({"--mode", "composed"});
    auto cached = start_server({"--mode", "cached"});
    CHECK_THAT(composed->ready_line(), Catch::Matchers::EndsWith(" mode=composed"));
    CHECK_THAT(cached->ready_line(), Catch::Matchers::EndsWith(" mode=cached"));

    const std::string te_accept =
        "Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,"
        "*/*;q=0.7\r\nConnection: keep-alive\r\n";
    const std::vector<Exchange> script = {
        {make_request("GET", "/plaintext"), Expect::body, false},
        {make_request("GET", "/json"), Expect::body, false},
        {make_request("GET", "/"), Expect::body, false},
        {make_request("GET", "/plaintext", te_accept), Expect::body, false},
        {make_request("GET", "/json", te_accept), Expect::body, false},
        {make_request("HEAD", "/plaintext"), Expect::no_body, false},
        {make_request("HEAD", "/json"), Expect::no_body, false},
        {make_request("HEAD", "/"), Expect::no_body, false},
        {make_request("GET", "/nope"), Expect::body, false},
        {make_request("HEAD", "/nope"), Expect::no_body, false},
        {make_request("POST", "/plaintext", "Content-Length: 0\r\n"), Expect::body, false},
        {make_request("DELETE", "/json", "Content-Length: 0\r\n"), Expect::body, false},
        {"GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", Expect::body, false},
        {"HEAD /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", Expect::no_body, false},
        {make_request("GET", "/json", "Connection: close\r\n"), Expect::body, true},
        {make_request("HEAD", "/", "Connection: close\r\n"), Expect::no_body, true},
        {"GET /plaintext HTTP/1.0\r\n\r\n", Expect::body, true},
        {"GET /plaintext HTTP/1.1\r\nNo-Colon\r\n\r\n", Expect::body, true},
    };
    const std::vector<std::string> a = run(*composed, script);
    const std::vector<std::string> b = run(*cached, script);
    REQUIRE(a.size() == script.size());
    REQUIRE(b.size() == script.size());
    for (std::size_t i = 0; i < script.size(); ++i) {
        INFO("request " << i << ": " << script[i].request);
        CHECK(without_date(a[i]) == without_date(b[i]));
    }
}
