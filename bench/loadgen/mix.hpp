// The requests of a run rendered once, before the load, for every thread to
// send from: nothing is rendered or copied per request. With a mix of U
// requests and --pipeline D, the mix is laid out U + D - 1 requests long
// (request k is request k mod U), so that any batch of up to D consecutive
// requests of the mix, from any first one, is one contiguous slice. One URL
// (U = 1): D copies of the request back to back, a batch of n its first n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config.hpp"

namespace sm::loadgen {

class RequestMix {
  public:
    explicit RequestMix(const Config& config);

    // U: the requests of the mix.
    [[nodiscard]] std::size_t size() const noexcept { return head_.size(); }
    // The bytes of requests first, first + 1, ... (mod U), n of them:
    // first < size(), 1 <= n <= the pipeline depth.
    [[nodiscard]] std::string_view batch(std::size_t first, std::uint32_t n) const noexcept {
        return std::string_view(bytes_).substr(offsets_[first],
                                               offsets_[first + n] - offsets_[first]);
    }
    // Whether request u is a HEAD (its response has no body).
    [[nodiscard]] bool head(std::size_t u) const noexcept { return head_[u] != 0; }
    // Some requests are HEAD and some are not: the framer must be told per response.
    [[nodiscard]] bool mixed_head() const noexcept { return mixed_head_; }
    [[nodiscard]] bool all_head() const noexcept { return all_head_; }

  private:
    std::string bytes_;
    std::vector<std::size_t>
        offsets_;  // U + D entries: where each laid-out request starts, and the end
    std::vector<std::uint8_t> head_;
    bool mixed_head_ = false;
    bool all_head_ = false;
};

}  // namespace sm::loadgen
