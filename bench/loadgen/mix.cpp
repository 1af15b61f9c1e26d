#include "mix.hpp"

#include <algorithm>

namespace sm::loadgen {

RequestMix::RequestMix(const Config& config) {
    std::vector<std::string> one;
    if (config.requests.empty()) {
        one.push_back(render_request(config));
        head_.push_back(config.method == "HEAD" ? 1 : 0);
    }
    for (const Request& r : config.requests) {
        one.push_back(render_request(config, r));
        head_.push_back(r.method == "HEAD" ? 1 : 0);
    }
    const std::size_t laid_out = one.size() + std::max(config.pipeline, 1u) - 1;
    for (std::size_t k = 0; k < laid_out; ++k) {
        offsets_.push_back(bytes_.size());
        bytes_ += one[k % one.size()];
    }
    offsets_.push_back(bytes_.size());
    const auto heads = static_cast<std::size_t>(std::count(head_.begin(), head_.end(), 1));
    all_head_ = heads == head_.size();
    mixed_head_ = heads > 0 && !all_head_;
}

}  // namespace sm::loadgen
