// The clock of every deadline, pause and rate limit in the runtime: steady,
// so a wall-clock step cannot fire or stall a timeout.
#pragma once

#include <chrono>

namespace sm::runtime {

using Clock = std::chrono::steady_clock;

}  // namespace sm::runtime
