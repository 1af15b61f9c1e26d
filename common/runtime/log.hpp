// Diagnostics on stderr, prefixed with the program name ("server-epoll: ...").
#pragma once

#include <chrono>
#include <string_view>

namespace sm::runtime {

void set_program_name(std::string_view name);
void log(std::string_view message);

// Lets a message through at most once per interval: an error that repeats
// per connection (EMFILE under fd exhaustion) must not flood the log or burn
// the core that writes it.
class RateLimit {
  public:
    explicit RateLimit(std::chrono::steady_clock::duration interval = std::chrono::seconds(1))
        : interval_(interval) {}
    // True when a message may be logged now; counts the ones suppressed.
    // The first message always may, however near the clock's epoch `now` is.
    bool allow(std::chrono::steady_clock::time_point now) noexcept {
        if (allowed_any_ && now - last_ < interval_) {
            ++suppressed_;
            return false;
        }
        allowed_any_ = true;
        last_ = now;
        return true;
    }
    // Suppressed since the last allowed message; resets the count.
    unsigned long take_suppressed() noexcept {
        const unsigned long n = suppressed_;
        suppressed_ = 0;
        return n;
    }

  private:
    std::chrono::steady_clock::duration interval_;
    std::chrono::steady_clock::time_point last_{};
    bool allowed_any_ = false;
    unsigned long suppressed_ = 0;
};

// A line that may repeat per connection or per batch, logged through a
// RateLimit in the one format every model uses:
//   "<message> (<n> more like this)"   when n were suppressed since the last.
// `make` builds the message only when it is let through.
class RateLimitedLog {
  public:
    template <typename Make>
    void operator()(std::chrono::steady_clock::time_point now, Make&& make) {
        if (limit_.allow(now)) emit(make(), limit_.take_suppressed());
    }

  private:
    static void emit(std::string_view message, unsigned long suppressed);
    RateLimit limit_;
};

}  // namespace sm::runtime
