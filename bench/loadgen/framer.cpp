#include "framer.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "http/chars.hpp"

namespace sm::loadgen {
namespace {

using http::chars::trim;

constexpr auto npos = std::string_view::npos;

char lower(char c) noexcept {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
}

bool iequals(std::string_view a, std::string_view lower_b) noexcept {
    if (a.size() != lower_b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower_b[i]) return false;
    return true;
}

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

// RFC 9110 tchar: what a field name may hold, as a table (the hot loop).
constexpr std::array<bool, 256> kTchar = [] {
    std::array<bool, 256> t{};
    for (int c = 'a'; c <= 'z'; ++c)
        t[static_cast<std::size_t>(c)] = true;
    for (int c = 'A'; c <= 'Z'; ++c)
        t[static_cast<std::size_t>(c)] = true;
    for (int c = '0'; c <= '9'; ++c)
        t[static_cast<std::size_t>(c)] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~"))
        t[static_cast<unsigned char>(c)] = true;
    return t;
}();

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The last element of a comma-separated list, trimmed.
std::string_view last_token(std::string_view list) noexcept {
    const auto comma = list.rfind(',');
    return trim(comma == npos ? list : list.substr(comma + 1));
}

bool has_token(std::string_view list, std::string_view lower_token) noexcept {
    while (!list.empty()) {
        const auto comma = list.find(',');
        if (iequals(trim(list.substr(0, comma)), lower_token)) return true;
        if (comma == npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

}  // namespace

void ResponseFramer::set_capture(std::size_t limit) {
    capture_ = limit > 0;
    capture_limit_ = limit;
    body_.reserve(std::min<std::size_t>(limit, 64 * 1024));
}

void ResponseFramer::reset() noexcept {
    state_ = State::head;
    current_ = Response{};
    remaining_ = 0;
    carry_.clear();
    body_.clear();
    done_ = false;
    error_.clear();
    error_context_.clear();
}

void ResponseFramer::fail(std::string_view why, std::string_view context) {
    error_.assign(why);
    error_context_.assign(context.substr(0, 256));
}

void ResponseFramer::append_body(const char* p, std::size_t n) {
    current_.body_bytes += n;
    if (!capture_) return;
    const std::size_t room = capture_limit_ - std::min(capture_limit_, body_.size());
    if (n > room) current_.body_truncated = true;
    body_.append(p, std::min(n, room));
}

std::size_t ResponseFramer::parse_head(const char* p, const char* end) {
    // A head must end within kMaxHead bytes, however the input was split:
    // look no further (the caller refuses an unfinished head that long).
    end = p + std::min(static_cast<std::size_t>(end - p), kMaxHead);
    const std::string_view all(p, static_cast<std::size_t>(end - p));
    // The status line: "HTTP/1.x SSS[ reason]". Garbage is refused as soon as
    // enough of it is here, not after kMaxHead bytes.
    static constexpr std::string_view kPrefix = "HTTP/1.";
    if (std::memcmp(p, kPrefix.data(), std::min(all.size(), kPrefix.size())) != 0) {
        fail("response does not start with \"HTTP/1.\"", all);
        return npos;
    }
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', all.size()));
    if (!nl) return 0;
    if (nl == p || nl[-1] != '\r') {
        fail("status line not ended by CRLF", all);
        return npos;
    }
    const std::string_view status_line(p, static_cast<std::size_t>(nl - 1 - p));
    if (status_line.size() < 12 || !is_digit(status_line[7]) || status_line[8] != ' ' ||
        !is_digit(status_line[9]) || !is_digit(status_line[10]) || !is_digit(status_line[11]) ||
        (status_line.size() > 12 && status_line[12] != ' ')) {
        fail("malformed status line", status_line);
        return npos;
    }
    const int status =
        (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
    if (status < 100 || status > 599) {
        fail("status code outside 100-599", status_line);
        return npos;
    }
    const bool http10 = status_line[7] == '0';

    bool close = false, keep_alive = false, chunked = false, other_coding = false,
         has_length = false;
    std::uint64_t length = 0;
    const char* line = nl + 1;
    while (true) {
        if (line >= end) return 0;
        if (*line == '\r' || *line == '\n') {  // the blank line ends the head
            if (*line == '\n') {
                fail("blank line ending the head is a bare LF", std::string_view(line, 1));
                return npos;
            }
            if (line + 1 >= end) return 0;
            if (line[1] != '\n') {
                fail("CR not followed by LF after the headers", std::string_view(line, 2));
                return npos;
            }
            line += 2;
            break;
        }
        // One pass over the name validates it and finds the colon.
        const char* q = line;
        while (q < end && kTchar[static_cast<unsigned char>(*q)])
            ++q;
        if (q == end) return 0;
        if (*q != ':' || q == line) {
            const char* eol =
                static_cast<const char*>(std::memchr(q, '\n', static_cast<std::size_t>(end - q)));
            const std::string_view field(line, static_cast<std::size_t>((eol ? eol : end) - line));
            fail(*q == ' ' || *q == '\t' ? "whitespace in or after a header name"
                 : (*q == '\r' || *q == '\n' || q == line)
                     ? "header line without a field name and colon"
                     : "invalid character in header name",
                 field);
            return npos;
        }
        nl = static_cast<const char*>(
            std::memchr(q + 1, '\n', static_cast<std::size_t>(end - q - 1)));
        if (!nl) return 0;
        if (nl[-1] != '\r') {
            fail("header line not ended by CRLF",
                 std::string_view(line, static_cast<std::size_t>(nl - line)));
            return npos;
        }
        const std::string_view field(line, static_cast<std::size_t>(nl - 1 - line));
        const std::string_view name(line, static_cast<std::size_t>(q - line));
        const auto colon = name.size();
        line = nl + 1;
        const std::string_view value = trim(field.substr(colon + 1));
        switch (name.size()) {
            case 14:
                if (iequals(name, "content-length")) {
                    if (value.empty() || value.size() > 15) {
                        fail("invalid Content-Length", field);
                        return npos;
                    }
                    std::uint64_t v = 0;
                    for (char c : value) {
                        if (!is_digit(c)) {
                            fail("invalid Content-Length", field);
                            return npos;
                        }
                        v = v * 10 + static_cast<std::uint64_t>(c - '0');
                    }
                    if (has_length && v != length) {
                        fail("conflicting Content-Length headers", field);
                        return npos;
                    }
                    has_length = true;
                    length = v;
                }
                break;
            case 17:
                if (iequals(name, "transfer-encoding")) {
                    if (iequals(last_token(value), "chunked")) {
                        chunked = true;
                        other_coding = false;
                    } else {
                        chunked = false;
                        other_coding = true;
                    }
                }
                break;
            case 10:
                if (iequals(name, "connection")) {
                    if (has_token(value, "close")) close = true;
                    if (has_token(value, "keep-alive")) keep_alive = true;
                }
                break;
            default: break;
        }
    }
    const auto consumed = static_cast<std::size_t>(line - p);

    if (status < 200) {
        if (status == 101) {
            fail("101 Switching Protocols: the connection left HTTP/1.1", status_line);
            return npos;
        }
        return consumed;  // interim (100 Continue, 103 Early Hints): the real one follows
    }
    current_ = Response{};
    current_.status = status;
    current_.close = close || (http10 && !keep_alive);
    if (head_requests_ || status == 204 || status == 304) {
        done_ = true;
    } else if (chunked) {
        state_ = State::chunk_size;
    } else if (other_coding || !has_length) {
        state_ = State::body_until_close;
        current_.close = true;
    } else if (length == 0) {
        done_ = true;
    } else {
        state_ = State::body_length;
        remaining_ = length;
    }
    return consumed;
}

bool ResponseFramer::chunk_size_line(std::string_view line) {
    std::uint64_t size = 0;
    std::size_t i = 0;
    for (; i < line.size(); ++i) {
        const int h = hex_value(line[i]);
        if (h < 0) break;
        if (i >= 15) {
            fail("chunk size too large", line);
            return false;
        }
        size = size * 16 + static_cast<std::uint64_t>(h);
    }
    const std::string_view rest = line.substr(i);
    if (i == 0 ||
        !(rest.empty() || rest.front() == ';' || rest.front() == ' ' || rest.front() == '\t')) {
        fail("invalid chunk size line", line);
        return false;
    }
    if (size == 0) {
        state_ = State::trailers;
    } else {
        state_ = State::chunk_data;
        remaining_ = size;
    }
    return true;
}

bool ResponseFramer::trailer_line(std::string_view line) {
    const auto colon = line.find(':');
    if (colon == npos || colon == 0) {
        fail("trailer line without a field name and colon", line);
        return false;
    }
    return true;
}

ResponseFramer::Step ResponseFramer::run(std::string_view& data) {
    while (true) {
        if (done_) {
            done_ = false;
            state_ = State::head;
            return Step::response;
        }
        switch (state_) {
            case State::head: {
                if (data.empty()) return Step::more;
                if (carry_.empty()) {
                    const std::size_t n = parse_head(data.data(), data.data() + data.size());
                    if (n == npos) return Step::error;
                    if (n == 0) {
                        if (data.size() > kMaxHead) {
                            fail("response head larger than 64 KiB", data);
                            return Step::error;
                        }
                        carry_.assign(data);
                        data = {};
                        return Step::more;
                    }
                    data.remove_prefix(n);
                } else {
                    const std::size_t old = carry_.size();
                    const std::size_t take = std::min(data.size(), kMaxHead + 1 - old);
                    carry_.append(data.data(), take);
                    const std::size_t n = parse_head(carry_.data(), carry_.data() + carry_.size());
                    if (n == npos) return Step::error;
                    if (n == 0) {
                        if (carry_.size() > kMaxHead) {
                            fail("response head larger than 64 KiB", carry_);
                            return Step::error;
                        }
                        data.remove_prefix(take);
                        return Step::more;
                    }
                    data.remove_prefix(n - old);
                    carry_.clear();
                }
                break;
            }
            case State::body_length: {
                const auto take =
                    static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, data.size()));
                append_body(data.data(), take);
                data.remove_prefix(take);
                remaining_ -= take;
                if (remaining_ != 0) return Step::more;
                done_ = true;
                break;
            }
            case State::body_until_close:
                append_body(data.data(), data.size());
                data = {};
                return Step::more;
            case State::chunk_data: {
                const auto take =
                    static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, data.size()));
                append_body(data.data(), take);
                data.remove_prefix(take);
                remaining_ -= take;
                if (remaining_ != 0) return Step::more;
                state_ = State::chunk_data_crlf;
                remaining_ = 2;
                break;
            }
            case State::chunk_data_crlf:
                while (remaining_ > 0 && !data.empty()) {
                    if (data.front() != (remaining_ == 2 ? '\r' : '\n')) {
                        fail("chunk data not followed by CRLF", data.substr(0, 16));
                        return Step::error;
                    }
                    data.remove_prefix(1);
                    --remaining_;
                }
                if (remaining_ != 0) return Step::more;
                state_ = State::chunk_size;
                break;
            case State::chunk_size:
            case State::trailers: {
                // One line, possibly split across feeds.
                const auto nl = data.find('\n');
                // The limit applies to the whole line, however the input was split.
                if (carry_.size() + (nl == npos ? data.size() : nl) > kMaxLine) {
                    fail(state_ == State::trailers ? "trailer line too long"
                                                   : "chunk size line too long",
                         data);
                    return Step::error;
                }
                std::string_view line;
                if (nl == npos) {
                    carry_.append(data);
                    data = {};
                    return Step::more;
                }
                if (carry_.empty()) {
                    line = data.substr(0, nl);
                } else {
                    carry_.append(data.substr(0, nl));
                    line = carry_;
                }
                data.remove_prefix(nl + 1);
                if (line.empty() || line.back() != '\r') {
                    fail("chunk size or trailer line not ended by CRLF", line);
                    return Step::error;
                }
                line.remove_suffix(1);
                bool good;
                if (state_ == State::chunk_size) {
                    good = chunk_size_line(line);
                } else if (line.empty()) {
                    good = true;
                    done_ = true;
                } else {
                    good = trailer_line(line);
                }
                carry_.clear();
                if (!good) return Step::error;
                break;
            }
        }
    }
}

}  // namespace sm::loadgen
