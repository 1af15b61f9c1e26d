// db::SyncClient against a real PostgreSQL: the shared fixture's (read only),
// or one of the test's own where the case stops it or changes its tables.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "db/sync_client.hpp"
#include "db_test_support.hpp"
#include "support/pg.hpp"

using namespace std::chrono_literals;
using sm::db::SyncClient;
using sm::http::Job;
using sm::http::JobError;
using sm::http::JobResult;
using sm::http::Work;
using sm::test::check_failure_told_apart;
namespace pg = sm::test::pg;

namespace {

Job job_of(Work work, std::uint16_t count = 1) {
    Job job;
    job.work = work;
    job.count = count;
    return job;
}

void check_worlds(const JobResult& r, std::size_t count, const std::map<std::int32_t, std::int32_t>& world) {
    INFO("error: " << sm::http::job_error_text(r.error));
    REQUIRE(r.error == JobError::none);
    REQUIRE(r.fortunes.empty());
    REQUIRE(r.worlds.size() == count);
    for (const auto& row : r.worlds) {
        REQUIRE(row.id >= 1);
        REQUIRE(row.id <= sm::http::kWorldRows);
        CHECK(row.random_number == world.at(row.id));
    }
}

}  // namespace

TEST_CASE("SyncClient world: one row, as the table has it", "[db][sync]") {
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const auto world = pg::world_table(ref);
    REQUIRE(world.size() == 10000);
    SyncClient client(url);
    CHECK_FALSE(client.connected());
    REQUIRE(client.connect());  // eager
    CHECK(client.connected());
    CHECK(client.why().empty());
    for (int i = 0; i < 200; ++i) check_worlds(client.run(job_of(Work::world)), 1, world);
}

TEST_CASE("SyncClient worlds: 1, 20 and 500 rows, one query each, as the table has them", "[db][sync]") {
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const auto world = pg::world_table(ref);
    SyncClient client(url);  // lazy: the first run connects
    for (int round = 0; round < 3; ++round) {
        for (const std::uint16_t count : {1, 20, 500}) {
            check_worlds(client.run(job_of(Work::worlds, count)), count, world);
            // Pipeline mode is left each time: plain queries still run.
            check_worlds(client.run(job_of(Work::world)), 1, world);
            CHECK(client.run(job_of(Work::fortunes)).fortunes.size() == 12);
        }
    }
    // Counts outside 1..500 are clamped (the session clamps them first).
    check_worlds(client.run(job_of(Work::worlds, 0)), 1, world);
    check_worlds(client.run(job_of(Work::worlds, 501)), 500, world);
}

TEST_CASE("SyncClient ids: uniform over 1..10000 as the rows come back", "[db][sync]") {
    const std::string url = pg::fixture_url_or_skip();
    SyncClient client(url);
    std::int32_t low = sm::http::kWorldRows;
    std::int32_t high = 0;
    std::vector<bool> seen(sm::http::kWorldRows + 1, false);
    // 20,000 draws: a minimum above 10 (or maximum below 9991) has odds of e^-20.
    for (int i = 0; i < 40; ++i) {
        const JobResult r = client.run(job_of(Work::worlds, 500));
        REQUIRE(r.error == JobError::none);
        for (const auto& row : r.worlds) {
            REQUIRE(row.id >= 1);
            REQUIRE(row.id <= sm::http::kWorldRows);
            low = std::min(low, row.id);
            high = std::max(high, row.id);
            seen[static_cast<std::size_t>(row.id)] = true;
        }
    }
    CHECK(low <= 10);
    CHECK(high >= 9991);
    // About 86% of the ids are drawn at least once in 20,000 draws.
    const auto distinct = std::count(seen.begin(), seen.end(), true);
    CHECK(distinct > 8000);
}

TEST_CASE("SyncClient fortunes: the table's 12 rows, UTF-8 intact", "[db][sync]") {
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const auto fortunes = pg::fortune_table(ref);
    REQUIRE(fortunes.size() == 12);
    SyncClient client(url);
    for (int round = 0; round < 3; ++round) {
        const JobResult r = client.run(job_of(Work::fortunes));
        INFO("error: " << sm::http::job_error_text(r.error));
        REQUIRE(r.error == JobError::none);
        REQUIRE(r.worlds.empty());
        REQUIRE(r.fortunes.size() == 12);
        std::vector<std::pair<std::int32_t, std::string>> got;
        for (const auto& f : r.fortunes) got.emplace_back(f.id, std::string(f.message));
        std::sort(got.begin(), got.end());
        CHECK(got == fortunes);
        const auto twelve = std::find_if(got.begin(), got.end(), [](const auto& f) { return f.first == 12; });
        REQUIRE(twelve != got.end());
        CHECK(twelve->second ==
              "\xe3\x83\x95\xe3\x83\xac\xe3\x83\xbc\xe3\x83\xa0\xe3\x83\xaf\xe3\x83\xbc\xe3\x82\xaf"
              "\xe3\x81\xae\xe3\x83\x99\xe3\x83\xb3\xe3\x83\x81\xe3\x83\x9e\xe3\x83\xbc\xe3\x82\xaf");
        CHECK(twelve->second.size() == 42);
    }
}

TEST_CASE("SyncClient with no database: fails at once, attempts at most once a second", "[db][sync]") {
    const std::string url = pg::url_nobody_listens_on();
    SyncClient client(url);
    const std::string log = sm::test::capture_log([&] {
        CHECK_FALSE(client.connect());
        CHECK_FALSE(client.why().empty());
        for (int i = 0; i < 3; ++i) {
            const JobResult r = client.run(job_of(Work::world));
            CHECK(r.error == JobError::unavailable);
            CHECK(r.worlds.empty());
        }
    });
    CHECK_FALSE(client.connected());
    // libpq's "connection to server at ..., port ... failed: Connection
    // refused" is the operator's, in the log; a client reads the class only.
    check_failure_told_apart(JobError::unavailable, "Service Unavailable: database unavailable\n", url, log,
                             sm::test::log_detail(log, "db: connecting failed: "), true);
}

TEST_CASE("SyncClient: the database stopped, then back: failures, then rows again", "[db][sync]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const auto world = pg::world_table(ref);
    SyncClient client(own.url());
    check_worlds(client.run(job_of(Work::world)), 1, world);
    own.pause();
    const std::string log = sm::test::capture_log([&] {
        {
            // Lost during the job (the retry on a new connection finds none).
            const JobResult r = client.run(job_of(Work::worlds, 20));
            CHECK(r.error == JobError::lost);
            CHECK(r.worlds.empty());
        }
        {
            const JobResult r = client.run(job_of(Work::fortunes));
            CHECK(r.error == JobError::unavailable);
            CHECK(r.fortunes.empty());
        }
    });
    // How the connection was lost, in the log only. (Whether the attempt to
    // connect again is made within the two jobs, and logged, depends on the
    // time since the last: at most one a second.)
    check_failure_told_apart(JobError::lost, "Service Unavailable: database connection lost\n", own.url(), log,
                             sm::test::log_detail(log, "db: connection lost: "), false);
    own.resume();
    // Back within a bounded wait: an attempt a second at most.
    const auto end = std::chrono::steady_clock::now() + 15s;
    JobResult r = client.run(job_of(Work::world));
    while (r.error != JobError::none && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(100ms);
        r = client.run(job_of(Work::world));
    }
    check_worlds(r, 1, world);
    check_worlds(client.run(job_of(Work::worlds, 500)), 500, world);
}

TEST_CASE("SyncClient: a failing query fails its job, the connection stays", "[db][sync]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const auto world = pg::world_table(ref);
    SyncClient client(own.url());
    REQUIRE(client.connect());
    ref.exec("ALTER TABLE world RENAME TO world_away");
    const std::string log = sm::test::capture_log([&] {
        for (const std::uint16_t count : {1, 20}) {
            INFO(count << " rows");
            const JobResult r = client.run(job_of(Work::worlds, count));
            CHECK(r.error == JobError::failed);
            CHECK(r.worlds.empty());
            CHECK(client.connected());
            CHECK(client.run(job_of(Work::fortunes)).fortunes.size() == 12);
        }
    });
    // PostgreSQL's 'relation "world" does not exist' is in the log only (the
    // first job's line: at most a line a second).
    check_failure_told_apart(JobError::failed, "Service Unavailable: database error\n", own.url(), log,
                             "relation \"world\" does not exist", false);
    ref.exec("ALTER TABLE world_away RENAME TO world");
    check_worlds(client.run(job_of(Work::world)), 1, world);
    check_worlds(client.run(job_of(Work::worlds, 20)), 20, world);
}

TEST_CASE("SyncClient: a statement past the statement timeout fails its job as a timeout", "[db][sync]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const auto world = pg::world_table(ref);
    SyncClient client(own.url(), 300ms);
    REQUIRE(client.connect());
    pg::Session locker(own.url());
    locker.exec("BEGIN; LOCK TABLE world IN ACCESS EXCLUSIVE MODE");
    JobResult r;
    const std::string log = sm::test::capture_log([&] { r = client.run(job_of(Work::world)); });
    locker.exec("ROLLBACK");
    CHECK(r.error == JobError::timeout);
    CHECK(r.worlds.empty());
    check_failure_told_apart(JobError::timeout, "Service Unavailable: database timeout\n", own.url(), log,
                             "canceling statement due to statement timeout", false);
    // The connection stays.
    CHECK(client.connected());
    check_worlds(client.run(job_of(Work::world)), 1, world);
}
