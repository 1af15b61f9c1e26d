#include "runtime/accept_gate.hpp"

#include <fmt/core.h>

#include "runtime/tuning.hpp"

namespace sm::runtime {

bool AcceptGate::try_acquire(Clock::time_point now) {
    if (limit_.try_acquire()) return true;
    close_at_limit(now);
    return false;
}

void AcceptGate::close_at_limit(Clock::time_point now) {
    if (shut_) return;
    retry_ = now + kLimitPause;
    if (at_limit()) return;
    closed_ = at_limit_ = true;
    limit_log_(now, [&] {
        return fmt::format("--max-connections {} reached: new connections wait in the backlog",
                           limit_.max());
    });
}

AcceptError AcceptGate::refused(int err, Clock::time_point now) {
    const AcceptError what = classify_accept_error(err);
    if (what == AcceptError::exhausted && !at_limit()) pause(err, now);
    if (what == AcceptError::unknown && !shut_) {
        unknown_log_(now, [&] {
            return fmt::format(
                "accept: {}; unexpected error, skipped: accepting goes on "
                "({} connections open)",
                error_text(err), limit_.open());
        });
    }
    return what;
}

void AcceptGate::pause(int err, Clock::time_point now) {
    if (shut_) return;
    closed_ = true;
    at_limit_ = false;
    retry_ = now + kAcceptPause;
    exhausted_log_(now, [&] {
        return fmt::format("accept: {}; pausing accepts for {} ms ({} connections open)",
                           error_text(err), kAcceptPause.count(), limit_.open());
    });
}

}  // namespace sm::runtime
