#include "runtime/session_slot.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>

#include "runtime/tuning.hpp"

namespace sm::runtime {

namespace {
thread_local SessionPool* current_pool = nullptr;
}

SessionPool::Scope::Scope(const http::ResponseCache& cache, const http::Limits& limits)
    : pool_(cache, limits), outer_(current_pool) {
    pool_.free_.reserve(kSparesKept);  // give() never allocates
    current_pool = &pool_;
}

SessionPool::Scope::~Scope() { current_pool = outer_; }

SessionPool* SessionPool::here() noexcept { return current_pool; }

SessionPool& SessionPool::current() noexcept {
    if (current_pool == nullptr) {
        // A model's thread fed a connection without making its pool: a bug
        // of the model, found by its first request.
        std::fputs("servermodels: a session was needed on a thread without a SessionPool::Scope\n", stderr);
        std::abort();
    }
    return *current_pool;
}

std::unique_ptr<http::Session> SessionPool::take() noexcept {
    if (!free_.empty()) {
        std::unique_ptr<http::Session> s = std::move(free_.back());
        free_.pop_back();
        s->bind(cache_);
        return s;
    }
    std::unique_ptr<http::Session> s(new (std::nothrow) http::Session(cache_, limits_));
    if (s) ++made_;
    return s;
}

void SessionPool::give(std::unique_ptr<http::Session> s) noexcept {
    if (free_.size() >= kSparesKept) return;  // s is freed
    s->reset();
    free_.push_back(std::move(s));  // within the capacity reserved: no allocation
}

SessionSlot::~SessionSlot() = default;

bool SessionSlot::take() noexcept {
    s_ = SessionPool::current().take();
    if (!s_) return false;
    s_->set_epoch(++epoch_);
    return true;
}

void SessionSlot::give_back() noexcept {
    if (SessionPool* pool = SessionPool::here()) pool->give(std::move(s_));
    else s_.reset();  // a thread that serves no connection (a sweep closing one): freed
}

void SessionSlot::settle() noexcept {
    if (s_->idle() && !s_->closed() && !s_->close_requested()) give_back();
}

SessionSlot::Result SessionSlot::feed(std::span<const char> in, http::ByteBuffer& out,
                                      std::size_t limit) noexcept {
    if (in.empty()) return s_ && s_->closed() ? Result::close : Result::open;
    if (!s_ && !take()) return Result::close;
    const Result r = s_->feed(in, out, limit);
    settle();
    return r;
}

SessionSlot::Result SessionSlot::resume(http::ByteBuffer& out, std::size_t limit) noexcept {
    if (!s_) return Result::open;
    const Result r = s_->resume(out, limit);
    settle();
    return r;
}

void SessionSlot::complete(const http::Job& job, const http::JobResult& result,
                           http::ByteBuffer& out) noexcept {
    if (!s_) return;
    s_->complete(job, result, out);
    settle();
}

void SessionSlot::request_close() noexcept {
    if (s_ || take()) s_->request_close();
}

void SessionSlot::expire_head(http::ByteBuffer& out) noexcept {
    if (s_ || take()) s_->expire_head(out);
}

void SessionSlot::reset() noexcept {
    if (s_) give_back();
}

}  // namespace sm::runtime
