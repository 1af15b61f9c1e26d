// What both fuzz harnesses give the session: one response cache and small
// limits, so that 413, 414 and 431 are reached by short inputs.
#pragma once

#include "http/limits.hpp"
#include "http/response.hpp"

namespace sm::fuzz {

inline const http::ResponseCache& cache() {
    static const http::ResponseCache c(http::ResponseMode::composed, 1'700'000'000);
    return c;
}

// The same with the workloads on: /db, /queries and /fortunes become jobs.
inline const http::ResponseCache& cache_with_database() {
    static const http::ResponseCache c(http::ResponseMode::composed, 1'700'000'000,
                                       {true, http::FortuneSource::database});
    return c;
}

inline http::Limits limits() {
    http::Limits l;
    l.max_head_bytes = 512;
    l.max_uri_bytes = 128;
    l.max_header_count = 8;
    l.max_body_bytes = 256;
    return l;
}

}  // namespace sm::fuzz
