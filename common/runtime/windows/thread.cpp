// The Windows side of runtime/platform.hpp: threads and affinity.
#include <process.h>

#include <memory>
#include <string>
#include <system_error>

#include "runtime/windows/winsock.hpp"

namespace sm::runtime {

Thread::Thread(std::size_t stack_bytes, std::function<void()> body) {
    auto fn = std::make_unique<std::function<void()>>(std::move(body));
    // STACK_SIZE_PARAM_IS_A_RESERVATION: the size reserves address space,
    // as pthread's stack size does; pages are committed as they are used.
    const std::uintptr_t h = ::_beginthreadex(
        nullptr, static_cast<unsigned>(stack_bytes),
        [](void* p) -> unsigned {
            const std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(p));
            (*f)();
            return 0;
        },
        fn.get(), STACK_SIZE_PARAM_IS_A_RESERVATION, nullptr);
    if (h == 0) throw std::system_error(errno, std::generic_category(), "_beginthreadex");
    thread_ = reinterpret_cast<NativeThread>(h);
    static_cast<void>(fn.release());  // the thread owns it now
}

Thread::~Thread() {
    ::WaitForSingleObject(thread_, INFINITE);
    ::CloseHandle(thread_);
}

std::vector<int> allowed_cpus() {
    DWORD_PTR process = 0;
    DWORD_PTR system = 0;
    std::vector<int> cpus;
    if (!::GetProcessAffinityMask(::GetCurrentProcess(), &process, &system)) return cpus;
    for (int c = 0; c < static_cast<int>(8 * sizeof process); ++c)
        if (process & (DWORD_PTR{1} << c)) cpus.push_back(c);
    return cpus;
}

void pin_current_thread(int cpu) {
    // An affinity mask holds CPUs 0-63 (one processor group).
    const bool in_mask = cpu >= 0 && cpu < static_cast<int>(8 * sizeof(DWORD_PTR));
    if (!in_mask || ::SetThreadAffinityMask(::GetCurrentThread(), DWORD_PTR{1} << cpu) == 0)
        throw std::system_error(in_mask ? static_cast<int>(::GetLastError()) : ERROR_INVALID_PARAMETER,
                                std::system_category(),
                                "cannot pin a thread to CPU " + std::to_string(cpu));
}

}  // namespace sm::runtime
