#include "http/byte_buffer.hpp"

#include <algorithm>
#include <cassert>

namespace sm::http {

void ByteBuffer::reserve(std::size_t capacity) {
    if (capacity <= cap_) return;
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
    const std::size_t used = size();
    if (used != 0) std::memcpy(bigger.get(), data(), used);
    buf_ = std::move(bigger);
    begin_ = 0;
    end_ = used;
    cap_ = capacity;
}

void ByteBuffer::release() noexcept {
    assert(empty());
    buf_.reset();
    begin_ = end_ = cap_ = 0;
}

void ByteBuffer::make_room(std::size_t n) {
    const std::size_t used = size();
    // Sliding the live bytes to the front is enough when the consumed prefix
    // makes the room; otherwise grow geometrically so appends stay amortised O(1).
    if (cap_ - used >= n && begin_ != 0) {
        std::memmove(buf_.get(), data(), used);
        begin_ = 0;
        end_ = used;
        return;
    }
    reserve(std::max({cap_ * 2, used + n, std::size_t{512}}));
}

}  // namespace sm::http
