// Request limits enforced by the session. Defaults sit in the range nginx,
// h2o, Node.js and Kestrel use (see docs/server.md, "Reliability").
#pragma once

#include <cstddef>
#include <cstdint>

namespace sm::http {

struct Limits {
    // Request line plus header lines, including their CRLFs (431 beyond).
    // Node.js: 16 KiB; Kestrel: 32 KiB; nginx: 4 x 8 KiB buffers.
    std::size_t max_head_bytes = 16 * 1024;
    // The request target (414 beyond). nginx and Kestrel: 8 KiB.
    std::size_t max_uri_bytes = 8 * 1024;
    // Header fields per request (431 beyond). Kestrel: 100.
    std::size_t max_header_count = 100;
    // Request body, read and discarded (413 beyond). nginx client_max_body_size: 1 MiB.
    std::uint64_t max_body_bytes = 1024 * 1024;
};

}  // namespace sm::http
