// The provided-buffer ring of server-uring and floor-uring (common/uring,
// ProvidedBuffers): it starts with kFirstBuffers buffers and grows, whole
// and resident, each time it runs dry. What a test sees of it: the
// process's RSS after bursts of connections that all send at once.
#pragma once

#include <cstddef>
#include <string>

#include "support/server_process.hpp"

namespace sm::test {

// Buffers the ring starts with, and each one's size (KiB): uring/ring.hpp's
// kFirstBuffers and uring/server_shape.hpp's kBufferSize.
inline constexpr std::size_t kFirstRingBuffers = 32;
inline constexpr std::size_t kRingBufferKiB = 8;

struct RingGrowth {
    std::size_t at_rest_kib = 0;  // RSS after one answered request (the ring set up)
    std::size_t loaded_kib = 0;   // RSS after the bursts
};

// Rounds of 256 connections to `server` that each send one GET `target` at
// once and read its answer (each must be 200, else std::runtime_error),
// until RSS has grown by kFirstRingBuffers buffers over its reading at rest
// (one burst normally does; up to five keep the result from depending on the
// scheduler's mood).
RingGrowth grow_ring(const ServerProcess& server, const std::string& target);

}  // namespace sm::test
