#include "db/async_client.hpp"

#include <algorithm>
#include <utility>

#include "db/handles.hpp"
#include "db/pg.hpp"

namespace sm::db {

namespace {

using namespace std::chrono_literals;

constexpr std::chrono::steady_clock::duration kFirstBackoff = 100ms;
constexpr std::chrono::steady_clock::duration kMaxBackoff = 1s;

// A FIFO over a vector that keeps its capacity (std::deque allocates and
// frees blocks as it moves along).
template <typename T>
class Ring {
  public:
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    T& front() noexcept { return slots_[head_]; }
    T& operator[](std::size_t i) noexcept { return slots_[(head_ + i) % slots_.size()]; }
    void push_back(const T& value) {
        if (size_ == slots_.size()) grow();
        slots_[(head_ + size_) % slots_.size()] = value;
        ++size_;
    }
    void pop_front() noexcept {
        head_ = (head_ + 1) % slots_.size();
        --size_;
    }
    void clear() noexcept { head_ = size_ = 0; }
    void swap(Ring& other) noexcept {
        slots_.swap(other.slots_);
        std::swap(head_, other.head_);
        std::swap(size_, other.size_);
    }

  private:
    void grow() {
        std::vector<T> bigger(std::max<std::size_t>(16, slots_.size() * 2));
        for (std::size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
        slots_.swap(bigger);
        head_ = 0;
    }
    std::vector<T> slots_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

enum class Kind : std::uint8_t { job, prepare, sync };

// What a connection waits for, in the order its results come back.
struct Item {
    void* owner = nullptr;
    http::Job job{};
    std::uint16_t left = 0;  // queries whose results are still due (job)
    Kind kind = Kind::job;
};

enum class State : std::uint8_t {
    down,        // not connected; the next attempt at `deadline`
    connecting,  // PQconnectPoll in progress; gives up at `deadline`
    preparing,   // connected, the statements being prepared; gives up at `deadline`
    ready,       // takes queries
};

unsigned query_count(const http::Job& job) noexcept {
    if (job.work != http::Work::worlds) return 1;
    return std::clamp<unsigned>(job.count, 1, http::kMaxQueries);
}

}  // namespace

struct AsyncClient::Connection {
    unsigned index = 0;
    State state = State::down;
    bool first = true;     // in its first attempt since construction
    bool was_up = false;   // has been ready once (then "up again" is worth a log line)
    ConnectionHandle pg;
    int fd = -1;           // watched fd, when `watching`
    bool watching = false;
    bool watching_read = false;
    bool watching_write = false;
    Clock::time_point deadline{};
    Clock::duration backoff = kFirstBackoff;
    Ring<Item> items;      // in flight
    Ring<Item> failing;    // in flight when the connection broke, being delivered
    std::size_t queries = 0;  // queries in flight (what dispatch balances)
    std::uint64_t jobs_sent = 0;
    bool unsynced = false;    // queries sent since the last Sync
    bool got_result = false;  // the head query's result is in; its null is next
    std::vector<http::WorldRow> worlds;
    std::vector<http::FortuneRow> fortunes;
    ResultHandle fortune_result;  // what the fortune rows point into
    http::JobError job_error = http::JobError::none;  // the head job's failure
    std::string shape_error;      // a result of the wrong shape, for the log
    std::string batch_error;      // the first failure since the last Sync
    std::string why;              // why it is down
};

AsyncClient::AsyncClient(std::string conninfo, unsigned connections, Loop& loop,
                         std::chrono::milliseconds statement_timeout)
    : conninfo_(std::move(conninfo)),
      options_(pg::statement_timeout_option(statement_timeout)),
      loop_(loop) {
    require_libpq();
    connections = std::max(connections, 1u);
    connections_.reserve(connections);
    for (unsigned i = 0; i < connections; ++i) {
        auto c = std::make_unique<Connection>();
        c->index = i;
        c->worlds.reserve(http::kMaxQueries);
        c->fortunes.reserve(32);
        c->shape_error.reserve(256);
        c->batch_error.reserve(256);
        connections_.push_back(std::move(c));
    }
    submitted_.reserve(256);
    batch_.reserve(256);
    const auto now = Clock::now();
    for (auto& c : connections_) start_connecting(*c, now);
}

AsyncClient::~AsyncClient() {
    for (auto& c : connections_) {
        unwatch(*c);
        c->pg.reset();
    }
}

unsigned AsyncClient::connections_up() const noexcept {
    return static_cast<unsigned>(
        std::count_if(connections_.begin(), connections_.end(), [](const auto& c) { return c->state == State::ready; }));
}

std::uint64_t AsyncClient::jobs_sent(unsigned index) const noexcept {
    return index < connections_.size() ? connections_[index]->jobs_sent : 0;
}

void AsyncClient::log_line(std::string_view what) noexcept { pg::log_line(log_, what); }

// ---- submitting -----------------------------------------------------------

void AsyncClient::submit(void* owner, const http::Job& job) noexcept {
    submitted_.push_back({owner, job});
    ++in_flight_;
}

void AsyncClient::flush() noexcept {
    settle_waiting();
    // Deliveries in here (failures, results read while writing) may submit
    // more: those go out in the same flush.
    while (!submitted_.empty()) {
        batch_.swap(submitted_);
        for (const Submitted& s : batch_) dispatch(s);
        batch_.clear();
        for (auto& c : connections_) {
            if (c->state != State::ready || !c->unsynced) continue;
            sync(*c);
            if (c->state == State::ready) push_output(*c);
            if (c->state == State::ready) drain(*c);
        }
    }
}

void AsyncClient::dispatch(const Submitted& s) noexcept {
    Connection* best = nullptr;
    for (auto& c : connections_) {
        if (c->state == State::ready && (best == nullptr || c->queries < best->queries)) best = c.get();
    }
    if (best != nullptr) {
        send_job(*best, s);
        return;
    }
    if (first_attempts_pending()) {
        waiting_.push_back(s);
        return;
    }
    // Why no connection is up is in the log (the failed attempts' lines).
    --in_flight_;
    loop_.deliver(s.owner, s.job, http::JobResult::failed(http::JobError::unavailable));
}

void AsyncClient::send_job(Connection& c, const Submitted& s) noexcept {
    const unsigned count = query_count(s.job);
    c.items.push_back({s.owner, s.job, static_cast<std::uint16_t>(count), Kind::job});
    c.queries += count;
    c.unsynced = true;
    ++c.jobs_sent;
    PGconn* pg = c.pg.get();
    for (unsigned i = 0; i < count; ++i) {
        const bool sent = s.job.work == http::Work::fortunes ? pg::send_fortunes(pg) : pg::send_world(pg, ids_.next());
        if (!sent) {
            fail(c, PQerrorMessage(pg));
            return;
        }
    }
}

void AsyncClient::sync(Connection& c) noexcept {
    if (PQpipelineSync(c.pg.get()) != 1) {
        fail(c, PQerrorMessage(c.pg.get()));
        return;
    }
    c.items.push_back({nullptr, {}, 0, Kind::sync});
    c.unsynced = false;
}

// Writes what libpq holds; watches for writability while some is left.
void AsyncClient::push_output(Connection& c) noexcept {
    const int left = PQflush(c.pg.get());
    if (left < 0) {
        fail(c, PQerrorMessage(c.pg.get()));
        return;
    }
    if ((left == 1) != c.watching_write || !c.watching_read) watch(c, true, left == 1);
}

void AsyncClient::settle_waiting() noexcept {
    if (waiting_.empty()) return;
    if (connections_up() == 0 && first_attempts_pending()) return;
    submitted_.insert(submitted_.end(), waiting_.begin(), waiting_.end());
    waiting_.clear();
}

bool AsyncClient::first_attempts_pending() const noexcept {
    return std::any_of(connections_.begin(), connections_.end(), [](const auto& c) { return c->first; });
}

// ---- results --------------------------------------------------------------

void AsyncClient::drain(Connection& c) noexcept {
    while (c.state == State::preparing || c.state == State::ready) {
        // With nothing due, PQgetResult would return null for ever.
        if (c.items.empty()) return;
        PGconn* pg = c.pg.get();
        if (PQisBusy(pg)) {
            if (PQstatus(pg) == CONNECTION_BAD) fail(c, PQerrorMessage(pg));
            return;
        }
        ResultHandle result(PQgetResult(pg));
        if (PQstatus(pg) == CONNECTION_BAD) {
            const char* message = result ? PQresultErrorMessage(result.get()) : "";
            fail(c, message != nullptr && *message != '\0' ? message : PQerrorMessage(pg));
            return;
        }
        Item& head = c.items.front();
        if (head.kind == Kind::sync) {
            // No null follows a Sync's result.
            if (!result || PQresultStatus(result.get()) != PGRES_PIPELINE_SYNC) {
                fail(c, "protocol surprise: a result where the Sync's was due");
                return;
            }
            c.items.pop_front();
            if (c.state == State::preparing) {
                if (!c.batch_error.empty()) {
                    std::string why;
                    pg::set_one_line(why, "preparing the statements failed: ", c.batch_error);
                    fail(c, why);
                    return;
                }
                became_ready(c);
            }
            c.batch_error.clear();
            continue;
        }
        if (!result) {
            // The end of the head query's results.
            if (!c.got_result) {
                fail(c, "protocol surprise: no result for a query");
                return;
            }
            c.got_result = false;
            if (head.kind == Kind::prepare) {
                c.items.pop_front();
                continue;
            }
            --c.queries;
            if (--head.left == 0) complete_head(c);
            continue;
        }
        c.got_result = true;
        const ExecStatusType status = PQresultStatus(result.get());
        if (status == PGRES_TUPLES_OK && head.kind == Kind::job) {
            if (c.job_error != http::JobError::none) continue;
            http::WorldRow row{};
            const bool parsed = head.job.work == http::Work::fortunes
                                    ? pg::parse_fortunes(result.get(), c.fortunes, c.shape_error)
                                    : pg::parse_world(result.get(), row, c.shape_error);
            if (!parsed) {
                c.job_error = http::JobError::failed;
                log_line(c.shape_error);
            } else if (head.job.work == http::Work::fortunes) {
                c.fortune_result = std::move(result);
            } else {
                c.worlds.push_back(row);
            }
        } else if (status == PGRES_COMMAND_OK && head.kind == Kind::prepare) {
            // prepared
        } else if (status == PGRES_PIPELINE_ABORTED) {
            // Not run: an earlier query of its batch failed (that one was logged).
            if (head.kind == Kind::job && c.job_error == http::JobError::none) {
                c.job_error = http::JobError::failed;
            }
        } else {
            const char* message = PQresultErrorMessage(result.get());
            if (message == nullptr || *message == '\0') message = PQresStatus(status);
            if (pg::ends_session(result.get())) {
                fail(c, message);
                return;
            }
            if (c.batch_error.empty()) pg::set_one_line(c.batch_error, "", message);
            if (head.kind == Kind::job && c.job_error == http::JobError::none) {
                c.job_error = pg::failure_of(result.get());
                std::string line;
                pg::set_one_line(line, "query failed: ", message);
                log_line(line);
            }
        }
    }
}

void AsyncClient::complete_head(Connection& c) noexcept {
    const Item item = c.items.front();
    c.items.pop_front();
    --in_flight_;
    http::JobResult result;
    if (c.job_error != http::JobError::none) {
        result = http::JobResult::failed(c.job_error);
    } else if (item.job.work == http::Work::fortunes) {
        result.fortunes = c.fortunes;
    } else {
        result.worlds = c.worlds;
    }
    loop_.deliver(item.owner, item.job, result);
    c.worlds.clear();
    c.fortunes.clear();
    c.fortune_result.reset();
    c.job_error = http::JobError::none;
}

// ---- the connection's life ------------------------------------------------

void AsyncClient::watch(Connection& c, bool read, bool write) noexcept {
    const int fd = PQsocket(c.pg.get());
    if (fd < 0) {
        fail(c, "libpq has no socket for the connection");
        return;
    }
    if (c.watching && c.fd != fd) unwatch(c);
    loop_.watch(fd, read, write);
    c.fd = fd;
    c.watching = true;
    c.watching_read = read;
    c.watching_write = write;
}

void AsyncClient::unwatch(Connection& c) noexcept {
    if (c.watching) loop_.unwatch(c.fd);
    c.watching = c.watching_read = c.watching_write = false;
    c.fd = -1;
}

void AsyncClient::start_connecting(Connection& c, Clock::time_point now) noexcept {
    c.deadline = now + pg::kConnectTimeout;
    c.pg.reset(pg::start_connection(conninfo_, options_));
    if (!c.pg) {
        fail(c, "out of memory");
        return;
    }
    if (PQstatus(c.pg.get()) == CONNECTION_BAD) {
        fail(c, PQerrorMessage(c.pg.get()));
        return;
    }
    pg::log_notices(c.pg.get(), log_);
    c.state = State::connecting;
    // Before the first PQconnectPoll, as if it had said "writing".
    watch(c, false, true);
}

void AsyncClient::continue_connecting(Connection& c) noexcept {
    // PQconnectPoll may close the socket and open another (the next address,
    // SSL refused): stop watching while the fd is surely still open.
    unwatch(c);
    switch (PQconnectPoll(c.pg.get())) {
        case PGRES_POLLING_READING:
            watch(c, true, false);
            break;
        case PGRES_POLLING_WRITING:
            watch(c, false, true);
            break;
        case PGRES_POLLING_OK:
            start_preparing(c);
            break;
        default:
            fail(c, PQerrorMessage(c.pg.get()));
            break;
    }
}

// Connected: pipeline mode, and both statements prepared in one round trip
// before any job is sent (a missing table shows here, once, not per job).
void AsyncClient::start_preparing(Connection& c) noexcept {
    PGconn* pg = c.pg.get();
    if (PQsetnonblocking(pg, 1) != 0 || PQenterPipelineMode(pg) != 1 || !pg::send_prepares(pg)) {
        fail(c, PQerrorMessage(pg));
        return;
    }
    c.items.push_back({nullptr, {}, 1, Kind::prepare});
    c.items.push_back({nullptr, {}, 1, Kind::prepare});
    c.state = State::preparing;
    c.got_result = false;
    c.batch_error.clear();
    sync(c);
    if (c.state == State::preparing) push_output(c);
    if (c.state == State::preparing) drain(c);
}

void AsyncClient::became_ready(Connection& c) noexcept {
    c.state = State::ready;
    c.first = false;
    c.backoff = kFirstBackoff;
    if (c.was_up) {
        std::string line = "connection " + std::to_string(c.index + 1) + " of " +
                           std::to_string(connections_.size()) + " up again";
        log_line(line);
    }
    c.was_up = true;
}

void AsyncClient::fail(Connection& c, std::string_view why) noexcept {
    const auto now = Clock::now();
    // `why` may point into libpq's connection: copy it before closing that.
    pg::set_one_line(c.why, "", why);
    const bool was_ready = c.state == State::ready;
    unwatch(c);
    c.pg.reset();
    c.state = State::down;
    c.first = false;
    std::string line = (was_ready ? "connection " : "connecting ") + std::to_string(c.index + 1) + " of " +
                       std::to_string(connections_.size()) + (was_ready ? " lost: " : " failed: ") + c.why;
    if (was_ready) {
        c.deadline = now;
        c.backoff = kFirstBackoff;
        line += " (reconnecting)";
    } else {
        c.deadline = now + c.backoff;
        line += " (next attempt in " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(c.backoff).count()) + " ms)";
        c.backoff = std::min(c.backoff * 2, kMaxBackoff);
    }
    log_line(line);
    // Everything in flight on it fails now; nothing is retried.
    c.failing.swap(c.items);
    c.items.clear();
    c.queries = 0;
    c.unsynced = false;
    c.got_result = false;
    c.worlds.clear();
    c.fortunes.clear();
    c.fortune_result.reset();
    c.job_error = http::JobError::none;
    c.batch_error.clear();
    for (std::size_t i = 0; i < c.failing.size(); ++i) {
        const Item item = c.failing[i];
        if (item.kind != Kind::job) continue;
        --in_flight_;
        loop_.deliver(item.owner, item.job, http::JobResult::failed(http::JobError::lost));
    }
    c.failing.clear();
}

// ---- readiness and time ---------------------------------------------------

void AsyncClient::on_ready(int fd, bool readable, bool writable) noexcept {
    Connection* c = nullptr;
    for (auto& candidate : connections_) {
        if (candidate->watching && candidate->fd == fd) c = candidate.get();
    }
    if (c == nullptr) return;
    switch (c->state) {
        case State::connecting:
            continue_connecting(*c);
            break;
        case State::preparing:
        case State::ready:
            if (writable) push_output(*c);
            if (readable && c->state != State::down && PQconsumeInput(c->pg.get()) == 0) {
                fail(*c, PQerrorMessage(c->pg.get()));
            }
            if (c->state != State::down) drain(*c);
            break;
        case State::down:
            break;
    }
    settle_waiting();
}

std::chrono::steady_clock::time_point AsyncClient::next_deadline() const noexcept {
    auto next = Clock::time_point::max();
    for (const auto& c : connections_) {
        if (c->state != State::ready) next = std::min(next, c->deadline);
    }
    return next;
}

void AsyncClient::expire(std::chrono::steady_clock::time_point now) noexcept {
    for (auto& c : connections_) {
        if (c->deadline > now) continue;
        if (c->state == State::down) {
            start_connecting(*c, now);
        } else if (c->state == State::connecting || c->state == State::preparing) {
            fail(*c, "no connection within the connect timeout (5 s)");
        }
    }
    settle_waiting();
}

}  // namespace sm::db
