// What every model keeps of a connection beside its bytes, and the rules
// over it that do not depend on how the bytes move: when the connection
// ends, when it lingers, what a late head gets. The event loops keep it in
// ConnectionRecord (deadlines.hpp) with their lists' hooks,
// server-threadpool with its deadlines in atomics (a sweeping thread reads
// them), server-blocking on the stack of the thread that serves it.
#pragma once

#include "http/byte_buffer.hpp"
#include "http/session.hpp"
#include "runtime/session_slot.hpp"
#include "runtime/clock.hpp"
#include "runtime/deadline_clock.hpp"
#include "runtime/options.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {

template <template <typename> class Cell>
struct ConnectionState {
    // Our side is shut down: input is discarded until EOF or the deadline.
    [[nodiscard]] bool lingering() const noexcept {
        return clock.phase() == DeadlineClock<Cell>::Phase::lingering;
    }
    // Reading is paused because the client does not take its responses.
    [[nodiscard]] bool blocked() const noexcept {
        return clock.phase() == DeadlineClock<Cell>::Phase::blocked;
    }

    // Held only while a request is in progress (session_slot.hpp).
    SessionSlot session;
    // The session ended (Connection: close, an error, HTTP/1.0): what follows
    // is not answered, and the connection ends once its output is written.
    bool want_close = false;
    // The client shut down its side (a read returned 0): no lingering close.
    bool peer_closed = false;
    DeadlineClock<Cell> clock;
};

// The output is written: does the connection end now? Only with nothing
// owed (no response waiting for a job or for room), and when the session
// ended, the client closed its side, or the server stops (`stopping`) with
// no request in progress. Then the model finishes it: start_linger, or close.
template <typename State>
[[nodiscard]] bool ending(const State& c, bool stopping) noexcept {
    return !c.session.owes() && (c.want_close || c.peer_closed || (stopping && c.session.idle()));
}

// Everything owed to the client is written: the lingering close starts on
// `socket` (its sending side shut down, platform.hpp); the model then puts
// it on c's clock (DeadlineClock::linger, or Deadlines::linger). False:
// close at once instead (no lingering configured, the client closed its
// side already, or it is gone).
template <typename State>
[[nodiscard]] bool shut_for_linger(const State& c, NativeHandle socket,
                                   const ServerOptions& o) noexcept {
    return !c.peer_closed && start_lingering_close(socket, o.linger_timeout);
}

// --header-timeout passed for c's head. A client whose responses are still
// queued is not reading: it gets no 408, and false says close it now.
// Otherwise the session's 408 (with "Connection: close") is appended to
// `out` and c wants to close: the model sends it, then finishes c.
template <typename State>
[[nodiscard]] bool answer_late_head(State& c, bool output_queued, http::ByteBuffer& out) noexcept {
    if (output_queued) return false;
    c.session.expire_head(out);
    c.want_close = true;
    return true;
}

}  // namespace sm::runtime
