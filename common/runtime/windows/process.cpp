// The Windows side of runtime/platform.hpp: console control events as the
// stop request, the stop event, error codes, the lingering close.
//
// Windows has no SIGTERM. What asks a console program to stop is a console
// control event: Ctrl-C (CTRL_C_EVENT), Ctrl-Break (CTRL_BREAK_EVENT, which
// GenerateConsoleCtrlEvent can send to a process group), closing its console
// window (CTRL_CLOSE_EVENT) and logoff or shutdown (services only). Each is
// delivered on a thread the system starts for it; the handler sets one
// event that wait_for_stop() waits on, so the stop goes the same way as a
// signal does on POSIX. After a close, logoff or shutdown event Windows ends
// the process as soon as the handler returns (and at most 5 s later, say the
// docs), so the handler holds that thread until the process exits by itself.
// Under Wine, SIGINT to the process arrives as CTRL_C_EVENT.
#include <atomic>
#include <cstdio>
#include <string>
#include <system_error>

#include <fmt/core.h>

#include "runtime/windows/winsock.hpp"

namespace sm::runtime {
namespace {

HANDLE stop_requested = nullptr;  // manual-reset: set once, never reset
std::atomic<DWORD> stop_event{~DWORD{0}};

BOOL WINAPI on_console_event(DWORD type) {
    stop_event.store(type, std::memory_order_release);
    ::SetEvent(stop_requested);
    if (type == CTRL_C_EVENT || type == CTRL_BREAK_EVENT) return TRUE;
    // Close, logoff, shutdown: returning ends the process at once. Wait here
    // for the graceful stop instead (the process exits while we sleep).
    ::Sleep(INFINITE);
    return TRUE;
}

HANDLE make_event() {
    HANDLE h = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);
    if (h == nullptr) throw std::system_error(static_cast<int>(::GetLastError()),
                                              std::system_category(), "CreateEvent");
    return h;
}

}  // namespace

StopSignal::StopSignal() : h_(reinterpret_cast<NativeHandle>(make_event())) {}

StopSignal::~StopSignal() {
    ::CloseHandle(as_handle(h_));
}

void StopSignal::request() noexcept {
    requested_.store(true, std::memory_order_release);
    ::SetEvent(as_handle(h_));
}

void prepare_process() {
    start_winsock();
    stop_requested = make_event();
    if (!::SetConsoleCtrlHandler(on_console_event, TRUE))
        throw std::system_error(static_cast<int>(::GetLastError()), std::system_category(),
                                "SetConsoleCtrlHandler");
    // A crash must not wait for a dialog box nobody will click.
    ::SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
}

std::string_view wait_for_stop() {
    if (::WaitForSingleObject(stop_requested, INFINITE) != WAIT_OBJECT_0)
        throw std::system_error(static_cast<int>(::GetLastError()), std::system_category(),
                                "WaitForSingleObject");
    switch (stop_event.load(std::memory_order_acquire)) {
        case CTRL_C_EVENT: return "CTRL_C_EVENT";
        case CTRL_BREAK_EVENT: return "CTRL_BREAK_EVENT";
        case CTRL_CLOSE_EVENT: return "CTRL_CLOSE_EVENT";
        case CTRL_LOGOFF_EVENT: return "CTRL_LOGOFF_EVENT";
        case CTRL_SHUTDOWN_EVENT: return "CTRL_SHUTDOWN_EVENT";
        default: return "a failing thread";
    }
}

void request_stop_from_thread() noexcept {
    if (stop_requested != nullptr) ::SetEvent(stop_requested);
}

AcceptError classify_accept_error(int err) noexcept {
    // AcceptEx reports a failed completion as a WSA error (WSAGetOverlappedResult)
    // or, read from the port, as the Win32 error of its NTSTATUS: both are listed.
    switch (err) {
        case WSAEWOULDBLOCK: return AcceptError::again;
        // One connection's failure, not the listener's: the next may be queued.
        case WSAEINTR:
        case WSAECONNRESET:          // the client gave up while queued (AcceptEx says so)
        case ERROR_NETNAME_DELETED:  // the same, as a completion's Win32 error
        case WSAECONNABORTED:
        case ERROR_CONNECTION_ABORTED:
        case WSAENOTCONN:  // Wine: the connection was reset before AcceptEx took its address
        case ERROR_CONNECTION_INVALID:  // the same, as a Win32 error
        case ERROR_OPERATION_ABORTED:   // our CancelIoEx (at the limit, stopping)
        case WSAEACCES:                 // Wine: accept() refused by a firewall rule (EPERM)
        // A network error pending on the connection, as POSIX's list.
        case WSAENETDOWN:
        case WSAENETUNREACH:
        case ERROR_NETWORK_UNREACHABLE:
        case WSAEHOSTUNREACH:
        case ERROR_HOST_UNREACHABLE:
        case WSAEHOSTDOWN:
        case WSAENETRESET:
        case WSAETIMEDOUT:
        case ERROR_SEM_TIMEOUT:  // a timeout's Win32 error
            return AcceptError::skip;
        case WSAEMFILE:  // out of socket handles
        case ERROR_TOO_MANY_OPEN_FILES:
        case WSAENOBUFS:               // out of buffer space
        case ERROR_NOT_ENOUGH_MEMORY:  // also WSA_NOT_ENOUGH_MEMORY
        case ERROR_OUTOFMEMORY:
        case ERROR_NO_SYSTEM_RESOURCES:  // the kernel's pools
        case ERROR_NONPAGED_SYSTEM_RESOURCES:
        case ERROR_PAGED_SYSTEM_RESOURCES:
        case ERROR_NOT_ENOUGH_QUOTA:
        case ERROR_COMMITMENT_LIMIT: return AcceptError::exhausted;
        default:  // WSAEINVAL, WSAENOTSOCK, WSAEFAULT: not a client's doing, nor a shortage
            return AcceptError::unknown;
    }
}

std::string error_text(int err) {
    char* text = nullptr;
    const DWORD n = ::FormatMessageA(
        FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
        nullptr, static_cast<DWORD>(err), 0, reinterpret_cast<char*>(&text), 0, nullptr);
    std::string out(text != nullptr ? text : "", n);
    if (text != nullptr) ::LocalFree(text);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ' ||
                            out.back() == '.'))
        out.pop_back();
    if (out.empty()) out = "unknown error";
    return fmt::format("{} (error {})", out, err);
}

bool start_lingering_close(NativeHandle socket, std::chrono::milliseconds timeout) noexcept {
    return timeout.count() != 0 && ::shutdown(as_socket(socket), SD_SEND) == 0;
}

std::size_t unsent_output(NativeHandle) noexcept {
    // SIO_TCP_INFO (Windows 10 1703 and later) would say; Wine does not
    // implement it, so untested here: none.
    return 0;
}

}  // namespace sm::runtime
