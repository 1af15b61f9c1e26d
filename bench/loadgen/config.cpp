#include "config.hpp"

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "runtime/cpu.hpp"

namespace sm::loadgen {

Target parse_url(std::string_view url) {
    Target t;
    t.url = std::string(url);
    constexpr std::string_view scheme = "http://";
    if (url.substr(0, scheme.size()) != scheme) {
        if (url.substr(0, 8) == "https://")
            throw std::invalid_argument("https is not supported: give an http:// URL");
        throw std::invalid_argument("the URL must start with http://");
    }
    std::string_view rest = url.substr(scheme.size());
    // The authority ends at the path, the query or the fragment (RFC 3986 3.2).
    const auto slash = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
        t.path = std::string(rest.substr(slash));
        if (t.path.front() != '/') t.path.insert(0, "/");
    }
    if (t.path.find_first_of(" \t\r\n") != std::string::npos)
        throw std::invalid_argument("the URL path must not contain whitespace");
    if (const auto frag = t.path.find('#'); frag != std::string::npos) t.path.resize(frag);
    if (authority.find('@') != std::string_view::npos)
        throw std::invalid_argument("user information in the URL is not supported");
    std::string_view port;
    if (!authority.empty() && authority.front() == '[') {
        const auto close = authority.find(']');
        if (close == std::string_view::npos)
            throw std::invalid_argument("unterminated [IPv6] address in the URL");
        t.host = std::string(authority.substr(1, close - 1));
        const std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':')
                throw std::invalid_argument("unexpected text after ] in the URL");
            port = after.substr(1);
        }
    } else {
        const auto colon = authority.find(':');
        t.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) port = authority.substr(colon + 1);
        if (port.find(':') != std::string_view::npos)
            throw std::invalid_argument(
                "more than one ':' in host:port (an IPv6 address goes in brackets: "
                "http://[::1]:8080/)");
    }
    if (t.host.empty()) throw std::invalid_argument("the URL has no host");
    if (!port.empty()) {
        unsigned v = 0;
        const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
        if (ec != std::errc{} || end != port.data() + port.size() || v == 0 || v > 65535)
            throw std::invalid_argument(fmt::format("invalid port '{}' in the URL", port));
        t.port = static_cast<std::uint16_t>(v);
    }
    const bool v6 = t.host.find(':') != std::string::npos;
    t.host_header = v6 ? fmt::format("[{}]", t.host) : t.host;
    if (t.port != 80) t.host_header += fmt::format(":{}", t.port);
    return t;
}

std::chrono::nanoseconds parse_duration(std::string_view text) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || text.empty())
        throw std::invalid_argument(
            fmt::format("'{}' is not a duration (e.g. 10s, 500ms, 2m)", text));
    const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    double scale;
    if (unit.empty() || unit == "s")
        scale = 1e9;
    else if (unit == "ms")
        scale = 1e6;
    else if (unit == "us")
        scale = 1e3;
    else if (unit == "m")
        scale = 60e9;
    else if (unit == "h")
        scale = 3600e9;
    else
        throw std::invalid_argument(
            fmt::format("'{}': unknown unit '{}' (use ms, s, m or h)", text, unit));
    if (!std::isfinite(value) || value < 0 || value * scale > 1e9 * 86400 * 366)
        throw std::invalid_argument(fmt::format("'{}' is out of range", text));
    return std::chrono::nanoseconds(std::llround(value * scale));
}

std::string_view engine_name(Engine engine) noexcept {
    switch (engine) {
        case Engine::automatic: return "auto";
        case Engine::epoll: return "epoll";
        case Engine::uring: return "uring";
    }
    return "?";
}

ParsedConfig parse_config(int argc, const char* const* argv) {
    Config c;
    for (int i = 0; i < argc; ++i)
        c.argv.emplace_back(argv[i]);
    CLI::App app{
        "loadgen: an HTTP/1.1 load generator. Closed loop (each connection sends its next "
        "request, or --pipeline batch, as soon as the last is answered) or open loop at a "
        "constant --rate with latency measured from each request's intended send time.",
        "loadgen"};
    app.get_formatter()->column_width(30);
    app.set_version_flag("--version", "loadgen (servermodels " SM_VERSION ")");

    std::string url, duration = "10s", warmup = "0s", timeout = "2s", cpus, engine = "auto";
    app.add_option("url", url, "Target: http://HOST[:PORT][/PATH]")->required();
    app.add_option("-c,--connections", c.connections, "Connections to keep open, over all threads")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    app.add_option("-t,--threads", c.threads, "Threads, each with its own event loop")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    app.add_option("-d,--duration", duration, "Measured duration (10s, 500ms, 2m)")
        ->capture_default_str();
    app.add_option("--warmup", warmup, "Load before measuring; its results are reported apart")
        ->capture_default_str();
    app.add_option("--pipeline", c.pipeline, "Requests per write (HTTP/1.1 pipelining depth)")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    app.add_option("-R,--rate", c.rate,
                   "Open loop: requests/s over all connections, at evenly spaced intended times; "
                   "latency counts from the intended time (0: closed loop)")
        ->check(CLI::Range(0.0, 1e9))
        ->capture_default_str();
    app.add_option("--timeout", timeout,
                   "A request unanswered this long counts as a timeout and its connection is "
                   "replaced; also bounds connecting")
        ->capture_default_str();
    app.add_option("-H,--header", c.headers, "Request header \"Name: value\" (repeatable)");
    app.add_option("-m,--method", c.method, "Request method")->capture_default_str();
    app.add_option("--body", c.body, "Request body (sent with Content-Length)");
    app.add_option("--expect-body", c.expect_body,
                   "Count a response whose body differs from this text as a body error");
    app.add_option("--expect-json", c.expect_json,
                   "Count a response whose body is not this JSON document (compared after "
                   "parsing, whitespace ignored) as a body error");
    app.add_option("--json", c.json_path, "Write the results as JSON to FILE ('-': stdout)");
    app.add_option("--cpus", cpus, "Pin thread i to the i-th CPU of this list (e.g. 1 or 2-3)");
    app.add_flag("-q,--quiet", c.quiet, "No text summary (errors still go to stderr)");
    app.add_flag("--announce", c.announce,
                 "Before the load starts, print 'schedule monotonic_ns start=S measure=M end=E': "
                 "when the warm-up starts, and the measured window starts and ends, on "
                 "CLOCK_MONOTONIC (for a harness that samples the server's CPU time over exactly "
                 "the measured window)");
    app.add_option("--engine", engine,
                   "I/O engine: epoll, uring (io_uring), or auto (uring when io_uring works "
                   "here, else epoll)")
        ->check(CLI::IsMember({"auto", "epoll", "uring"}))
        ->capture_default_str();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return {std::nullopt, code == 0 ? 0 : 2};
    }
    const auto error = [](const std::string& what) {
        fmt::print(stderr, "loadgen: {}\nRun with --help for more information.\n", what);
        return ParsedConfig{std::nullopt, 2};
    };
    try {
        c.target = parse_url(url);
    } catch (const std::invalid_argument& e) {
        return error(fmt::format("{}: {}", url, e.what()));
    }
    try {
        c.duration = parse_duration(duration);
        c.warmup = parse_duration(warmup);
        c.timeout = parse_duration(timeout);
    } catch (const std::invalid_argument& e) {
        return error(e.what());
    }
    c.engine = engine == "epoll"   ? Engine::epoll
               : engine == "uring" ? Engine::uring
                                   : Engine::automatic;
    if (c.duration.count() == 0) return error("--duration must be more than 0");
    if (c.timeout < std::chrono::milliseconds(1)) return error("--timeout must be at least 1ms");
    if (c.connections < c.threads)
        return error(fmt::format(
            "--connections ({}) must be at least --threads ({}): every thread needs one",
            c.connections, c.threads));
    if (c.method.empty() || c.method.find_first_of(" \t\r\n") != std::string::npos)
        return error(fmt::format("--method '{}' is not a method token", c.method));
    for (const auto& h : c.headers) {
        const auto colon = h.find(':');
        if (colon == std::string::npos || colon == 0 ||
            h.find_first_of("\r\n") != std::string::npos || h.find_first_of(" \t") < colon)
            return error(fmt::format("-H '{}' is not a header \"Name: value\"", h));
    }
    if (c.expect_body && c.expect_json)
        return error("give --expect-body or --expect-json, not both");
    if (!cpus.empty()) {
        try {
            c.cpus = runtime::parse_cpu_list(cpus);
        } catch (const std::invalid_argument& e) {
            return error(fmt::format("--cpus: {}", e.what()));
        }
    }
    return {std::move(c), 0};
}

std::string render_request(const Config& c) {
    std::string r = fmt::format("{} {} HTTP/1.1\r\n", c.method, c.target.path);
    bool has_host = false;
    for (const auto& h : c.headers) {
        const std::string_view name = std::string_view(h).substr(0, h.find(':'));
        if (name.size() == 4 && (name[0] | 0x20) == 'h' && (name[1] | 0x20) == 'o' &&
            (name[2] | 0x20) == 's' && (name[3] | 0x20) == 't')
            has_host = true;
    }
    if (!has_host) r += fmt::format("Host: {}\r\n", c.target.host_header);
    for (const auto& h : c.headers) {
        r += h;
        r += "\r\n";
    }
    if (!c.body.empty() || c.method == "POST" || c.method == "PUT")
        r += fmt::format("Content-Length: {}\r\n", c.body.size());
    r += "\r\n";
    r += c.body;
    return r;
}

}  // namespace sm::loadgen
