#include "integration_support.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/io_uring_check.hpp"
#include "support/wait.hpp"

namespace sm::test::loadgen {
namespace {

std::string binary_from(const char* env, const char* compiled) {
    const char* value = std::getenv(env);
    std::string path = value != nullptr && *value != '\0' ? value : compiled;
    if (::access(path.c_str(), X_OK) != 0) {
        throw std::runtime_error(std::string(env) + "=" + path +
                                 " is not an executable file (build the loadgen and server-epoll "
                                 "targets, or set " +
                                 env + ")");
    }
    return path;
}

std::string errno_text(std::string_view what, int err) {
    return std::string(what) + ": " + std::strerror(err);
}

std::string join(const std::string& binary, const std::vector<std::string>& args) {
    std::string s = binary;
    for (const auto& a : args) {
        const bool quote = a.empty() || a.find_first_of(" \t'\"{}") != std::string::npos;
        s += quote ? " '" + a + "'" : " " + a;
    }
    return s;
}

Run collect(std::string command, RunResult result, const TempFile& json) {
    Run run;
    run.command = std::move(command);
    run.result = std::move(result);
    run.json_text = json.read();
    if (!run.json_text.empty()) {
        try {
            run.report.emplace(run.json_text);
        } catch (const std::runtime_error&) {
            run.report.reset();  // describe() shows the text; json() fails the test
        }
    }
    return run;
}

enum class Kind {
    integer,
    number,
    string,
    boolean,
    object,
    array,
    null,
    null_or_number,
    null_or_string,
    null_or_object
};

const char* kind_name(Kind kind) {
    switch (kind) {
        case Kind::integer: return "a non-negative integer";
        case Kind::number: return "a number";
        case Kind::string: return "a string";
        case Kind::boolean: return "true or false";
        case Kind::object: return "an object";
        case Kind::array: return "an array";
        case Kind::null: return "null";
        case Kind::null_or_number: return "null or a number";
        case Kind::null_or_string: return "null or a string";
        case Kind::null_or_object: return "null or an object";
    }
    return "?";
}

bool matches(simdjson::dom::element e, Kind kind) {
    using simdjson::dom::element_type;
    const element_type t = e.type();
    const bool is_number =
        t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
    switch (kind) {
        case Kind::integer: return !e.get_uint64().error();
        case Kind::number: return is_number;
        case Kind::string: return t == element_type::STRING;
        case Kind::boolean: return t == element_type::BOOL;
        case Kind::object: return t == element_type::OBJECT;
        case Kind::array: return t == element_type::ARRAY;
        case Kind::null: return t == element_type::NULL_VALUE;
        case Kind::null_or_number: return t == element_type::NULL_VALUE || is_number;
        case Kind::null_or_string:
            return t == element_type::NULL_VALUE || t == element_type::STRING;
        case Kind::null_or_object:
            return t == element_type::NULL_VALUE || t == element_type::OBJECT;
    }
    return false;
}

// CHECKs that `pointer` exists with the documented kind; returns whether it does.
bool check_key(const Report& r, const std::string& pointer, Kind kind) {
    INFO("JSON " << pointer << " must be " << kind_name(kind));
    const bool present = r.has(pointer);
    CHECK(present);
    if (!present) return false;
    const simdjson::dom::element e = r.at(pointer);
    INFO("it is " << simdjson::minify(e));
    const bool ok = matches(e, kind);
    CHECK(ok);
    return ok;
}

// The latency block at `base` ("/latency", "/latency_uncorrected").
void check_latency(const Report& r, const std::string& base, std::uint64_t requests) {
    const auto key = [&](std::string_view k) { return base + "/" + std::string(k); };
    check_key(r, key("corrected"), Kind::boolean);
    const bool has_count = check_key(r, key("count"), Kind::integer);
    bool numbers = true;
    for (const char* k : {"min_us", "max_us", "mean_us", "stdev_us"})
        numbers = check_key(r, key(k), Kind::number) && numbers;
    const bool has_percentiles = check_key(r, key("percentiles_us"), Kind::object);
    const bool has_spectrum = check_key(r, key("spectrum"), Kind::array);
    if (!has_count) return;
    const std::uint64_t count = r.count(key("count"));
    INFO(base << "/count is " << count << ", requests " << requests);
    CHECK(count == requests);

    // Values are kept to 3 significant digits: a percentile is the highest
    // value of its bucket, which may lie a little above the exact maximum.
    const auto slack = [](double v) { return v / 512.0 + 1.0; };
    if (numbers && count > 0) {
        const double min = r.number(key("min_us"));
        const double max = r.number(key("max_us"));
        const double mean = r.number(key("mean_us"));
        INFO("min_us " << min << ", mean_us " << mean << ", max_us " << max);
        CHECK(min >= 0.0);
        CHECK(min <= max);
        CHECK(mean >= min - slack(min));
        CHECK(mean <= max + slack(max));
        CHECK(r.number(key("stdev_us")) >= 0.0);
    }

    if (has_percentiles) {
        const simdjson::dom::object percentiles = r.at(key("percentiles_us")).get_object().value();
        if (count == 0) {
            INFO(base << "/percentiles_us must be empty when no request completed: "
                      << simdjson::minify(r.at(key("percentiles_us"))));
            CHECK(percentiles.size() == 0);
        } else {
            double previous = 0.0;
            for (const char* p : {"50", "75", "90", "99", "99.9", "99.99"}) {
                const std::string pointer = key("percentiles_us") + "/" + p;
                if (!check_key(r, pointer, Kind::number)) continue;
                const double v = r.number(pointer);
                INFO(pointer << " = " << v << ", the percentile before it " << previous);
                CHECK(v >= previous);
                previous = v;
            }
            if (numbers) {
                const double max = r.number(key("max_us"));
                INFO("the highest percentile " << previous << ", max_us " << max);
                CHECK(previous <= max + slack(max));
            }
        }
    }

    if (has_spectrum) {
        const simdjson::dom::array spectrum = r.at(key("spectrum")).get_array().value();
        if (count == 0) {
            INFO(base << "/spectrum must be empty when no request completed");
            CHECK(spectrum.size() == 0);
            return;
        }
        INFO(base << "/spectrum: " << simdjson::minify(r.at(key("spectrum"))));
        REQUIRE(spectrum.size() > 0);
        double last_percentile = -1.0;
        double last_value = -1.0;
        std::uint64_t last_count = 0;
        std::size_t i = 0;
        bool shaped = true;
        for (const simdjson::dom::element step : spectrum) {
            const std::string at = key("spectrum") + "/" + std::to_string(i++);
            bool ok = check_key(r, at + "/percentile", Kind::number);
            ok = check_key(r, at + "/value_us", Kind::number) && ok;
            ok = check_key(r, at + "/count", Kind::integer) && ok;
            if (!ok) {
                shaped = false;
                continue;
            }
            const double percentile = step["percentile"].get_double().value();
            const double value = step["value_us"].get_double().value();
            const std::uint64_t cumulative = step["count"].get_uint64().value();
            INFO("step " << at << ": percentile " << percentile << ", value_us " << value
                         << ", count " << cumulative);
            CHECK(percentile > last_percentile);
            CHECK(percentile <= 100.0);
            CHECK(value >= last_value);
            CHECK(cumulative >= last_count);
            last_percentile = percentile;
            last_value = value;
            last_count = cumulative;
        }
        if (shaped) {
            INFO("the spectrum must end at 100% with every request counted");
            CHECK(last_percentile == Approx(100.0).epsilon(1e-12));
            CHECK(last_count == count);
        }
    }
}

}  // namespace

const std::string& loadgen_binary() {
    static const std::string path = binary_from("SM_LOADGEN_BINARY", SM_LOADGEN_BINARY);
    return path;
}

const std::string& server_epoll_binary() {
    static const std::string path = binary_from("SM_SERVER_EPOLL_BINARY", SM_SERVER_EPOLL_BINARY);
    return path;
}

namespace {

// The uring engine's run is skipped as a whole (exit 77, "skipped" in ctest)
// where io_uring is refused, instead of failing every case.
const bool uring_checked = [] {
    const char* engine = std::getenv("SM_LOADGEN_ENGINE");
    if (engine != nullptr && std::string(engine) == "uring")
        exit_skipped_unless_io_uring("loadgen-uring");
    return true;
}();

}  // namespace

const std::string& loadgen_engine() {
    static const std::string engine = [] {
        const char* value = std::getenv("SM_LOADGEN_ENGINE");
        std::string e = value != nullptr ? value : "";
        if (!e.empty() && e != "epoll" && e != "uring" && e != "auto")
            throw std::runtime_error("SM_LOADGEN_ENGINE=" + e + ": expected epoll, uring or auto");
        return e;
    }();
    return engine;
}

std::string deny_io_uring_launcher() {
    const char* value = std::getenv("SM_DENY_IO_URING");
    if (value != nullptr && *value != '\0') return value;
#ifdef SM_DENY_IO_URING_BINARY
    return SM_DENY_IO_URING_BINARY;
#else
    return {};
#endif
}

std::unique_ptr<ServerProcess> start_epoll(const std::string& address) {
    return std::make_unique<ServerProcess>(
        server_epoll_binary(),
        std::vector<std::string>{"--address", address, "--port", "0", "--threads", "1"});
}

std::string url_of(const std::string& host, std::uint16_t port, std::string_view path) {
    const bool v6 = host.find(':') != std::string::npos;
    return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
           std::string(path);
}

std::string url_of(const ServerProcess& server, std::string_view path) {
    return url_of(server.host(), server.port(), path);
}

TempFile::TempFile() {
    const char* dir = std::getenv("TMPDIR");
    std::string name =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/sm-loadgen-test-XXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw std::runtime_error(errno_text("mkstemp " + name, errno));
    ::close(fd);
    path_ = std::move(name);
}

TempFile::~TempFile() {
    ::unlink(path_.c_str());
}

std::string TempFile::read() const {
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

Report::Report(std::string text)
    : text_(std::move(text)), parser_(std::make_unique<simdjson::dom::parser>()) {
    const auto error = parser_->parse(text_).get(root_);
    if (error) {
        throw std::runtime_error(std::string("not valid JSON (") + simdjson::error_message(error) +
                                 "): " + text_);
    }
}

bool Report::has(std::string_view pointer) const {
    return !root_.at_pointer(pointer).error();
}

simdjson::dom::element Report::at(std::string_view pointer) const {
    simdjson::dom::element e;
    if (root_.at_pointer(pointer).get(e)) {
        throw std::runtime_error("the JSON report has no " + std::string(pointer));
    }
    return e;
}

std::uint64_t Report::count(std::string_view pointer) const {
    std::uint64_t v = 0;
    if (at(pointer).get_uint64().get(v)) {
        throw std::runtime_error(
            "JSON " + std::string(pointer) +
            " is not a non-negative integer: " + simdjson::minify(at(pointer)));
    }
    return v;
}

double Report::number(std::string_view pointer) const {
    double v = 0;
    if (at(pointer).get_double().get(v)) {
        throw std::runtime_error("JSON " + std::string(pointer) +
                                 " is not a number: " + simdjson::minify(at(pointer)));
    }
    return v;
}

std::string Report::string(std::string_view pointer) const {
    std::string_view v;
    if (at(pointer).get_string().get(v)) {
        throw std::runtime_error("JSON " + std::string(pointer) +
                                 " is not a string: " + simdjson::minify(at(pointer)));
    }
    return std::string(v);
}

bool Report::boolean(std::string_view pointer) const {
    bool v = false;
    if (at(pointer).get_bool().get(v)) {
        throw std::runtime_error("JSON " + std::string(pointer) +
                                 " is not true or false: " + simdjson::minify(at(pointer)));
    }
    return v;
}

bool Report::is_null(std::string_view pointer) const {
    return at(pointer).is_null();
}

const Report& Run::json() const {
    INFO(describe());
    REQUIRE(report.has_value());
    return *report;
}

std::uint64_t Run::total_errors() const {
    const Report& r = json();
    std::uint64_t sum = 0;
    for (const auto c : kErrorClasses)
        sum += r.count("/errors/" + std::string(c));
    return sum;
}

std::string Run::describe() const {
    std::string s = "command: " + command + "\nstatus: " + result.status.describe() +
                    "\n--- stdout ---\n" + result.out + "--- stderr ---\n" + result.err +
                    "--- JSON ---\n";
    s += json_text.empty() ? "(nothing written)\n" : json_text + "\n";
    if (!json_text.empty() && !report) s += "(not valid JSON)\n";
    return s;
}

std::vector<std::string> with_engine(const std::vector<std::string>& args) {
    std::vector<std::string> full;
    if (!loadgen_engine().empty()) full = {"--engine", loadgen_engine()};
    full.insert(full.end(), args.begin(), args.end());
    return full;
}

Run run_loadgen(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
    const TempFile json;
    std::vector<std::string> full = {"--json", json.path()};
    if (!loadgen_engine().empty()) full.insert(full.end(), {"--engine", loadgen_engine()});
    full.insert(full.end(), args.begin(), args.end());
    RunResult result = run_to_exit(loadgen_binary(), full, timeout);
    return collect(join(loadgen_binary(), full), std::move(result), json);
}

Run run_loadgen_under(const std::string& launcher, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout) {
    const TempFile json;
    std::vector<std::string> full = {"--json", json.path()};
    full.insert(full.end(), args.begin(), args.end());
    if (launcher.empty()) {
        RunResult result = run_to_exit(loadgen_binary(), full, timeout);
        return collect(join(loadgen_binary(), full), std::move(result), json);
    }
    full.insert(full.begin(), loadgen_binary());
    RunResult result = run_to_exit(launcher, full, timeout);
    return collect(join(launcher, full), std::move(result), json);
}

BackgroundLoadgen::BackgroundLoadgen(const std::vector<std::string>& args) {
    std::vector<std::string> full = {"--json", json_.path()};
    if (!loadgen_engine().empty()) full.insert(full.end(), {"--engine", loadgen_engine()});
    full.insert(full.end(), args.begin(), args.end());
    command_ = join(loadgen_binary(), full);
    process_ = std::make_unique<BackgroundProcess>(loadgen_binary(), full);
}

Run BackgroundLoadgen::finish(std::chrono::milliseconds timeout) {
    RunResult result = process_->wait(timeout);
    return collect(command_, std::move(result), json_);
}

void check_schema(const Report& r) {
    // Identification.
    if (check_key(r, "/tool", Kind::string)) CHECK(r.string("/tool") == "loadgen");
    if (check_key(r, "/schema", Kind::integer)) CHECK(r.count("/schema") == 1);
    if (check_key(r, "/version", Kind::string)) CHECK_FALSE(r.string("/version").empty());
    if (check_key(r, "/command", Kind::array)) {
        const simdjson::dom::array command = r.at("/command").get_array().value();
        CHECK(command.size() > 0);
        for (std::size_t i = 0; i < command.size(); ++i)
            check_key(r, "/command/" + std::to_string(i), Kind::string);
    }

    // The configuration.
    check_key(r, "/config", Kind::object);
    check_key(r, "/config/url", Kind::string);
    for (const char* k : {"connections", "threads", "pipeline", "body_bytes"})
        check_key(r, std::string("/config/") + k, Kind::integer);
    for (const char* k : {"duration_s", "warmup_s", "timeout_s"})
        check_key(r, std::string("/config/") + k, Kind::number);
    check_key(r, "/config/rate", Kind::null_or_number);
    check_key(r, "/config/method", Kind::string);
    if (check_key(r, "/config/engine", Kind::string)) {
        // The engine used, never "auto"; the one the command asked for, if it did.
        const std::string engine = r.string("/config/engine");
        std::string asked;
        if (r.has("/command") && matches(r.at("/command"), Kind::array)) {
            bool next = false;
            const simdjson::dom::array command = r.at("/command").get_array().value();
            for (const simdjson::dom::element e : command) {
                std::string_view arg;
                if (e.get_string().get(arg)) continue;
                if (next) asked = std::string(arg);
                next = arg == "--engine";
                if (arg.starts_with("--engine=")) asked = std::string(arg.substr(9));
            }
        }
        INFO("config.engine is \"" << engine << "\", the command asked for \"" << asked << "\"");
        CHECK((engine == "epoll" || engine == "uring"));
        if (asked == "epoll" || asked == "uring") CHECK(engine == asked);
    }
    if (check_key(r, "/config/headers", Kind::array)) {
        const simdjson::dom::array headers = r.at("/config/headers").get_array().value();
        for (std::size_t i = 0; i < headers.size(); ++i)
            check_key(r, "/config/headers/" + std::to_string(i), Kind::string);
    }
    if (check_key(r, "/config/expect", Kind::null_or_object) && !r.is_null("/config/expect")) {
        const bool body = r.has("/config/expect/body");
        const bool json = r.has("/config/expect/json");
        INFO("config.expect must be {\"body\": ...} or {\"json\": ...}");
        CHECK(body != json);
        if (body) check_key(r, "/config/expect/body", Kind::string);
        if (json) check_key(r, "/config/expect/json", Kind::string);
    }

    // How it ended.
    if (check_key(r, "/ended", Kind::string)) {
        const std::string ended = r.string("/ended");
        INFO("ended: " << ended);
        CHECK((ended == "completed" || ended == "server_gone" || ended == "interrupted"));
        if (check_key(r, "/message", Kind::null_or_string)) {
            if (ended == "completed") {
                CHECK(r.is_null("/message"));
            } else {
                INFO("a run that ended early says why");
                CHECK_FALSE(r.is_null("/message"));
                if (!r.is_null("/message")) CHECK_FALSE(r.string("/message").empty());
            }
        }
    }

    // Totals.
    const bool has_duration = check_key(r, "/duration_s", Kind::number);
    const bool has_requests = check_key(r, "/requests", Kind::integer);
    const bool has_bytes = check_key(r, "/bytes_read", Kind::integer);
    const bool has_rps = check_key(r, "/requests_per_s", Kind::number);
    const bool has_bps = check_key(r, "/bytes_per_s", Kind::number);
    const std::uint64_t requests = has_requests ? r.count("/requests") : 0;
    if (has_duration) CHECK(r.number("/duration_s") >= 0.0);
    if (has_duration && has_requests && has_rps && r.number("/duration_s") > 0.0) {
        const double expected = static_cast<double>(requests) / r.number("/duration_s");
        INFO("requests_per_s must be requests / duration_s = " << expected);
        CHECK(r.number("/requests_per_s") == Approx(expected).epsilon(0.01).margin(0.01));
    }
    if (has_duration && has_bytes && has_bps && r.number("/duration_s") > 0.0) {
        const double expected =
            static_cast<double>(r.count("/bytes_read")) / r.number("/duration_s");
        INFO("bytes_per_s must be bytes_read / duration_s = " << expected);
        CHECK(r.number("/bytes_per_s") == Approx(expected).epsilon(0.01).margin(0.01));
    }
    if (has_requests && has_bytes && requests > 0) CHECK(r.count("/bytes_read") > 0);

    // Status classes: every completed response has one.
    if (check_key(r, "/status", Kind::object)) {
        std::uint64_t sum = 0;
        bool all = true;
        for (const auto c : kStatusClasses) {
            const std::string pointer = "/status/" + std::string(c);
            if (check_key(r, pointer, Kind::integer)) {
                if (c != "1xx") sum += r.count(pointer);
            } else {
                all = false;
            }
        }
        if (all && has_requests) {
            INFO("status 2xx..5xx must add up to requests (" << requests << ")");
            CHECK(sum == requests);
        }
    }

    // Error classes, each with its first message.
    check_key(r, "/errors", Kind::object);
    const bool has_messages = check_key(r, "/error_messages", Kind::object);
    if (has_messages) {
        const simdjson::dom::object messages = r.at("/error_messages").get_object().value();
        for (const simdjson::dom::key_value_pair field : messages) {
            const std::string_view name = field.key;
            bool known = false;
            for (const auto c : kErrorClasses)
                known = known || c == name;
            INFO("error_messages has the key \"" << name << "\"");
            CHECK(known);
            check_key(r, "/error_messages/" + std::string(name), Kind::string);
        }
    }
    for (const auto c : kErrorClasses) {
        const std::string pointer = "/errors/" + std::string(c);
        if (!check_key(r, pointer, Kind::integer) || !has_messages) continue;
        const std::string message = "/error_messages/" + std::string(c);
        if (r.count(pointer) > 0) {
            INFO(pointer << " = " << r.count(pointer) << ": its first message must be kept");
            if (check_key(r, message, Kind::string)) CHECK_FALSE(r.string(message).empty());
        }
    }

    // Connections.
    check_key(r, "/connections", Kind::object);
    bool connections = true;
    for (const char* k : {"opened", "reconnects", "open_at_end"})
        connections = check_key(r, std::string("/connections/") + k, Kind::integer) && connections;
    if (connections) CHECK(r.count("/connections/open_at_end") <= r.count("/connections/opened"));

    // Latency, and the uncorrected latency that only --rate has.
    if (check_key(r, "/latency", Kind::object)) check_latency(r, "/latency", requests);
    if (check_key(r, "/latency_uncorrected", Kind::null_or_object) &&
        !r.is_null("/latency_uncorrected")) {
        check_latency(r, "/latency_uncorrected", requests);
    }
    if (r.has("/config/rate") && r.has("/latency/corrected") && r.has("/latency_uncorrected")) {
        const bool open_loop = !r.is_null("/config/rate");
        INFO("config.rate is " << simdjson::minify(r.at("/config/rate")));
        if (matches(r.at("/latency/corrected"), Kind::boolean))
            CHECK(r.boolean("/latency/corrected") == open_loop);
        CHECK(r.is_null("/latency_uncorrected") == !open_loop);
    }

    // Warm-up and the client's own CPU time.
    check_key(r, "/warmup", Kind::object);
    check_key(r, "/warmup/requests", Kind::integer);
    check_key(r, "/warmup/errors", Kind::integer);
    check_key(r, "/client_cpu", Kind::object);
    for (const char* k : {"user_s", "sys_s"}) {
        const std::string pointer = std::string("/client_cpu/") + k;
        if (check_key(r, pointer, Kind::number)) CHECK(r.number(pointer) >= 0.0);
    }
    // Per request: null when no request completed (nothing to divide by).
    if (requests == 0) {
        check_key(r, "/client_cpu/us_per_request", Kind::null);
    } else if (check_key(r, "/client_cpu/us_per_request", Kind::number)) {
        CHECK(r.number("/client_cpu/us_per_request") >= 0.0);
    }
}

bool has_line_starting(std::string_view text, std::string_view prefix) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t eol = text.find('\n', pos);
        std::string_view line =
            text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            line.remove_prefix(1);
        if (line.starts_with(prefix)) return true;
        if (eol == std::string_view::npos) break;
        pos = eol + 1;
    }
    return false;
}

RefusingPort::RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(errno_text("socket", errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const int err = errno;
        ::close(fd_);
        throw std::runtime_error(errno_text("bind 127.0.0.1:0", err));
    }
    port_ = ntohs(addr.sin_port);
}

RefusingPort::~RefusingPort() {
    ::close(fd_);
}

MisbehavingServer::MisbehavingServer(Behavior behavior) : behavior_(std::move(behavior)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::runtime_error(errno_text("socket", errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 1024) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const int err = errno;
        ::close(listener_);
        throw std::runtime_error(errno_text("listen on 127.0.0.1:0", err));
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::jthread([this](const std::stop_token& stop) { serve(stop); });
}

MisbehavingServer::~MisbehavingServer() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
}

std::string MisbehavingServer::url(std::string_view path) const {
    return url_of("127.0.0.1", port_, path);
}

void MisbehavingServer::serve(const std::stop_token& stop) {
    struct Client {
        int fd = -1;
        std::string in;        // received, not yet taken as requests
        std::size_t next = 0;  // index of the next request on this connection
        bool closing = false;  // replied with close_after: waiting for the client's EOF
    };
    // Bounded: the client may never read, so a send waits a second at most.
    const auto send_all = [](int fd, std::string_view bytes) {
        const auto deadline = std::chrono::steady_clock::now() + 1s;
        while (!bytes.empty()) {
            const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n > 0) {
                bytes.remove_prefix(static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                pollfd p{fd, POLLOUT, 0};
                if (::poll(&p, 1, remaining_ms(deadline)) > 0) continue;
            }
            return false;
        }
        return true;
    };
    constexpr std::size_t kMaxClients = 4096;
    std::vector<Client> clients;
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    std::vector<pollfd> fds;
    std::array<char, 16 * 1024> buf{};
    while (!stop.stop_requested() && std::chrono::steady_clock::now() < give_up) {
        fds.clear();
        fds.push_back(pollfd{listener_, POLLIN, 0});
        for (const Client& c : clients)
            fds.push_back(pollfd{c.fd, POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 20) <= 0) continue;

        // Clients first: fds[i + 1] is clients[i] until the vector changes.
        std::vector<std::size_t> finished;
        for (std::size_t i = 0; i < clients.size(); ++i) {
            if (fds[i + 1].revents == 0) continue;
            Client& c = clients[i];
            const ssize_t n = ::recv(c.fd, buf.data(), buf.size(), 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) {
                finished.push_back(i);
                continue;
            }
            if (c.closing) continue;  // requests after our close are ignored
            c.in.append(buf.data(), static_cast<std::size_t>(n));
            bool alive = true;
            for (std::size_t end = c.in.find("\r\n\r\n"); end != std::string::npos && alive;
                 end = c.in.find("\r\n\r\n")) {
                c.in.erase(0, end + 4);
                ++requests_;
                if (!behavior_.reply) continue;
                const Reply reply = behavior_.reply(c.next++);
                for (const std::string& piece : reply.pieces)
                    alive = alive && send_all(c.fd, piece);
                if (alive && reply.close_after) {
                    ::shutdown(c.fd, SHUT_WR);
                    c.closing = true;
                    c.in.clear();
                    break;
                }
            }
            if (!alive) finished.push_back(i);
        }
        for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
            ::close(clients[*it].fd);
            clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(*it));
        }

        if ((fds[0].revents & POLLIN) == 0) continue;
        for (;;) {
            const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;  // EAGAIN: all taken (or an error: try again next round)
            ++accepted_;
            if (behavior_.close_on_accept || clients.size() >= kMaxClients) {
                ::close(fd);
                continue;
            }
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            clients.push_back(Client{fd, {}, 0, false});
        }
    }
    for (const Client& c : clients)
        ::close(c.fd);
}

}  // namespace sm::test::loadgen
