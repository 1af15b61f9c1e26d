// A blocking model's whole use of the database: after each feed, the jobs
// the session queued are run on this thread, one after the other, and their
// responses released in order (so nothing is waiting() when it returns).
// True when a job ran: the time has moved on by the queries' wait, and the
// responses they released are progress (runtime's idle time starts again
// from them, not from the read that asked for them).
#pragma once

#include "db/sync_client.hpp"
#include "http/byte_buffer.hpp"
#include "http/session.hpp"

namespace sm::db {

// (`Session`: http::Session, or what holds one: runtime::SessionSlot.)
template <typename Session>
[[nodiscard]] bool serve_jobs(Session& session, SyncClient& client,
                                     http::ByteBuffer& out) noexcept {
    http::Job job;
    bool ran = false;
    while (session.next_job(job)) {
        session.complete(job, client.run(job), out);  // run()'s views live until the next run()
        ran = true;
    }
    return ran;
}

// The same, and the responses the session deferred for want of room in the
// output rendered while `out` is under `limit` (the jobs they ask for run
// too): a blocking model's step after each feed, and again once it has
// sent `out`. Something is left deferred only if `out` reached the limit.
// `client` may be null (no --db: the session then queues no job).
template <typename Session>
[[nodiscard]] bool fill(Session& session, SyncClient* client, http::ByteBuffer& out,
                               std::size_t limit) noexcept {
    bool ran = false;
    while (true) {
        if (client != nullptr && serve_jobs(session, *client, out)) ran = true;
        if (!session.deferred() || out.size() >= limit) return ran;
        session.resume(out, limit);
    }
}

}  // namespace sm::db
