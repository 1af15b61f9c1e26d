// A doubly linked list threaded through its elements: O(1) push, pop and
// removal from the middle, no allocation. Models use it for per-thread queues
// of connections (ready to continue, lingering until a deadline). A queue whose
// entries all get the same timeout stays sorted by deadline when appended to,
// so its front is always the next to expire: no timer heap needed.
#pragma once

#include <cassert>

namespace sm::runtime {

struct ListHook {
    ListHook* prev = nullptr;
    ListHook* next = nullptr;
    void* owner = nullptr;  // the element this hook is part of
    [[nodiscard]] bool linked() const noexcept { return prev != nullptr; }
};

template <typename T, ListHook T::*Hook>
class IntrusiveList {
  public:
    IntrusiveList() noexcept { head_.prev = head_.next = &head_; }
    IntrusiveList(const IntrusiveList&) = delete;
    IntrusiveList& operator=(const IntrusiveList&) = delete;

    [[nodiscard]] bool empty() const noexcept { return head_.next == &head_; }

    void push_back(T& item) noexcept {
        ListHook& h = item.*Hook;
        assert(!h.linked());
        h.owner = &item;
        h.prev = head_.prev;
        h.next = &head_;
        head_.prev->next = &h;
        head_.prev = &h;
    }

    // Appends item unless it is on the list already (then it keeps its place):
    // marking a connection for a look after the batch, however often.
    void push_back_once(T& item) noexcept {
        if (!(item.*Hook).linked()) push_back(item);
    }

    static void remove(T& item) noexcept {
        ListHook& h = item.*Hook;
        if (!h.linked()) return;
        h.prev->next = h.next;
        h.next->prev = h.prev;
        h.prev = h.next = nullptr;
    }

    // The list links its elements, it does not own them: a const list
    // still hands out its elements for change.
    T& front() const noexcept {
        assert(!empty());
        return owner(head_.next);
    }

    T* pop_front() noexcept {
        if (empty()) return nullptr;
        T& item = front();
        remove(item);
        return &item;
    }

    // Calls f(T&) for each element, front to back. f must not unlink the
    // element it is given.
    template <typename F>
    void for_each(F&& f) {
        for (ListHook* h = head_.next; h != &head_; h = h->next)
            f(owner(h));
    }

    // Moves every element to `to` (appending), leaving this list empty.
    void splice_into(IntrusiveList& to) noexcept {
        while (T* item = pop_front())
            to.push_back(*item);
    }

  private:
    static T& owner(ListHook* h) noexcept { return *static_cast<T*>(h->owner); }

    ListHook head_;
};

}  // namespace sm::runtime
