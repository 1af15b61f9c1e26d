#include "uring/ring.hpp"

#include "runtime/tsan.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <system_error>

namespace sm::uring {
namespace {

struct FlagSet {
    unsigned flags;
    std::string_view name;
};

// Every set sizes the completion queue itself (CQSIZE: multishot requests
// post many completions per submission) and lets a kernel with lower limits
// shrink the sizes rather than fail (CLAMP). SUBMIT_ALL (5.18: keep submitting
// after one SQE fails) is in the sets whose other flags imply a kernel that has it.
constexpr unsigned kSizing = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;

constexpr std::array<FlagSet, 3> kFlagSets = {{
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL | kSizing,
     "single-issuer+defer-taskrun"},
    {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL | kSizing,
     "coop-taskrun"},
    {kSizing, "basic"},
}};

}  // namespace

Ring::~Ring() {
    if (!live_) return;
#ifdef SM_TSAN
    // liburing maps and unmaps the rings with raw system calls, which
    // ThreadSanitizer does not see: a ring another thread maps later at the
    // same address would look like a race with this one's owner (seen when
    // one worker stops before another has set its ring up). So the rings
    // are unmapped here through libc, which TSan sees, and liburing is left
    // nothing to unmap (zero sizes: its munmap calls fail harmlessly); it
    // still closes the ring.
    const std::size_t sqe_bytes = ring_.sq.ring_entries * sizeof(io_uring_sqe) *
                                  ((ring_.flags & IORING_SETUP_SQE128) ? 2 : 1);
    ::munmap(ring_.sq.sqes, sqe_bytes);
    ::munmap(ring_.sq.ring_ptr, ring_.sq.ring_sz);
    if (ring_.cq.ring_ptr != nullptr && ring_.cq.ring_ptr != ring_.sq.ring_ptr)
        ::munmap(ring_.cq.ring_ptr, ring_.cq.ring_sz);
    ring_.sq.ring_entries = 0;
    ring_.sq.ring_sz = 0;
    ring_.cq.ring_ptr = nullptr;
#endif
    io_uring_queue_exit(&ring_);
}

int Ring::init(unsigned sq_entries, unsigned cq_entries) noexcept {
    int err = -EINVAL;
    for (const FlagSet& set : kFlagSets) {
        io_uring_params params{};
        params.flags = set.flags;
        params.cq_entries = cq_entries;
        err = io_uring_queue_init_params(sq_entries, &ring_, &params);
        if (err == 0) {
            live_ = true;
            setup_ = set.name;
            // Saves the ring fd lookup on every io_uring_enter (5.18; optional).
            (void)io_uring_register_ring_fd(&ring_);
            return 0;
        }
        if (&set == kFlagSets.data()) preferred_refused_ = -err;
        // EINVAL: this kernel does not know a flag; anything else (EPERM,
        // ENOSYS, ENOMEM) fails every set alike.
        if (err != -EINVAL) break;
    }
    return err;
}

io_uring_sqe* Ring::sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    if (s != nullptr) return s;
    // The queue is full: hand what it holds to the kernel to make room.
    const int rc = io_uring_submit(&ring_);
    s = io_uring_get_sqe(&ring_);
    if (s == nullptr) {
        throw std::system_error(rc < 0 ? -rc : EBUSY, std::generic_category(),
                                "io_uring_submit (submission queue full)");
    }
    return s;
}

ProvidedBuffers::ProvidedBuffers(unsigned count, std::size_t size, Residency residency)
    : count_(count), residency_(residency), size_(size), mask_(io_uring_buf_ring_mask(count)) {
    // The ring of buffer descriptors must be page aligned: mmap gives that.
    ring_bytes_ = count * sizeof(io_uring_buf);
    void* r =
        ::mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (r == MAP_FAILED)
        throw std::system_error(errno, std::generic_category(), "mmap(buffer ring)");
    ring_ = static_cast<io_uring_buf_ring*>(r);
    // The buffers themselves: address space for all, resident as they are
    // handed over or as the kernel writes (Residency says why).
    data_bytes_ = count * size;
    void* d = ::mmap(nullptr, data_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (d == MAP_FAILED) {
        const int err = errno;
        ::munmap(ring_, ring_bytes_);
        throw std::system_error(err, std::generic_category(), "mmap(provided buffers)");
    }
    data_ = static_cast<char*>(d);
    io_uring_buf_ring_init(ring_);
}

ProvidedBuffers::~ProvidedBuffers() {
    // The ring that registered these buffers is gone by now (it is declared
    // after them), so the kernel no longer picks from them.
    ::munmap(data_, data_bytes_);
    ::munmap(ring_, ring_bytes_);
}

int ProvidedBuffers::register_with(Ring& ring, std::uint16_t group) noexcept {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(ring_);
    reg.ring_entries = count_;
    reg.bgid = group;
    if (const int rc = io_uring_register_buf_ring(ring.get(), &reg, 0); rc < 0) return rc;
    provide(residency_ == Residency::populated ? std::min(count_, kFirstBuffers) : count_);
    publish();
    return 0;
}

bool ProvidedBuffers::grow() noexcept {
    if (grown_) return true;
    if (provided_ == count_) return false;
    provide(std::min(provided_, count_ - provided_));
    grown_ = true;
    return true;
}

void ProvidedBuffers::provide(unsigned n) noexcept {
    if (residency_ == Residency::populated) {
        // Best effort: without it (kernels before 5.14) the pages fault in
        // where the kernel writes.
        (void)::madvise(buffer(static_cast<std::uint16_t>(provided_)), n * size_, MADV_POPULATE_WRITE);
    }
    for (unsigned i = 0; i < n; ++i)
        give_back(static_cast<std::uint16_t>(provided_ + i));
    provided_ += n;
}

}  // namespace sm::uring
