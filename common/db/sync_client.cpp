#include "db/sync_client.hpp"

#include <algorithm>
#include <utility>

#include "db/pg.hpp"

namespace sm::db {

namespace {

constexpr auto kRetryInterval = std::chrono::seconds(1);

bool prepare(PGconn* connection, std::string& why) noexcept {
    const Oid int4[] = {23};
    ResultHandle world(PQprepare(connection, pg::kWorldStatement, pg::kWorldQuery, 1, int4));
    if (world && PQresultStatus(world.get()) == PGRES_COMMAND_OK) {
        ResultHandle fortune(PQprepare(connection, pg::kFortuneStatement, pg::kFortuneQuery, 0, nullptr));
        if (fortune && PQresultStatus(fortune.get()) == PGRES_COMMAND_OK) return true;
        pg::set_one_line(why, "preparing the fortune query failed: ",
                         fortune ? PQresultErrorMessage(fortune.get()) : PQerrorMessage(connection));
        return false;
    }
    pg::set_one_line(why, "preparing the world query failed: ",
                     world ? PQresultErrorMessage(world.get()) : PQerrorMessage(connection));
    return false;
}

}  // namespace

SyncClient::SyncClient(std::string conninfo, std::chrono::milliseconds statement_timeout)
    : conninfo_(std::move(conninfo)), options_(pg::statement_timeout_option(statement_timeout)) {
    require_libpq();
    worlds_.reserve(http::kMaxQueries);
    fortunes_.reserve(32);
    why_.reserve(256);
    error_.reserve(256);
}

SyncClient::~SyncClient() = default;

bool SyncClient::connect() noexcept { return ensure_connected(Clock::now()); }

bool SyncClient::ensure_connected(Clock::time_point now) noexcept {
    if (connection_) return true;
    if (attempted_ && now - last_attempt_ < kRetryInterval) return false;
    const bool again = attempted_;
    attempted_ = true;
    last_attempt_ = now;
    ConnectionHandle connection(pg::make_connection(conninfo_, options_));
    if (!connection) {
        why_.assign("out of memory");
    } else if (PQstatus(connection.get()) != CONNECTION_OK) {
        pg::set_one_line(why_, "", PQerrorMessage(connection.get()));
    } else {
        pg::log_notices(connection.get(), log_);
        if (prepare(connection.get(), why_)) {
            why_.clear();
            connection_ = std::move(connection);
            {
                const std::lock_guard lock(cancel_mutex_);
                cancel_.reset(PQgetCancel(connection_.get()));
            }
            if (again) pg::log_line(log_, "connected again");
            return true;
        }
    }
    std::string line;
    try {
        line.append("connecting failed: ").append(why_).append(" (next attempt in 1 s at the earliest)");
    } catch (...) {
    }
    pg::log_line(log_, line);
    return false;
}

void SyncClient::drop(const char* message) noexcept {
    std::string line;
    pg::set_one_line(line, "connection lost: ", message);
    pg::log_line(log_, line);
    {
        const std::lock_guard lock(cancel_mutex_);
        cancel_.reset();
    }
    connection_.reset();
}

void SyncClient::cancel() noexcept {
    const std::lock_guard lock(cancel_mutex_);
    char error[256];
    // Sends the cancel request on a connection of its own; nothing to do
    // if nothing runs. Its failure leaves the query to finish by itself.
    if (cancel_) PQcancel(cancel_.get(), error, sizeof error);
}

http::JobResult SyncClient::run(const http::Job& job) noexcept {
    fortune_result_.reset();
    worlds_.clear();
    fortunes_.clear();
    // A connection lost during the job (the server restarted since the last
    // one, most often) is made again and the job run once more: the queries
    // only read. At most one attempt a second still holds.
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (!connection_ && !ensure_connected(Clock::now()))
            return failed(attempt > 0 ? http::JobError::lost : http::JobError::unavailable);
        http::JobResult result;
        switch (job.work) {
            case http::Work::world:
                result = world();
                break;
            case http::Work::worlds: {
                const unsigned count = std::clamp<unsigned>(job.count, 1, http::kMaxQueries);
                result = count == 1 ? world() : worlds(count);
                break;
            }
            case http::Work::fortunes:
                result = fortunes();
                break;
            default:
                pg::log_line(log_, "unknown job");
                return failed(http::JobError::failed);
        }
        if (result.error == http::JobError::none || connection_) return result;
    }
    return failed(http::JobError::lost);  // lost twice, or not made again at once
}

http::JobResult SyncClient::failed(http::JobError why) noexcept {
    worlds_.clear();
    fortunes_.clear();
    return http::JobResult::failed(why);
}

http::JobResult SyncClient::failed_query(const pg_result* result) noexcept {
    PGconn* connection = connection_.get();
    const char* message = result != nullptr ? PQresultErrorMessage(result) : "";
    if (message == nullptr || *message == '\0') message = PQerrorMessage(connection);
    if (PQstatus(connection) == CONNECTION_BAD || (result != nullptr && pg::ends_session(result))) {
        drop(message);
        return failed(http::JobError::lost);
    }
    std::string line;
    pg::set_one_line(line, "query failed: ", message);
    pg::log_line(log_, line);
    return failed(pg::failure_of(result));
}

http::JobResult SyncClient::world() noexcept {
    ResultHandle result(pg::exec_world(connection_.get(), ids_.next()));
    if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) return failed_query(result.get());
    http::WorldRow row{};
    if (!pg::parse_world(result.get(), row, error_)) {
        pg::log_line(log_, error_);
        return failed(http::JobError::failed);
    }
    worlds_.push_back(row);
    return {worlds_, {}, {}};
}

// `count` queries in one pipeline: every Bind/Execute and one Sync leave in
// one write, their results come back in order (each followed by a null
// result), then the Sync's. Blocking mode is safe here: 500 queries are
// about 22 kB of requests, sent before any result is read, far below what the
// sockets buffer, so the server never blocks writing results while this
// thread blocks writing queries.
http::JobResult SyncClient::worlds(unsigned count) noexcept {
    PGconn* connection = connection_.get();
    if (PQenterPipelineMode(connection) != 1) return failed_query(nullptr);
    bool sent = true;
    for (unsigned i = 0; i < count && sent; ++i) sent = pg::send_world(connection, ids_.next());
    if (sent) sent = PQpipelineSync(connection) == 1;
    if (!sent) {
        // Whatever went out, the pipeline's state is not worth recovering.
        drop(PQerrorMessage(connection));
        return failed(http::JobError::lost);
    }
    http::JobError failure = http::JobError::none;  // the class of the first failure
    bool lost = false;
    bool synced = false;
    // Each query yields its result and a null; the Sync its own result. The
    // bound only guards against a libpq that says otherwise.
    for (unsigned step = 0; step < 4 * count + 8 && !synced && !lost; ++step) {
        ResultHandle result(PQgetResult(connection));
        if (result) {
            switch (PQresultStatus(result.get())) {
                case PGRES_TUPLES_OK:
                    if (failure == http::JobError::none) {
                        http::WorldRow row{};
                        if (pg::parse_world(result.get(), row, error_)) {
                            worlds_.push_back(row);
                        } else {
                            failure = http::JobError::failed;
                            pg::log_line(log_, error_);
                        }
                    }
                    break;
                case PGRES_PIPELINE_SYNC:
                    synced = true;
                    break;
                case PGRES_PIPELINE_ABORTED:  // after the error that aborted it
                    break;
                default:
                    if (pg::ends_session(result.get())) lost = true;
                    if (failure == http::JobError::none) {
                        failure = pg::failure_of(result.get());
                        if (!lost) {  // else logged as the connection lost, below
                            std::string line;
                            pg::set_one_line(line, "query failed: ", PQresultErrorMessage(result.get()));
                            pg::log_line(log_, line);
                        }
                    }
                    break;
            }
        }
        if (PQstatus(connection) == CONNECTION_BAD) lost = true;
    }
    if (lost || !synced || PQexitPipelineMode(connection) != 1) {
        // Dropped: run() makes the connection again and runs the job once more.
        failure = lost ? http::JobError::lost : http::JobError::failed;
        drop(lost ? PQerrorMessage(connection) : "the pipeline's results did not add up");
    }
    if (failure != http::JobError::none) return failed(failure);
    return {worlds_, {}, {}};
}

http::JobResult SyncClient::fortunes() noexcept {
    ResultHandle result(pg::exec_fortunes(connection_.get()));
    if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) return failed_query(result.get());
    if (!pg::parse_fortunes(result.get(), fortunes_, error_)) {
        pg::log_line(log_, error_);
        return failed(http::JobError::failed);
    }
    fortune_result_ = std::move(result);
    return {{}, fortunes_, {}};
}

}  // namespace sm::db
