#include "config.hpp"

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
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

std::int64_t parse_start_at(std::string_view text, std::int64_t now_ns) {
    const auto bad = [&] {
        return std::invalid_argument(fmt::format(
            "--start-at '{}' is not a time: give seconds since the epoch, e.g. 1764907200.25 "
            "(date +%s.%N)",
            text));
    };
    const auto dot = text.find('.');
    const std::string_view whole = text.substr(0, dot);
    const std::string_view fraction =
        dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
    const auto digits = [](std::string_view d) {
        return std::all_of(d.begin(), d.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    };
    if (whole.empty() || !digits(whole) || !digits(fraction)) throw bad();
    // Beyond 9e9 s (year 2255) the nanoseconds overflow: far ahead anyway.
    const auto first = whole.find_first_not_of('0');
    const std::string_view significant =
        first == std::string_view::npos ? std::string_view{} : whole.substr(first);
    std::int64_t seconds = 9'000'000'000;
    if (significant.size() <= 10)
        std::from_chars(significant.data(), significant.data() + significant.size(), seconds);
    seconds = std::min<std::int64_t>(seconds, 9'000'000'000);
    std::int64_t ns = 0;
    for (std::size_t i = 0; i < 9; ++i)
        ns = ns * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
    const std::int64_t at = seconds * 1'000'000'000 + ns;
    if (at < kYear2000Ns)
        throw std::invalid_argument(
            fmt::format("--start-at {} is before 2000: give seconds since the epoch (e.g. "
                        "$(($(date +%s) + 10)))",
                        text));
    if (at > now_ns + std::chrono::nanoseconds(kStartAtHorizon).count())
        throw std::invalid_argument(fmt::format(
            "--start-at {} is more than {} hour ahead: give seconds since the epoch (not "
            "milliseconds)",
            text, kStartAtHorizon.count()));
    return at;
}

std::string header_problem(std::string_view h) {
    const auto colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0 ||
        h.find_first_of("\r\n") != std::string_view::npos || h.find_first_of(" \t") < colon)
        return fmt::format("'{}' is not a header \"Name: value\"", h);
    return {};
}

std::vector<RequestLine> parse_request_lines(std::string_view text, std::string_view name) {
    std::vector<RequestLine> out;
    std::size_t number = 0;
    while (!text.empty()) {
        const auto eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        ++number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const auto first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos || line[first] == '#') continue;
        const auto fail = [&](const std::string& why) {
            return std::invalid_argument(fmt::format("{}:{}: {}", name, number, why));
        };
        std::string_view content = line.substr(first);
        while (!content.empty() && (content.back() == ' ' || content.back() == '\t'))
            content.remove_suffix(1);
        if (first > 0) {  // indented: a header of the request above
            if (out.empty())
                throw fail(
                    "an indented line is a header of the request above it, and there is none");
            if (auto why = header_problem(content); !why.empty()) throw fail(why);
            out.back().headers.emplace_back(content);
            continue;
        }
        RequestLine r;
        r.line = number;
        const auto space = content.find_first_of(" \t");
        if (space == std::string_view::npos) {
            r.url = std::string(content);
        } else {
            r.method = std::string(content.substr(0, space));
            const std::string_view rest = content.substr(content.find_first_not_of(" \t", space));
            if (rest.find_first_of(" \t") != std::string_view::npos)
                throw fail(fmt::format(
                    "'{}': expected \"[METHOD] URL\" (headers go on the indented lines below it)",
                    content));
            r.url = std::string(rest);
        }
        out.push_back(std::move(r));
    }
    return out;
}

namespace {

std::string read_text_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::invalid_argument(fmt::format("--urls: cannot read {}", path));
    std::ostringstream text;
    text << f.rdbuf();
    return text.str();
}

}  // namespace

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

    std::vector<std::string> urls;
    std::string duration = "10s", warmup = "0s", timeout = "2s", cpus, engine = "auto";
    std::string hlog_interval = "1s", start_at;
    app.add_option("url", urls,
                   "Target: http://HOST[:PORT][/PATH]. Several make a mix, on one host and port: "
                   "request i of connection j goes to URL (i + j) mod URLs");
    app.add_option("--urls", c.urls_file,
                   "Read the mix from FILE (after any URL given): a line \"[METHOD] URL\" per "
                   "request, its headers on the indented lines below it (\"  Name: value\"), '#' "
                   "comments, blank lines skipped");
    app.add_option("-c,--connections", c.connections, "Connections to keep open, over all threads")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    app.add_option("-t,--threads", c.threads, "Threads, each with its own event loop")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    CLI::Option* duration_option =
        app.add_option("-d,--duration", duration,
                       "Measured duration (10s, 500ms, 2m); with -n a time limit")
            ->capture_default_str();
    app.add_option("-n,--requests", c.request_count,
                   "Stop after N responses (warm-up aside): at most N requests are sent after the "
                   "warm-up, and the time from the first of them to the N-th response is the "
                   "measured time. With -d, whichever comes first ends the run")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000'000}));
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
    // One value per -H, so a URL after it stays a URL.
    app.add_option("-H,--header", c.headers, "Request header \"Name: value\" (repeatable)")
        ->allow_extra_args(false);
    app.add_option("-m,--method", c.method, "Request method")->capture_default_str();
    app.add_option("--body", c.body, "Request body (sent with Content-Length)");
    app.add_option("--expect-body", c.expect_body,
                   "Count a response whose body differs from this text as a body error");
    app.add_option("--expect-json", c.expect_json,
                   "Count a response whose body is not this JSON document (compared after "
                   "parsing, whitespace ignored) as a body error");
    app.add_option("--json", c.json_path,
                   "Write the results as JSON to FILE ('-': stdout; then the summary goes to "
                   "stderr)");
    CLI::Option* hlog_option =
        app.add_option("--hlog", c.hlog_path,
                       "Write the latency as HdrHistogram's interval log to FILE (Java "
                       "HistogramLogWriter's "
                       "format 1.3: a compressed histogram per --hlog-interval of the measured "
                       "window, read by "
                       "HdrHistogram's HistogramLogProcessor; values in ns). Closed loop: one "
                       "series, untagged; "
                       "with --rate two, Tag=corrected and Tag=uncorrected. '-': stdout (after the "
                       "JSON when "
                       "--json - too: one stream, the JSON, then the log). E.g. --hlog run.hlog")
            ->type_name("FILE");
    app.add_option("--hlog-interval", hlog_interval,
                   "The interval of --hlog's histograms (500ms, 1s, 5s; at least 10ms)")
        ->type_name("T")
        ->capture_default_str()
        ->needs(hlog_option);
    app.add_option("--hgrm", c.hgrm_path,
                   "Write the latency as HdrHistogram's percentile distribution to FILE (what "
                   "Java's outputPercentileDistribution(out, 5, ...) prints and wrk2 --latency "
                   "shows: Value (ms), Percentile, TotalCount, 1/(1-Percentile), then mean, max "
                   "and count); with --rate the corrected latency. '-': stdout (after the JSON "
                   "when --json - too). E.g. --hgrm run.hgrm")
        ->type_name("FILE");
    CLI::Option* start_at_option =
        app.add_option(
               "--start-at", start_at,
               "Begin the load (the warm-up, then the measured window) at TIME on the wall clock "
               "(CLOCK_REALTIME), in seconds since the epoch: load hosts given the same TIME "
               "(clocks "
               "synchronized by NTP or PTP) measure the same window. A TIME already past starts at "
               "once, the lateness reported as skew; at most 1 hour ahead. E.g. --start-at "
               "$(($(date +%s) + 10)), --start-at 1764907200.25")
            ->type_name("TIME");
    app.add_option("--cpus", cpus, "Pin thread i to the i-th CPU of this list (e.g. 1 or 2-3)");
    app.add_flag("--latency", c.latency_table,
                 "Print latency as a table of percentiles (50, 75, 90, 99, 99.9, 99.99, max; "
                 "with --rate corrected and uncorrected side by side) instead of one row");
    app.add_flag("-q,--quiet", c.quiet,
                 "No text summary and no progress line (errors still go to stderr)");
    app.add_flag("--announce", c.announce,
                 "Before the load starts, print 'schedule monotonic_ns start=S measure=M end=E': "
                 "when the warm-up starts, and the measured window starts and ends, on "
                 "CLOCK_MONOTONIC (for a harness that samples the server's CPU time over exactly "
                 "the measured window). With -n: 'schedule monotonic_ns start=S measure=M "
                 "requests=N limit=E|none' before, and 'measured monotonic_ns first=F last=L' "
                 "(the first measured request sent, the N-th response) when the load ends. With "
                 "--start-at, when the load ends: 'start_at realtime_s=T started_s=S skew_s=X' "
                 "(S: when the last load thread woke to begin)");
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
    std::vector<RequestLine> lines;
    for (const auto& u : urls)
        lines.push_back(RequestLine{{}, u, {}, 0});
    if (!c.urls_file.empty()) {
        try {
            auto more = parse_request_lines(read_text_file(c.urls_file), c.urls_file);
            if (more.empty()) return error(fmt::format("--urls {}: no request in it", c.urls_file));
            lines.insert(lines.end(), std::make_move_iterator(more.begin()),
                         std::make_move_iterator(more.end()));
        } catch (const std::invalid_argument& e) {
            return error(e.what());
        }
    }
    if (lines.empty()) return error("a URL is required (or --urls FILE)");
    if (lines.size() > kMaxUrls)
        return error(fmt::format("{} URLs: a mix has at most {}", lines.size(), kMaxUrls));
    for (const auto& line : lines) {
        const std::string where =
            line.line ? fmt::format("{}:{}: {}", c.urls_file, line.line, line.url) : line.url;
        Request r;
        try {
            r.target = parse_url(line.url);
        } catch (const std::invalid_argument& e) {
            return error(fmt::format("{}: {}", where, e.what()));
        }
        if (!c.requests.empty() &&
            (r.target.host != c.target.host || r.target.port != c.target.port))
            return error(fmt::format(
                "{}: every URL must name the same host and port as the first ({}:{}): each "
                "connection carries the whole mix",
                where, c.target.host, c.target.port));
        if (c.requests.empty()) c.target = r.target;
        r.method = line.method;
        r.headers = line.headers;
        c.requests.push_back(std::move(r));
    }
    try {
        c.duration = parse_duration(duration);
        c.warmup = parse_duration(warmup);
        c.timeout = parse_duration(timeout);
        c.hlog_interval = parse_duration(hlog_interval);
        if (start_at_option->count() > 0) {
            timespec now{};
            ::clock_gettime(CLOCK_REALTIME, &now);
            c.start_at_ns = parse_start_at(
                start_at, static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec);
        }
    } catch (const std::invalid_argument& e) {
        return error(e.what());
    }
    if (c.hlog_interval < kMinHlogInterval)
        return error(
            fmt::format("--hlog-interval must be at least {}ms", kMinHlogInterval.count()));
    if (c.hlog_path == "-" && c.hgrm_path == "-")
        return error(
            "--hlog - and --hgrm - would share stdout: write one of them to a file (stdout "
            "carries the JSON of --json -, then one of them)");
    c.engine = engine == "epoll"   ? Engine::epoll
               : engine == "uring" ? Engine::uring
                                   : Engine::automatic;
    if (c.duration.count() == 0) return error("--duration must be more than 0");
    // -n without -d: no time limit (as ab and h2load); every request ends
    // anyway, answered or failed within --timeout.
    c.time_limited = !c.counted() || duration_option->count() > 0;
    if (c.timeout < std::chrono::milliseconds(1)) return error("--timeout must be at least 1ms");
    if (c.connections < c.threads)
        return error(fmt::format(
            "--connections ({}) must be at least --threads ({}): every thread needs one",
            c.connections, c.threads));
    if (c.method.empty() || c.method.find_first_of(" \t\r\n") != std::string::npos)
        return error(fmt::format("--method '{}' is not a method token", c.method));
    for (const auto& h : c.headers)
        if (auto why = header_problem(h); !why.empty()) return error("-H " + why);
    for (auto& r : c.requests) {
        if (r.method.empty()) r.method = c.method;
        r.headers.insert(r.headers.begin(), c.headers.begin(), c.headers.end());
    }
    if (c.expect_body && c.expect_json)
        return error("give --expect-body or --expect-json, not both");
    if ((c.expect_body || c.expect_json) && c.mix())
        return error(fmt::format(
            "--expect-body and --expect-json check the response of one URL, and this mix has "
            "{}: check one URL at a time (a mix still reports status and errors per URL)",
            c.requests.size()));
    if (!cpus.empty()) {
        try {
            c.cpus = runtime::parse_cpu_list(cpus);
        } catch (const std::invalid_argument& e) {
            return error(fmt::format("--cpus: {}", e.what()));
        }
    }
    return {std::move(c), 0};
}

bool wants_progress(const Config& c, bool stderr_is_terminal) noexcept {
    return stderr_is_terminal && !c.quiet &&
           (c.counted() || c.warmup + c.duration >= kProgressMinRun);
}

std::string render_request(const Config& c) {
    if (!c.requests.empty()) return render_request(c, c.requests.front());
    return render_request(c, Request{c.target, c.method, c.headers});
}

std::string render_request(const Config& c, const Request& request) {
    std::string r = fmt::format("{} {} HTTP/1.1\r\n", request.method, request.target.path);
    bool has_host = false;
    for (const auto& h : request.headers) {
        const std::string_view name = std::string_view(h).substr(0, h.find(':'));
        if (name.size() == 4 && (name[0] | 0x20) == 'h' && (name[1] | 0x20) == 'o' &&
            (name[2] | 0x20) == 's' && (name[3] | 0x20) == 't')
            has_host = true;
    }
    if (!has_host) r += fmt::format("Host: {}\r\n", request.target.host_header);
    for (const auto& h : request.headers) {
        r += h;
        r += "\r\n";
    }
    if (!c.body.empty() || request.method == "POST" || request.method == "PUT")
        r += fmt::format("Content-Length: {}\r\n", c.body.size());
    r += "\r\n";
    r += c.body;
    return r;
}

}  // namespace sm::loadgen
