// A growable byte buffer for the hot path: append at the back, consume from the
// front, never shrink on its own. Once it has grown to a connection's or a
// thread's working size it stops allocating, so steady-state requests cost a
// memcpy and no allocation.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

namespace sm::http {

class ByteBuffer {
  public:
    ByteBuffer() = default;
    explicit ByteBuffer(std::size_t capacity) { reserve(capacity); }

    ByteBuffer(ByteBuffer&&) noexcept = default;
    ByteBuffer& operator=(ByteBuffer&&) noexcept = default;
    ByteBuffer(const ByteBuffer&) = delete;
    ByteBuffer& operator=(const ByteBuffer&) = delete;

    [[nodiscard]] const char* data() const noexcept { return buf_.get() + begin_; }
    [[nodiscard]] std::size_t size() const noexcept { return end_ - begin_; }
    [[nodiscard]] bool empty() const noexcept { return end_ == begin_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }
    [[nodiscard]] std::string_view view() const noexcept { return {data(), size()}; }
    [[nodiscard]] std::span<const char> readable() const noexcept { return {data(), size()}; }

    // Returns room for at least n bytes at the back; commit() what was written.
    char* prepare(std::size_t n) {
        if (cap_ - end_ < n) make_room(n);
        return buf_.get() + end_;
    }
    void commit(std::size_t n) noexcept { end_ += n; }

    void append(std::string_view s) {
        if (s.empty()) return;  // memcpy to or from a null pointer is UB, even for 0 bytes
        std::memcpy(prepare(s.size()), s.data(), s.size());
        end_ += s.size();
    }

    // Drops n bytes from the front.
    void consume(std::size_t n) noexcept {
        begin_ += n;
        if (begin_ >= end_) begin_ = end_ = 0;
    }
    void clear() noexcept { begin_ = end_ = 0; }

    void reserve(std::size_t capacity);
    // Frees the storage (for idle connections); the buffer must be empty.
    void release() noexcept;

  private:
    void make_room(std::size_t n);

    std::unique_ptr<char[]> buf_;
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
    std::size_t cap_ = 0;
};

}  // namespace sm::http
