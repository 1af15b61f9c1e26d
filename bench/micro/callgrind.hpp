// Instructions counted by valgrind's callgrind, for the micro-benchmarks: a
// figure that is the same every run of the same binary and input, where
// timings on a shared machine are not (and where the kernel offers no
// hardware counters). Two halves:
//   - count(): run under callgrind, the counting side measures one stage:
//     a warm-up not collected, then the stage's batches collected and dumped
//     as one profile named after the stage (valgrind/callgrind.h's client
//     requests; they do nothing when the program is not under valgrind);
//   - run(): the front end re-runs this program under
//     valgrind --tool=callgrind and reads each dump's instructions (Ir).
// valgrind/callgrind.h is optional at build time (Debian's valgrind
// package has it): without it, available() says why and nothing is counted.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define SM_HAVE_CALLGRIND 1
#else
#define SM_HAVE_CALLGRIND 0
#endif

namespace sm::bench::callgrind {

// Why instructions cannot be counted here (this build has no
// valgrind/callgrind.h, or valgrind is not on PATH), or nullopt if they can.
std::optional<std::string> unavailable();

// True when this process runs under valgrind (any tool): the counting side.
bool counting() noexcept;

// Under callgrind started with --collect-atstart=no: runs `batch` `warmup`
// times, not collected, then `batches` times collected, and dumps what they
// executed as one profile named `name` (its "desc: Trigger: Client Request:"
// line). What the caller allocates or reads from a clock belongs outside
// `batch`: only then is the count the same every run.
template <typename F>
void count(const std::string& name, long warmup, long batches, F&& batch) {
#if SM_HAVE_CALLGRIND
    CALLGRIND_START_INSTRUMENTATION;  // once; a no-op after (--instr-atstart=no)
    for (long i = 0; i < warmup; ++i)
        batch();
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < batches; ++i)
        batch();
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(name.c_str());
#else
    (void)name, (void)warmup, (void)batches, (void)batch;
#endif
}

struct Counts {
    std::string creator;                           // "callgrind-3.19.0": whose CPU model
    std::map<std::string, unsigned long long> ir;  // dump name -> instructions
};

// Runs this program (/proc/self/exe) with `args` under
//   valgrind -q --tool=callgrind --collect-atstart=no --instr-atstart=no
// into a temporary directory (removed after), its stdout discarded, and
// reads every dump's name and Ir total. nullopt, with the reason on stderr
// after `name` (the program's), when valgrind cannot start, does not exit 0,
// or leaves no dump.
std::optional<Counts> run(const char* name, const std::vector<std::string>& args);

}  // namespace sm::bench::callgrind
