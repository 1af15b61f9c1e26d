// loadgen's options: URL and duration parsing, the command line (wrk's option
// names, bad arguments exit with code 2), the request mix (several URLs,
// --urls FILE), -n, and the request put on the wire.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"

using namespace std::chrono_literals;
using sm::loadgen::Config;
using sm::loadgen::parse_config;
using sm::loadgen::parse_duration;
using sm::loadgen::parse_url;
using sm::loadgen::ParsedConfig;
using sm::loadgen::render_request;

namespace {

constexpr const char* kUrl = "http://127.0.0.1:8080/plaintext";

// Parses `loadgen ARGS...`.
ParsedConfig parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"loadgen"};
    for (const auto& a : args)
        argv.push_back(a.c_str());
    return parse_config(static_cast<int>(argv.size()), argv.data());
}

Config parse_ok(const std::vector<std::string>& args) {
    const auto parsed = parse(args);
    REQUIRE(parsed.exit_code == 0);
    REQUIRE(parsed.config.has_value());
    return *parsed.config;
}

}  // namespace

TEST_CASE("config parse_url takes host, port, path and query", "[config]") {
    struct Case {
        const char* url;
        const char* host;
        std::uint16_t port;
        const char* path;
        const char* host_header;
    };
    const Case cases[] = {
        {"http://127.0.0.1:8080/plaintext", "127.0.0.1", 8080, "/plaintext", "127.0.0.1:8080"},
        {"http://127.0.0.1/", "127.0.0.1", 80, "/", "127.0.0.1"},
        {"http://127.0.0.1", "127.0.0.1", 80, "/", "127.0.0.1"},
        {"http://localhost:80/json", "localhost", 80, "/json",
         "localhost"},  // the default port is left out
        {"http://example.test:65535/a/b/c", "example.test", 65535, "/a/b/c", "example.test:65535"},
        {"http://h:1/", "h", 1, "/", "h:1"},
        {"http://h:/", "h", 80, "/", "h"},  // an empty port is the default (RFC 3986 3.2.3)
        {"http://[::1]:8080/json", "::1", 8080, "/json", "[::1]:8080"},
        {"http://[::1]/", "::1", 80, "/", "[::1]"},
        {"http://[2001:db8::7]", "2001:db8::7", 80, "/", "[2001:db8::7]"},
        {"http://h/path?query=1&b=2", "h", 80, "/path?query=1&b=2", "h"},
        {"http://h:8080?x=1", "h", 8080, "/?x=1", "h:8080"},
        {"http://h/p#fragment", "h", 80, "/p", "h"},  // the fragment is not sent
        {"http://h#top", "h", 80, "/", "h"},
        {"http://h:9000#top", "h", 9000, "/", "h:9000"},
    };
    for (const auto& c : cases) {
        INFO(c.url);
        const auto t = parse_url(c.url);
        CHECK(t.url == c.url);
        CHECK(t.host == c.host);
        CHECK(t.port == c.port);
        CHECK(t.path == c.path);
        CHECK(t.host_header == c.host_header);
    }
}

TEST_CASE("config parse_url refuses what it cannot use, with a reason", "[config]") {
    for (const char* url : {
             "",
             "garbage",
             "127.0.0.1:8080/plaintext",  // no scheme
             "ftp://h/",
             "HTTPS://h/",
             "http://",
             "http:///path",
             "http://:8080/",
             "http://[]:8080/",
             "http://h:0/",
             "http://h:65536/",
             "http://h:99999999999/",
             "http://h:-1/",
             "http://h:80a/",
             "http://h:http/",
             "http://[::1/",
             "http://[::1]8080/",
             "http://::1/",  // IPv6 without brackets
             "http://::1:8080/",
             "http://h:80:90/",
             "http://user@h/",
             "http://user:pw@h:8080/",
             "http://h/a b",
             "http://h/a\r\nX: y",
         }) {
        INFO("'" << url << "'");
        try {
            (void)parse_url(url);
            FAIL("accepted");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string(e.what()).size() > 0);
        }
    }
    // https gets a message of its own.
    try {
        (void)parse_url("https://127.0.0.1:8443/");
        FAIL("accepted https");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find("https") != std::string::npos);
    }
}

TEST_CASE("config parse_duration takes wrk's forms", "[config]") {
    CHECK(parse_duration("10") == 10s);
    CHECK(parse_duration("10s") == 10s);
    CHECK(parse_duration("1.5s") == 1500ms);
    CHECK(parse_duration("500ms") == 500ms);
    CHECK(parse_duration("2m") == 2min);
    CHECK(parse_duration("1h") == 1h);
    CHECK(parse_duration("0.25m") == 15s);
    CHECK(parse_duration("250us") == 250us);
    CHECK(parse_duration("0") == 0s);
    CHECK(parse_duration("0s") == 0s);
    CHECK(parse_duration("0.001s") == 1ms);
    CHECK(parse_duration("30.5ms") == 30'500us);
    CHECK(parse_duration("366") == 366s);
}

TEST_CASE("config parse_duration refuses malformed and out-of-range durations", "[config]") {
    for (const char* text : {"",      "s",   "ms",    "abc",    "10x",
                             "10sec", "10S", "10 s",  " 10s",   "10s ",
                             "+10s",  "-1s", "-1",    "1.5.5s", "0x10s",
                             "inf",   "nan", "1e400", "10000h", "9999999999999999999"}) {
        INFO("'" << text << "'");
        CHECK_THROWS_AS(parse_duration(text), std::invalid_argument);
    }
}

TEST_CASE("config defaults", "[config]") {
    const Config c = parse_ok({kUrl});
    CHECK(c.target.url == kUrl);
    CHECK(c.target.host == "127.0.0.1");
    CHECK(c.target.port == 8080);
    CHECK(c.target.path == "/plaintext");
    CHECK(c.connections == 10);
    CHECK(c.threads == 2);
    CHECK(c.duration == 10s);
    CHECK(c.warmup == 0s);
    CHECK(c.timeout == 2s);
    CHECK(c.pipeline == 1);
    CHECK(c.rate == 0.0);
    CHECK_FALSE(c.open_loop());
    CHECK(c.method == "GET");
    CHECK(c.headers.empty());
    CHECK(c.body.empty());
    CHECK_FALSE(c.expect_body.has_value());
    CHECK_FALSE(c.expect_json.has_value());
    CHECK(c.json_path.empty());
    CHECK(c.cpus.empty());
    CHECK_FALSE(c.quiet);
    CHECK(c.engine == sm::loadgen::Engine::automatic);
    CHECK(c.argv == std::vector<std::string>{"loadgen", kUrl});
}

TEST_CASE("config --engine takes epoll, uring and auto", "[config]") {
    using sm::loadgen::Engine;
    using sm::loadgen::engine_name;
    CHECK(parse_ok({"--engine", "epoll", kUrl}).engine == Engine::epoll);
    CHECK(parse_ok({"--engine", "uring", kUrl}).engine == Engine::uring);
    CHECK(parse_ok({"--engine=auto", kUrl}).engine == Engine::automatic);
    CHECK(engine_name(Engine::epoll) == "epoll");
    CHECK(engine_name(Engine::uring) == "uring");
    CHECK(engine_name(Engine::automatic) == "auto");
    for (const char* bad : {"kqueue", "", "URING", "io_uring"}) {
        INFO("--engine '" << bad << "'");
        const auto parsed = parse({"--engine", bad, kUrl});
        CHECK(parsed.exit_code == 2);
        CHECK_FALSE(parsed.config.has_value());
    }
}

TEST_CASE("config takes every option, short and long", "[config]") {
    const std::vector<std::string> short_form = {"-c",
                                                 "64",
                                                 "-t",
                                                 "1",
                                                 "-d",
                                                 "1.5s",
                                                 "--warmup",
                                                 "500ms",
                                                 "--pipeline",
                                                 "16",
                                                 "-R",
                                                 "50000.5",
                                                 "--timeout",
                                                 "3s",
                                                 "-H",
                                                 "X-A: 1",
                                                 "-H",
                                                 "host: example.test",
                                                 "-m",
                                                 "POST",
                                                 "--body",
                                                 "payload",
                                                 "--expect-body",
                                                 "Hello, World!",
                                                 "--json",
                                                 "-",
                                                 "--cpus",
                                                 "0,2-3",
                                                 "-q",
                                                 "http://[::1]:9000/json?x=1"};
    const std::vector<std::string> long_form = {"--connections", "64",
                                                "--threads",     "1",
                                                "--duration",    "1.5s",
                                                "--warmup",      "500ms",
                                                "--pipeline",    "16",
                                                "--rate",        "50000.5",
                                                "--timeout",     "3s",
                                                "--header",      "X-A: 1",
                                                "--header",      "host: example.test",
                                                "--method",      "POST",
                                                "--body",        "payload",
                                                "--expect-body", "Hello, World!",
                                                "--json",        "-",
                                                "--cpus",        "0,2-3",
                                                "--quiet",       "http://[::1]:9000/json?x=1"};
    for (const auto& args : {short_form, long_form}) {
        INFO(args.front());
        const Config c = parse_ok(args);
        CHECK(c.connections == 64);
        CHECK(c.threads == 1);
        CHECK(c.duration == 1500ms);
        CHECK(c.warmup == 500ms);
        CHECK(c.pipeline == 16);
        CHECK(c.rate == 50000.5);
        CHECK(c.open_loop());
        CHECK(c.timeout == 3s);
        CHECK(c.headers == std::vector<std::string>{"X-A: 1", "host: example.test"});
        CHECK(c.method == "POST");
        CHECK(c.body == "payload");
        CHECK(c.expect_body == std::optional<std::string>("Hello, World!"));
        CHECK_FALSE(c.expect_json.has_value());
        CHECK(c.json_path == "-");
        CHECK(c.cpus == std::vector<int>{0, 2, 3});
        CHECK(c.quiet);
        CHECK(c.target.host == "::1");
        CHECK(c.target.port == 9000);
        CHECK(c.target.path == "/json?x=1");
        CHECK(c.argv.size() == args.size() + 1);
    }
}

TEST_CASE("config takes wrk's glued short options and the URL anywhere", "[config]") {
    const Config c = parse_ok({"-t1", "-c64", "-d10s", kUrl});
    CHECK(c.threads == 1);
    CHECK(c.connections == 64);
    CHECK(c.duration == 10s);

    const Config first =
        parse_ok({kUrl, "-H", "X-A: 1", "--expect-json", R"({"message": "Hello, World!"})"});
    CHECK(first.target.path == "/plaintext");
    CHECK(first.headers == std::vector<std::string>{"X-A: 1"});
    CHECK(first.expect_json == std::optional<std::string>(R"({"message": "Hello, World!"})"));

    // A header option right before the URL does not swallow it.
    const Config last = parse_ok({"-H", "X-A: 1", kUrl});
    CHECK(last.headers == std::vector<std::string>{"X-A: 1"});
    CHECK(last.target.url == kUrl);

    // As many connections as threads is enough.
    CHECK(parse_ok({"-t", "4", "-c", "4", kUrl}).connections == 4);
    CHECK(parse_ok({"--rate", "0", kUrl}).rate == 0.0);
    CHECK(parse_ok({"-m", "HEAD", kUrl}).method == "HEAD");
}

TEST_CASE("config refuses bad arguments with exit code 2", "[config]") {
    const std::vector<std::vector<std::string>> cases = {
        {},                      // no URL
        {"https://127.0.0.1/"},  // bad URL
        {"http://h:0/"},
        {kUrl, "extra"},               // a second positional
        {"--bogus", kUrl},             // unknown option
        {"-c", "1", "-t", "2", kUrl},  // fewer connections than threads
        {"-c", "0", kUrl},
        {"-c", "abc", kUrl},
        {"-c", "-5", kUrl},
        {"-t", "0", kUrl},
        {"--pipeline", "0", kUrl},
        {"--pipeline", "1025", kUrl},
        {"-R", "-5", kUrl},
        {"-R", "fast", kUrl},
        {"-H", "NoColon", kUrl},  // bad headers
        {"-H", ": no name", kUrl},
        {"-H", "Bad Name: 1", kUrl},
        {"-H", "X-A : 1", kUrl},
        {"-H", "X-A: 1\r\nX-B: 2", kUrl},
        {"--expect-body", "a", "--expect-json", "{}", kUrl},  // both expect options
        {"-d", "10x", kUrl},                                  // bad durations
        {"-d", "0", kUrl},
        {"-d", "-1s", kUrl},
        {"--warmup", "soon", kUrl},
        {"--timeout", "0", kUrl},
        {"--timeout", "500us", kUrl},
        {"-m", "G ET", kUrl},  // bad methods
        {"-m", "", kUrl},
        {"--cpus", "x", kUrl},  // bad CPU lists
        {"--cpus", "3-1", kUrl},
        {"-d", kUrl},  // an option missing its value
        {"--hlog-interval", "1s", kUrl},  // without --hlog
        {"--hlog", "x", "--hlog-interval", "5ms", kUrl},
        {"--hlog", "x", "--hlog-interval", "0", kUrl},
        {"--hlog", "x", "--hlog-interval", "soon", kUrl},
        {"--hlog", "-", "--hgrm", "-", kUrl},  // both on stdout
        {"--start-at", "100", kUrl},            // before 2000
        {"--start-at", "1764907200250", kUrl},  // milliseconds
        {"--start-at", "tomorrow", kUrl},
        {"--start-at", "", kUrl},
        {"--hlog", kUrl},  // a value missing
    };
    for (const auto& args : cases) {
        std::string joined;
        for (const auto& a : args)
            joined += "'" + a + "' ";
        INFO("loadgen " << joined);
        const auto parsed = parse(args);
        CHECK(parsed.exit_code == 2);
        CHECK_FALSE(parsed.config.has_value());
    }
}

TEST_CASE("config --help and --version exit 0 without a config", "[config]") {
    for (const char* flag : {"--help", "-h", "--version"}) {
        INFO(flag);
        const auto parsed = parse({flag});
        CHECK(parsed.exit_code == 0);
        CHECK_FALSE(parsed.config.has_value());
    }
    // Even with other options, valid or not.
    const auto parsed = parse({"-c", "64", "--help", kUrl});
    CHECK(parsed.exit_code == 0);
    CHECK_FALSE(parsed.config.has_value());
}

TEST_CASE("config render_request puts Host, the headers and the body on the wire", "[config]") {
    SECTION("the default Host header") {
        CHECK(render_request(parse_ok({kUrl})) ==
              "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
        CHECK(render_request(parse_ok({"http://example.test/"})) ==
              "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n");
        CHECK(render_request(parse_ok({"http://[::1]:8080/json?x=1"})) ==
              "GET /json?x=1 HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
    }
    SECTION("headers in the order given, after Host") {
        CHECK(render_request(parse_ok(
                  {"-H", "Accept: */*", "-H", "X-Hostname: y", "-H", "X-Host: z", kUrl})) ==
              "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\nX-Hostname: "
              "y\r\nX-Host: z\r\n\r\n");
    }
    SECTION("a Host header replaces the default one, in any case") {
        for (const char* host : {"Host: example.test", "host: example.test", "HOST:example.test"}) {
            INFO(host);
            CHECK(render_request(parse_ok({"-H", "Accept: */*", "-H", host, kUrl})) ==
                  std::string("GET /plaintext HTTP/1.1\r\nAccept: */*\r\n") + host + "\r\n\r\n");
        }
    }
    SECTION("a body goes with its Content-Length") {
        CHECK(render_request(parse_ok(
                  {"-m", "POST", "--body", "hello", "-H", "Content-Type: text/plain", kUrl})) ==
              "POST /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: text/plain\r\n"
              "Content-Length: 5\r\n\r\nhello");
        CHECK(render_request(parse_ok({"--body", "{\"a\":1}", kUrl})) ==
              "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: "
              "7\r\n\r\n{\"a\":1}");
    }
    SECTION("POST and PUT without a body say Content-Length: 0") {
        CHECK(render_request(parse_ok({"-m", "POST", kUrl})) ==
              "POST /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 0\r\n\r\n");
        CHECK(render_request(parse_ok({"-m", "PUT", kUrl})) ==
              "PUT /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 0\r\n\r\n");
        CHECK(render_request(parse_ok({"-m", "HEAD", kUrl})) ==
              "HEAD /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
    }
    SECTION("a Config built by hand") {
        Config c;
        c.target = parse_url("http://10.0.0.1:81/x");
        c.method = "DELETE";
        c.headers = {"X-Only-Name", "Host-Like: 1"};  // not validated here: rendered as given
        CHECK(render_request(c) ==
              "DELETE /x HTTP/1.1\r\nHost: 10.0.0.1:81\r\nX-Only-Name\r\nHost-Like: 1\r\n\r\n");
    }
}

TEST_CASE("config several URLs make a mix, in the order given", "[config][mix]") {
    const Config c = parse_ok({"-m", "HEAD", "-H", "X-A: 1", kUrl, "http://127.0.0.1:8080/json",
                               "http://127.0.0.1:8080/"});
    REQUIRE(c.requests.size() == 3);
    CHECK(c.mix());
    CHECK(c.target.url == kUrl);
    CHECK(c.requests[0].target.path == "/plaintext");
    CHECK(c.requests[1].target.path == "/json");
    CHECK(c.requests[2].target.path == "/");
    for (const auto& r : c.requests) {
        CHECK(r.method == "HEAD");  // -m and -H apply to every URL
        CHECK(r.headers == std::vector<std::string>{"X-A: 1"});
    }
    CHECK_FALSE(parse_ok({kUrl}).mix());
    CHECK(parse_ok({kUrl}).requests.size() == 1);
}

TEST_CASE("config parse_request_lines reads methods, indented headers, comments", "[config][mix]") {
    using sm::loadgen::parse_request_lines;
    const std::string text =
        "# a mix\n"
        "http://h:1/a\n"
        "\n"
        "POST http://h:1/b\r\n"
        "  Content-Type: text/plain\n"
        "\tX-Trace: one two  \n"
        "   # a comment between headers\n"
        "HEAD   http://h:1/c\n"
        "   \n";
    const auto lines = parse_request_lines(text, "mix.txt");
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].method.empty());
    CHECK(lines[0].url == "http://h:1/a");
    CHECK(lines[0].headers.empty());
    CHECK(lines[0].line == 2);
    CHECK(lines[1].method == "POST");
    CHECK(lines[1].url == "http://h:1/b");
    CHECK(lines[1].headers ==
          std::vector<std::string>{"Content-Type: text/plain", "X-Trace: one two"});
    CHECK(lines[1].line == 4);
    CHECK(lines[2].method == "HEAD");
    CHECK(lines[2].url == "http://h:1/c");
    CHECK(parse_request_lines("", "empty").empty());
    CHECK(parse_request_lines("# only\n\n", "comments").empty());
}

TEST_CASE("config parse_request_lines names the file and line of a bad one", "[config][mix]") {
    using sm::loadgen::parse_request_lines;
    struct Case {
        const char* text;
        const char* where;
    };
    for (const Case& c :
         {Case{"  X-A: 1\nhttp://h/\n", "f:1:"}, Case{"http://h/\n  NoColon\n", "f:2:"},
          Case{"http://h/\n\nGET http://h/ extra\n", "f:3:"}}) {
        INFO(c.text);
        try {
            parse_request_lines(c.text, "f");
            FAIL("accepted");
        } catch (const std::invalid_argument& e) {
            CHECK_THAT(e.what(), Catch::Matchers::StartsWith(c.where));
        }
    }
}

TEST_CASE("config --urls FILE adds its requests after the URLs given", "[config][mix]") {
    const std::string path = "/tmp/sm_loadgen_unit_urls_" + std::to_string(::getpid()) + ".txt";
    {
        std::ofstream f(path);
        f << "# the mix\nGET http://127.0.0.1:8080/json\n  Accept: application/json\n"
             "HEAD http://127.0.0.1:8080/\n";
    }
    const Config c = parse_ok({"-H", "X-A: 1", "--urls", path, kUrl});
    std::remove(path.c_str());
    REQUIRE(c.requests.size() == 3);
    CHECK(c.urls_file == path);
    CHECK(c.requests[0].target.url == kUrl);
    CHECK(c.requests[0].method == "GET");
    CHECK(c.requests[1].target.path == "/json");
    CHECK(c.requests[1].headers == std::vector<std::string>{"X-A: 1", "Accept: application/json"});
    CHECK(c.requests[2].method == "HEAD");
    CHECK(
        render_request(c, c.requests[1]) ==
        "GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A: 1\r\nAccept: application/json\r\n\r\n");
    // The file alone is enough.
    {
        std::ofstream f(path);
        f << "http://127.0.0.1:8080/json\n";
    }
    const Config alone = parse_ok({"--urls", path});
    std::remove(path.c_str());
    CHECK(alone.target.path == "/json");
    CHECK_FALSE(alone.mix());
}

TEST_CASE("config refuses a mix it cannot run, with exit code 2", "[config][mix]") {
    const std::string path = "/tmp/sm_loadgen_unit_bad_" + std::to_string(::getpid()) + ".txt";
    const auto with_file = [&](const std::string& text) {
        std::ofstream f(path);
        f << text;
    };
    std::vector<std::string> many;
    for (std::size_t i = 0; i <= sm::loadgen::kMaxUrls; ++i)
        many.push_back("http://127.0.0.1:8080/" + std::to_string(i));
    struct Case {
        const char* what;
        std::string file;  // written to `path` first when not empty
        std::vector<std::string> args;
    };
    const std::vector<Case> cases = {
        {"another port", "", {kUrl, "http://127.0.0.1:8081/json"}},
        {"another host", "", {kUrl, "http://localhost:8080/json"}},
        {"--expect-body with a mix",
         "",
         {"--expect-body", "x", kUrl, "http://127.0.0.1:8080/json"}},
        {"--expect-json with a mix", "", {"--expect-json", "{}", kUrl, kUrl}},
        {"more than kMaxUrls", "", many},
        {"a missing file", "", {"--urls", "/nonexistent/sm-urls.txt"}},
        {"a file without requests", "# nothing\n", {"--urls", path}},
        {"a bad URL in the file", "http://127.0.0.1:8080/\nftp://x/\n", {"--urls", path}},
        {"another host in the file", "http://127.0.0.1:9/\n", {"--urls", path, kUrl}},
        {"a bad header in the file", "http://127.0.0.1:8080/\n  Bad Name: 1\n", {"--urls", path}},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        if (!c.file.empty()) with_file(c.file);
        const auto parsed = parse(c.args);
        CHECK(parsed.exit_code == 2);
        CHECK_FALSE(parsed.config.has_value());
    }
    std::remove(path.c_str());
}

TEST_CASE("config -n counts requests, and -d is then a time limit only when given",
          "[config][count]") {
    const Config plain = parse_ok({kUrl});
    CHECK_FALSE(plain.counted());
    CHECK(plain.time_limited);

    const Config n = parse_ok({"-n", "1000", kUrl});
    CHECK(n.counted());
    CHECK(n.request_count == 1000);
    CHECK_FALSE(n.time_limited);

    const Config limited = parse_ok({"--requests", "5", "-d", "3s", kUrl});
    CHECK(limited.request_count == 5);
    CHECK(limited.time_limited);
    CHECK(limited.duration == 3s);

    for (const char* bad : {"0", "-1", "many", "1.5"}) {
        INFO("-n " << bad);
        CHECK(parse({"-n", bad, kUrl}).exit_code == 2);
    }
}

TEST_CASE("config --latency asks for the percentile table", "[config]") {
    CHECK_FALSE(parse_ok({kUrl}).latency_table);
    CHECK(parse_ok({"--latency", kUrl}).latency_table);
}

TEST_CASE("config wants_progress: a terminal, no --quiet, a long run or -n", "[config]") {
    using sm::loadgen::wants_progress;
    CHECK(wants_progress(parse_ok({"-d", "3s", kUrl}), true));
    CHECK(wants_progress(parse_ok({"-d", "2s", "--warmup", "1s", kUrl}), true));
    CHECK(wants_progress(parse_ok({"-n", "10", kUrl}), true));
    CHECK_FALSE(wants_progress(parse_ok({"-d", "2s", kUrl}), true));
    CHECK_FALSE(wants_progress(parse_ok({"-d", "10s", kUrl}), false));
    CHECK_FALSE(wants_progress(parse_ok({"-d", "10s", "-q", kUrl}), true));
    CHECK_FALSE(wants_progress(parse_ok({"-n", "10", "--quiet", kUrl}), true));
}

TEST_CASE("config parse_start_at takes epoch seconds with a fraction, exactly", "[config][hdr]") {
    using sm::loadgen::parse_start_at;
    constexpr std::int64_t now = 1'764'907'000'000'000'000;  // 200 s before the times below
    CHECK(parse_start_at("1764907200", now) == 1'764'907'200'000'000'000);
    CHECK(parse_start_at("1764907200.25", now) == 1'764'907'200'250'000'000);
    CHECK(parse_start_at("1764907200.", now) == 1'764'907'200'000'000'000);
    CHECK(parse_start_at("1764907200.123456789", now) == 1'764'907'200'123'456'789);
    CHECK(parse_start_at("1764907200.1234567899", now) == 1'764'907'200'123'456'789);  // past ns
    CHECK(parse_start_at("01764907200.5", now) == 1'764'907'200'500'000'000);
    // The past is fine (it starts at once, late), back to 2000.
    CHECK(parse_start_at("946684800", now) == sm::loadgen::kYear2000Ns);
    CHECK(parse_start_at("1764903600", now) == 1'764'903'600'000'000'000);
    // Up to an hour ahead.
    CHECK(parse_start_at("1764910600", now) == 1'764'910'600'000'000'000);
}

TEST_CASE("config parse_start_at refuses malformed times, before 2000 or over an hour ahead",
          "[config][hdr]") {
    using sm::loadgen::parse_start_at;
    constexpr std::int64_t now = 1'764'907'000'000'000'000;
    const auto why = [&](const char* text) {
        try {
            parse_start_at(text, now);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    for (const char* bad : {"", "now", "-5", "+1764907200", "1.7e9", "1764907200,5", ".5",
                            "1764907200.5.1", " 1764907200", "1764907200s"}) {
        INFO(bad);
        CHECK(why(bad).find("is not a time") != std::string::npos);
    }
    CHECK(why("100").find("before 2000") != std::string::npos);
    CHECK(why("946684799.999").find("before 2000") != std::string::npos);
    CHECK(why("1764910600.001").find("more than 1 hour ahead") != std::string::npos);
    CHECK(why("1764907200250").find("more than 1 hour ahead") != std::string::npos);  // ms
    CHECK(why("99999999999999999999999999").find("more than 1 hour ahead") != std::string::npos);
}

TEST_CASE("config --hlog, --hlog-interval, --hgrm and --start-at", "[config][hdr]") {
    const Config plain = parse_ok({kUrl});
    CHECK(plain.hlog_path.empty());
    CHECK(plain.hgrm_path.empty());
    CHECK(plain.hlog_interval == 1s);
    CHECK_FALSE(plain.start_at_ns.has_value());
    CHECK_FALSE(plain.stdout_taken());

    const Config files =
        parse_ok({"--hlog", "run.hlog", "--hlog-interval", "500ms", "--hgrm", "run.hgrm", kUrl});
    CHECK(files.hlog_path == "run.hlog");
    CHECK(files.hgrm_path == "run.hgrm");
    CHECK(files.hlog_interval == 500ms);
    CHECK_FALSE(files.stdout_taken());

    // stdout: one document after the JSON; the summary goes to stderr.
    CHECK(parse_ok({"--hlog", "-", kUrl}).stdout_taken());
    CHECK(parse_ok({"--hgrm", "-", kUrl}).stdout_taken());
    CHECK(parse_ok({"--json", "-", kUrl}).stdout_taken());
    CHECK(parse_ok({"--json", "-", "--hlog", "-", "--hgrm", "x", kUrl}).stdout_taken());

    // A time in the past parses (the run starts at once).
    const Config at = parse_ok({"--start-at", "1700000000.5", kUrl});
    REQUIRE(at.start_at_ns.has_value());
    CHECK(*at.start_at_ns == 1'700'000'000'500'000'000);
    // (the values refused: "config refuses bad arguments with exit code 2")
}
