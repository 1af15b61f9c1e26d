// Differential libFuzzer harness: the same bytes go to an independent
// reference of RFC 9112 message framing (tests/support/rfc9112.hpp, written
// from the grammar, without llhttp and without reading common/http) and to
// http::Session; the run fails (abort, so libFuzzer keeps the input) when
// they disagree on where a message ends or whether the connection may carry
// another one. This is how HTTP Garden found request smuggling across
// servers; it keeps that class closed here.
//
// Input: the first byte picks a piece size (1..17); the rest is the bytes a
// client sent on one connection. For every message the reference frames:
//   - accept: fed up to one byte before its end the session has answered
//     nothing more; with its last byte it answers exactly once, normally
//     (200, 404, 405 or 503), with "Connection: close" and a closed session
//     exactly when the reference says the connection cannot carry another;
//   - either (the RFC leaves the choice to the server): that, or one error
//     response ("Connection: close") that ends the session;
//   - reject: nothing normal for it, ever; once all the input is in, one
//     error response and a closed session, or (the input ended before the
//     session could tell) still waiting with nothing more answered;
//   - incomplete: once all the input is in, nothing more answered and the
//     session still open; or one error response that ends the session, if
//     what arrived of the message is already an `either` (its target is out
//     of form, say) or none of a few endings makes the reference accept it
//     (llhttp sees a target that cannot become valid before it ends).
// Every segment is fed in pieces of the chosen size, so how TCP cut the
// stream cannot change an answer. Limits are small, so that 413/414/431 are
// reached by short inputs; both sides get the same ones.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_setup.hpp"
#include "http/byte_buffer.hpp"
#include "http/limits.hpp"
#include "http/response.hpp"
#include "http/session.hpp"
#include "support/printable.hpp"
#include "support/rfc9112.hpp"

namespace {

using sm::http::ByteBuffer;
using sm::http::Limits;
using sm::http::ResponseCache;
using sm::http::Session;
namespace rfc = sm::test::rfc9112;

// The whole input: a disagreement is reported with every byte.
std::string printable(std::string_view s) {
    return sm::test::printable(s, s.size());
}

// The head of one response: its status and whether it says it closes.
struct Answer {
    int status = 0;
    bool close = false;
};

class Check {
  public:
    Check(std::string_view in, const rfc::Result& ref) : in_(in), ref_(ref) {}

    [[noreturn]] void fail(const std::string& why) const {
        std::fprintf(stderr,
                     "fuzz_framing: %s\n--- input (%zu bytes):\n%s\n--- reference:\n%s\n"
                     "--- session output so far:\n%s\n",
                     why.c_str(), in_.size(), printable(in_).c_str(), rfc::describe(ref_).c_str(),
                     printable(seen_).c_str());
        std::abort();
    }

    // Keeps the output of one feed step for the failure report.
    std::string_view remember(std::string_view out) {
        seen_ += out;
        return out;
    }

  private:
    std::string_view in_;
    const rfc::Result& ref_;
    std::string seen_;
};

// The status and Connection header of the response at the start of `out`.
// Only the head is read: a response to HEAD has no body behind its
// Content-Length, and the harness does not know which requests were HEAD.
Answer first_answer(std::string_view out, const Check& check) {
    if (!out.starts_with("HTTP/1.1 ") || out.size() < 12) check.fail("output is not a response");
    Answer a;
    a.status = (out[9] - '0') * 100 + (out[10] - '0') * 10 + (out[11] - '0');
    const std::size_t head_end = out.find("\r\n\r\n");
    if (head_end == std::string_view::npos) check.fail("response head not terminated");
    const std::string_view head = out.substr(0, head_end + 2);
    a.close = head.find("\r\nConnection: close\r\n") != std::string_view::npos;
    return a;
}

bool normal(int status) {
    // 503: /db or /queries on a server without a database (http/work.hpp),
    // an answer to a well-framed request like 404; never one to a bad one.
    return status == 200 || status == 404 || status == 405 || status == 503;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const ResponseCache& cache = sm::fuzz::cache();
    const Limits limits = sm::fuzz::limits();
    rfc::Policy policy;
    policy.max_head_bytes = limits.max_head_bytes;
    policy.max_uri_bytes = limits.max_uri_bytes;
    policy.max_header_count = limits.max_header_count;
    policy.max_body_bytes = limits.max_body_bytes;

    const std::size_t piece = 1 + data[0] % 17;
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    const rfc::Result ref = rfc::frame(in, policy);
    Check check(in, ref);

    Session session(cache, limits);
    ByteBuffer out;
    Session::Result result = Session::Result::open;
    std::size_t fed = 0;
    // Feeds in[fed, to) in pieces; returns the output of the step.
    auto feed_to = [&](std::size_t to) {
        out.clear();
        for (; fed < to; fed += std::min(piece, to - fed)) {
            const std::size_t n = std::min(piece, to - fed);
            result = session.feed(std::span<const char>(in.data() + fed, n), out);
        }
        return check.remember({out.data(), out.size()});
    };

    std::uint64_t answered = 0;
    for (std::size_t i = 0; i < ref.messages.size(); ++i) {
        const rfc::Message& m = ref.messages[i];
        const std::string which = "message #" + std::to_string(i) + ": ";
        if (m.verdict == rfc::Verdict::reject) {
            const std::string_view rest = feed_to(in.size());
            if (session.responses() == answered) {
                if (result == Session::Result::close)
                    check.fail(which +
                               "rejected by the reference; the session closed without an answer");
                return 0;  // still waiting for bytes that would show it the fault
            }
            if (session.responses() != answered + 1)
                check.fail(which + "rejected by the reference (" + m.rule +
                           "); the session answered more than once");
            const Answer a = first_answer(rest, check);
            if (normal(a.status))
                check.fail(which + "rejected by the reference (" + m.rule +
                           "); the session answered it with " + std::to_string(a.status));
            if (!a.close || result != Session::Result::close)
                check.fail(which + "an error response that does not close");
            return 0;
        }
        if (m.end <= fed) check.fail(which + "the reference ends it before the previous one");
        if (!feed_to(m.end - 1).empty() || session.responses() != answered) {
            if (m.verdict == rfc::Verdict::either && result == Session::Result::close &&
                session.responses() == answered + 1)
                return 0;  // refused before its end, which the RFC allows here
            check.fail(which +
                       "the session answered before its last byte (the reference ends it at " +
                       std::to_string(m.end) + ")");
        }
        const std::string_view answer = feed_to(m.end);
        if (session.responses() != answered + 1)
            check.fail(which + "the session did not answer it at its last byte, offset " +
                       std::to_string(m.end));
        const Answer a = first_answer(answer, check);
        if (!normal(a.status)) {
            if (m.verdict == rfc::Verdict::either && a.close && result == Session::Result::close)
                return 0;
            check.fail(which + "accepted by the reference; the session answered " +
                       std::to_string(a.status));
        }
        if (a.close != !m.persist || (result == Session::Result::close) != !m.persist)
            check.fail(which + (m.persist
                                    ? "the reference keeps the connection; the session closes it"
                                    : "the reference closes the connection (" + m.rule +
                                          "); the session keeps it"));
        ++answered;
        if (!m.persist) {
            // Nothing after it is answered, however much more arrives.
            if (!feed_to(in.size()).empty()) check.fail("input after the close was answered");
            return 0;
        }
    }
    // Every message the reference framed was answered; what is left is the
    // start of one more (incomplete), or leading empty lines, or nothing.
    const std::string_view rest = feed_to(in.size());
    if (ref.incomplete && session.responses() == answered + 1 && result == Session::Result::close) {
        // The session refused the unfinished message before its end. Fine
        // if what arrived is already an `either`, or if no ending makes it
        // valid: the reference is asked about a few endings (where the input
        // may stop: in the target, the version, a field value, a chunk).
        const Answer a = first_answer(rest, check);
        if (normal(a.status) || !a.close)
            check.fail("an early refusal that is not an error and close");
        if (!ref.incomplete_either.empty()) return 0;
        static constexpr std::string_view kEndings[] = {" HTTP/1.1\r\nHost: a\r\n\r\n",
                                                        "\r\nHost: a\r\n\r\n",
                                                        "\r\n\r\n",
                                                        "\n\r\n\r\n",
                                                        "\r\n",
                                                        "0\r\n\r\n",
                                                        "\r\n0\r\n\r\n"};
        for (const std::string_view ending : kEndings) {
            const rfc::Result r = rfc::frame(std::string(in) + std::string(ending), policy);
            if (r.messages.size() > answered &&
                r.messages[answered].verdict == rfc::Verdict::accept)
                check.fail("the session refused an unfinished message that \"" + printable(ending) +
                           "\" completes into a valid one");
        }
        return 0;
    }
    if (!rest.empty() || session.responses() != answered) {
        check.fail(ref.incomplete ? "the reference waits for more input; the session answered"
                                  : "the session answered input the reference did not frame");
    }
    if (result == Session::Result::close)
        check.fail("the session closed; the reference waits for more");
    return 0;
}
