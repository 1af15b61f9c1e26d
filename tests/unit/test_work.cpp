// The workloads (http/work.hpp) and the session's responses completed later:
// /fortunes rendered by TechEmpower's rules, /db and /queries as jobs whose
// rows arrive after the request, pipelined responses held in order behind
// them, jobs completed out of order, failed, or stale (the connection closed
// while a query was out). Responses are parsed back with llhttp in response
// mode (http_test_support.hpp).
#include <nlohmann/json.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "http/work.hpp"
#include "http_test_support.hpp"
#include "support/fortunes_page.hpp"

using Result = sm::http::Session::Result;
using sm::http::FortuneRow;
using sm::http::FortuneSource;
using sm::http::Job;
using sm::http::JobError;
using sm::http::JobResult;
using sm::http::Work;
using sm::http::WorldRow;
using sm::http::Workloads;
using sm::test::SessionHarness;

namespace {

constexpr Workloads kWithDatabase{true, FortuneSource::database};

SessionHarness with_database(Workloads w = kWithDatabase) {
    return SessionHarness({}, sm::http::ResponseMode::composed, sm::test::kRfcExampleSecond, w);
}

std::string get(std::string_view target, std::string_view extra = "") {
    return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

std::vector<Job> take_jobs(sm::http::Session& s) {
    std::vector<Job> jobs;
    Job j;
    while (s.next_job(j))
        jobs.push_back(j);
    return jobs;
}

// The page for `source` by TechEmpower's rules (support/fortunes_page.hpp,
// written apart from common/http), read back row by row, then byte for byte;
// for TechEmpower's own rows, byte for byte the page written out whole.
void check_fortunes_page(const sm::test::ParsedResponse& r, std::span<const FortuneRow> source) {
    namespace te = sm::test::fortunes;
    REQUIRE(r.status == 200);
    CHECK(r.header("Content-Type") == "text/html; charset=utf-8");
    std::vector<te::Fortune> rows;
    for (const FortuneRow& f : source)
        rows.push_back({f.id, std::string(f.message)});
    std::string why;
    const auto page = te::parse_page(r.body, why);
    INFO("the page: " << r.body);
    if (!page) FAIL("not the fortunes table: " << why);
    const std::vector<te::Fortune> expected = te::page_order(rows);
    REQUIRE(page->size() == expected.size());
    for (std::size_t i = 0; i < page->size(); ++i) {
        INFO("row " << i);
        CHECK((*page)[i].id == std::to_string(expected[i].id));
        const auto message = te::unescape_html((*page)[i].raw, why);
        INFO(why);
        REQUIRE(message);
        CHECK(*message == expected[i].message);
    }
    CHECK(r.body == te::expected_page(rows));
    if (te::are_techempower_rows(rows)) CHECK(r.body == te::kTechEmpowerPage);
}

}  // namespace

TEST_CASE("work fortunes page follows TechEmpower's rules, from memory", "[work]") {
    SessionHarness h;  // no database: the rows built in
    REQUIRE(h.feed(get("/fortunes")) == Result::open);
    CHECK_FALSE(h.session.waiting());
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 1);
    check_fortunes_page(out[0], sm::http::builtin_fortunes());
    const std::string& body = out[0].body;
    // The page TechEmpower's verifier accepts, written out whole.
    CHECK(body == sm::test::fortunes::kTechEmpowerPage);
    CHECK(body.find("<tr><td>12</td><td>\xe3\x83\x95\xe3\x83\xac\xe3\x83\xbc\xe3\x83\xa0") !=
          std::string::npos);
    CHECK(body.find("&lt;script&gt;alert(&quot;This should not be displayed in a browser alert "
                    "box.&quot;);&lt;/script&gt;") != std::string::npos);
    CHECK(body.find("aren&#39;t broken.") != std::string::npos);
    CHECK(body.find("<tr><td>0</td><td>Additional fortune added at request time.</td></tr>") !=
          std::string::npos);
    // By message, as bytes: "<script>" first, the Japanese row last.
    std::string why;
    const auto rows = sm::test::fortunes::parse_page(body, why);
    REQUIRE(rows);
    CHECK(rows->front().id == "11");
    CHECK(rows->back().id == "12");
}

TEST_CASE("work the page written out whole is the one TechEmpower's rows make", "[work]") {
    // The tests' two copies of TechEmpower's Fortunes, kept apart on purpose,
    // agree: the rows with the rules, and the page written out by hand.
    namespace te = sm::test::fortunes;
    CHECK(te::expected_page(te::techempower_fortunes()) == te::kTechEmpowerPage);
    CHECK(te::are_techempower_rows(te::techempower_fortunes()));
}

TEST_CASE("work built-in fortunes are TechEmpower's twelve rows", "[work]") {
    const auto rows = sm::http::builtin_fortunes();
    const auto& te = sm::test::fortunes::techempower_fortunes();
    REQUIRE(rows.size() == te.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        CHECK(rows[i].id == te[i].id);
        CHECK(rows[i].message == te[i].message);
    }
}

TEST_CASE("work queries parameter is clamped as TechEmpower specifies", "[work]") {
    using sm::http::parse_queries;
    CHECK(parse_queries("") == 1);
    CHECK(parse_queries("queries=") == 1);
    CHECK(parse_queries("queries=foo") == 1);
    CHECK(parse_queries("queries=0") == 1);
    CHECK(parse_queries("queries=-3") == 1);
    CHECK(parse_queries("queries=1") == 1);
    CHECK(parse_queries("queries=20") == 20);
    CHECK(parse_queries("queries=500") == 500);
    CHECK(parse_queries("queries=501") == 500);
    CHECK(parse_queries("queries=99999999999999999999") == 500);
    CHECK(parse_queries("a=1&queries=7&queries=9") == 7);
    CHECK(parse_queries("xqueries=7") == 1);
}

TEST_CASE("session answers /db and /queries with 503 without a database", "[work]") {
    SessionHarness h;
    REQUIRE(h.feed(get("/db") + get("/queries?queries=5") + get("/plaintext")) == Result::open);
    CHECK_FALSE(h.session.waiting());
    Job j;
    CHECK_FALSE(h.session.next_job(j));
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 3);
    for (int i : {0, 1}) {
        CHECK(out[i].status == 503);
        CHECK(out[i].reason == "Service Unavailable");
        CHECK(out[i].body.find("no database: start the server with --db") != std::string::npos);
        CHECK(out[i].keep_alive);
    }
    CHECK(out[2].status == 200);
}

TEST_CASE("session queues a job for /db and answers when its row arrives", "[work]") {
    auto h = with_database();
    REQUIRE(h.feed(get("/db")) == Result::open);
    CHECK(h.out.empty());
    CHECK(h.session.waiting());
    CHECK_FALSE(h.session.idle());     // a graceful stop must wait for it
    CHECK_FALSE(h.session.in_head());  // no head deadline for a request already here
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].work == Work::world);
    CHECK(jobs[0].count == 1);
    CHECK(jobs[0].epoch == h.session.epoch());
    const WorldRow row{4174, 331};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    CHECK_FALSE(h.session.waiting());
    CHECK(h.session.idle());
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 1);
    CHECK(out[0].status == 200);
    CHECK(out[0].header("Content-Type") == "application/json");
    CHECK(out[0].body == R"({"id":4174,"randomNumber":331})");
    CHECK(nlohmann::json::parse(out[0].body) == nlohmann::json{{"id", 4174}, {"randomNumber", 331}});
}

TEST_CASE("session asks /queries for the clamped number of rows and answers an array",
          "[work]") {
    auto h = with_database();
    h.feed(get("/queries?queries=3") + get("/queries?queries=0") + get("/queries?queries=900") +
           get("/queries"));
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 4);
    CHECK(jobs[0].work == Work::worlds);
    CHECK(jobs[0].count == 3);
    CHECK(jobs[1].count == 1);
    CHECK(jobs[2].count == 500);
    CHECK(jobs[3].count == 1);
    std::vector<WorldRow> rows;
    for (int i = 1; i <= 500; ++i)
        rows.push_back({i, 10001 - i});
    for (const Job& j : jobs)
        h.session.complete(j, {{rows.data(), j.count}, {}, {}}, h.out);
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 4);
    const auto first = nlohmann::json::parse(out[0].body);
    REQUIRE(first.is_array());
    REQUIRE(first.size() == 3);
    CHECK(first[2] == nlohmann::json{{"id", 3}, {"randomNumber", 9998}});
    CHECK(nlohmann::json::parse(out[1].body).size() == 1);  // an array even for one
    CHECK(nlohmann::json::parse(out[2].body).size() == 500);
}

TEST_CASE("session holds pipelined responses behind a pending job, in order", "[work]") {
    auto h = with_database();
    REQUIRE(h.feed(get("/plaintext") + get("/db") + get("/json") + get("/nothing") +
                   get("/plaintext")) == Result::open);
    // The response before the job goes out at once; the rest waits.
    auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 1);
    CHECK(out[0].body == sm::test::kPlaintextBody);
    h.out.clear();
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 1);
    const WorldRow row{1, 2};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 4);
    CHECK(out[0].body == R"({"id":1,"randomNumber":2})");
    CHECK(out[1].body == sm::test::kJsonBody);
    CHECK(out[2].status == 404);
    CHECK(out[3].body == sm::test::kPlaintextBody);
    CHECK(h.session.responses() == 5);
}

TEST_CASE("session releases responses in order when jobs complete out of order", "[work]") {
    auto h = with_database();
    h.feed(get("/db") + get("/plaintext") + get("/queries?queries=2") + get("/json") +
           get("/fortunes"));
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 3);
    const std::vector<WorldRow> rows{{5, 6}, {7, 8}};
    const FortuneRow fortune{42, "a & b"};
    // The last first: nothing may go out while the first still waits.
    h.session.complete(jobs[2], {{}, {&fortune, 1}, {}}, h.out);
    h.session.complete(jobs[1], {rows, {}, {}}, h.out);
    CHECK(h.out.empty());
    CHECK(h.session.waiting());
    h.session.complete(jobs[0], {{rows.data(), 1}, {}, {}}, h.out);
    CHECK_FALSE(h.session.waiting());
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 5);
    CHECK(out[0].body == R"({"id":5,"randomNumber":6})");
    CHECK(out[1].body == sm::test::kPlaintextBody);
    CHECK(out[2].body == R"([{"id":5,"randomNumber":6},{"id":7,"randomNumber":8}])");
    CHECK(out[3].body == sm::test::kJsonBody);
    check_fortunes_page(out[4], {&fortune, 1});
}

TEST_CASE("session releases what no longer waits as each job completes", "[work]") {
    auto h = with_database();
    h.feed(get("/db") + get("/plaintext") + get("/db") + get("/json"));
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 2);
    const WorldRow row{9, 9};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    auto out = h.parsed();
    REQUIRE(out.size() == 2);  // the first job and what follows it, up to the next
    CHECK(out[1].body == sm::test::kPlaintextBody);
    CHECK(h.session.waiting());
    h.out.clear();
    // A job answered twice, or one of another connection, changes nothing.
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    Job foreign = jobs[1];
    foreign.epoch = h.session.epoch() + 1;
    h.session.complete(foreign, {{&row, 1}, {}, {}}, h.out);
    CHECK(h.out.empty());
    h.session.complete(jobs[1], {{&row, 1}, {}, {}}, h.out);
    out = h.parsed();
    REQUIRE(out.size() == 2);
    CHECK(out[1].body == sm::test::kJsonBody);
}

TEST_CASE("session more requests arrive while a job waits", "[work]") {
    auto h = with_database();
    h.feed(get("/db"));
    h.feed(get("/plaintext") + "GET /js");  // a model that kept reading
    h.feed(std::string("on HTTP/1.1\r\nHost: t\r\n\r\n") + get("/db"));
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 2);
    CHECK(h.out.empty());
    const WorldRow row{3, 4};
    h.session.complete(jobs[1], {{&row, 1}, {}, {}}, h.out);
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 4);
    CHECK(out[1].body == sm::test::kPlaintextBody);
    CHECK(out[2].body == sm::test::kJsonBody);
    CHECK(out[3].body == R"({"id":3,"randomNumber":4})");
}

TEST_CASE("session ignores a job that completes after its connection closed", "[work]") {
    auto h = with_database();
    h.feed(get("/db") + get("/plaintext"));
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 1);
    // The client went away while the query was out: the connection object
    // serves the next client before the row arrives.
    h.session.reset();
    CHECK_FALSE(h.session.waiting());
    CHECK(jobs[0].epoch != h.session.epoch());
    h.feed(get("/json"));
    const WorldRow row{1, 1};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 1);  // only the new client's response
    CHECK(out[0].body == sm::test::kJsonBody);
    // The new connection's own jobs work as before.
    h.out.clear();
    h.feed(get("/db"));
    const auto next = take_jobs(h.session);
    REQUIRE(next.size() == 1);
    CHECK(next[0].epoch == h.session.epoch());
    h.session.complete(next[0], {{&row, 1}, {}, {}}, h.out);
    CHECK(h.parsed().size() == 1);
}

TEST_CASE("session answers a failed job with 503 and keeps the connection", "[work]") {
    auto h = with_database();
    h.feed(get("/db") + get("/plaintext"));
    const auto jobs = take_jobs(h.session);
    h.session.complete(jobs[0], JobResult::failed(JobError::lost), h.out);
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 2);
    CHECK(out[0].status == 503);
    CHECK(out[0].body == "Service Unavailable: database connection lost\n");
    CHECK(out[0].keep_alive);
    CHECK(out[1].status == 200);
    CHECK_FALSE(h.session.closed());
    // A World job that came back without its row is a 503 too, not "{}".
    h.out.clear();
    h.feed(get("/db"));
    const auto next = take_jobs(h.session);
    h.session.complete(next[0], {}, h.out);
    CHECK(h.parsed()[0].status == 503);
    CHECK(h.parsed()[0].body == "Service Unavailable: database error\n");
}

TEST_CASE("session names a failed job's class in its 503, nothing more", "[work]") {
    // The bodies a client may read, written out here apart from http/work.cpp:
    // a fixed text per class; the database's address and libpq's message
    // are for the server's log (the database clients write it there).
    const std::pair<JobError, std::string_view> classes[] = {
        {JobError::unavailable, "Service Unavailable: database unavailable\n"},
        {JobError::lost, "Service Unavailable: database connection lost\n"},
        {JobError::failed, "Service Unavailable: database error\n"},
        {JobError::timeout, "Service Unavailable: database timeout\n"},
    };
    for (const auto& [error, body] : classes) {
        INFO(body);
        for (const Work work : {Work::world, Work::worlds, Work::fortunes}) {
            auto h = with_database();
            h.feed(get(work == Work::world    ? "/db"
                       : work == Work::worlds ? "/queries?queries=3"
                                              : "/fortunes") +
                   get("/plaintext"));
            const auto jobs = take_jobs(h.session);
            REQUIRE(jobs.size() == 1);
            CHECK(jobs[0].work == work);
            h.session.complete(jobs[0], JobResult::failed(error), h.out);
            const auto out = h.parsed();
            REQUIRE(out.ok());
            REQUIRE(out.size() == 2);
            CHECK(out[0].status == 503);
            CHECK(out[0].header("Content-Type") == "text/plain");
            CHECK(out[0].body == body);
            CHECK(out[0].keep_alive);
            CHECK(out[1].status == 200);
        }
    }
}

TEST_CASE("session closes after a job whose request said Connection: close", "[work]") {
    auto h = with_database();
    REQUIRE(h.feed(get("/db", "Connection: close\r\n") + get("/plaintext")) == Result::close);
    CHECK(h.session.waiting());  // the model closes only once nothing waits
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 1);
    const WorldRow row{1, 1};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    CHECK_FALSE(h.session.waiting());
    CHECK(h.session.closed());
    const auto out = h.parsed();
    REQUIRE(out.size() == 1);  // nothing after "Connection: close" is answered
    CHECK(out[0].header("Connection") == "close");
}

TEST_CASE("session holds an error response behind a pending job", "[work]") {
    auto h = with_database();
    REQUIRE(h.feed(get("/db") + "GET /json HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n") ==
            Result::close);
    CHECK(h.out.empty());
    const auto jobs = take_jobs(h.session);
    const WorldRow row{1, 1};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    const auto out = h.parsed();
    REQUIRE(out.ok());
    REQUIRE(out.size() == 2);
    CHECK(out[0].status == 200);
    CHECK(out[0].header("Connection") == std::nullopt);
    CHECK(out[1].status == 400);
    CHECK(out[1].header("Connection") == "close");
}

TEST_CASE("session graceful stop while a job waits: its response says close", "[work]") {
    auto h = with_database();
    h.feed(get("/db"));
    const auto jobs = take_jobs(h.session);
    h.session.request_close();
    CHECK_FALSE(h.session.idle());  // not closed at once
    const WorldRow row{1, 1};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    const auto out = h.parsed();
    REQUIRE(out.size() == 1);
    CHECK(out[0].status == 200);
    CHECK(out[0].header("Connection") == "close");
    CHECK(h.session.closed());
}

TEST_CASE("session answers HEAD /db without a body", "[work]") {
    auto h = with_database();
    h.feed("HEAD /db HTTP/1.1\r\nHost: t\r\n\r\n");
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 1);
    const WorldRow row{10000, 10000};
    h.session.complete(jobs[0], {{&row, 1}, {}, {}}, h.out);
    const auto out = h.parsed({true});
    REQUIRE(out.ok());
    REQUIRE(out.size() == 1);
    CHECK(out[0].body.empty());
    CHECK(out[0].header("Content-Length") == std::to_string(std::string_view(R"({"id":10000,"randomNumber":10000})").size()));
}

TEST_CASE("session serves /fortunes from memory when told to, with a database", "[work]") {
    auto h = with_database({true, FortuneSource::memory});
    h.feed(get("/fortunes"));
    CHECK_FALSE(h.session.waiting());
    const auto out = h.parsed();
    REQUIRE(out.size() == 1);
    check_fortunes_page(out[0], sm::http::builtin_fortunes());
}

TEST_CASE("session routes the workloads' query strings split anywhere", "[work]") {
    const std::string request = get("/queries?a=b&queries=17#frag");
    for (std::size_t cut = 1; cut < request.size(); ++cut) {
        auto h = with_database();
        h.feed(request.substr(0, cut));
        h.feed(request.substr(cut));
        const auto jobs = take_jobs(h.session);
        INFO("cut at " << cut);
        REQUIRE(jobs.size() == 1);
        CHECK(jobs[0].count == 17);
    }
    // A query too long to keep whole keeps the parameters that fit.
    auto h = with_database();
    h.feed(get("/queries?queries=9&pad=" + std::string(300, 'x') + "&queries=3"));
    const auto jobs = take_jobs(h.session);
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].count == 9);
}
