// The POSIX platform's types (see runtime/platform.hpp): a file descriptor
// for sockets and the stop signal's eventfd alike, pthreads.
#pragma once

#include <pthread.h>

namespace sm::runtime {

using NativeHandle = int;
inline constexpr NativeHandle kNoHandle = -1;
using NativeThread = pthread_t;

}  // namespace sm::runtime
