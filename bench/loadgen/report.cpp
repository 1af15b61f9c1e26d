#include "report.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "hdr.hpp"

namespace sm::loadgen {
namespace {

constexpr std::array<double, 6> kPercentiles = {50, 75, 90, 99, 99.9, 99.99};
constexpr std::array<const char*, 6> kPercentileKeys = {"50", "75", "90", "99", "99.9", "99.99"};

double seconds(std::chrono::nanoseconds d) {
    return static_cast<double>(d.count()) / 1e9;
}

std::string human_duration(std::chrono::nanoseconds d) {
    const double s = seconds(d);
    if (s >= 60 && std::fmod(s, 60) == 0) return fmt::format("{}m", static_cast<long long>(s / 60));
    if (s >= 1 || s == 0) return fmt::format("{}s", s);
    return fmt::format("{}ms", s * 1000);
}

// wrk's style: 351.20us, 1.02ms, 2.10s.
std::string human_latency(double ns) {
    if (ns < 1e6) return fmt::format("{:.2f}us", ns / 1e3);
    if (ns < 1e9) return fmt::format("{:.2f}ms", ns / 1e6);
    return fmt::format("{:.2f}s", ns / 1e9);
}

// wrk's style: 1024-based units.
std::string human_bytes(double bytes) {
    static constexpr std::array<const char*, 5> units = {"B", "KB", "MB", "GB", "TB"};
    std::size_t u = 0;
    while (bytes >= 1024 && u + 1 < units.size()) {
        bytes /= 1024;
        ++u;
    }
    return fmt::format("{:.2f}{}", bytes, units[u]);
}

std::string latency_line(const char* label, const Histogram& h) {
    std::string line = fmt::format("  {:<12}", label);
    for (double p : kPercentiles)
        line += fmt::format(" {:>9}", human_latency(static_cast<double>(h.value_at_percentile(p))));
    line += fmt::format(" {:>9} {:>9} {:>9}\n", human_latency(static_cast<double>(h.max())),
                        human_latency(h.mean()), human_latency(h.stddev()));
    return line;
}

// --latency: wrk's "Latency Distribution" layout ("     50%  351.20us", which
// scripts written for wrk parse), the maximum as its last row; with --rate
// the uncorrected latency in a second column.
std::string latency_table(const Histogram& h, const Histogram* uncorrected) {
    std::string out = fmt::format("  {:<12} {:>9} {:>9}\n", "Latency", "mean", "stdev");
    out += fmt::format("  {:<12} {:>9} {:>9}\n", uncorrected ? "Corrected" : "",
                       human_latency(h.mean()), human_latency(h.stddev()));
    if (uncorrected)
        out +=
            fmt::format("  {:<12} {:>9} {:>9}\n", "Uncorrected", human_latency(uncorrected->mean()),
                        human_latency(uncorrected->stddev()));
    out += "  Latency Distribution\n";
    if (uncorrected) out += fmt::format("{:>8}{:>10} {:>12}\n", "", "corrected", "uncorrected");
    const auto row = [&](std::string label, std::int64_t value, std::int64_t other) {
        out += fmt::format("{:>8}{:>10}", label, human_latency(static_cast<double>(value)));
        if (uncorrected) out += fmt::format(" {:>12}", human_latency(static_cast<double>(other)));
        out += "\n";
    };
    for (std::size_t i = 0; i < kPercentiles.size(); ++i)
        row(fmt::format("{}%", kPercentileKeys[i]), h.value_at_percentile(kPercentiles[i]),
            uncorrected ? uncorrected->value_at_percentile(kPercentiles[i]) : 0);
    row("max", h.max(), uncorrected ? uncorrected->max() : 0);
    return out;
}

std::string status_text(const Counters& m) {
    std::string status;
    for (std::size_t i = 0; i < m.status.size(); ++i)
        if (m.status[i])
            status += fmt::format("{}{}xx {}", status.empty() ? "" : ", ", i + 1, m.status[i]);
    return status.empty() ? "none" : status;
}

// A mix: one row per URL of the mix, after the totals.
std::string url_table(const Config& c, const Results& r) {
    std::vector<std::string> statuses;
    std::size_t width = 6;
    for (const UrlResults& u : r.urls) {
        statuses.push_back(status_text(u.counters));
        width = std::max(width, statuses.back().size());
    }
    std::string out = fmt::format(
        "  Per URL (request i of connection j goes to URL (i + j) mod {}):\n", r.urls.size());
    out += fmt::format("  {:>10} {:>8} {:>9} {:>9} {:>9}  {:<{}}  {}\n", "requests", "errors",
                       "p50", "p99", "max", "status", width, "request");
    for (std::size_t i = 0; i < r.urls.size(); ++i) {
        const UrlResults& u = r.urls[i];
        const Histogram& h = u.latency;
        const bool any = h.count() > 0;
        const auto at = [&](double p) {
            return any ? human_latency(static_cast<double>(h.value_at_percentile(p))) : "-";
        };
        const Request& q = c.requests[i];
        out += fmt::format("  {:>10} {:>8} {:>9} {:>9} {:>9}  {:<{}}  {} {}\n", u.counters.requests,
                           u.counters.error_total(), at(50), at(99),
                           any ? human_latency(static_cast<double>(h.max())) : "-", statuses[i],
                           width, q.method, q.target.path);
    }
    return out;
}

nlohmann::json latency_json(const Histogram& h, bool corrected) {
    nlohmann::json j;
    j["corrected"] = corrected;
    j["count"] = h.count();
    j["min_us"] = static_cast<double>(h.min()) / 1e3;
    j["max_us"] = static_cast<double>(h.max()) / 1e3;
    j["mean_us"] = h.mean() / 1e3;
    j["stdev_us"] = h.stddev() / 1e3;
    j["saturated"] = h.saturated();
    auto& p = j["percentiles_us"] = nlohmann::json::object();
    auto& s = j["spectrum"] = nlohmann::json::array();
    if (h.count() == 0) return j;
    for (std::size_t i = 0; i < kPercentiles.size(); ++i)
        p[kPercentileKeys[i]] = static_cast<double>(h.value_at_percentile(kPercentiles[i])) / 1e3;
    for (const auto& step : h.spectrum())
        s.push_back({{"percentile", step.percentile},
                     {"value_us", static_cast<double>(step.value_ns) / 1e3},
                     {"count", step.cumulative}});
    return j;
}

nlohmann::json status_json(const Counters& m) {
    return {{"1xx", m.status[0]},
            {"2xx", m.status[1]},
            {"3xx", m.status[2]},
            {"4xx", m.status[3]},
            {"5xx", m.status[4]}};
}

const char* ended_name(Ended e) {
    switch (e) {
        case Ended::completed: return "completed";
        case Ended::server_gone: return "server_gone";
        case Ended::interrupted: return "interrupted";
    }
    return "completed";
}

}  // namespace

std::string describe_run(const Config& c) {
    std::string shape =
        c.open_loop() ? fmt::format("open loop at {} req/s", c.rate) : "closed loop";
    std::string what = human_duration(c.duration) + " test";
    if (c.counted())
        what = fmt::format(
            "{} requests{}", c.request_count,
            c.time_limited ? fmt::format(" (time limit {})", human_duration(c.duration)) : "");
    const std::string where =
        c.mix() ? fmt::format("{} and {} more URL{} (round-robin over each connection)",
                              c.target.url, c.requests.size() - 1, c.requests.size() > 2 ? "s" : "")
                : c.target.url;
    return fmt::format(
        "Running {} @ {}\n  {} threads and {} connections, {}, pipeline {}{}\n", what, where,
        c.threads, c.connections, shape, c.pipeline,
        c.warmup.count() ? fmt::format(", after {} warm-up", human_duration(c.warmup)) : "");
}

std::string progress_line(const Config& c, const ProgressSample& p) {
    const long long elapsed = p.elapsed_ns / 1'000'000'000;  // whole seconds, as a clock shows
    // -n: the run is N responses long, its time unknown.
    const std::string clock =
        c.counted() ? fmt::format("[{}s]", elapsed)
                    : fmt::format("[{}s/{}]", elapsed, human_duration(c.warmup + c.duration));
    const std::string count = p.warming_up  ? fmt::format("warm-up: {}", p.responses)
                              : c.counted() ? fmt::format("{}/{}", p.responses, c.request_count)
                                            : fmt::format("{}", p.responses);
    return fmt::format("{} {} responses, {:.0f} req/s, {} error{}", clock, count, p.per_second,
                       p.errors, p.errors == 1 ? "" : "s");
}

std::string text_report(const Config& c, const Outcome& o) {
    const Results& r = o.results;
    const Counters& m = r.measured;
    std::string out;
    if (c.warmup.count())
        out += fmt::format("  Warm-up: {} requests, {} errors (not counted below)\n",
                           r.warmup.requests, r.warmup.error_total());
    if (c.latency_table) {
        if (r.latency.count() == 0)
            out += "  Latency: (no request completed)\n";
        else
            out += latency_table(r.latency, c.open_loop() ? &r.uncorrected : nullptr);
    } else {
        out += fmt::format("  {:<12}", "Latency");
        for (const char* k : kPercentileKeys)
            out += fmt::format(" {:>9}", fmt::format("p{}", k));
        out += fmt::format(" {:>9} {:>9} {:>9}\n", "max", "mean", "stdev");
        if (r.latency.count() == 0) {
            out += "  (no request completed)\n";
        } else {
            out += latency_line(c.open_loop() ? "Corrected" : "", r.latency);
            if (c.open_loop()) out += latency_line("Uncorrected", r.uncorrected);
        }
    }
    out += fmt::format("  {} requests in {:.2f}s, {} read\n", m.requests, r.measured_s,
                       human_bytes(static_cast<double>(m.bytes)));
    if (c.counted() && o.ended == Ended::completed) {
        if (o.stopped_by == StoppedBy::duration)
            out +=
                fmt::format("  Stopped by the time limit ({}) before -n {}: {} sent, {} answered\n",
                            human_duration(c.duration), c.request_count, m.sent, m.requests);
        else if (m.requests < c.request_count)
            out += fmt::format("  {} of the {} requests got no response (see Errors)\n",
                               c.request_count - m.requests, c.request_count);
    }
    out += fmt::format("  Status: {}\n", status_text(m));
    std::string errors;
    for (std::size_t i = 0; i < kErrorClasses; ++i)
        if (m.errors[i])
            errors +=
                fmt::format("{}{} {}", errors.empty() ? "" : ", ", kErrorNames[i], m.errors[i]);
    out += fmt::format("  Errors: {}\n", errors.empty() ? "none" : errors);
    for (std::size_t i = 0; i < kErrorClasses; ++i)
        if (m.errors[i] && !r.first_error[i].empty())
            out += fmt::format("    first {} error: {}\n", kErrorNames[i], r.first_error[i]);
    const auto e = [&](Error x) { return m.errors[static_cast<std::size_t>(x)]; };
    if (e(Error::connect) || e(Error::read) || e(Error::write) || e(Error::timeout))
        out += fmt::format("  Socket errors: connect {}, read {}, write {}, timeout {}\n",
                           e(Error::connect), e(Error::read), e(Error::write), e(Error::timeout));
    if (e(Error::non_2xx))
        out += fmt::format("  Non-2xx or 3xx responses: {}\n", e(Error::non_2xx));
    if (r.reconnects)
        out += fmt::format("  Connections: {} opened, {} reopened\n", r.opened, r.reconnects);
    if (c.mix()) out += url_table(c, r);
    const double cpu = r.user_s + r.sys_s;
    if (m.requests)
        out += fmt::format(
            "  Client CPU: {:.2f}us/req (user {:.2f}s, sys {:.2f}s, {:.0f}% of {} thread{})\n",
            cpu * 1e6 / static_cast<double>(m.requests), r.user_s, r.sys_s,
            r.measured_s > 0 ? 100.0 * cpu / (r.measured_s * c.threads) : 0.0, c.threads,
            c.threads == 1 ? "" : "s");
    const double secs = r.measured_s > 0 ? r.measured_s : 1;
    out += fmt::format("Requests/sec: {:>10.2f}\n", static_cast<double>(m.requests) / secs);
    out += fmt::format("Transfer/sec: {:>10}\n", human_bytes(static_cast<double>(m.bytes) / secs));
    if (o.ended == Ended::server_gone) out += fmt::format("Run ended early: {}\n", o.message);
    if (o.ended == Ended::interrupted)
        out += "Run interrupted: the figures cover the time until then.\n";
    return out;
}

std::string json_report(const Config& c, const Outcome& o) {
    const Results& r = o.results;
    const Counters& m = r.measured;
    nlohmann::json j;
    j["tool"] = "loadgen";
    j["schema"] = 1;
    j["version"] = SM_VERSION;
    j["command"] = c.argv;
    nlohmann::json cfg;
    cfg["url"] = c.target.url;
    cfg["connections"] = c.connections;
    cfg["threads"] = c.threads;
    cfg["duration_s"] =
        c.time_limited ? nlohmann::json(seconds(c.duration)) : nlohmann::json(nullptr);
    cfg["requests"] = c.counted() ? nlohmann::json(c.request_count) : nlohmann::json(nullptr);
    cfg["warmup_s"] = seconds(c.warmup);
    cfg["pipeline"] = c.pipeline;
    cfg["rate"] = c.open_loop() ? nlohmann::json(c.rate) : nlohmann::json(nullptr);
    cfg["timeout_s"] = seconds(c.timeout);
    cfg["engine"] = engine_name(c.engine);  // the one used: "epoll" or "uring"
    cfg["method"] = c.method;
    cfg["headers"] = c.headers;
    cfg["body_bytes"] = c.body.size();
    if (c.expect_body)
        cfg["expect"] = {{"body", *c.expect_body}};
    else if (c.expect_json)
        cfg["expect"] = {{"json", *c.expect_json}};
    else
        cfg["expect"] = nullptr;
    j["config"] = cfg;
    j["ended"] = ended_name(o.ended);
    j["message"] = o.message.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.message);
    j["stopped_by"] = o.ended != Ended::completed           ? nlohmann::json(nullptr)
                      : o.stopped_by == StoppedBy::requests ? nlohmann::json("requests")
                                                            : nlohmann::json("duration");
    j["duration_s"] = r.measured_s;
    // The measured window's start on the wall clock: the hlog's BaseTime.
    j["window_start_s"] = static_cast<double>(o.window_start_ns) / 1e9;
    j["start_at"] =
        o.start_requested_ns
            ? nlohmann::json{{"requested_s", static_cast<double>(*o.start_requested_ns) / 1e9},
                             {"started_s", static_cast<double>(o.started_ns) / 1e9},
                             {"skew_s",
                              static_cast<double>(o.started_ns - *o.start_requested_ns) / 1e9}}
            : nlohmann::json(nullptr);
    j["sent"] = m.sent;
    j["requests"] = m.requests;
    j["bytes_read"] = m.bytes;
    const double secs = r.measured_s > 0 ? r.measured_s : 1;
    j["requests_per_s"] = static_cast<double>(m.requests) / secs;
    j["bytes_per_s"] = static_cast<double>(m.bytes) / secs;
    j["status"] = status_json(m);
    auto& errors = j["errors"] = nlohmann::json::object();
    auto& messages = j["error_messages"] = nlohmann::json::object();
    for (std::size_t i = 0; i < kErrorClasses; ++i) {
        errors[std::string(kErrorNames[i])] = m.errors[i];
        if (!r.first_error[i].empty()) messages[std::string(kErrorNames[i])] = r.first_error[i];
    }
    j["connections"] = {
        {"opened", r.opened}, {"reconnects", r.reconnects}, {"open_at_end", r.open_at_end}};
    j["latency"] = latency_json(r.latency, c.open_loop());
    j["latency_uncorrected"] =
        c.open_loop() ? latency_json(r.uncorrected, false) : nlohmann::json(nullptr);
    auto& urls = j["urls"] = nlohmann::json::array();
    for (std::size_t i = 0; i < r.urls.size() && i < c.requests.size(); ++i) {
        const Request& q = c.requests[i];
        const Counters& u = r.urls[i].counters;
        nlohmann::json e;
        e["url"] = q.target.url;
        e["method"] = q.method;
        e["headers"] = q.headers;
        e["sent"] = u.sent;
        e["requests"] = u.requests;
        e["status"] = status_json(u);
        auto& ue = e["errors"] = nlohmann::json::object();
        for (std::size_t k = 0; k < kErrorClasses; ++k)
            ue[std::string(kErrorNames[k])] = u.errors[k];
        e["latency"] = latency_json(r.urls[i].latency, c.open_loop());
        urls.push_back(std::move(e));
    }
    j["warmup"] = {{"requests", r.warmup.requests}, {"errors", r.warmup.error_total()}};
    const double cpu = r.user_s + r.sys_s;
    j["client_cpu"] = {
        {"user_s", r.user_s},
        {"sys_s", r.sys_s},
        {"us_per_request", m.requests ? nlohmann::json(cpu * 1e6 / static_cast<double>(m.requests))
                                      : nlohmann::json(nullptr)}};
    return j.dump(1) + "\n";
}

std::string hlog_report(const Config& c, const Outcome& o) {
    hdr::LogSpec spec;
    spec.base_time_ns = o.window_start_ns;
    spec.interval_ns = c.hlog_interval.count();
    spec.window_ns = o.window_ns;
    // Closed loop: no correction, one untagged series; --rate: both.
    spec.tags = c.open_loop() ? std::vector<std::string>{"corrected", "uncorrected"}
                              : std::vector<std::string>{""};
    return hdr::interval_log(spec, o.results.intervals);
}

std::string hgrm_report(const Config& /*c*/, const Outcome& o) {
    return hdr::percentile_distribution(o.results.latency, 5, 1e6);
}

}  // namespace sm::loadgen
