// http::ResponseCache and the response writers: the Date line (IMF-fixdate,
// RFC 9110 5.6.7) against a hand table of known seconds and an independent
// calendar computation, refresh() once per second, the endpoint and error
// responses parsed back with llhttp, and byte-identical composed/cached modes.
#include <catch2/catch.hpp>

#include <ctime>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "http_test_support.hpp"

using sm::http::ByteBuffer;
using sm::http::Endpoint;
using sm::http::Persistence;
using sm::http::ResponseCache;
using sm::http::ResponseMode;
using sm::http::Status;
using sm::test::parse_responses;
using sm::test::ParsedResponse;
using sm::test::ParsedStream;

namespace {

struct KnownDate {
    std::time_t second;
    std::string_view date;
};

// Checked against RFC 9110's example, well-known epochs and Python's
// email.utils.formatdate(t, usegmt=True).
const std::vector<KnownDate> kKnownDates = {
    {0, "Thu, 01 Jan 1970 00:00:00 GMT"},
    {784111777, "Sun, 06 Nov 1994 08:49:37 GMT"},
    {951782400, "Tue, 29 Feb 2000 00:00:00 GMT"},
    {951868799, "Tue, 29 Feb 2000 23:59:59 GMT"},
    {1234567890, "Fri, 13 Feb 2009 23:31:30 GMT"},
    {1700000000, "Tue, 14 Nov 2023 22:13:20 GMT"},
    {2147483647, "Tue, 19 Jan 2038 03:14:07 GMT"},
    {2147483648, "Tue, 19 Jan 2038 03:14:08 GMT"},
    {4102444800, "Fri, 01 Jan 2100 00:00:00 GMT"},
    {4107542399, "Sun, 28 Feb 2100 23:59:59 GMT"},
    {253402300799, "Fri, 31 Dec 9999 23:59:59 GMT"},
};

std::string date_line(std::string_view date) {
    return "Date: " + std::string(date) + "\r\n";
}

const std::regex kImfFixdate(
    R"(Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) )"
    R"([0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT\r\n)");

struct EndpointSpec {
    Endpoint endpoint;
    std::string_view content_type;
    std::string_view body;
};

const std::vector<EndpointSpec> kEndpoints = {
    {Endpoint::plaintext, "text/plain", sm::test::kPlaintextBody},
    {Endpoint::json, "application/json", sm::test::kJsonBody},
    {Endpoint::root, "text/plain; charset=utf-8", sm::test::kRootBody},
};

const Persistence kPersistences[] = {Persistence::keep_alive, Persistence::keep_alive_explicit,
                                     Persistence::close};

std::string endpoint_response(const ResponseCache& cache, Endpoint e, bool head, Persistence p) {
    ByteBuffer out;
    cache.write_endpoint(e, head, p, out);
    return std::string(out.view());
}

ParsedResponse single(std::string_view bytes, bool head) {
    const ParsedStream s = parse_responses(bytes, {head});
    INFO("parse error: " << s.error);
    REQUIRE(s.ok());
    REQUIRE(s.size() == 1);
    return s[0];
}

void check_connection(const ParsedResponse& r, Persistence p) {
    switch (p) {
        case Persistence::keep_alive:
            CHECK(r.count("Connection") == 0);
            CHECK(r.keep_alive);
            break;
        case Persistence::keep_alive_explicit:
            CHECK(r.header("Connection") == "keep-alive");
            CHECK(r.count("Connection") == 1);
            break;
        case Persistence::close:
            CHECK(r.header("Connection") == "close");
            CHECK(r.count("Connection") == 1);
            CHECK_FALSE(r.keep_alive);
            break;
    }
}

}  // namespace

TEST_CASE("response_cache test calendar agrees with the hand table", "[response]") {
    // The independent renderer used for sweeps must itself be right.
    for (const auto& k : kKnownDates) {
        INFO("second " << k.second);
        CHECK(sm::test::imf_fixdate(k.second) == k.date);
    }
    CHECK(sm::test::imf_fixdate(-1) == "Wed, 31 Dec 1969 23:59:59 GMT");
}

TEST_CASE("response_cache renders the Date of known seconds as IMF-fixdate", "[response]") {
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    for (const auto& k : kKnownDates) {
        INFO("second " << k.second);
        const ResponseCache constructed(mode, k.second);
        CHECK(constructed.date_line() == date_line(k.date));
        CHECK(constructed.second() == k.second);
        CHECK(std::regex_match(std::string(constructed.date_line()), kImfFixdate));

        ResponseCache refreshed(mode, 12345);
        CHECK(refreshed.refresh(k.second));
        CHECK(refreshed.date_line() == date_line(k.date));
    }
}

TEST_CASE("response_cache renders the Date of any second it is constructed with", "[response]") {
    // The second before the epoch is (time_t)-1: a valid instant, not "no second yet".
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    const ResponseCache cache(mode, -1);
    const std::string expected = date_line("Wed, 31 Dec 1969 23:59:59 GMT");
    REQUIRE(cache.date_line().size() == expected.size());
    CHECK(cache.date_line() == expected);
    const ParsedResponse r = single(
        endpoint_response(cache, Endpoint::plaintext, false, Persistence::keep_alive), false);
    CHECK(r.header("Date") == "Wed, 31 Dec 1969 23:59:59 GMT");
    CHECK(r.body == sm::test::kPlaintextBody);
}

TEST_CASE("response_cache Date matches an independent calendar across leap years and centuries",
          "[response]") {
    ResponseCache cache(ResponseMode::composed, 0);
    // 1968..2101 in strides of about three days plus an odd remainder, so the
    // time of day, weekday and month all vary (about 16k seconds in all).
    for (std::time_t t = -63158400; t < 4133980800; t += 86399 * 3 + 7919) {
        cache.refresh(t);
        if (cache.date_line() != date_line(sm::test::imf_fixdate(t))) {
            FAIL_CHECK("second " << t << ": " << cache.date_line());
            break;
        }
    }
}

TEST_CASE("response_cache refresh re-renders only in a new second", "[response]") {
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    ResponseCache cache(mode, sm::test::kRfcExampleSecond);
    const std::string before(cache.date_line());
    const std::string response =
        endpoint_response(cache, Endpoint::json, false, Persistence::keep_alive);

    CHECK_FALSE(cache.refresh(sm::test::kRfcExampleSecond));
    CHECK(cache.second() == sm::test::kRfcExampleSecond);
    CHECK(cache.date_line() == before);
    CHECK(endpoint_response(cache, Endpoint::json, false, Persistence::keep_alive) == response);

    CHECK(cache.refresh(sm::test::kRfcExampleSecond + 1));
    CHECK(cache.second() == sm::test::kRfcExampleSecond + 1);
    CHECK(cache.date_line() == date_line("Sun, 06 Nov 1994 08:49:38 GMT"));
    for (const auto& spec : kEndpoints) {
        for (const bool head : {false, true}) {
            // In cached mode the pre-rendered responses must follow the new second too.
            const ParsedResponse r = single(
                endpoint_response(cache, spec.endpoint, head, Persistence::keep_alive), head);
            CHECK(r.header("Date") == "Sun, 06 Nov 1994 08:49:38 GMT");
        }
    }
    CHECK_FALSE(cache.refresh(sm::test::kRfcExampleSecond + 1));

    // Clocks can step back; a different second is a different Date.
    CHECK(cache.refresh(sm::test::kRfcExampleSecond));
    CHECK(cache.date_line() == before);
}

TEST_CASE("response_cache refresh re-renders in every new second", "[response]") {
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    ResponseCache cache(mode, 1700000000);
    for (std::time_t t = 1700000001; t < 1700000100; ++t) {
        INFO("second " << t);
        CHECK(cache.refresh(t));
        CHECK(cache.second() == t);
        CHECK(cache.date_line() == date_line(sm::test::imf_fixdate(t)));
        const ParsedResponse r = single(
            endpoint_response(cache, Endpoint::plaintext, false, Persistence::keep_alive), false);
        CHECK(r.header("Date") == sm::test::imf_fixdate(t));
        CHECK_FALSE(cache.refresh(t));
    }
}

TEST_CASE("response_cache writes each endpoint with its content type and length", "[response]") {
    const auto mode = GENERATE(ResponseMode::composed, ResponseMode::cached);
    const ResponseCache cache(mode, sm::test::kRfcExampleSecond);
    for (const auto& spec : kEndpoints) {
        for (const bool head : {false, true}) {
            for (const Persistence p : kPersistences) {
                INFO("endpoint " << static_cast<int>(spec.endpoint) << ", head " << head
                                 << ", persistence " << static_cast<int>(p));
                const std::string bytes = endpoint_response(cache, spec.endpoint, head, p);
                CHECK_THAT(bytes, Catch::Matchers::StartsWith("HTTP/1.1 200 OK\r\n"));
                const ParsedResponse r = single(bytes, head);
                CHECK(r.status == 200);
                CHECK(r.header("Server") == "servermodels");
                CHECK(r.count("Server") == 1);
                CHECK(r.header("Date") == std::string(sm::test::kRfcExampleDate));
                CHECK(r.count("Date") == 1);
                CHECK(r.header("Content-Type") == std::string(spec.content_type));
                CHECK(r.count("Content-Type") == 1);
                CHECK(r.header("Content-Length") == std::to_string(spec.body.size()));
                CHECK(r.count("Content-Length") == 1);
                CHECK(r.count("Allow") == 0);
                CHECK(r.body == (head ? std::string_view{} : spec.body));
                check_connection(r, p);
            }
        }
    }
}

TEST_CASE("response_cache composed and cached modes write identical bytes", "[response]") {
    const std::time_t t0 = sm::test::kRfcExampleSecond;
    ResponseCache composed(ResponseMode::composed, t0);
    ResponseCache cached(ResponseMode::cached, t0);
    REQUIRE(composed.mode() == ResponseMode::composed);
    REQUIRE(cached.mode() == ResponseMode::cached);
    auto compare_all = [&] {
        for (const Endpoint e :
             {Endpoint::plaintext, Endpoint::json, Endpoint::root, Endpoint::none}) {
            for (const bool head : {false, true}) {
                for (const Persistence p : kPersistences) {
                    INFO("endpoint " << static_cast<int>(e) << ", head " << head << ", persistence "
                                     << static_cast<int>(p));
                    CHECK(endpoint_response(cached, e, head, p) ==
                          endpoint_response(composed, e, head, p));
                }
            }
        }
        for (const Status s : {Status::bad_request, Status::not_found, Status::method_not_allowed,
                               Status::payload_too_large}) {
            ByteBuffer a, b;
            composed.write_error(s, "detail", false, Persistence::close, a);
            cached.write_error(s, "detail", false, Persistence::close, b);
            CHECK(a.view() == b.view());
        }
    };
    compare_all();
    SECTION("after a refresh to a new second") {
        REQUIRE(composed.refresh(t0 + 3600));
        REQUIRE(cached.refresh(t0 + 3600));
        compare_all();
        CHECK(endpoint_response(cached, Endpoint::json, false, Persistence::keep_alive)
                  .find("Sun, 06 Nov 1994 09:49:37 GMT") != std::string::npos);
    }
    SECTION("after a refresh in the same second") {
        REQUIRE_FALSE(cached.refresh(t0));
        compare_all();
    }
}

TEST_CASE("response_cache writes unknown endpoints as 404", "[response]") {
    const ResponseCache cache(ResponseMode::cached, sm::test::kRfcExampleSecond);
    const ParsedResponse r =
        single(endpoint_response(cache, Endpoint::none, false, Persistence::keep_alive), false);
    CHECK(r.status == 404);
    CHECK(r.reason == "Not Found");
    CHECK_THAT(r.body, Catch::Matchers::StartsWith("Not Found"));
    CHECK(r.header("Content-Length") == std::to_string(r.body.size()));
    CHECK(r.count("Connection") == 0);
}

TEST_CASE("response_cache writes error responses with the reason phrase as body", "[response]") {
    struct Case {
        Status status;
        int code;
        std::string_view reason;  // RFC 9110 section 15
    };
    const std::vector<Case> cases = {
        {Status::bad_request, 400, "Bad Request"},
        {Status::not_found, 404, "Not Found"},
        {Status::method_not_allowed, 405, "Method Not Allowed"},
        {Status::request_timeout, 408, "Request Timeout"},
        {Status::payload_too_large, 413, "Content Too Large"},
        {Status::uri_too_long, 414, "URI Too Long"},
        {Status::header_fields_too_large, 431, "Request Header Fields Too Large"},
    };
    const ResponseCache cache(ResponseMode::composed, sm::test::kRfcExampleSecond);
    for (const auto& c : cases) {
        INFO("status " << c.code);
        CHECK(sm::http::reason_phrase(c.status) == c.reason);
        CHECK(static_cast<int>(c.status) == c.code);
        for (const Persistence p : kPersistences) {
            ByteBuffer out;
            cache.write_error(c.status, "something went wrong", false, p, out);
            const std::string bytes(out.view());
            CHECK_THAT(bytes, Catch::Matchers::StartsWith("HTTP/1.1 " + std::to_string(c.code) +
                                                          " " + std::string(c.reason) + "\r\n"));
            const ParsedResponse r = single(bytes, false);
            CHECK(r.status == c.code);
            CHECK(r.header("Server") == "servermodels");
            CHECK(r.header("Date") == std::string(sm::test::kRfcExampleDate));
            CHECK(r.header("Content-Type") == "text/plain");
            CHECK(r.header("Content-Length") == std::to_string(r.body.size()));
            CHECK_THAT(r.body, Catch::Matchers::StartsWith(std::string(c.reason) +
                                                           ": something went wrong"));
            check_connection(r, p);
            if (c.code == 405) {
                CHECK(r.header("Allow") == "GET, HEAD");
                CHECK(r.count("Allow") == 1);
            } else {
                CHECK(r.count("Allow") == 0);
            }
        }
    }
}

TEST_CASE("response_cache error responses to HEAD keep the length and drop the body",
          "[response]") {
    const ResponseCache cache(ResponseMode::composed, sm::test::kRfcExampleSecond);
    ByteBuffer get_out, head_out;
    cache.write_error(Status::method_not_allowed, {}, false, Persistence::keep_alive, get_out);
    cache.write_error(Status::method_not_allowed, {}, true, Persistence::keep_alive, head_out);
    const ParsedResponse g = single(get_out.view(), false);
    const ParsedResponse h = single(head_out.view(), true);
    CHECK_THAT(g.body, Catch::Matchers::StartsWith("Method Not Allowed"));
    CHECK(h.body.empty());
    CHECK(h.headers == g.headers);
    CHECK(h.raw == g.head_block());
}

TEST_CASE("response_cache error bodies stay consistent with a very long detail", "[response]") {
    const ResponseCache cache(ResponseMode::composed, sm::test::kRfcExampleSecond);
    ByteBuffer out;
    cache.write_error(Status::bad_request, std::string(10000, 'x'), false, Persistence::close, out);
    const ParsedResponse r = single(out.view(), false);
    CHECK(r.status == 400);
    CHECK_THAT(r.body, Catch::Matchers::StartsWith("Bad Request: xxxx"));
    CHECK(r.header("Content-Length") == std::to_string(r.body.size()));
    CHECK(r.body.size() < 10000);  // error bodies are bounded
}

TEST_CASE("response_cache appends after what the buffer already holds", "[response]") {
    const ResponseCache cache(ResponseMode::cached, sm::test::kRfcExampleSecond);
    ByteBuffer out;
    out.append("previous bytes");
    out.consume(8);  // " bytes" left, not at the front of the storage
    cache.write_endpoint(Endpoint::plaintext, false, Persistence::keep_alive, out);
    cache.write_endpoint(Endpoint::json, false, Persistence::close, out);
    std::string_view all = out.view();
    REQUIRE(all.starts_with(" bytes"));
    all.remove_prefix(6);
    const ParsedStream s = parse_responses(all);
    REQUIRE(s.ok());
    REQUIRE(s.size() == 2);
    CHECK(s[0].body == sm::test::kPlaintextBody);
    CHECK(s[1].body == sm::test::kJsonBody);
}

TEST_CASE("response_cache response modes convert to and from their names", "[response]") {
    CHECK(sm::http::to_string(ResponseMode::composed) == "composed");
    CHECK(sm::http::to_string(ResponseMode::cached) == "cached");
    CHECK(sm::http::parse_response_mode("composed") == ResponseMode::composed);
    CHECK(sm::http::parse_response_mode("cached") == ResponseMode::cached);
    for (const std::string_view bad : {"", "fast", "cache", "composed ", "precomposed"}) {
        INFO("name: " << bad);
        CHECK_FALSE(sm::http::parse_response_mode(bad).has_value());
    }
}
