#include "iocp.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "runtime/send_buffers.hpp"
#include "runtime/tuning.hpp"

namespace sm::iocp {
namespace {

// Bytes one WSARecv may take. A connection holds this buffer while it is
// open (the kernel writes into it while the recv is in flight); 8 KiB holds
// a 16-deep pipelined batch many times over and a typical request head whole.
constexpr std::size_t kRecvSize = 8 * 1024;
// AcceptEx calls thread 0 keeps posted: a burst of connections is taken
// without waiting for a re-post, each holding one unconnected socket.
constexpr std::size_t kAcceptsAhead = 16;
[[noreturn]] void throw_last_error(const char* what) {
    throw std::system_error(static_cast<int>(::GetLastError()), std::system_category(), what);
}

using runtime::output_of;
using runtime::trim;

// The Win32 error of a completed operation (0: it succeeded).
DWORD error_of(SOCKET s, OVERLAPPED* ov) noexcept {
    if (ov->Internal == 0) return 0;  // STATUS_SUCCESS
    DWORD bytes = 0;
    DWORD flags = 0;
    if (::WSAGetOverlappedResult(s, reinterpret_cast<WSAOVERLAPPED*>(ov), &bytes, FALSE, &flags))
        return 0;
    const int err = ::WSAGetLastError();
    return err == 0 ? ERROR_OPERATION_ABORTED : static_cast<DWORD>(err);
}

}  // namespace

Worker::Worker(const runtime::WorkerContext& ctx, std::span<const HANDLE> ports)
    : listener_(ctx.listener),
      accepting_(ctx.index == 0),
      ports_(ports),
      port_(ports[ctx.index]),
      cache_(ctx.options.mode, std::time(nullptr), ctx.options.workloads()),
      conns_(ctx, cache_),
      now_(Clock::now()) {
    if (!accepting_) return;
    const SOCKET l = runtime::as_socket(listener_.handle());
    if (::CreateIoCompletionPort(reinterpret_cast<HANDLE>(l), port_, kIoKey, 0) == nullptr)
        throw_last_error("CreateIoCompletionPort (listener)");
    GUID guid = WSAID_ACCEPTEX;
    DWORD bytes = 0;
    if (::WSAIoctl(l, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid, sizeof guid, &accept_ex_,
                   sizeof accept_ex_, &bytes, nullptr, nullptr) != 0)
        throw std::system_error(::WSAGetLastError(), std::system_category(), "AcceptEx lookup");
    // AcceptEx takes a socket of the listener's family: looked up once, not per accept.
    sockaddr_storage local{};
    int len = sizeof local;
    if (::getsockname(l, reinterpret_cast<sockaddr*>(&local), &len) != 0)
        throw std::system_error(::WSAGetLastError(), std::system_category(), "getsockname");
    listen_family_ = local.ss_family;
    for (std::size_t i = 0; i < kAcceptsAhead; ++i)
        slots_.push_back(std::make_unique<AcceptSlot>());
}

void Worker::run() {
    post_accepts();
    OVERLAPPED_ENTRY entries[runtime::kMaxEvents];
    // Returns with no operation in flight: every connection recycled, every
    // AcceptEx completed (or cancelled).
    while (!(conns_.finished() && inflight_ == 0)) {
        ULONG n = 0;
        if (!::GetQueuedCompletionStatusEx(port_, entries, runtime::kMaxEvents, &n,
                                           next_timeout_ms(), FALSE)) {
            if (::GetLastError() != WAIT_TIMEOUT) throw_last_error("GetQueuedCompletionStatusEx");
            n = 0;
        }
        now_ = Clock::now();
        // The Date line is re-rendered only when the second changes.
        cache_.refresh(std::time(nullptr));
        for (ULONG i = 0; i < n; ++i)
            dispatch(entries[i]);
        // Sends, finished connections, recv re-posts: after the whole batch,
        // so one connection's responses to all of it leave in one send.
        while (Connection* c = work_.pop_front())
            work(*c);
        conns_.expire(
            now_, [this](Connection& c) { close_now(c); },
            [this](Connection& c) { expire_head(c); });
        if (accepting_ && conns_.gate.reopen_due(now_)) resume_accepting();
    }
}

void Worker::dispatch(const OVERLAPPED_ENTRY& e) {
    if (e.lpCompletionKey == kStopKey) return begin_shutdown();
    if (e.lpCompletionKey == kAdoptKey)
        return adopt(static_cast<SOCKET>(reinterpret_cast<std::uintptr_t>(e.lpOverlapped)));
    if (e.lpCompletionKey == kAcceptKey) {
        accept_retry_posted_ = false;
        return post_accepts();
    }
    Op& op = *reinterpret_cast<Op*>(e.lpOverlapped);
    --inflight_;
    if (op.kind == Op::accept) {
        auto& slot = *reinterpret_cast<AcceptSlot*>(&op);
        return on_accept(slot, error_of(slot.socket, &op.ov));
    }
    Connection& c = *op.conn;
    const DWORD bytes = e.dwNumberOfBytesTransferred;
    const SOCKET s = c.socket;
    const DWORD error = s == INVALID_SOCKET ? ERROR_OPERATION_ABORTED : error_of(s, &op.ov);
    if (op.kind == Op::recv) return on_recv(c, bytes, error);
    on_send(c, bytes, error);
}

// --- Accepting (thread 0) ---------------------------------------------------------

void Worker::post_accepts() {
    // An AcceptEx that fails at once was given a connection already gone
    // (WSAECONNRESET), or an error the gate logged: it queues no completion,
    // so its slot is posted again, for the next connection. At most
    // kAcceptsAhead such failures per call, so that an error that repeats
    // cannot hold the thread; if they leave no AcceptEx posted, no
    // completion would call here again: the port is asked to, after the
    // completions it holds.
    std::size_t failures = 0;
    for (auto& slot : slots_) {
        while (slot->socket == INVALID_SOCKET) {
            if (!accepting_ || !listener_ || !conns_.gate.open()) return;
            if (failures == kAcceptsAhead) {
                if (accepts_posted_ == 0 && !accept_retry_posted_)
                    accept_retry_posted_ =
                        ::PostQueuedCompletionStatus(port_, 0, kAcceptKey, nullptr) != 0;
                return;
            }
            if (!post_accept(*slot)) ++failures;
        }
    }
}

bool Worker::post_accept(AcceptSlot& slot) {
    const SOCKET l = runtime::as_socket(listener_.handle());
    const SOCKET s = ::WSASocketW(listen_family_, SOCK_STREAM, IPPROTO_TCP, nullptr, 0,
                                  WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    if (s == INVALID_SOCKET) {
        // Out of handles or buffers (or no socket at all): nothing can be
        // posted before some time has passed. Accepting pauses (and that is logged).
        conns_.gate.pause(::WSAGetLastError(), now_);
        return false;
    }
    slot.socket = s;
    slot.op.ov = OVERLAPPED{};
    DWORD got = 0;
    constexpr DWORD kAddressSpace = sizeof(sockaddr_in6) + 16;
    if (!accept_ex_(l, s, slot.addresses, 0, kAddressSpace, kAddressSpace, &got, &slot.op.ov)) {
        const int err = ::WSAGetLastError();
        if (err != ERROR_IO_PENDING) {
            ::closesocket(s);
            slot.socket = INVALID_SOCKET;
            // Exhausted closes the gate; the rest is that connection's (or logged).
            conns_.gate.refused(err, now_);
            return false;
        }
    }
    // Even one that completes at once reports through the port.
    ++inflight_;
    ++accepts_posted_;
    return true;
}

void Worker::cancel_accepts() {
    if (accepts_posted_ == 0 || !listener_) return;
    // Each reports its own end (ERROR_OPERATION_ABORTED) through the port.
    ::CancelIoEx(reinterpret_cast<HANDLE>(runtime::as_socket(listener_.handle())), nullptr);
}

void Worker::on_accept(AcceptSlot& slot, DWORD error) {
    --accepts_posted_;
    const SOCKET s = std::exchange(slot.socket, INVALID_SOCKET);
    if (error != 0 || conns_.stopping()) {
        ::closesocket(s);
        // Cancelled by us (at the limit, stopping: ERROR_OPERATION_ABORTED),
        // the client is gone (skipped), out of resources (the gate pauses),
        // or an error the gate logs: only the pause keeps the slot empty.
        if (error != 0) conns_.gate.refused(static_cast<int>(error), now_);
        return post_accepts();
    }
    // The accepted socket takes the listener's properties (shutdown() and
    // getpeername() need it).
    const SOCKET l = runtime::as_socket(listener_.handle());
    ::setsockopt(s, SOL_SOCKET, SO_UPDATE_ACCEPT_CONTEXT, reinterpret_cast<const char*>(&l),
                 sizeof l);
    parked_.take(
        conns_.gate, s, now_, [this](SOCKET a) { assign(a); }, [this] { pause_at_limit(); });
    post_accepts();
}

void Worker::assign(SOCKET s) {
    const std::size_t to = next_thread_;
    next_thread_ = (next_thread_ + 1) % ports_.size();
    // Its completions go to that thread's port from now on; another thread
    // learns of it from the one completion posted to it here.
    if (::CreateIoCompletionPort(reinterpret_cast<HANDLE>(s), ports_[to], kIoKey, 0) == nullptr) {
        ::closesocket(s);
        return conns_.gate.release();
    }
    if (ports_[to] == port_) return adopt(s);
    if (!::PostQueuedCompletionStatus(ports_[to], 0, kAdoptKey,
                                      reinterpret_cast<OVERLAPPED*>(static_cast<std::uintptr_t>(s)))) {
        ::closesocket(s);
        conns_.gate.release();
    }
}

void Worker::adopt(SOCKET s) {
    // A slot was taken for it on thread 0 (which may be this one), and it is
    // associated with this thread's port.
    if (conns_.stopping()) {
        ::closesocket(s);
        return conns_.gate.release();
    }
    runtime::set_nodelay(static_cast<runtime::NativeHandle>(s));
    Connection& c = conns_.open(now_);
    c.socket = s;
    if (!c.in) c.in = std::make_unique_for_overwrite<char[]>(kRecvSize);
    post_recv(c);
}

void Worker::pause_at_limit() {
    conns_.gate.close_at_limit(now_);
    cancel_accepts();
}

void Worker::resume_accepting() {
    switch (parked_.resume(conns_.gate, now_, [this](SOCKET s) { assign(s); })) {
        case Parked::Resumed::waiting: return;
        case Parked::Resumed::at_limit: return pause_at_limit();
        case Parked::Resumed::reopened: return post_accepts();
    }
}

// --- Receiving and sending --------------------------------------------------------

void Worker::post_recv(Connection& c) {
    c.recv_op.ov = OVERLAPPED{};
    WSABUF buf{static_cast<ULONG>(kRecvSize), c.in.get()};
    DWORD flags = 0;
    if (::WSARecv(c.socket, &buf, 1, nullptr, &flags, &c.recv_op.ov, nullptr) != 0 &&
        ::WSAGetLastError() != WSA_IO_PENDING)
        return close_now(c);  // reset, or out of memory: nobody to answer
    // Even one that completes at once reports through the port.
    c.recv_posted = true;
    ++c.ops;
    ++inflight_;
}

void Worker::post_send(Connection& c) {
    c.send_op.ov = OVERLAPPED{};
    // WSASend only reads it; WSABUF has no const flavour.
    WSABUF buf{static_cast<ULONG>(c.sending.size()), const_cast<char*>(c.sending.data())};
    if (::WSASend(c.socket, &buf, 1, nullptr, 0, &c.send_op.ov, nullptr) != 0 &&
        ::WSAGetLastError() != WSA_IO_PENDING)
        return close_now(c);
    c.send_posted = true;
    ++c.ops;
    ++inflight_;
}

void Worker::on_recv(Connection& c, DWORD bytes, DWORD error) {
    c.recv_posted = false;
    if (op_done(c)) return;
    if (error != 0) return close_now(c);  // reset and friends: nobody to answer
    if (bytes == 0) {
        // EOF: answer what was received, then close (work() does, once the
        // output is sent). A lingering connection has seen what it waited for.
        c.peer_closed = true;
        if (c.lingering()) return close_now(c);
        return mark(c);
    }
    // Lingering, or after the session ended: input is discarded.
    if (!c.lingering() && !c.want_close) {
        conns_.deadlines.touch(c, now_);
        const auto r = c.session.feed({c.in.get(), bytes}, c.out,
                                      runtime::feed_limit(c, bytes, conns_.options().output_mark, spare_));
        conns_.deadlines.track_head(c, now_);
        if (r == http::Session::Result::close) c.want_close = true;  // what follows is not answered
    }
    mark(c);
}

void Worker::on_send(Connection& c, DWORD bytes, DWORD error) {
    c.send_posted = false;
    if (op_done(c)) return;
    if (error != 0) return close_now(c);  // reset: nobody to answer
    if (runtime::consume_sent(c, bytes)) conns_.deadlines.touch(c, now_);  // work() sends the rest
    mark(c);
}

void Worker::work(Connection& c) {
    if (c.closing) return;
    const bool receive = c.lingering() || runtime::settle_output(c, conns_.deadlines, now_, conns_.options().output_mark);
    if (!c.send_posted && !c.lingering()) {
        runtime::take_collected(c, spare_);
        // Closed by either (maybe recycled already: only `open` says so).
        if (!c.sending.empty()) {
            post_send(c);
            if (!c.open) return;
        } else if (conns_.ending(c)) {
            // Everything we owe the client is sent.
            finish(c);
            if (!c.open) return;
        }
    }
    if (runtime::wants_receive(c, c.recv_posted, receive)) post_recv(c);
}

// --- Closing ----------------------------------------------------------------------

void Worker::expire_head(Connection& c) {
    if (!runtime::answer_late_head(c, output_of(c) != 0 || c.send_posted, c.out))
        return close_now(c);
    work(c);  // sends the 408, then lingers
}

void Worker::finish(Connection& c) {
    if (!conns_.start_linger(c, static_cast<runtime::NativeHandle>(c.socket), now_)) close_now(c);
}

void Worker::close_now(Connection& c) {
    if (c.closing) return;
    c.closing = true;
    // Operations in flight end with ERROR_OPERATION_ABORTED; the object is
    // reused once the last one has reported (op_done). closesocket() alone
    // cancels them too, but a send stuck on a client that does not read
    // was seen (under Wine) never to report: cancelled explicitly first.
    const SOCKET s = std::exchange(c.socket, INVALID_SOCKET);
    if (c.ops != 0) ::CancelIoEx(reinterpret_cast<HANDLE>(s), nullptr);
    ::closesocket(s);
    WorkList::remove(c);
    conns_.closed(c);
    if (c.ops == 0) op_done(c);  // recycled now
}

bool Worker::op_done(Connection& c) noexcept {
    if (c.ops > 0) --c.ops;
    if (!c.closing) return false;
    if (c.ops != 0) return true;
    trim(c.out, runtime::kKeepCapacity);
    trim(c.sending, runtime::kKeepCapacity);
    c.recv_posted = c.send_posted = c.closing = false;
    conns_.recycle(c);
    return true;
}

void Worker::begin_shutdown() {
    if (accepting_) {
        // Pending AcceptEx calls end with ERROR_OPERATION_ABORTED; then new
        // connections are refused rather than queued.
        cancel_accepts();
        listener_.close();
        parked_.close_all([](SOCKET s) { ::closesocket(s); });
    }
    conns_.begin_shutdown(
        now_, [](const Connection& c) { return !c.send_posted && output_of(c) == 0; },
        [this](Connection& c) { close_now(c); });
}

DWORD Worker::next_timeout_ms() const {
    const Clock::time_point next = conns_.next_deadline();
    if (next == Clock::time_point::max()) return INFINITE;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return wait.count() <= 0 ? 0 : static_cast<DWORD>(std::min(wait, runtime::kMaxWait).count());
}

// --- The threads ------------------------------------------------------------------

void serve_threads(const runtime::WorkerContext& ctx) {
    const unsigned n = ctx.options.threads;
    struct Port {
        HANDLE h = nullptr;
        Port() : h(::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 1)) {
            if (h == nullptr) throw_last_error("CreateIoCompletionPort");
        }
        Port(const Port&) = delete;
        Port& operator=(const Port&) = delete;
        ~Port() {
            // A socket assigned to a thread that had stopped already.
            OVERLAPPED_ENTRY e[64];
            ULONG got = 0;
            while (::GetQueuedCompletionStatusEx(h, e, 64, &got, 0, FALSE) && got > 0)
                for (ULONG i = 0; i < got; ++i)
                    if (e[i].lpCompletionKey == Worker::kAdoptKey)
                        ::closesocket(static_cast<SOCKET>(
                            reinterpret_cast<std::uintptr_t>(e[i].lpOverlapped)));
            ::CloseHandle(h);
        }
    };
    std::vector<std::unique_ptr<Port>> owned;
    std::vector<HANDLE> ports;
    for (unsigned i = 0; i < n; ++i) {
        owned.push_back(std::make_unique<Port>());
        ports.push_back(owned.back()->h);
    }
    std::mutex failed_mutex;
    std::exception_ptr failed;
    {
        std::vector<std::jthread> threads;
        threads.reserve(n);
        for (unsigned i = 0; i < n; ++i) {
            threads.emplace_back([&, i] {
                try {
                    runtime::pin_worker_thread(ctx.options, i);
                    const runtime::WorkerContext mine{ctx.options, i, ctx.listener, ctx.stop,
                                                      ctx.connections};
                    Worker(mine, ports).run();
                } catch (...) {
                    const std::scoped_lock lock(failed_mutex);
                    if (!failed) failed = std::current_exception();
                    runtime::request_stop_from_thread();
                }
            });
        }
        // The workers wait on their ports, not on the stop event: one
        // completion on each port tells it.
        ::WaitForSingleObject(runtime::as_handle(ctx.stop.handle()), INFINITE);
        for (const HANDLE p : ports)
            ::PostQueuedCompletionStatus(p, 0, Worker::kStopKey, nullptr);
    }  // joins
    if (failed) std::rethrow_exception(failed);
}

}  // namespace sm::iocp

int main(int argc, char** argv) {
    using namespace sm;
    return runtime::serve({.name = "iocp",
                           .worker = &iocp::serve_threads,
                           .listeners = runtime::ListenerLayout::one},
                          argc, argv);
}
