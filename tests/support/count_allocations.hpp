// Counts the program's C++ heap allocations: replaces the global operator
// new and delete (so include it in exactly one file of a test binary, one
// of its own: the replacement is the whole program's). Not under
// sanitizers, whose runtimes own the allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace sm::test {
// operator new calls so far.
inline std::atomic<std::size_t> g_allocations{0};
}  // namespace sm::test

// Counting replacements; GCC warns that free() gets a pointer from operator
// new once it inlines them, which is exactly what this pair does.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
    sm::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
    return operator new(n);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
