// A bounded multi-producer multi-consumer queue of pointers: a mutex and two
// condition variables, like Java's ArrayBlockingQueue. server-threadpool
// hands ready connections from its reactor to its workers through it (that
// hand-off is the model's cost, and what it is there to show); it sits here
// so that it is tested on its own.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace sm::runtime {

template <typename T>
class HandOffQueue {
  public:
    explicit HandOffQueue(std::size_t capacity) : ring_(capacity) {}

    // Hands over a batch in order, waiting for room when full (back-pressure:
    // the producer stops taking work, the kernel keeps the rest). One lock for
    // the batch. Returns how many times it had to wait.
    std::size_t push(T* const* items, std::size_t n) {
        std::size_t waits = 0;
        std::size_t i = 0;
        std::unique_lock lock(mutex_);
        while (i < n) {
            while (count_ == ring_.size()) {
                ++waits;
                not_full_.wait(lock);
            }
            const std::size_t k = std::min(ring_.size() - count_, n - i);
            for (std::size_t j = 0; j < k; ++j)
                ring_[(head_ + count_ + j) % ring_.size()] = items[i + j];
            count_ += k;
            i += k;
            if (k == 1)
                not_empty_.notify_one();
            else
                not_empty_.notify_all();
        }
        return waits;
    }

    // The next item, waiting for one; nullptr once closed and drained.
    T* pop() {
        std::unique_lock lock(mutex_);
        not_empty_.wait(lock, [this] { return count_ != 0 || closed_; });
        if (count_ == 0) return nullptr;
        T* item = ring_[head_];
        head_ = (head_ + 1) % ring_.size();
        --count_;
        not_full_.notify_one();
        return item;
    }

    // Wakes every consumer; pop() returns nullptr once the queue is drained.
    void close() {
        {
            const std::lock_guard lock(mutex_);
            closed_ = true;
        }
        not_empty_.notify_all();
    }

  private:
    std::mutex mutex_;
    std::condition_variable not_empty_;
    std::condition_variable not_full_;
    std::vector<T*> ring_;  // fixed capacity: no allocation per hand-off
    std::size_t head_ = 0;
    std::size_t count_ = 0;
    bool closed_ = false;
};

}  // namespace sm::runtime
