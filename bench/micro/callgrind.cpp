// The front end of callgrind.hpp: re-running this program under callgrind
// and reading its dumps.
#include "callgrind.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace sm::bench::callgrind {
namespace {

namespace fs = std::filesystem;

// An executable named `exe` in one of PATH's directories (an empty entry
// is the current directory, as for execvp).
bool on_path(std::string_view exe) {
    const char* const path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "";
    for (;;) {
        const std::size_t colon = rest.find(':');
        const std::string_view dir = rest.substr(0, colon);
        const fs::path file = fs::path(dir.empty() ? "." : dir) / exe;
        if (::access(file.c_str(), X_OK) == 0) return true;
        if (colon == std::string_view::npos) return false;
        rest.remove_prefix(colon + 1);
    }
}

// A directory of its own under the system's temporary one, removed with
// everything in it when it goes.
class TempDir {
  public:
    explicit TempDir(const char* prefix) {
        std::string pattern = (fs::temp_directory_path() / prefix).string() + ".XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr)
            throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
        path_ = pattern;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    [[nodiscard]] const fs::path& path() const noexcept { return path_; }

  private:
    fs::path path_;
};

// posix_spawn's file actions, destroyed when they go.
class FileActions {
  public:
    FileActions() { ::posix_spawn_file_actions_init(&actions_); }
    FileActions(const FileActions&) = delete;
    FileActions& operator=(const FileActions&) = delete;
    ~FileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
    posix_spawn_file_actions_t* get() noexcept { return &actions_; }

  private:
    posix_spawn_file_actions_t actions_{};
};

// Runs `args` (args[0] looked up on PATH) with stdout on /dev/null and
// stderr shared: nullopt once it exited 0, else what went wrong.
std::optional<std::string> run_quiet(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    FileActions actions;
    ::posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    if (const int err = ::posix_spawnp(&pid, argv[0], actions.get(), nullptr, argv.data(), environ);
        err != 0)
        return "could not start " + args[0] + ": " + std::strerror(err);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return std::string("waitpid: ") + std::strerror(errno);
    if (WIFSIGNALED(status))
        return args[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
    if (WEXITSTATUS(status) != 0)
        return args[0] + " exited with status " + std::to_string(WEXITSTATUS(status));
    return std::nullopt;
}

bool starts_with(std::string_view line, std::string_view prefix, std::string_view& rest) {
    if (line.substr(0, prefix.size()) != prefix) return false;
    rest = line.substr(prefix.size());
    return true;
}

// run(), which may throw (the temporary directory, /proc/self/exe).
std::optional<Counts> run_and_read(const char* name, const std::vector<std::string>& args) {
    const TempDir dir(name);
    const fs::path out = dir.path() / "callgrind.out";
    std::vector<std::string> command = {"valgrind",
                                        "-q",
                                        "--tool=callgrind",
                                        "--collect-atstart=no",
                                        "--instr-atstart=no",
                                        "--callgrind-out-file=" + out.string(),
                                        fs::read_symlink("/proc/self/exe").string()};
    command.insert(command.end(), args.begin(), args.end());
    if (const auto failed = run_quiet(command)) {
        std::fprintf(stderr, "%s: %s\n", name, failed->c_str());
        return std::nullopt;
    }
    // callgrind writes each client-requested dump to callgrind.out.N (and
    // what is left at the end, nothing here, to callgrind.out).
    Counts counts;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir.path())) {
        std::ifstream in(entry.path());
        std::string creator, dump;
        std::optional<unsigned long long> totals;
        for (std::string text; std::getline(in, text);) {
            std::string_view rest;
            if (starts_with(text, "creator: ", rest))
                creator = rest;
            else if (starts_with(text, "desc: Trigger: Client Request: ", rest))
                dump = rest;
            else if (starts_with(text, "totals: ", rest))
                totals = std::strtoull(std::string(rest).c_str(), nullptr, 10);  // Ir: the first
        }
        if (dump.empty()) continue;  // the one at the program's end
        if (!totals || !counts.ir.emplace(dump, *totals).second) {
            std::fprintf(stderr, "%s: callgrind's dump %s: %s '%s'\n", name,
                         entry.path().filename().c_str(),
                         totals ? "a second dump named" : "no totals line in", dump.c_str());
            return std::nullopt;
        }
        counts.creator = creator;
    }
    if (counts.ir.empty()) {
        std::fprintf(stderr, "%s: callgrind made no dump\n", name);
        return std::nullopt;
    }
    return counts;
}

}  // namespace

// A sanitized build cannot run under valgrind: its shadow memory and
// interceptors collide with valgrind's own (and its counts would be the
// sanitizer's work anyway).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SM_SANITIZED 1
#endif
#endif
#ifndef SM_SANITIZED
#define SM_SANITIZED 0
#endif

std::optional<std::string> unavailable() {
    if (SM_SANITIZED)
        return "this build has sanitizers, which valgrind cannot run: count with a release build "
               "(cmake --preset release)";
    if (!SM_HAVE_CALLGRIND)
        return "this build has no valgrind/callgrind.h (Debian: apt-get install valgrind, then "
               "build again)";
    if (!on_path("valgrind"))
        return "valgrind is not on PATH (Debian: apt-get install valgrind; scripts/deps.sh "
               "installs it)";
    return std::nullopt;
}

bool counting() noexcept {
#if SM_HAVE_CALLGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return false;
#endif
}

std::optional<Counts> run(const char* name, const std::vector<std::string>& args) {
    try {
        return run_and_read(name, args);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return std::nullopt;
    }
}

}  // namespace sm::bench::callgrind
