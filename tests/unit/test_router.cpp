// http::target_path and http::route: the four request-target forms of
// RFC 9112 3.2 and the method rules of DESIGN.md (GET and HEAD on the three
// endpoints, 405 for other methods on them, 404 elsewhere).
#include <catch2/catch.hpp>

#include <string_view>
#include <vector>

#include "http/router.hpp"

using sm::http::Endpoint;
using sm::http::endpoint_for_path;
using sm::http::Method;
using sm::http::route;
using sm::http::target_path;

namespace {

struct PathCase {
    std::string_view target;
    std::string_view path;
};

const std::vector<PathCase> kPaths = {
    // origin-form
    {"/", "/"},
    {"/plaintext", "/plaintext"},
    {"/plaintext?x=1", "/plaintext"},
    {"/json?", "/json"},
    {"/json#frag", "/json"},
    {"/json?a=b#frag", "/json"},
    {"/json#frag?notquery", "/json"},
    {"/a/b/c?d=/e", "/a/b/c"},
    {"/?q", "/"},
    {"//json", "//json"},
    // absolute-form
    {"http://example.com/json", "/json"},
    {"http://example.com:8080/plaintext?x=1", "/plaintext"},
    {"https://example.com/", "/"},
    {"http://example.com", "/"},
    {"http://example.com?x=1", "/"},
    {"http://user@example.com/json#f", "/json"},
    {"http://[::1]:80/json", "/json"},
    // asterisk-form and authority-form have no path
    {"*", ""},
    {"example.com:443", ""},
    {"", ""},
};

}  // namespace

TEST_CASE("router target_path extracts the path of every target form", "[router]") {
    for (const auto& c : kPaths) {
        INFO("target: " << c.target);
        CHECK(target_path(c.target) == c.path);
    }
}

TEST_CASE("router endpoint_for_path matches exact paths only", "[router]") {
    CHECK(endpoint_for_path("/") == Endpoint::root);
    CHECK(endpoint_for_path("/plaintext") == Endpoint::plaintext);
    CHECK(endpoint_for_path("/json") == Endpoint::json);
    for (const std::string_view p : {"", "/PLAINTEXT", "/Json", "/plaintext/", "/json/", "//",
                                     "/jsonx", "plaintext", "/plain", "/plaintext/x", "//json"}) {
        INFO("path: " << p);
        CHECK(endpoint_for_path(p) == Endpoint::none);
    }
}

TEST_CASE("router routes GET and HEAD on the endpoints", "[router]") {
    struct Case {
        std::string_view target;
        Endpoint endpoint;
    };
    const std::vector<Case> cases = {
        {"/", Endpoint::root},
        {"/plaintext", Endpoint::plaintext},
        {"/json", Endpoint::json},
        {"/plaintext?x=1", Endpoint::plaintext},
        {"/json#frag", Endpoint::json},
        {"http://host/json", Endpoint::json},
        {"http://host:1/plaintext?q#f", Endpoint::plaintext},
        {"http://host", Endpoint::root},
    };
    for (const auto& c : cases) {
        INFO("target: " << c.target);
        const auto g = route(Method::get, c.target);
        CHECK(g.endpoint == c.endpoint);
        CHECK(g.method_allowed);
        CHECK_FALSE(g.head);
        const auto h = route(Method::head, c.target);
        CHECK(h.endpoint == c.endpoint);
        CHECK(h.method_allowed);
        CHECK(h.head);
    }
}

TEST_CASE("router refuses other methods on the endpoints", "[router]") {
    for (const std::string_view t : {"/", "/plaintext", "/json", "/json?x", "http://h/plaintext"}) {
        INFO("target: " << t);
        const auto r = route(Method::other, t);
        CHECK(r.endpoint != Endpoint::none);
        CHECK_FALSE(r.method_allowed);
        CHECK_FALSE(r.head);
    }
}

TEST_CASE("router finds no endpoint for unknown paths and path-less targets", "[router]") {
    for (const std::string_view t : {"/missing", "/plaintext/", "/JSON", "*", "example.com:443", "",
                                     "http://h/nope", "/jsonp?x"}) {
        for (const Method m : {Method::get, Method::head, Method::other}) {
            INFO("target: " << t << ", method " << static_cast<int>(m));
            const auto r = route(m, t);
            CHECK(r.endpoint == Endpoint::none);
            CHECK_FALSE(r.method_allowed);
            CHECK(r.head == (m == Method::head));
        }
    }
}
