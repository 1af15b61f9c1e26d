#include "runtime/options.hpp"

#include <fmt/core.h>
#include <llhttp.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/cpu.hpp"
#include "runtime/platform.hpp"

namespace sm::runtime {
namespace {

std::chrono::milliseconds to_ms(double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000.0)));
}

}  // namespace

ParsedOptions parse_server_options(std::string_view program_name, std::string_view description,
                                   std::span<const ModelOption> extra, int argc,
                                   const char* const* argv) {
    const std::string program{program_name};
    ServerOptions o;
    CLI::App app{fmt::format("{}: {}", program, description), program};
    app.get_formatter()->column_width(34);
    app.set_version_flag(
        "--version", fmt::format("{} (servermodels {}, llhttp {}.{}.{})", program, SM_VERSION,
                                 LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH));

    std::string cpus;
    std::string mode{http::to_string(o.mode)};
    double shutdown_s = static_cast<double>(o.shutdown_timeout.count()) / 1000.0;
    double linger_s = static_cast<double>(o.linger_timeout.count()) / 1000.0;
    double idle_s = static_cast<double>(o.idle_timeout.count()) / 1000.0;
    double header_s = static_cast<double>(o.header_timeout.count()) / 1000.0;
    double send_s = static_cast<double>(o.send_timeout.count()) / 1000.0;
    std::size_t output_mark_kib = o.output_mark / 1024;

    app.add_option("-a,--address", o.address,
                   "Address to listen on: IPv4 or IPv6, 0.0.0.0 or :: for all interfaces")
        ->check(
            [](const std::string& s) {
                return is_ip_address(s)
                           ? std::string()
                           : "'" + s +
                                 "' is not an IPv4 or IPv6 address (e.g. 127.0.0.1, ::1, 0.0.0.0)";
            },
            "IP")
        ->capture_default_str();
    app.add_option("-p,--port", o.port, "TCP port; 0 picks a free one (the ready line shows it)")
        ->capture_default_str();
    app.add_option("-t,--threads", o.threads,
                   "Threads (default: one per CPU this process may run on)")
        ->check(CLI::Range(1u, 1024u));
    app.add_option("--cpus", cpus,
                   "Pin thread i to the i-th CPU of this list, e.g. 0-3,6 (default: no pinning)");
    app.add_option("--mode", mode,
                   "Response mode: composed (headers composed and JSON serialized per response, "
                   "TechEmpower rules) or cached (whole responses pre-rendered once a second)")
        ->check(CLI::IsMember({"composed", "cached"}))
        ->capture_default_str();
    app.add_option("--backlog", o.backlog, "listen() backlog (the kernel caps it at somaxconn)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();

    // The model's own: stored in order, then copied by name.
    std::vector<unsigned long> extra_values;
    extra_values.reserve(extra.size());
    for (const ModelOption& m : extra) {
        auto* opt = app.add_option(fmt::format("--{}", m.name), extra_values.emplace_back(m.value),
                                   std::string(m.help))
                        ->check(CLI::Range(m.min, m.max))
                        ->capture_default_str();
        if (m.power_of_two)
            opt->check(
                [](const std::string& s) {
                    const unsigned long n = std::stoul(s);
                    return (n & (n - 1)) == 0 ? std::string() : "must be a power of two";
                },
                "POW2");
    }

    auto* workloads = "Workloads";
    std::string fortunes;
    app.add_option("--db", o.db,
                   "PostgreSQL for /db, /queries and /fortunes: a libpq connection string, e.g. "
                   "postgresql://user:pass@127.0.0.1:5432/hello_world (scripts/pg.sh starts one); "
                   "without it /db and /queries answer 503")
        ->group(workloads);
    app.add_option("--db-connections", o.db_connections,
                   "Database connections per thread (event-loop models multiplex them; the "
                   "blocking models use one per thread)")
        ->check(CLI::Range(1u, kMaxDbConnections))
        ->capture_default_str()
        ->group(workloads);
    app.add_option("--fortunes", fortunes,
                   "Where /fortunes takes its rows: memory (a CPU-bound handler) or db "
                   "(default: db when --db is given, else memory)")
        ->check(CLI::IsMember({"memory", "db"}))
        ->group(workloads);

    auto* limits = "Limits";
    app.add_option("--max-connections", o.max_connections,
                   "Connections open at once (all threads); beyond it new ones wait in the "
                   "listen backlog")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--idle-timeout", idle_s,
                   "Seconds a connection may stay silent: waiting for its next request, or "
                   "between the parts of one")
        ->check(CLI::Range(0.001, 86400.0))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--header-timeout", header_s,
                   "Seconds from a request's first byte until its head (request line and "
                   "headers) must be complete, however slowly it trickles in; then 408 and close")
        ->check(CLI::Range(0.001, 86400.0))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--send-timeout", send_s,
                   "Seconds a client that does not read its responses is given: while its "
                   "output waits (and the server stops reading its requests), the connection "
                   "is closed when no byte of output is accepted for this long")
        ->check(CLI::Range(0.001, 86400.0))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--output-mark", output_mark_kib,
                   "KiB of responses one connection may hold unsent before the server stops "
                   "reading its requests (the rest wait unanswered, a few bytes each): what a "
                   "client that pipelines without reading costs; also the largest write")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--max-head-bytes", o.limits.max_head_bytes,
                   "Largest request line + headers; larger gets 431")
        ->check(CLI::Range(std::size_t{64}, std::size_t{1} << 24))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--max-uri-bytes", o.limits.max_uri_bytes,
                   "Longest request target; longer gets 414")
        ->check(CLI::Range(std::size_t{16}, std::size_t{1} << 24))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--max-header-count", o.limits.max_header_count,
                   "Most header fields in a request; more gets 431")
        ->check(CLI::Range(std::size_t{1}, std::size_t{100000}))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--max-body-bytes", o.limits.max_body_bytes,
                   "Largest request body, read and discarded (chunked: counted with its framing); "
                   "larger gets 413")
        ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--shutdown-timeout", shutdown_s,
                   "Seconds to finish responses in flight after SIGINT/SIGTERM")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str()
        ->group(limits);
    app.add_option("--linger-timeout", linger_s,
                   "Seconds to drain a connection closed after an error or Connection: close, "
                   "so the client gets the response rather than a reset")
        ->check(CLI::Range(0.0, 600.0))
        ->capture_default_str()
        ->group(limits);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return {std::nullopt, code == 0 ? 0 : 2};
    }

    try {
        if (!cpus.empty()) o.cpus = parse_cpu_list(cpus);
    } catch (const std::invalid_argument& e) {
        fmt::print(stderr, "{}: --cpus: {}\n", program, e.what());
        return {std::nullopt, 2};
    }
    for (std::size_t i = 0; i < extra.size(); ++i)
        o.model_values.emplace_back(extra[i].name, extra_values[i]);
    if (fortunes == "db" && o.db.empty()) {
        fmt::print(stderr, "{}: --fortunes db needs --db (a PostgreSQL connection string)\n",
                   program);
        return {std::nullopt, 2};
    }
    o.fortunes = fortunes == "memory" || (fortunes.empty() && o.db.empty())
                     ? http::FortuneSource::memory
                     : http::FortuneSource::database;
    o.mode = *http::parse_response_mode(mode);
    o.shutdown_timeout = to_ms(shutdown_s);
    o.linger_timeout = to_ms(linger_s);
    o.idle_timeout = std::max(to_ms(idle_s), std::chrono::milliseconds(1));
    o.header_timeout = std::max(to_ms(header_s), std::chrono::milliseconds(1));
    o.send_timeout = std::max(to_ms(send_s), std::chrono::milliseconds(1));
    o.output_mark = output_mark_kib * 1024;
    if (o.threads == 0) {
        const std::size_t n = !o.cpus.empty() ? o.cpus.size() : allowed_cpus().size();
        o.threads = n == 0 ? 1u : static_cast<unsigned>(n);
    }
    return {std::move(o), 0};
}

unsigned long ServerOptions::model_option(std::string_view name) const {
    for (const auto& [n, v] : model_values)
        if (n == name) return v;
    throw std::out_of_range(fmt::format("no model option --{}", name));
}

}  // namespace sm::runtime
