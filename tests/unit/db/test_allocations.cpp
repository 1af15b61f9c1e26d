// The clients allocate nothing per job once warm: after a few jobs of every
// kind and size, running more performs no C++ heap allocation (operator
// new) at all; libpq's own mallocs (its PGresult per query) are not counted.
// Its own binary: it replaces the global operator new. The loop here is a
// lean poll(2) loop that allocates nothing itself (test_loop.hpp's records
// every delivery by value, which does).
#include <catch2/catch.hpp>

#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>

#include "support/count_allocations.hpp"
#include "db/async_client.hpp"
#include "db/sync_client.hpp"
#include "support/pg.hpp"

using sm::test::g_allocations;

namespace {

using sm::http::Job;
using sm::http::JobResult;
using sm::http::Work;
namespace pg = sm::test::pg;

Job job_of(std::uint64_t id, Work work, std::uint16_t count = 1) {
    Job job;
    job.id = id;
    job.work = work;
    job.count = count;
    return job;
}

// Counts deliveries and what was wrong with them, in place.
class LeanLoop final : public sm::db::Loop {
  public:
    sm::db::AsyncClient* client = nullptr;
    std::size_t delivered = 0;
    std::size_t failed = 0;
    std::size_t rows = 0;

    void watch(int fd, bool read, bool write) noexcept override {
        for (auto& w : watches_) {
            if (w.fd == fd || w.fd < 0) {
                w.fd = fd;
                w.events = static_cast<short>((read ? POLLIN : 0) | (write ? POLLOUT : 0));
                return;
            }
        }
    }
    void unwatch(int fd) noexcept override {
        for (auto& w : watches_) {
            if (w.fd == fd) w.fd = -1;
        }
    }
    void deliver(void*, const Job&, const JobResult& result) noexcept override {
        ++delivered;
        if (result.error != sm::http::JobError::none) ++failed;
        rows += result.worlds.size() + result.fortunes.size();
    }

    bool run_until_delivered(std::size_t n) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (delivered < n) {
            if (std::chrono::steady_clock::now() > end) return false;
            std::array<pollfd, 8> fds{};
            std::size_t count = 0;
            for (const auto& w : watches_) {
                if (w.fd >= 0) fds[count++] = {w.fd, w.events, 0};
            }
            if (::poll(fds.data(), count, 50) > 0) {
                for (std::size_t i = 0; i < count; ++i) {
                    const short r = fds[i].revents;
                    if (r == 0) continue;
                    const bool error = (r & (POLLERR | POLLHUP | POLLNVAL)) != 0;
                    client->on_ready(fds[i].fd, (r & POLLIN) != 0 || error, (r & POLLOUT) != 0 || error);
                }
            }
            const auto now = std::chrono::steady_clock::now();
            if (client->next_deadline() <= now) client->expire(now);
            client->flush();
        }
        return true;
    }

  private:
    struct Watched {
        int fd = -1;
        short events = 0;
    };
    std::array<Watched, 8> watches_{};
};

}  // namespace

TEST_CASE("SyncClient allocates nothing per job once warm", "[db][allocations]") {
    const std::string url = pg::fixture_url_or_skip();
    sm::db::SyncClient client(url);
    const std::array<Job, 5> jobs{job_of(0, Work::world), job_of(0, Work::worlds, 1), job_of(0, Work::worlds, 20),
                                  job_of(0, Work::worlds, 500), job_of(0, Work::fortunes)};
    for (int round = 0; round < 3; ++round) {
        for (const Job& job : jobs) REQUIRE(client.run(job).error == sm::http::JobError::none);
    }
    std::size_t failures = 0;
    const std::size_t before = g_allocations.load();
    for (int round = 0; round < 50; ++round) {
        for (const Job& job : jobs) failures += client.run(job).error == sm::http::JobError::none ? 0 : 1;
    }
    const std::size_t allocations = g_allocations.load() - before;
    CHECK(failures == 0);
    CHECK(allocations == 0);
}

TEST_CASE("AsyncClient allocates nothing per job once warm", "[db][allocations]") {
    const std::string url = pg::fixture_url_or_skip();
    LeanLoop loop;
    sm::db::AsyncClient client(url, 2, loop);
    loop.client = &client;
    int owners[50] = {};
    auto batch = [&](std::size_t& expected) {
        for (std::uint64_t i = 0; i < 400; ++i) {
            const Work work = i % 8 == 0 ? Work::fortunes : i % 8 <= 2 ? Work::worlds : Work::world;
            client.submit(&owners[i % 50], job_of(i, work, static_cast<std::uint16_t>(i % 8 == 1 ? 500 : 7)));
        }
        expected += 400;
        return loop.run_until_delivered(expected);
    };
    std::size_t expected = 0;
    for (int round = 0; round < 3; ++round) REQUIRE(batch(expected));
    const std::size_t before = g_allocations.load();
    bool done = true;
    for (int round = 0; round < 10; ++round) done = batch(expected) && done;
    const std::size_t allocations = g_allocations.load() - before;
    CHECK(done);
    CHECK(loop.failed == 0);
    CHECK(allocations == 0);
}

TEST_CASE("allocations the counter sees an allocation", "[db][allocations]") {
    // Else every "no allocation" above would pass however much is allocated.
    const std::size_t before = g_allocations.load();
    void* p = ::operator new(16);  // a call, not a new-expression: never elided
    const std::size_t counted = g_allocations.load() - before;
    ::operator delete(p);
    CHECK(counted == 1);
}
