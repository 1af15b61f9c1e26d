// SM_TSAN is defined when this translation unit is built with
// ThreadSanitizer (g++ says so with __SANITIZE_THREAD__, clang with
// __has_feature), for the hooks TSan reads at start-up.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SM_TSAN 1
#endif
#endif
