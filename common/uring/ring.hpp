// io_uring plumbing shared by server-uring and loadgen's --engine uring, as
// RAII objects: the ring (set up with the flags that suit one ring per
// thread, falling back to what older kernels accept) and a provided-buffer
// ring (memory mapped here: liburing 2.3 has no io_uring_setup_buf_ring
// helper).
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sm::uring {

class Ring {
  public:
    Ring() noexcept = default;
    ~Ring();
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;

    // Sets the ring up with `sq_entries` submission and `cq_entries`
    // completion slots. Tries, in order:
    //   SINGLE_ISSUER|DEFER_TASKRUN (Linux 6.1): completion work runs only when
    //     the thread waits, in its own context, batched, with no interrupt;
    //   COOP_TASKRUN|TASKRUN_FLAG (5.19): no inter-processor interrupt per completion;
    //   no task-run flags (5.5).
    // A kernel that does not know a flag answers EINVAL and the next set is
    // tried. Returns 0 or the negative errno of the last attempt.
    int init(unsigned sq_entries, unsigned cq_entries) noexcept;

    [[nodiscard]] io_uring* get() noexcept { return &ring_; }
    // The flag set init() settled on, for messages: "defer-taskrun" ...
    [[nodiscard]] std::string_view setup() const noexcept { return setup_; }
    // The errno with which the first (preferred) flag set was refused, or 0.
    [[nodiscard]] int preferred_refused() const noexcept { return preferred_refused_; }

    // A free submission slot. When the queue is full, what it holds is
    // submitted first. Throws std::system_error if the kernel refuses that.
    io_uring_sqe* sqe();

  private:
    io_uring ring_{};
    bool live_ = false;
    std::string_view setup_;
    int preferred_refused_ = 0;
};

// When the memory of provided buffers becomes resident, and how many are
// handed to the kernel.
enum class Residency {
    // As they are handed to the kernel, whole (MADV_POPULATE_WRITE, best
    // effort): kFirstBuffers at registration, and as many again each time the
    // ring runs dry (grow()), up to the count. Left to fault in where the
    // kernel first writes, the buffers would become resident page by page
    // over minutes (a second page only when a recv fills more than 4 KiB), so
    // RSS would creep under load and the first recvs of a measurement would
    // pay the page faults; handed over all at once, an idle server would hold
    // count x size (8 MiB by default) for load it may never see. So the
    // memory steps up to what the load keeps in flight, during the warm-up,
    // and stays flat. For a server whose memory is measured.
    populated,
    // All handed over at registration, resident where the kernel first
    // writes: the memory follows what recvs fill.
    on_demand,
};

// Buffers a populated ring starts with: a few idle or light connections'
// worth (256 KiB of 8 KiB buffers), so a server at rest stays small.
inline constexpr unsigned kFirstBuffers = 32;

// `count` buffers of `size` bytes handed to the kernel through a buffer ring:
// a multishot recv picks a free one per completion, so memory follows the
// data in flight, not the number of connections. Returned buffers are
// published to the kernel in one store per batch (publish()).
class ProvidedBuffers {
  public:
    // count: a power of two up to 32768. Throws std::system_error when the
    // memory cannot be mapped.
    ProvidedBuffers(unsigned count, std::size_t size, Residency residency = Residency::populated);
    ~ProvidedBuffers();
    ProvidedBuffers(const ProvidedBuffers&) = delete;
    ProvidedBuffers& operator=(const ProvidedBuffers&) = delete;

    // Registers the ring as buffer group `group` and hands the first buffers
    // (Residency) to the kernel. Returns 0 or a negative errno (EINVAL:
    // kernel older than 5.19).
    int register_with(Ring& ring, std::uint16_t group) noexcept;
    // The ring ran dry (a recv got ENOBUFS): as many buffers again as the
    // kernel has, up to count(), made resident and handed over with the next
    // publish(); once per batch (the other recvs of the batch that found the
    // ring dry asked for the same). False when it has them all.
    bool grow() noexcept;

    [[nodiscard]] char* buffer(std::uint16_t id) const noexcept { return data_ + id * size_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] unsigned count() const noexcept { return count_; }
    // How many the kernel has been handed (count() once grown to it).
    [[nodiscard]] unsigned provided() const noexcept { return provided_; }

    // Queues buffer `id` for return; the kernel sees it after publish().
    void give_back(std::uint16_t id) noexcept {
        io_uring_buf_ring_add(ring_, buffer(id), static_cast<unsigned>(size_), id, mask_, pending_);
        ++pending_;
    }
    void publish() noexcept {
        grown_ = false;
        if (pending_ == 0) return;
        io_uring_buf_ring_advance(ring_, pending_);
        pending_ = 0;
    }

  private:
    // Hands buffers [provided_, provided_ + n) to the kernel, made resident
    // first when populated.
    void provide(unsigned n) noexcept;

    unsigned count_;
    unsigned provided_ = 0;
    bool grown_ = false;  // since the last publish()
    Residency residency_;
    std::size_t size_;
    int mask_;
    int pending_ = 0;
    io_uring_buf_ring* ring_ = nullptr;
    std::size_t ring_bytes_ = 0;
    char* data_ = nullptr;
    std::size_t data_bytes_ = 0;
};

// Takes every completion ready, up to `Batch` per peek, and calls
// complete(user_data, res, flags) for each but liburing's own timeouts
// (kernels without IORING_FEAT_EXT_ARG). The buffers given back while a
// batch is handled go to the kernel in one store after it. Completions of
// requests that finish inline while a batch submits (a full submission
// queue) are taken in the same pass.
template <unsigned Batch = 256, typename Complete>
void reap(Ring& ring, ProvidedBuffers& buffers, Complete&& complete) {
    io_uring_cqe* cqes[Batch];
    while (const unsigned n = io_uring_peek_batch_cqe(ring.get(), cqes, Batch)) {
        for (unsigned i = 0; i < n; ++i)
            if (cqes[i]->user_data != LIBURING_UDATA_TIMEOUT)
                complete(cqes[i]->user_data, cqes[i]->res, cqes[i]->flags);
        io_uring_cq_advance(ring.get(), n);
        buffers.publish();
    }
}

}  // namespace sm::uring
