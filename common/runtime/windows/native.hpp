// The Windows platform's types (see runtime/platform.hpp): a SOCKET (or,
// for the stop signal, an event HANDLE) held as an integer of its width, so
// that this header needs no <winsock2.h>; Win32 threads.
#pragma once

#include <cstdint>

namespace sm::runtime {

using NativeHandle = std::uintptr_t;                          // SOCKET, HANDLE
inline constexpr NativeHandle kNoHandle = ~NativeHandle{0};  // INVALID_SOCKET
using NativeThread = void*;                                   // HANDLE

}  // namespace sm::runtime
