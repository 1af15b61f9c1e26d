// A tiny poll(2) loop implementing db::Loop the way the contract in
// db/async_client.hpp asks (level-triggered, errors as readable, stale events
// dropped, on_ready / expire / flush each iteration), recording every
// delivery by value (the result's views die with deliver()).
#pragma once

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "db/async_client.hpp"

namespace sm::test {

class TestLoop final : public db::Loop {
  public:
    using Clock = std::chrono::steady_clock;

    struct Delivery {
        void* owner = nullptr;
        http::Job job{};
        http::JobError error = http::JobError::none;
        std::vector<http::WorldRow> worlds;
        std::vector<std::pair<std::int32_t, std::string>> fortunes;
    };
    struct Watch {
        bool read = false;
        bool write = false;
    };

    // Set after the client is made (the client calls watch() from its constructor).
    db::AsyncClient* client = nullptr;
    std::vector<Delivery> delivered;
    std::map<int, Watch> watched;
    // An extra fd (a timer, say) serviced by the same poll, and its handler.
    int extra_fd = -1;
    std::function<void()> on_extra;
    // Called inside deliver(), e.g. to submit the owner's next job.
    std::function<void(void*, const http::Job&)> after_deliver;
    bool watch_on_unwatched_fd = false;  // a contract breach seen
    unsigned watch_calls = 0;

    void watch(int fd, bool read, bool write) noexcept override {
        if (fd < 0) watch_on_unwatched_fd = true;
        ++watch_calls;
        watched[fd] = {read, write};
    }
    void unwatch(int fd) noexcept override {
        if (watched.erase(fd) == 0) watch_on_unwatched_fd = true;
    }
    void deliver(void* owner, const http::Job& job, const http::JobResult& result) noexcept override {
        Delivery d;
        d.owner = owner;
        d.job = job;
        d.error = result.error;
        d.worlds.assign(result.worlds.begin(), result.worlds.end());
        for (const auto& f : result.fortunes) d.fortunes.emplace_back(f.id, std::string(f.message));
        delivered.push_back(std::move(d));
        if (after_deliver) after_deliver(owner, job);
    }

    // One iteration: poll (at most `max_wait`, less when the client has a
    // deadline), readiness to the client, expire, flush.
    void iterate(std::chrono::milliseconds max_wait = std::chrono::milliseconds(50)) {
        std::vector<pollfd> fds;
        for (const auto& [fd, w] : watched) {
            short events = 0;
            if (w.read) events |= POLLIN;
            if (w.write) events |= POLLOUT;
            fds.push_back({fd, events, 0});
        }
        if (extra_fd >= 0) fds.push_back({extra_fd, POLLIN, 0});
        auto timeout = max_wait;
        const auto deadline = client->next_deadline();
        const auto now = Clock::now();
        if (deadline != Clock::time_point::max()) {
            const auto until = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
            timeout = std::clamp(until, std::chrono::milliseconds(0), max_wait);
        }
        const int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
        if (n > 0) {
            for (const pollfd& p : fds) {
                if (p.revents == 0) continue;
                if (p.fd == extra_fd) {
                    if (on_extra) on_extra();
                    continue;
                }
                // Dropped if unwatched (or re-watched) by an earlier event of this iteration.
                const auto it = watched.find(p.fd);
                if (it == watched.end()) continue;
                const bool error = (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0;
                const bool readable = (p.revents & POLLIN) != 0 || error;
                const bool writable = (p.revents & POLLOUT) != 0 || (error && it->second.write);
                client->on_ready(p.fd, readable, writable);
            }
        }
        if (client->next_deadline() <= Clock::now()) client->expire(Clock::now());
        client->flush();
    }

    // Iterates until `done()` or `limit` passed; returns done().
    template <typename Done>
    bool run_until(Done done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
        const auto end = Clock::now() + limit;
        while (!done()) {
            if (Clock::now() > end) return done();
            iterate();
        }
        return true;
    }
};

}  // namespace sm::test
