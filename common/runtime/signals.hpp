// Stop signals (POSIX): SIGINT and SIGTERM are blocked in every thread and
// taken synchronously by the main thread; SIGPIPE is ignored so a write to a
// reset connection returns EPIPE instead of killing the server.
#pragma once

namespace sm::runtime {

// Call before starting threads: they inherit the mask.
void block_stop_signals();

// Waits for SIGINT or SIGTERM and returns its number.
int wait_for_stop_signal();

// Asks this process to stop as if SIGTERM had arrived (used by a failing thread).
void request_stop_from_thread() noexcept;

}  // namespace sm::runtime
