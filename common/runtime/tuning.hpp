// Sizes and pauses the event-driven models share: one copy, so a model
// compared with another differs in how its bytes move, not in its batch
// sizes. A model that departs from one says why beside its own constant
// (server-blocking's smaller read buffer, say).
#pragma once

#include <chrono>
#include <cstddef>

namespace sm::runtime {

// A read of 64 KiB holds hundreds of pipelined requests; a batch rarely
// fills it (libuv suggests the same size per read).
inline constexpr std::size_t kReadSize = 64 * 1024;
// Room for the response that crosses a connection's output mark
// (--output-mark): the suite's responses are 130 bytes to 1.3 KiB, but for
// /queries with more than ~100 rows (which then grows the buffer once). A
// buffer that may hold a mark's worth is reserved at the mark and this, at
// once, instead of grown by doubling through every size on the way (each
// size left behind, resident, in the allocator, and the last one twice the
// mark): a client that pipelined without reading cost server-blocking
// 86 KiB of memory instead of 52.
inline constexpr std::size_t kResponseSlack = 4 * 1024;
// What an idle connection gives back, a thread keeps for the next requests:
// this many sessions (session_slot.hpp) and output buffers (send_buffers.hpp,
// the completion models). More than a thread has requests in progress at
// once under a benchmark's load (64-512 connections, most of them between
// requests at any moment), so none is allocated per request; after a burst
// of more, the rest are freed (some 120 KiB of sessions kept, and 128 KiB of
// output buffers of the usual size).
inline constexpr std::size_t kSparesKept = 256;
// Connections accepted per listener wake-up before serving the others.
inline constexpr int kAcceptBatch = 64;
// Full reads (kReadSize each) one connection may do in one turn before it
// yields to the others and continues in a later one: 1 MiB, a few thousand
// pipelined requests, so a client that never stops sending cannot starve
// the rest of its thread.
inline constexpr int kReadsPerTurn = 16;
// Reads a lingering connection (input discarded) may do in one turn: what it
// sends is worth nothing to us, so it gets less than a serving turn.
inline constexpr int kLingerReadsPerTurn = 4;
// Events taken per epoll_wait: a benchmark keeps 64-512 connections per
// thread, so one wait usually takes every ready one (the rest come with the
// next wait, which costs a syscall, not fairness: the list is level-ordered
// by the kernel).
inline constexpr int kMaxEvents = 256;
// How long accepting pauses after EMFILE/ENFILE (or another accept error
// that more accepting cannot fix): long enough not to spin, short enough
// that service resumes promptly once descriptors free up.
inline constexpr std::chrono::milliseconds kAcceptPause{100};
// At --max-connections a slot freed by another thread is noticed this fast.
inline constexpr std::chrono::milliseconds kLimitPause{10};
// How often a thread that waits on other threads (for a free one, or, while
// stopping, for the others to finish) looks again whether it should stop or
// is done: a stop request from a signal handler wakes no condition variable.
inline constexpr std::chrono::milliseconds kStopPoll{20};
// The longest one wait for events (epoll_wait, GetQueuedCompletionStatusEx)
// is given when the next deadline is further away: a minute, after which the
// loop works the deadline out again.
inline constexpr std::chrono::milliseconds kMaxWait{60'000};

}  // namespace sm::runtime
