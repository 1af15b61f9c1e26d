// Captures what a call writes to stderr (runtime::log, CLI11's errors) or to
// stdout (--help): for the call, the descriptor points at a temporary file
// (dup2), then it is put back, also when the call throws.
//
// The descriptor calls (dup, dup2, fileno) are POSIX's, which mingw-w64's
// C runtime has too (<unistd.h>, <io.h>).
//
// Catch2 reports a failed assertion at once, on stdout: assertions inside a
// stderr capture are fine, but inside a stdout capture their report would
// vanish into it. So a capture is a function call around just the code under
// test, and the assertions on its output run after it returns.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>

#include "runtime/log.hpp"

namespace sm::test {

class Redirect {
  public:
    // Points `fd` (1 or 2) at a fresh temporary file.
    explicit Redirect(int fd) : fd_(fd), file_(std::tmpfile()) {
        if (file_ == nullptr) fail("tmpfile");
        flush();
        saved_ = ::dup(fd_);
        if (saved_ < 0) fail("dup");
        if (::dup2(::fileno(file_), fd_) < 0) fail("dup2");
    }
    Redirect(const Redirect&) = delete;
    Redirect& operator=(const Redirect&) = delete;
    ~Redirect() {
        flush();
        if (saved_ >= 0) {
            ::dup2(saved_, fd_);
            ::close(saved_);
        }
        std::fclose(file_);
    }

    // Everything written to the descriptor so far. Read back through the
    // file's own stream (no pread on Windows): the descriptor and the stream
    // share one file offset, so the stream seeks back to the end afterwards
    // and later writes still append.
    [[nodiscard]] std::string text() const {
        flush();
        std::string out;
        if (std::fseek(file_, 0, SEEK_SET) != 0) return out;
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;)
            out.append(buf, n);
        std::fseek(file_, 0, SEEK_END);
        return out;
    }

  private:
    // C stdio and the C++ streams buffer separately from the descriptor:
    // what they hold must land on the side of the switch it was written on.
    static void flush() {
        std::cout.flush();
        std::cerr.flush();
        std::fflush(stdout);
        std::fflush(stderr);
    }
    [[noreturn]] void fail(const char* what) {
        const int err = errno;
        if (saved_ >= 0) ::close(saved_);
        if (file_ != nullptr) std::fclose(file_);
        throw std::system_error(err, std::generic_category(), what);
    }

    int fd_;
    std::FILE* file_;
    int saved_ = -1;
};

// What f() wrote to stderr.
template <typename F>
std::string capture_stderr(F&& f) {
    const Redirect r(STDERR_FILENO);
    std::forward<F>(f)();
    return r.text();
}

// What f() wrote to stdout.
template <typename F>
std::string capture_stdout(F&& f) {
    const Redirect r(STDOUT_FILENO);
    std::forward<F>(f)();
    return r.text();
}

// The lines f() logged through runtime::log, each "test: <message>\n".
template <typename F>
std::string capture_log(F&& f) {
    runtime::set_program_name("test");
    return capture_stderr(std::forward<F>(f));
}

}  // namespace sm::test
