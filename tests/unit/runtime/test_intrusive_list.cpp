// runtime::IntrusiveList: the list threaded through its elements that the
// models queue connections on. Every check reads the order back through the
// list itself (for_each, front, pop_front) and the hooks' linked() state.
#include <catch2/catch.hpp>

#include <vector>

#include "runtime/intrusive_list.hpp"

using sm::runtime::IntrusiveList;
using sm::runtime::ListHook;

namespace {

struct Item {
    explicit Item(int v) : value(v) {}
    int value;
    ListHook hook;
    ListHook other;  // a second list the same item can be on
};

using List = IntrusiveList<Item, &Item::hook>;
using OtherList = IntrusiveList<Item, &Item::other>;

template <typename L>
std::vector<int> values(L& l) {
    std::vector<int> out;
    l.for_each([&](Item& i) { out.push_back(i.value); });
    return out;
}

}  // namespace

TEST_CASE("intrusive_list starts empty", "[intrusive_list]") {
    List l;
    CHECK(l.empty());
    CHECK(l.pop_front() == nullptr);
    CHECK(values(l).empty());
}

TEST_CASE("intrusive_list push_back appends and for_each visits front to back",
          "[intrusive_list]") {
    Item a(1), b(2), c(3);
    List l;
    l.push_back(a);
    l.push_back(b);
    l.push_back(c);
    CHECK_FALSE(l.empty());
    CHECK(values(l) == std::vector{1, 2, 3});
    CHECK(&l.front() == &a);
    CHECK(a.hook.linked());
    CHECK(c.hook.linked());
}

TEST_CASE("intrusive_list pop_front takes the elements in order and unlinks them",
          "[intrusive_list]") {
    Item a(1), b(2);
    List l;
    l.push_back(a);
    l.push_back(b);
    CHECK(l.pop_front() == &a);
    CHECK_FALSE(a.hook.linked());
    CHECK(&l.front() == &b);
    CHECK(l.pop_front() == &b);
    CHECK(l.empty());
    CHECK(l.pop_front() == nullptr);
}

TEST_CASE("intrusive_list remove unlinks from the front, the middle and the back",
          "[intrusive_list]") {
    Item a(1), b(2), c(3), d(4);
    List l;
    for (Item* i : {&a, &b, &c, &d})
        l.push_back(*i);

    List::remove(b);  // the middle: its neighbours are joined
    CHECK_FALSE(b.hook.linked());
    CHECK(values(l) == std::vector{1, 3, 4});
    List::remove(a);  // the front
    CHECK(&l.front() == &c);
    CHECK(values(l) == std::vector{3, 4});
    List::remove(d);  // the back: a push_back after it must follow c
    CHECK(values(l) == std::vector{3});
    l.push_back(b);
    CHECK(values(l) == std::vector{3, 2});
}

TEST_CASE("intrusive_list remove of an unlinked element is a no-op", "[intrusive_list]") {
    Item a(1), b(2), loose(9);
    List l;
    l.push_back(a);
    l.push_back(b);
    List::remove(loose);  // never linked
    CHECK(values(l) == std::vector{1, 2});
    List::remove(a);
    List::remove(a);  // already removed: must not touch b's links again
    CHECK(values(l) == std::vector{2});
    CHECK(&l.front() == &b);
}

TEST_CASE("intrusive_list an element removed can be pushed again", "[intrusive_list]") {
    // The models move a connection to the back of its list on every touch.
    Item a(1), b(2), c(3);
    List l;
    for (Item* i : {&a, &b, &c})
        l.push_back(*i);
    List::remove(a);
    l.push_back(a);
    CHECK(values(l) == std::vector{2, 3, 1});
}

TEST_CASE("intrusive_list splice_into appends in order and empties the source",
          "[intrusive_list]") {
    Item a(1), b(2), c(3), x(10);
    List from, to;
    to.push_back(x);
    from.push_back(a);
    from.push_back(b);
    from.push_back(c);
    from.splice_into(to);
    CHECK(from.empty());
    CHECK(values(to) == std::vector{10, 1, 2, 3});
    CHECK(&to.front() == &x);
}

TEST_CASE("intrusive_list splice_into an empty list keeps order", "[intrusive_list]") {
    Item a(1), b(2);
    List from, to;
    from.push_back(a);
    from.push_back(b);
    from.splice_into(to);
    CHECK(values(to) == std::vector{1, 2});
    // The source is usable again.
    Item c(3);
    from.push_back(c);
    CHECK(values(from) == std::vector{3});
}

TEST_CASE("intrusive_list one element on two lists through two hooks", "[intrusive_list]") {
    // A connection is on its idle and head lists at once (deadlines.hpp).
    Item a(1), b(2);
    List l;
    OtherList o;
    l.push_back(a);
    l.push_back(b);
    o.push_back(b);
    o.push_back(a);
    List::remove(a);
    CHECK(values(l) == std::vector{2});
    CHECK(values(o) == std::vector{2, 1});
    CHECK(a.other.linked());
}

TEST_CASE("intrusive_list front of a const list hands out the element", "[intrusive_list]") {
    Item a(1);
    List l;
    l.push_back(a);
    const List& cl = l;
    cl.front().value = 5;
    CHECK(a.value == 5);
}

TEST_CASE("intrusive_list push_back_once appends an item once, and it keeps its place",
          "[intrusive_list]") {
    Item a(1), b(2);
    List l;
    l.push_back_once(a);
    l.push_back_once(b);
    l.push_back_once(a);  // already on the list: not moved to the back, not linked twice
    CHECK(values(l) == std::vector<int>{1, 2});
    CHECK(l.pop_front() == &a);
    CHECK_FALSE(a.hook.linked());
    l.push_back_once(a);  // off the list again: appended
    CHECK(values(l) == std::vector<int>{2, 1});
}
