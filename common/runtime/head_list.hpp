// --header-timeout for the models that keep their deadlines in intrusive
// lists (server-epoll, server-libuv, server-uring): the connections inside a
// request head, oldest head first. Every head gets the same timeout, so the
// list stays sorted by deadline and its front is the next to expire.
#pragma once

#include "http/session.hpp"
#include "runtime/intrusive_list.hpp"

namespace sm::runtime {

// After each feed of `c` (which has `session`, `head` (an http::HeadMark) and
// `head_deadline`): keeps it in `heads` exactly while its session is inside a
// request head. When that head is new, its deadline is `deadline` and it
// goes to the back; returns true then. A head's deadline is never moved by
// the bytes that follow: trickling cannot extend it (slowloris).
template <typename Conn, ListHook Conn::*Hook, typename Time>
bool track_head(IntrusiveList<Conn, Hook>& heads, Conn& c, Time deadline) noexcept {
    using List = IntrusiveList<Conn, Hook>;
    if (!c.session.in_head()) {
        List::remove(c);
        return false;
    }
    if (!c.head.is_new(c.session, (c.*Hook).linked())) return false;
    List::remove(c);
    c.head_deadline = deadline;
    heads.push_back(c);
    return true;
}

}  // namespace sm::runtime
