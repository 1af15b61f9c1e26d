// Shared pieces of the robustness suite: malformed and hostile input against
// every server model. The server under test, FdBaseline and the checks every
// response must pass are the conformance suite's (conformance.hpp); ctest
// passes the binary and the model's name in SM_SERVER_BINARY and SM_MODEL.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conformance.hpp"

namespace sm::test::robustness {

using namespace std::chrono_literals;
using conformance::connect;
using conformance::FdBaseline;
using conformance::start_server;

// Fails the test unless the server closes `c` gracefully (EOF, not a reset)
// within `timeout`, sending nothing more.
void require_closed_cleanly(Connection& c, std::chrono::milliseconds timeout = 5s);

// Checks an error response: exactly `status`, the headers every response
// carries, "Connection: close", and not keep-alive by llhttp's reading.
void check_error_response(const Response& r, int status, Expect expect = Expect::body);

// On a new connection: sends `bytes` (in one write), requires the error
// response `status` (check_error_response) and then a clean close with
// nothing after the response. Returns the response.
Response require_rejected(ServerProcess& server, std::string_view bytes, int status,
                          Expect expect = Expect::body);

// A fresh connection gets 200 and "Hello, World!" for GET /plaintext, and
// the connection stays open.
void require_serving(ServerProcess& server);

// The whole life of one hostile input: starts the server under test (with
// `extra` options), takes its descriptor baseline, requires `bytes` to be
// answered with `status` and a clean close, then a fresh valid request to be
// served and the descriptor count to return to the baseline.
void check_rejected(std::string_view bytes, int status, const std::vector<std::string>& extra = {});

// check_rejected() for several inputs on one server: each on its own
// connection, each answered with `status`.
void check_each_rejected(const std::vector<std::string>& inputs, int status,
                         const std::vector<std::string>& extra = {});

// The same for input that must be accepted: every response to `bytes` (one
// write) has the status listed in `statuses`, in order, and the connection
// stays open (a last GET on it is answered).
void check_accepted(std::string_view bytes, const std::vector<int>& statuses,
                    const std::vector<std::string>& extra = {});


// Raises this process's RLIMIT_NOFILE soft limit toward the hard limit so at
// least `wanted` descriptors can be open; a server started afterwards
// inherits it. Returns the soft limit now in force, or nothing if it cannot
// reach `wanted`.
std::optional<std::size_t> raise_descriptor_limit(std::size_t wanted);

}  // namespace sm::test::robustness
