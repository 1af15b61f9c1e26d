// The POSIX side of runtime/platform.hpp: threads and affinity.
#include "runtime/platform.hpp"

#include <pthread.h>
#include <sched.h>

#include <memory>
#include <string>
#include <system_error>

namespace sm::runtime {

Thread::Thread(std::size_t stack_bytes, std::function<void()> body) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack_bytes);
    auto fn = std::make_unique<std::function<void()>>(std::move(body));
    const int rc = pthread_create(
        &thread_, &attr,
        [](void* p) -> void* {
            const std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(p));
            (*f)();
            return nullptr;
        },
        fn.get());
    pthread_attr_destroy(&attr);
    if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_create");
    static_cast<void>(fn.release());  // the thread owns it now
}

Thread::~Thread() {
    pthread_join(thread_, nullptr);
}

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

void pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0)
        throw std::system_error(rc, std::generic_category(),
                                "cannot pin a thread to CPU " + std::to_string(cpu));
}

}  // namespace sm::runtime
