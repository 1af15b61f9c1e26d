// loadgen: the suite's HTTP/1.1 load generator (bench/loadgen/README.md).
#include <unistd.h>

#include <csignal>

#include <fmt/core.h>
#include <simdjson.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <fstream>

#include "config.hpp"
#include "engine.hpp"
#include "report.hpp"

namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_signal(int) {
    g_stop.store(true, std::memory_order_relaxed);
}

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace sm::loadgen;
    auto parsed = parse_config(argc, argv);
    if (!parsed.config) return parsed.exit_code;
    Config& config = *parsed.config;
    if (config.expect_json) {
        simdjson::dom::parser parser;
        if (auto err = parser.parse(simdjson::padded_string(*config.expect_json)).error()) {
            fmt::print(stderr,
                       "loadgen: --expect-json is not valid JSON ({})\nRun with --help for more "
                       "information.\n",
                       simdjson::error_message(err));
            return 2;
        }
    }
    // With --json -, --hlog - or --hgrm -, stdout carries the documents alone
    // (the JSON, then the log or the distribution) and the summary goes to stderr.
    std::FILE* text = config.stdout_taken() ? stderr : stdout;

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    try {
        // --engine auto settles on an engine here (silently); --engine uring
        // where io_uring cannot run ends here, saying why.
        config.engine = choose_engine(config.engine);
        // Probe first: an unreachable target gets one clear line, nothing else.
        const Endpoint endpoint = resolve_and_probe(config);
        if (!config.quiet) {
            fmt::print(text, "{}", describe_run(config));
            std::fflush(text);
        }
        // The progress line: rewritten in place ("\r", then erase to the end
        // of the line), and erased before the summary is printed.
        ProgressSink progress;
        if (wants_progress(config, ::isatty(STDERR_FILENO) == 1))
            progress = [&config](const ProgressSample& p) {
                if (p.done)
                    fmt::print(stderr, "\r\x1b[K");
                else
                    fmt::print(stderr, "\r{}\x1b[K", progress_line(config, p));
                std::fflush(stderr);
            };
        const Outcome outcome = run_load(config, endpoint, g_stop, progress);
        if (!config.quiet) fmt::print(text, "{}", text_report(config, outcome));
        if (outcome.ended == Ended::server_gone)
            fmt::print(stderr, "loadgen: {}; the run ended early\n", outcome.message);
        // One stream on stdout: the JSON first, then the log (or the
        // distribution); a reader splits them after the JSON document.
        const auto output = [](const std::string& path, const std::string& document) {
            if (path == "-") {
                fmt::print(stdout, "{}", document);
                std::fflush(stdout);
                return true;
            }
            if (write_file(path, document)) return true;
            fmt::print(stderr, "loadgen: cannot write {}\n", path);
            return false;
        };
        bool written = true;
        if (!config.json_path.empty())
            written = output(config.json_path, json_report(config, outcome)) && written;
        if (!config.hlog_path.empty())
            written = output(config.hlog_path, hlog_report(config, outcome)) && written;
        if (!config.hgrm_path.empty())
            written = output(config.hgrm_path, hgrm_report(config, outcome)) && written;
        if (!written) return 1;
        switch (outcome.ended) {
            case Ended::completed: return 0;
            case Ended::server_gone: return 1;
            case Ended::interrupted: return 130;
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "loadgen: {}\n", e.what());
        return 1;
    }
    return 0;
}
