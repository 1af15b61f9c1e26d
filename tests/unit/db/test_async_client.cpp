// db::AsyncClient against a real PostgreSQL, driven by a poll(2) loop
// (test_loop.hpp): the shared fixture's database (read only), or one of the
// test's own where the case stops it, locks or changes its tables.
#include <catch2/catch.hpp>

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "db/async_client.hpp"
#include "db_test_support.hpp"
#include "support/pg.hpp"
#include "test_loop.hpp"

using namespace std::chrono_literals;
using sm::db::AsyncClient;
using sm::http::Job;
using sm::http::JobError;
using sm::http::Work;
using sm::test::check_failure_told_apart;
using sm::test::TestLoop;
namespace pg = sm::test::pg;

namespace {

using World = std::map<std::int32_t, std::int32_t>;
using Fortunes = std::vector<std::pair<std::int32_t, std::string>>;

Job job_of(std::uint64_t id, Work work, std::uint16_t count = 1) {
    Job job;
    job.id = id;
    job.epoch = 7;
    job.work = work;
    job.count = count;
    return job;
}

// A loop with its client, connected (every connection up) within a bounded wait.
struct Rig {
    TestLoop loop;
    std::unique_ptr<AsyncClient> client;

    Rig(const std::string& url, unsigned connections, bool wait_up = true,
        std::chrono::milliseconds statement_timeout = 0ms) {
        client = std::make_unique<AsyncClient>(url, connections, loop, statement_timeout);
        loop.client = client.get();
        if (wait_up) REQUIRE(loop.run_until([&] { return client->connections_up() == connections; }));
    }
};

void check_delivery(const TestLoop::Delivery& d, const World& world, const Fortunes& fortunes) {
    INFO("job " << d.job.id << " error: " << sm::http::job_error_text(d.error));
    REQUIRE(d.error == JobError::none);
    if (d.job.work == Work::fortunes) {
        CHECK(d.worlds.empty());
        auto got = d.fortunes;
        std::sort(got.begin(), got.end());
        CHECK(got == fortunes);
        return;
    }
    CHECK(d.fortunes.empty());
    const std::size_t count = d.job.work == Work::worlds ? d.job.count : 1;
    REQUIRE(d.worlds.size() == count);
    for (const auto& row : d.worlds) {
        REQUIRE(row.id >= 1);
        REQUIRE(row.id <= sm::http::kWorldRows);
        CHECK(row.random_number == world.at(row.id));
    }
}

// A timerfd ticking every 5 ms: what the loop must keep servicing.
struct Ticker {
    int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    unsigned ticks = 0;
    Ticker() {
        REQUIRE(fd >= 0);
        itimerspec spec{};
        spec.it_interval.tv_nsec = 5'000'000;
        spec.it_value.tv_nsec = 5'000'000;
        REQUIRE(::timerfd_settime(fd, 0, &spec, nullptr) == 0);
    }
    ~Ticker() { ::close(fd); }
    void attach(TestLoop& loop) {
        loop.extra_fd = fd;
        loop.on_extra = [this] {
            std::uint64_t n = 0;
            if (::read(fd, &n, sizeof n) == sizeof n) ticks += static_cast<unsigned>(n);
        };
    }
};

}  // namespace

TEST_CASE("AsyncClient: 1,000 jobs from 50 owners in one batch, spread over the connections", "[db][async]") {
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(url, 4);
    std::array<int, 50> owners{};
    for (std::uint64_t i = 0; i < 1000; ++i) {
        const Work work = i % 10 == 0 ? Work::fortunes : i % 10 <= 3 ? Work::worlds : Work::world;
        const auto count = static_cast<std::uint16_t>(work == Work::worlds ? i % 37 + 1 : 1);
        rig.client->submit(&owners[i % 50], job_of(i, work, count));
    }
    CHECK(rig.client->in_flight() == 1000);
    CHECK(rig.loop.delivered.empty());  // nothing before a flush
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 1000; }));
    CHECK(rig.loop.delivered.size() == 1000);
    CHECK(rig.client->in_flight() == 0);
    std::set<std::uint64_t> ids;
    for (const auto& d : rig.loop.delivered) {
        CHECK(d.owner == &owners[d.job.id % 50]);
        CHECK(d.job.epoch == 7);
        ids.insert(d.job.id);
        check_delivery(d, world, fortunes);
    }
    CHECK(ids.size() == 1000);
    std::uint64_t sent = 0;
    for (unsigned c = 0; c < rig.client->connections(); ++c) {
        INFO("connection " << c);
        CHECK(rig.client->jobs_sent(c) > 0);
        sent += rig.client->jobs_sent(c);
    }
    CHECK(sent == 1000);
    CHECK_FALSE(rig.loop.watch_on_unwatched_fd);
}

TEST_CASE("AsyncClient: jobs submitted inside deliver go out in the same iteration", "[db][async]") {
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(url, 2);
    // Each owner's next job only when its previous one is in: a pipelined
    // session's shape.
    std::array<int, 50> owners{};
    std::array<unsigned, 50> done{};
    std::uint64_t next_id = 0;
    rig.loop.after_deliver = [&](void* owner, const Job&) {
        const auto o = static_cast<std::size_t>(static_cast<int*>(owner) - owners.data());
        if (++done[o] == 10) return;
        const std::uint64_t id = next_id++;
        rig.client->submit(owner, job_of(id, id % 3 != 0 ? Work::world : Work::fortunes));
    };
    for (auto& owner : owners) rig.client->submit(&owner, job_of(next_id++, Work::worlds, 5));
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 500; }));
    CHECK(rig.loop.delivered.size() == 500);
    for (const auto& d : rig.loop.delivered) check_delivery(d, world, fortunes);
    CHECK(rig.client->in_flight() == 0);
}

TEST_CASE("AsyncClient: jobs submitted before the first connection is up wait for it", "[db][async]") {
    const std::string url = pg::fixture_url_or_skip();
    pg::Session ref(url);
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(url, 2, false);
    CHECK(rig.client->connections_up() == 0);
    for (std::uint64_t i = 0; i < 10; ++i) rig.client->submit(nullptr, job_of(i, Work::world));
    rig.client->flush();
    CHECK(rig.loop.delivered.empty());
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 10; }));
    for (const auto& d : rig.loop.delivered) check_delivery(d, world, fortunes);
}

TEST_CASE("AsyncClient with no database: jobs fail at once, attempts back off", "[db][async]") {
    const std::string url = pg::url_nobody_listens_on();
    std::unique_ptr<Rig> made;
    // From the start: an attempt may fail in the constructor already.
    const std::string log = sm::test::capture_log([&] {
        made = std::make_unique<Rig>(url, 2, false);
        Rig& rig = *made;
        rig.client->submit(nullptr, job_of(1, Work::world));
        // The first attempts fail (connection refused): the job with them.
        REQUIRE(rig.loop.run_until([&] { return !rig.loop.delivered.empty(); }, 10s));
        CHECK(rig.loop.delivered[0].error == JobError::unavailable);
        // Now a job fails within the flush that sends it: nothing to wait for.
        rig.client->submit(nullptr, job_of(2, Work::fortunes));
        rig.client->submit(nullptr, job_of(3, Work::worlds, 20));
        rig.client->flush();
    });
    Rig& rig = *made;
    REQUIRE(rig.loop.delivered.size() == 3);
    for (const auto& d : rig.loop.delivered) {
        CHECK(d.error == JobError::unavailable);
        CHECK(d.worlds.empty());
        CHECK(d.fortunes.empty());
    }
    // libpq's "connection to server at ..., port ... failed: Connection
    // refused" is the operator's, in the log; a client reads the class only.
    check_failure_told_apart(JobError::unavailable, "Service Unavailable: database unavailable\n", url, log,
                             sm::test::log_detail(log, " failed: "), true);
    CHECK(rig.client->in_flight() == 0);
    CHECK(rig.client->connections_up() == 0);
    // It keeps trying, in the background: a deadline is pending.
    CHECK(rig.client->next_deadline() != std::chrono::steady_clock::time_point::max());
    CHECK(rig.client->next_deadline() < std::chrono::steady_clock::now() + 2s);
    for (int i = 0; i < 20; ++i) rig.loop.iterate(10ms);
    CHECK_FALSE(rig.loop.watch_on_unwatched_fd);
}

TEST_CASE("AsyncClient: the database stopped mid-run, then back on its port", "[db][async]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(own.url(), 2);
    // Jobs held in flight by a lock; then their sessions are ended under
    // them, as a stop ends them, while the lock still holds them (a stop
    // would end the locker's session too, in a race with theirs).
    const std::string lost_log = sm::test::capture_log([&] {
        pg::Session locker(own.url());
        locker.exec("BEGIN; LOCK TABLE world IN ACCESS EXCLUSIVE MODE");
        for (std::uint64_t i = 0; i < 20; ++i)
            rig.client->submit(nullptr, job_of(i, i % 2 ? Work::world : Work::worlds, 3));
        rig.loop.iterate(0ms);
        REQUIRE(rig.loop.run_until([&] { return pg::sessions_waiting_on_a_lock(locker) >= 2; }, 10s));
        CHECK(rig.loop.delivered.empty());
        CHECK(rig.client->in_flight() == 20);
        locker.exec(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()");
        REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 20; }, 10s));
    });
    CHECK(rig.loop.delivered.size() == 20);
    for (const auto& d : rig.loop.delivered) CHECK(d.error == JobError::lost);
    // PostgreSQL's "terminating connection due to administrator command", in
    // the log only.
    check_failure_told_apart(JobError::lost, "Service Unavailable: database connection lost\n", own.url(),
                             lost_log, sm::test::log_detail(lost_log, " lost: "), false);
    // Then the server stops: the connections made again are lost too.
    own.pause();
    REQUIRE(rig.loop.run_until([&] { return rig.client->connections_up() == 0; }, 10s));
    CHECK(rig.client->in_flight() == 0);
    // While it is down, a job fails at once.
    rig.loop.delivered.clear();
    rig.client->submit(nullptr, job_of(100, Work::world));
    rig.client->flush();
    REQUIRE(rig.loop.delivered.size() == 1);
    CHECK(rig.loop.delivered[0].error == JobError::unavailable);
    // Let it retry against nothing for a while (the backoff grows), then start it again.
    for (int i = 0; i < 30; ++i) rig.loop.iterate(10ms);
    own.resume();
    REQUIRE(rig.loop.run_until([&] { return rig.client->connections_up() == 2; }, 20s));
    rig.loop.delivered.clear();
    for (std::uint64_t i = 0; i < 100; ++i)
        rig.client->submit(nullptr, job_of(200 + i, i % 5 == 0 ? Work::fortunes : Work::worlds, 4));
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 100; }));
    for (const auto& d : rig.loop.delivered) check_delivery(d, world, fortunes);
    CHECK_FALSE(rig.loop.watch_on_unwatched_fd);
}

TEST_CASE("AsyncClient: a locked table holds the job back, not the loop", "[db][async]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(own.url(), 1);
    Ticker ticker;
    ticker.attach(rig.loop);
    pg::Session locker(own.url());
    locker.exec("BEGIN; LOCK TABLE world IN ACCESS EXCLUSIVE MODE");
    rig.client->submit(nullptr, job_of(1, Work::worlds, 10));
    rig.loop.iterate(0ms);
    REQUIRE(rig.loop.run_until([&] { return pg::sessions_waiting_on_a_lock(ref) >= 1; }, 10s));
    // The query waits in the server; the loop goes on serving its timer.
    const unsigned before = ticker.ticks;
    REQUIRE(rig.loop.run_until([&] { return ticker.ticks >= before + 20; }, 10s));
    CHECK(rig.loop.delivered.empty());
    CHECK(rig.client->in_flight() == 1);
    locker.exec("COMMIT");
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 1; }, 10s));
    check_delivery(rig.loop.delivered[0], world, fortunes);
    CHECK(rig.client->in_flight() == 0);
}

TEST_CASE("AsyncClient: a failing query fails its job and the rest of its batch, the connection stays",
          "[db][async]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(own.url(), 1);
    ref.exec("ALTER TABLE world RENAME TO world_away");
    rig.client->submit(nullptr, job_of(1, Work::fortunes));
    rig.client->submit(nullptr, job_of(2, Work::world));
    rig.client->submit(nullptr, job_of(3, Work::fortunes));
    rig.client->submit(nullptr, job_of(4, Work::worlds, 3));
    const std::string log = sm::test::capture_log(
        [&] { REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 4; })); });
    const auto& d = rig.loop.delivered;
    REQUIRE(d.size() == 4);
    // In the order the connection returned them: the order they were sent.
    CHECK(d[0].job.id == 1);
    CHECK(d[1].job.id == 2);
    CHECK(d[2].job.id == 3);
    CHECK(d[3].job.id == 4);
    check_delivery(d[0], world, fortunes);
    // The failed query, and the rest of its batch, which PostgreSQL did not run.
    CHECK(d[1].error == JobError::failed);
    CHECK(d[2].error == JobError::failed);
    CHECK(d[3].error == JobError::failed);
    // PostgreSQL's 'relation "world" does not exist' is in the log only.
    check_failure_told_apart(JobError::failed, "Service Unavailable: database error\n", own.url(), log,
                             "relation \"world\" does not exist", false);
    CHECK(rig.client->connections_up() == 1);
    ref.exec("ALTER TABLE world_away RENAME TO world");
    rig.loop.delivered.clear();
    rig.client->submit(nullptr, job_of(5, Work::worlds, 7));
    rig.client->submit(nullptr, job_of(6, Work::fortunes));
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 2; }));
    for (const auto& x : rig.loop.delivered) check_delivery(x, world, fortunes);
}

TEST_CASE("AsyncClient: a statement past the statement timeout fails its job as a timeout, the loop goes on",
          "[db][async]") {
    pg::OwnPostgres own;
    pg::Session ref(own.url());
    const World world = pg::world_table(ref);
    const Fortunes fortunes = pg::fortune_table(ref);
    Rig rig(own.url(), 1, true, 300ms);
    pg::Session locker(own.url());
    locker.exec("BEGIN; LOCK TABLE world IN ACCESS EXCLUSIVE MODE");
    rig.client->submit(nullptr, job_of(1, Work::world));
    const std::string log = sm::test::capture_log(
        [&] { REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 1; }, 10s)); });
    locker.exec("ROLLBACK");
    CHECK(rig.loop.delivered[0].error == JobError::timeout);
    check_failure_told_apart(JobError::timeout, "Service Unavailable: database timeout\n", own.url(), log,
                             "canceling statement due to statement timeout", false);
    // The connection stays and serves the next job.
    CHECK(rig.client->connections_up() == 1);
    rig.loop.delivered.clear();
    rig.client->submit(nullptr, job_of(2, Work::worlds, 3));
    REQUIRE(rig.loop.run_until([&] { return rig.loop.delivered.size() >= 1; }));
    check_delivery(rig.loop.delivered[0], world, fortunes);
}

TEST_CASE("AsyncClient: destroyed with jobs in flight, it delivers nothing and unwatches every fd",
          "[db][async]") {
    const std::string url = pg::fixture_url_or_skip();
    Rig rig(url, 3);
    CHECK(rig.loop.watched.size() == 3);
    for (std::uint64_t i = 0; i < 100; ++i) rig.client->submit(nullptr, job_of(i, Work::worlds, 20));
    rig.client->flush();
    const std::size_t delivered = rig.loop.delivered.size();
    CHECK(rig.client->in_flight() + delivered == 100);
    rig.client.reset();
    CHECK(rig.loop.delivered.size() == delivered);
    CHECK(rig.loop.watched.empty());
    CHECK_FALSE(rig.loop.watch_on_unwatched_fd);
}
