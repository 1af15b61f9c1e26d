// What every model does when a request head misses --header-timeout (the
// deadline itself lives in deadlines.hpp or shared_deadlines.hpp): the one
// rule, so that no model spells it out again.
#pragma once

#include "http/byte_buffer.hpp"

namespace sm::runtime {

// --header-timeout passed for c's head. A client whose responses are still
// queued is not reading: it gets no 408, and false says close it now.
// Otherwise the session's 408 (with "Connection: close") is appended to
// `out` and c wants to close: the model sends it, then finishes c. For
// every model whose connection has a session and a want_close flag.
template <typename Conn>
[[nodiscard]] bool answer_late_head(Conn& c, bool output_queued, http::ByteBuffer& out) noexcept {
    if (output_queued) return false;
    c.session.expire_head(out);
    c.want_close = true;
    return true;
}

}  // namespace sm::runtime
