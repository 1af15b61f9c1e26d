// What the Windows side of the runtime and server-iocp share: the Winsock
// headers in the order they need (winsock2.h before windows.h), Winsock
// started once per process, and conversions between the NativeHandle of
// runtime/platform.hpp and SOCKET/HANDLE.
#pragma once

// clang-format off
#include <winsock2.h>
#include <ws2tcpip.h>
#include <mswsock.h>
#include <windows.h>
// clang-format on

#include "runtime/platform.hpp"

namespace sm::runtime {

// WSAStartup, once per process (idempotent, thread-safe); throws
// std::system_error when Winsock cannot start.
void start_winsock();

inline SOCKET as_socket(NativeHandle h) noexcept {
    return static_cast<SOCKET>(h);
}
inline HANDLE as_handle(NativeHandle h) noexcept {
    return reinterpret_cast<HANDLE>(h);
}

}  // namespace sm::runtime
