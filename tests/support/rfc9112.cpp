// The reference framing of RFC 9112 requests; see rfc9112.hpp. Written for
// clarity: one octet at a time through an explicit state machine for the head
// and one for the chunked body, with the field semantics in small hooks.
#include "support/rfc9112.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sm::test::rfc9112 {

namespace {

constexpr std::size_t npos = std::string_view::npos;
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// ---------------------------------------------------------------------------
// Character classes (RFC 5234 B.1, RFC 9110 5.5 / 5.6, RFC 3986 2)

unsigned char octet(std::string_view s, std::size_t i) {
    return static_cast<unsigned char>(s[i]);
}

bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}
bool is_alpha(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
// ABNF strings are case-insensitive, so HEXDIG's "A"-"F" match "a"-"f" too.
bool is_hexdig(unsigned char c) {
    return is_digit(c) || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}
unsigned hex_value(unsigned char c) {
    if (is_digit(c)) return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    return static_cast<unsigned>(c - 'A' + 10);
}
bool is_ws(unsigned char c) {
    return c == ' ' || c == '\t';
}  // SP / HTAB (OWS, BWS)
bool is_ctl(unsigned char c) {
    return c < 0x20 || c == 0x7F;
}
bool is_vchar(unsigned char c) {
    return c >= 0x21 && c <= 0x7E;
}
bool is_obs_text(unsigned char c) {
    return c >= 0x80;
}
// RFC 9110 5.6.2
bool is_tchar(unsigned char c) {
    if (is_digit(c) || is_alpha(c)) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != npos;
}
// RFC 9110 5.5: field-vchar / SP / HTAB
bool is_field_octet(unsigned char c) {
    return is_vchar(c) || is_obs_text(c) || is_ws(c);
}
// RFC 9110 5.6.4
bool is_qdtext(unsigned char c) {
    return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5B) ||
           (c >= 0x5D && c <= 0x7E) || is_obs_text(c);
}
bool is_quoted_pair_octet(unsigned char c) {
    return c == '\t' || c == ' ' || is_vchar(c) || is_obs_text(c);
}
// RFC 3986 2.3, 2.2
bool is_unreserved(unsigned char c) {
    return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}
bool is_sub_delim(unsigned char c) {
    return std::string_view("!$&'()*+,;=").find(static_cast<char>(c)) != npos;
}

char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
std::string to_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        c = lower(c);
    return out;
}
bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

std::size_t skip_ws(std::string_view s, std::size_t i) {
    while (i < s.size() && is_ws(octet(s, i)))
        ++i;
    return i;
}
std::size_t token_end(std::string_view s, std::size_t i) {
    while (i < s.size() && is_tchar(octet(s, i)))
        ++i;
    return i;
}
// RFC 9112 5.1: the leading and trailing OWS are not part of the field value.
std::string_view trim_ows(std::string_view s) {
    std::size_t b = 0;
    std::size_t e = s.size();
    while (b < e && is_ws(octet(s, b)))
        ++b;
    while (e > b && is_ws(octet(s, e - 1)))
        --e;
    return s.substr(b, e - b);
}

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
    return a > kU64Max - b ? kU64Max : a + b;
}

// ---------------------------------------------------------------------------
// RFC 3986 pieces

// Every octet of s is allowed (a single-octet class, or "%" HEXDIG HEXDIG).
template <typename Allowed>
bool all_pct_or(std::string_view s, Allowed allowed) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = octet(s, i);
        if (c == '%') {
            if (i + 2 >= s.size()) return false;
            if (!is_hexdig(octet(s, i + 1)) || !is_hexdig(octet(s, i + 2))) return false;
            i += 2;
            continue;
        }
        if (!allowed(c)) return false;
    }
    return true;
}

bool is_pchar_octet(unsigned char c) {
    return is_unreserved(c) || is_sub_delim(c) || c == ':' || c == '@';
}
// *( pchar / "/" ): a path of segments
bool is_path_chars(std::string_view s) {
    return all_pct_or(s, [](unsigned char c) { return is_pchar_octet(c) || c == '/'; });
}
// query = *( pchar / "/" / "?" )
bool is_query(std::string_view s) {
    return all_pct_or(s, [](unsigned char c) { return is_pchar_octet(c) || c == '/' || c == '?'; });
}
bool is_reg_name(std::string_view s) {
    return all_pct_or(s, [](unsigned char c) { return is_unreserved(c) || is_sub_delim(c); });
}
bool is_userinfo(std::string_view s) {
    return all_pct_or(
        s, [](unsigned char c) { return is_unreserved(c) || is_sub_delim(c) || c == ':'; });
}
bool all_digits(std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return is_digit(static_cast<unsigned char>(c)); });
}

// dec-octet = DIGIT / %x31-39 DIGIT / "1" 2DIGIT / "2" %x30-34 DIGIT / "25" %x30-35
bool is_dec_octet(std::string_view s) {
    if (s.empty() || s.size() > 3 || !all_digits(s)) return false;
    if (s.size() > 1 && s[0] == '0') return false;
    unsigned v = 0;
    for (const char c : s)
        v = v * 10 + static_cast<unsigned>(c - '0');
    return v <= 255;
}

bool is_h16(std::string_view s) {
    return !s.empty() && s.size() <= 4 && std::all_of(s.begin(), s.end(), [](char c) {
        return is_hexdig(static_cast<unsigned char>(c));
    });
}

// h16 *( ":" h16 ), the last piece may be an IPv4address (worth two h16) when
// v4_tail. Returns the number of 16-bit pieces, or -1 if s is not such a list.
int h16_pieces(std::string_view s, bool v4_tail) {
    int n = 0;
    std::size_t i = 0;
    for (;;) {
        const std::size_t colon = s.find(':', i);
        const std::string_view piece = s.substr(i, colon == npos ? npos : colon - i);
        if (colon == npos) {
            if (v4_tail && piece.find('.') != npos)
                return grammar::is_ipv4_address(piece) ? n + 2 : -1;
            return is_h16(piece) ? n + 1 : -1;
        }
        if (!is_h16(piece)) return -1;
        ++n;
        i = colon + 1;
    }
}

// IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
bool is_ipv_future(std::string_view s) {
    if (s.size() < 4 || lower(s[0]) != 'v') return false;
    std::size_t i = 1;
    while (i < s.size() && is_hexdig(octet(s, i)))
        ++i;
    if (i == 1 || i >= s.size() || s[i] != '.') return false;
    const std::string_view rest = s.substr(i + 1);
    return !rest.empty() && std::all_of(rest.begin(), rest.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return is_unreserved(c) || is_sub_delim(c) || c == ':';
    });
}

struct HostPort {
    bool valid = false;
    std::string_view host;
    bool has_colon = false;
    std::string_view port;
};

// uri-host [ ":" port ]; uri-host = IP-literal / IPv4address / reg-name (every
// IPv4address is also a reg-name, so it needs no case of its own); port = *DIGIT.
HostPort parse_host_port(std::string_view s) {
    HostPort hp;
    std::size_t i = 0;
    if (!s.empty() && s[0] == '[') {
        const std::size_t close = s.find(']');
        if (close == npos || !grammar::is_ip_literal(s.substr(0, close + 1))) return hp;
        i = close + 1;
    } else {
        i = std::min(s.find(':'), s.size());
        if (!is_reg_name(s.substr(0, i))) return hp;
    }
    hp.host = s.substr(0, i);
    if (i < s.size()) {
        if (s[i] != ':') return hp;
        hp.has_colon = true;
        hp.port = s.substr(i + 1);
        if (!all_digits(hp.port)) return hp;
    }
    hp.valid = true;
    return hp;
}

// authority = [ userinfo "@" ] host [ ":" port ]
bool is_authority(std::string_view s, bool* has_userinfo, bool* empty_host) {
    const std::size_t at = s.find('@');
    std::string_view host_port = s;
    if (at != npos) {
        if (!is_userinfo(s.substr(0, at))) return false;
        host_port = s.substr(at + 1);
    }
    const HostPort hp = parse_host_port(host_port);
    if (has_userinfo != nullptr) *has_userinfo = at != npos;
    if (empty_host != nullptr) *empty_host = hp.host.empty();
    return hp.valid;
}

struct UriParts {
    bool valid = false;
    std::string_view scheme;
    bool has_authority = false;
    bool has_userinfo = false;
    bool empty_host = false;
};

// absolute-URI = scheme ":" hier-part [ "?" query ]
// hier-part = "//" authority path-abempty / path-absolute / path-rootless / path-empty
UriParts parse_absolute_uri(std::string_view s) {
    UriParts u;
    const std::size_t colon = s.find(':');
    if (colon == npos || colon == 0 || !is_alpha(octet(s, 0))) return u;
    for (std::size_t i = 1; i < colon; ++i) {
        const unsigned char c = octet(s, i);
        if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return u;
    }
    u.scheme = s.substr(0, colon);
    const std::string_view rest = s.substr(colon + 1);
    const std::size_t q = rest.find('?');
    const std::string_view hier = rest.substr(0, q);
    if (q != npos && !is_query(rest.substr(q + 1))) return u;
    if (hier.substr(0, 2) == "//") {
        u.has_authority = true;
        const std::size_t slash = hier.find('/', 2);
        const std::string_view authority = hier.substr(2, slash == npos ? npos : slash - 2);
        if (!is_authority(authority, &u.has_userinfo, &u.empty_host)) return u;
        if (slash != npos && !is_path_chars(hier.substr(slash))) return u;
        u.valid = true;
        return u;
    }
    // path-absolute ("/" not followed by "/"), path-rootless or path-empty: any
    // run of pchar and "/" that does not start with "//".
    u.valid = is_path_chars(hier);
    return u;
}

bool parse_quoted_string_at(std::string_view s, std::size_t& i) {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size()) {
        const unsigned char c = octet(s, i);
        if (c == '"') {
            ++i;
            return true;
        }
        if (c == '\\') {
            if (i + 1 >= s.size() || !is_quoted_pair_octet(octet(s, i + 1))) return false;
            i += 2;
            continue;
        }
        if (!is_qdtext(c)) return false;
        ++i;
    }
    return false;
}

// ---------------------------------------------------------------------------
// Field values with a list syntax

struct Coding {
    std::string name;  // lower case
    bool has_params = false;
};

// transfer-coding = token *( OWS ";" OWS transfer-parameter )
// transfer-parameter = token BWS "=" BWS ( token / quoted-string )     (RFC 9110 10.1.4)
bool parse_transfer_coding(std::string_view s, std::size_t& i, Coding& out) {
    const std::size_t name_end = token_end(s, i);
    if (name_end == i) return false;
    out.name = to_lower(s.substr(i, name_end - i));
    i = name_end;
    for (;;) {
        std::size_t j = skip_ws(s, i);
        if (j >= s.size() || s[j] != ';') return true;  // i stays before the OWS
        j = skip_ws(s, j + 1);
        const std::size_t param_end = token_end(s, j);
        if (param_end == j) return false;
        j = skip_ws(s, param_end);
        if (j >= s.size() || s[j] != '=') return false;
        j = skip_ws(s, j + 1);
        if (j < s.size() && s[j] == '"') {
            if (!parse_quoted_string_at(s, j)) return false;
        } else {
            const std::size_t value_end = token_end(s, j);
            if (value_end == j) return false;
            j = value_end;
        }
        out.has_params = true;
        i = j;
    }
}

// #transfer-coding (RFC 9110 5.6.1): [ element ] *( OWS "," OWS [ element ] );
// empty elements are ignored.
bool parse_coding_list(std::string_view s, std::vector<Coding>& out) {
    std::size_t i = 0;
    for (;;) {
        i = skip_ws(s, i);
        if (i >= s.size()) return true;
        if (s[i] == ',') {
            ++i;
            continue;
        }
        Coding coding;
        if (!parse_transfer_coding(s, i, coding)) return false;
        out.push_back(std::move(coding));
        i = skip_ws(s, i);
        if (i >= s.size()) return true;
        if (s[i] != ',') return false;
        ++i;
    }
}

struct ConnectionOptions {
    bool close = false;
    bool keep_alive = false;
    bool upgrade = false;
    bool malformed = false;  // an element that is not a token
};

// Connection = #connection-option; connection-option = token (RFC 9110 7.6.1)
void parse_connection(std::string_view s, ConnectionOptions& out) {
    std::size_t i = 0;
    while (i <= s.size()) {
        const std::size_t comma = std::min(s.find(',', i), s.size());
        const std::string_view element = trim_ows(s.substr(i, comma - i));
        if (!element.empty()) {
            if (!grammar::is_token(element)) {
                out.malformed = true;
            } else if (iequals(element, "close")) {
                out.close = true;
            } else if (iequals(element, "keep-alive")) {
                out.keep_alive = true;
            } else if (iequals(element, "upgrade")) {
                out.upgrade = true;
            }
        }
        i = comma + 1;
    }
}

// ---------------------------------------------------------------------------
// Rule texts

constexpr std::string_view kBareLf =
    "RFC 9112 2.2: a bare LF is not a line terminator (we do not accept it)";
constexpr std::string_view kBareCr = "RFC 9112 2.2: CR must be followed by LF";
constexpr std::string_view kHeadTooLong =
    "RFC 9110 5.4, RFC 6585 5: head longer than max_head_bytes (431)";
constexpr std::string_view kTargetTooLong =
    "RFC 9112 3, RFC 9110 15.5.15: request-target longer than max_uri_bytes (414)";
constexpr std::string_view kTooManyFields =
    "RFC 9110 5.4, RFC 6585 5: more than max_header_count field lines (431)";
constexpr std::string_view kVersion =
    "RFC 9112 2.3: HTTP-version must be \"HTTP/\" DIGIT \".\" DIGIT, case-sensitive";
constexpr std::string_view kFieldName =
    "RFC 9112 5.1: field-name must be a token followed by \":\"";
constexpr std::string_view kFieldValue =
    "RFC 9110 5.5: field-value octets are VCHAR, obs-text, SP and HTAB only";
constexpr std::string_view kSpaceBeforeColon =
    "RFC 9112 5.1: no whitespace is allowed between field-name and colon";
constexpr std::string_view kObsFold =
    "RFC 9112 5.2: obs-fold (a line starting with SP or HTAB) is rejected";
constexpr std::string_view kBodyTooLong =
    "RFC 9110 15.5.14: chunked body longer than max_body_bytes (413)";
constexpr std::string_view kChunkDataEnd = "RFC 9112 7.1: chunk-data must be followed by CRLF";

// A rule text for an unexpected octet: the CR/LF rules first, else `other`.
std::string_view line_fault(unsigned char c, std::string_view other) {
    if (c == '\n') return kBareLf;
    return other;
}

// ---------------------------------------------------------------------------
// The framer

struct Fault {
    std::size_t at = 0;
    std::string rule;
};

struct Head {
    std::size_t end = 0;  // one past the final LF
    std::string_view method;
    std::string_view target;
    unsigned minor = 1;  // HTTP/1.<minor>
    std::size_t host_lines = 0;
    bool has_content_length = false;
    std::uint64_t content_length = 0;
    bool has_transfer_encoding = false;
    std::vector<Coding> codings;
    bool has_upgrade = false;
    ConnectionOptions connection;
};

enum class Status : std::uint8_t { done, incomplete, fault };

struct HeadOutcome {
    Status status = Status::incomplete;
    Head head;
    Fault fault;
};

struct BodyOutcome {
    Status status = Status::incomplete;
    std::size_t end = 0;
    Fault fault;
};

std::optional<Fault> fault_at(std::size_t at, std::string_view rule) {
    return Fault{at, std::string(rule)};
}

void add_reason(std::string& rule, std::string_view reason) {
    if (!rule.empty()) rule += "; ";
    rule += reason;
}

std::string either_for_target(std::string_view method, std::string_view target) {
    if (target == "*") {
        if (method == "OPTIONS") return {};
        return "RFC 9112 3.2.4: asterisk-form is only for OPTIONS";
    }
    if (method == "CONNECT") {
        const HostPort hp = parse_host_port(target);
        if (!hp.valid || !hp.has_colon) return "RFC 9112 3.2.3: CONNECT takes the authority-form";
        if (hp.host.empty() || hp.port.empty()) {
            return "RFC 9110 9.3.6: the authority-form of CONNECT needs a host and a port";
        }
        return {};
    }
    if (target.find('#') != npos) return "RFC 9112 3.2: a request-target has no fragment";
    if (target[0] == '/') {
        if (grammar::is_origin_form(target)) return {};
        return "RFC 9112 3.2.1, RFC 3986 3.3/3.4: not an origin-form (octet outside RFC 3986)";
    }
    if (grammar::is_authority_form(target)) {
        return "RFC 9112 3.2.3: authority-form is only for CONNECT";
    }
    const UriParts uri = parse_absolute_uri(target);
    if (!uri.valid) return "RFC 9112 3.2: request-target is none of the four forms";
    if (iequals(uri.scheme, "http") || iequals(uri.scheme, "https")) {
        if (!uri.has_authority || uri.empty_host) {
            return "RFC 9110 4.2.1: an http(s) URI with an empty host is invalid";
        }
        if (uri.has_userinfo) return "RFC 9110 4.2.4: userinfo in an http(s) URI is an error";
        return {};
    }
    // An origin server decides whether it serves a target URI (RFC 9110
    // 7.4); one of another scheme it may refuse (llhttp, for one, parses
    // only "scheme://" absolute-forms).
    return "RFC 9110 7.4: a target URI of a scheme other than http(s) may be refused";
}

class Framer {
  public:
    Framer(std::string_view input, const Policy& policy)
        : in_(input),
          policy_(policy),
          methods_(policy.methods.empty() ? default_methods() : policy.methods) {}

    Result run() {
        Result result;
        std::size_t start = 0;
        while (start < in_.size()) {
            std::optional<Message> message = message_at(start);
            if (!message) {
                result.incomplete = true;
                result.incomplete_either = std::move(pending_either_);
                break;
            }
            result.messages.push_back(std::move(*message));
            const Message& m = result.messages.back();
            if (m.verdict == Verdict::reject || !m.persist) break;
            start = m.end;
        }
        return result;
    }

  private:
    static Message rejected(Fault fault) {
        Message m;
        m.verdict = Verdict::reject;
        m.end = fault.at;
        m.persist = false;
        m.rule = std::move(fault.rule);
        return m;
    }

    // The message starting at `start`; nullopt if the input ends inside it.
    std::optional<Message> message_at(std::size_t start) {
        HeadOutcome h = parse_head(start);
        if (h.status == Status::fault) return rejected(std::move(h.fault));
        const Head& head = h.head;

        Message m;
        m.verdict = Verdict::accept;
        std::string either;
        std::string closing;

        // What is already `either` about the head so far: the target once
        // it is complete, the Connection elements once their line is.
        if (!head.target.empty()) {
            if (const std::string reason = either_for_target(head.method, head.target);
                !reason.empty()) {
                add_reason(either, reason);
            }
        }
        if (head.connection.malformed) {
            add_reason(
                either,
                "RFC 9110 7.6.1, 2.2: a Connection element is not a token (the recipient may "
                "reject or recover)");
        }
        if (h.status == Status::incomplete) {
            pending_either_ = either;
            return std::nullopt;
        }

        bool persist = true;
        if (head.minor == 0) {
            if (!head.connection.keep_alive || head.connection.close) {
                persist = false;
                add_reason(closing,
                           "RFC 9112 9.3: HTTP/1.0 persists only with Connection: keep-alive");
            }
        } else if (head.connection.close) {
            persist = false;
            add_reason(closing, "RFC 9110 7.6.1, RFC 9112 9.6: Connection: close");
        }
        if (head.has_upgrade && head.connection.upgrade) {
            persist = false;
            add_reason(closing,
                       "RFC 9110 7.8: Upgrade with Connection: upgrade (this server never switches "
                       "protocols: it answers and closes)");
        }

        if (head.method == "CONNECT") {
            // RFC 9110 9.3.6: a CONNECT request has no content; the connection then
            // becomes a tunnel, which this server does not provide.
            persist = false;
            add_reason(closing,
                       "RFC 9110 9.3.6: CONNECT has no content (the server answers and closes)");
            if (head.has_content_length || head.has_transfer_encoding) {
                add_reason(either, "RFC 9110 9.3.6: a CONNECT request with framing fields");
            }
            m.end = head.end;
        } else if (head.has_transfer_encoding) {
            if (head.minor == 0) {
                persist = false;
                add_reason(
                    closing,
                    "RFC 9112 6.1: Transfer-Encoding in HTTP/1.0: the framing is faulty, close "
                    "after the message");
            }
            BodyOutcome b = parse_chunked(head.end);
            if (b.status == Status::incomplete) {
                pending_either_ = either;
                return std::nullopt;
            }
            if (b.status == Status::fault) return rejected(std::move(b.fault));
            m.end = b.end;
        } else if (head.has_content_length) {
            if (in_.size() - head.end < head.content_length) {
                pending_either_ = either;
                return std::nullopt;
            }
            m.end = head.end + static_cast<std::size_t>(head.content_length);
        } else {
            m.end = head.end;  // RFC 9112 6.3 item 6: no content
        }

        if (!either.empty()) m.verdict = Verdict::either;
        m.persist = persist;
        m.rule = either;
        if (!persist) add_reason(m.rule, closing);
        return m;
    }

    // -- head ----------------------------------------------------------------

    enum class H : std::uint8_t {
        lead,        // start of the message: empty lines or the method
        lead_lf,     // CR of an empty line read
        method,      // inside the method
        target,      // inside the request-target
        version,     // inside HTTP-version (version_index_ octets matched)
        version_cr,  // HTTP-version read, CR expected
        line_lf,     // CR of a line read, LF expected
        field_start,
        field_name,
        field_value,
        final_lf,  // CR of the empty line ending the head read
    };

    HeadOutcome parse_head(std::size_t start) {
        HeadOutcome out;
        Head& head = out.head;
        H state = H::lead;
        std::size_t method_begin = 0;
        std::size_t target_begin = 0;
        std::size_t version_index = 0;
        std::size_t line_begin = 0;
        std::size_t value_begin = 0;
        std::size_t field_count = 0;
        std::string name;  // lower case, of the field line being read

        const auto fail = [&out](std::size_t at, std::string_view rule) {
            out.status = Status::fault;
            out.fault = Fault{at, std::string(rule)};
            return out;
        };

        for (std::size_t pos = start; pos < in_.size(); ++pos) {
            if (pos - start >= policy_.max_head_bytes) return fail(pos, kHeadTooLong);
            const unsigned char c = octet(in_, pos);
            switch (state) {
                case H::lead:
                    if (c == '\r') {
                        state = H::lead_lf;
                    } else if (is_tchar(c)) {
                        method_begin = pos;
                        state = H::method;
                    } else {
                        return fail(pos, line_fault(c, "RFC 9112 3.1: method must be a token"));
                    }
                    break;
                case H::lead_lf:
                    if (c != '\n') return fail(pos, kBareCr);
                    state = H::lead;  // RFC 9112 2.2: an empty line before the request-line
                    break;
                case H::method:
                    if (c == ' ') {
                        head.method = in_.substr(method_begin, pos - method_begin);
                        target_begin = pos + 1;
                        state = H::target;
                    } else if (!is_tchar(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 3: method must be a token "
                                                    "followed by exactly one SP"));
                    }
                    break;
                case H::target:
                    if (c == ' ') {
                        if (pos == target_begin) {
                            return fail(pos,
                                        "RFC 9112 3: exactly one SP between method and "
                                        "request-target (empty request-target)");
                        }
                        head.target = in_.substr(target_begin, pos - target_begin);
                        version_index = 0;
                        state = H::version;
                    } else if (is_ctl(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 3.2: a CTL in the request-target "
                                                    "(or a request-line without HTTP-version)"));
                    } else if (pos - target_begin >= policy_.max_uri_bytes) {
                        return fail(pos, kTargetTooLong);
                    }
                    break;
                case H::version: {
                    constexpr std::string_view kName = "HTTP/";
                    if (version_index < kName.size()) {
                        if (c != static_cast<unsigned char>(kName[version_index])) {
                            return fail(pos, line_fault(c, kVersion));
                        }
                    } else if (version_index == kName.size()) {  // major
                        if (!is_digit(c)) return fail(pos, line_fault(c, kVersion));
                        if (c != '1') {
                            return fail(pos, "RFC 9110 15.6.6: only HTTP/1.x is supported (505)");
                        }
                    } else if (version_index == kName.size() + 1) {
                        if (c != '.') return fail(pos, line_fault(c, kVersion));
                    } else {  // minor
                        if (!is_digit(c)) return fail(pos, line_fault(c, kVersion));
                        head.minor = static_cast<unsigned>(c - '0');
                        state = H::version_cr;
                    }
                    ++version_index;
                    break;
                }
                case H::version_cr:
                    if (c != '\r') {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 3: the request-line ends with CRLF "
                                                    "right after HTTP-version"));
                    }
                    state = H::line_lf;
                    break;
                case H::line_lf:
                    if (c != '\n') return fail(pos, kBareCr);
                    state = H::field_start;
                    break;
                case H::field_start:
                    if (c == '\r') {
                        state = H::final_lf;
                        break;
                    }
                    if (is_ws(c)) {
                        return fail(pos, field_count == 0
                                             ? "RFC 9112 2.2: whitespace between the request-line "
                                               "and the first field line is rejected"
                                             : kObsFold);
                    }
                    if (!is_tchar(c)) return fail(pos, line_fault(c, kFieldName));
                    if (field_count >= policy_.max_header_count) return fail(pos, kTooManyFields);
                    line_begin = pos;
                    state = H::field_name;
                    break;
                case H::field_name:
                    if (c == ':') {
                        ++field_count;
                        name = to_lower(in_.substr(line_begin, pos - line_begin));
                        if (std::optional<Fault> f = on_field_name(name, pos, head)) {
                            return fail(f->at, f->rule);
                        }
                        value_begin = pos + 1;
                        state = H::field_value;
                    } else if (is_ws(c)) {
                        return fail(pos, kSpaceBeforeColon);
                    } else if (!is_tchar(c)) {
                        return fail(pos, line_fault(c, kFieldName));
                    }
                    break;
                case H::field_value:
                    if (c == '\r') {
                        const std::string_view value =
                            trim_ows(in_.substr(value_begin, pos - value_begin));
                        if (std::optional<Fault> f = on_field_value(name, value, pos, head)) {
                            return fail(f->at, f->rule);
                        }
                        state = H::line_lf;
                    } else if (!is_field_octet(c)) {
                        return fail(pos, line_fault(c, kFieldValue));
                    }
                    break;
                case H::final_lf:
                    if (c != '\n') return fail(pos, kBareCr);
                    head.end = pos + 1;
                    if (std::optional<Fault> f = on_head_end(pos, head))
                        return fail(f->at, f->rule);
                    out.status = Status::done;
                    return out;
            }
        }
        out.status = Status::incomplete;
        return out;
    }

    // At the colon: the rules that depend on the field name alone.
    static std::optional<Fault> on_field_name(std::string_view name, std::size_t at, Head& head) {
        if (name == "host") {
            if (++head.host_lines > 1) {
                return fault_at(at, "RFC 9112 3.2: more than one Host field line (400)");
            }
        } else if (name == "content-length") {
            if (head.has_content_length) {
                return fault_at(at,
                                "RFC 9112 6.3, RFC 9110 8.6: more than one Content-Length "
                                "field line (we reject rather than fold)");
            }
            if (head.has_transfer_encoding) {
                return fault_at(at,
                                "RFC 9112 6.1: Content-Length with Transfer-Encoding (we reject)");
            }
            head.has_content_length = true;
        } else if (name == "transfer-encoding") {
            if (head.has_content_length) {
                return fault_at(at,
                                "RFC 9112 6.1: Transfer-Encoding with Content-Length (we reject)");
            }
            head.has_transfer_encoding = true;
        } else if (name == "upgrade") {
            head.has_upgrade = true;
        }
        return std::nullopt;
    }

    // At the CR ending a field value (leading and trailing OWS removed).
    std::optional<Fault> on_field_value(std::string_view name, std::string_view value,
                                        std::size_t at, Head& head) const {
        if (name == "host") {
            if (!grammar::is_host_value(value)) {
                return fault_at(at,
                                "RFC 9112 3.2, RFC 3986 3.2.2: Host must be uri-host [ \":\" "
                                "port ] (400)");
            }
        } else if (name == "content-length") {
            if (value.empty() || !all_digits(value)) {
                return fault_at(at,
                                "RFC 9110 8.6: Content-Length must be 1*DIGIT (no list, no "
                                "sign)");
            }
            std::uint64_t n = 0;
            for (const char ch : value) {
                const auto d = static_cast<std::uint64_t>(ch - '0');
                if (n > (kU64Max - d) / 10) {
                    return fault_at(at, "RFC 9110 8.6: Content-Length does not fit in 64 bits");
                }
                n = n * 10 + d;
            }
            if (n > policy_.max_body_bytes) {
                return fault_at(at, "RFC 9110 15.5.14: Content-Length above max_body_bytes (413)");
            }
            head.content_length = n;
        } else if (name == "transfer-encoding") {
            const std::size_t first_new = head.codings.size();
            if (!parse_coding_list(value, head.codings)) {
                return fault_at(at,
                                "RFC 9112 6.1, RFC 9110 10.1.4: Transfer-Encoding must be a "
                                "list of transfer-coding");
            }
            std::size_t chunked = 0;
            for (std::size_t i = 0; i < head.codings.size(); ++i) {
                if (head.codings[i].name != "chunked") continue;
                ++chunked;
                if (i >= first_new && head.codings[i].has_params) {
                    return fault_at(
                        at, "RFC 9112 7.1: chunked takes no parameters in Transfer-Encoding");
                }
            }
            if (chunked > 1) {
                return fault_at(at,
                                "RFC 9112 6.1: Transfer-Encoding applies chunked more than once");
            }
        } else if (name == "connection") {
            parse_connection(value, head.connection);
        }
        return std::nullopt;
    }

    // At the LF ending the head: the rules over the whole field section.
    std::optional<Fault> on_head_end(std::size_t at, const Head& head) const {
        if (head.minor >= 1 && head.host_lines == 0) {
            return fault_at(at, "RFC 9112 3.2: an HTTP/1.1 request without Host (400)");
        }
        if (head.has_transfer_encoding) {
            if (head.codings.empty()) {
                return fault_at(at,
                                "RFC 9112 6.1, RFC 9110 5.6.1: Transfer-Encoding without a "
                                "transfer-coding");
            }
            if (head.codings.back().name != "chunked") {
                return fault_at(at,
                                "RFC 9112 6.3: in a request the final transfer coding must be "
                                "chunked (400)");
            }
        }
        if (std::find(methods_.begin(), methods_.end(), head.method) == methods_.end()) {
            return fault_at(at, "RFC 9110 9.1, 15.6.2: method not implemented (501)");
        }
        return std::nullopt;
    }

    // -- chunked body (RFC 9112 7.1) -------------------------------------------

    enum class C : std::uint8_t {
        size_first,       // a chunk-size begins
        size,             // inside chunk-size
        bws_before_semi,  // BWS that must be followed by ";"
        bws_after_semi,   // after ";": BWS, then chunk-ext-name
        ext_name,
        bws_after_name,  // BWS after chunk-ext-name: "=" or ";" must follow
        bws_after_eq,    // after "=": BWS, then chunk-ext-val
        ext_token,
        ext_quoted,       // inside a quoted-string
        ext_quoted_pair,  // after "\" inside a quoted-string
        ext_after_quoted,
        line_lf,  // CR of the chunk-size line read
        data,
        data_cr,
        data_lf,
        trailer_start,
        trailer_name,
        trailer_value,
        trailer_lf,
        final_lf,
        done,
    };

    // The fewest octets that could still complete the chunked body from `state`.
    static std::uint64_t min_rest(C state, std::uint64_t size, std::uint64_t remaining) {
        // After the chunk-size line: the chunk-data, its CRLF, "0" CRLF, CRLF; or,
        // for the last-chunk, the CRLF ending the empty trailer-section.
        const std::uint64_t after_line = size > 0 ? sat_add(size, 7) : 2;
        switch (state) {
            case C::size_first: return 5;  // "0" CRLF CRLF
            case C::size:
            case C::ext_name:
            case C::ext_token:
            case C::ext_after_quoted: return sat_add(2, after_line);  // CRLF
            case C::bws_before_semi:
            case C::bws_after_name:
            case C::ext_quoted_pair: return sat_add(4, after_line);  // e.g. ";a" CRLF
            case C::bws_after_semi:
            case C::bws_after_eq:
            case C::ext_quoted: return sat_add(3, after_line);  // e.g. "a" CRLF
            case C::line_lf: return sat_add(1, after_line);
            case C::data: return sat_add(remaining, 7);
            case C::data_cr: return 7;
            case C::data_lf: return 6;
            case C::trailer_start: return 2;
            case C::trailer_name: return 5;  // ":" CRLF CRLF
            case C::trailer_value: return 4;
            case C::trailer_lf: return 3;
            case C::final_lf: return 1;
            case C::done: return 0;
        }
        return 0;
    }

    BodyOutcome parse_chunked(std::size_t begin) const {
        BodyOutcome out;
        const auto fail = [&out](std::size_t at, std::string_view rule) {
            out.status = Status::fault;
            out.fault = Fault{at, std::string(rule)};
            return out;
        };
        C state = C::size_first;
        std::uint64_t size = 0;
        std::uint64_t remaining = 0;
        for (std::size_t pos = begin; pos < in_.size(); ++pos) {
            const unsigned char c = octet(in_, pos);
            switch (state) {
                case C::size_first:
                    if (!is_hexdig(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1: chunk-size = 1*HEXDIG (nothing "
                                                    "before it)"));
                    }
                    size = hex_value(c);
                    state = C::size;
                    break;
                case C::size:
                    if (is_hexdig(c)) {
                        const std::uint64_t d = hex_value(c);
                        if (size > (kU64Max - d) / 16) {
                            return fail(pos, "RFC 9112 7.1: chunk-size does not fit in 64 bits");
                        }
                        size = size * 16 + d;
                    } else if (is_ws(c)) {
                        state = C::bws_before_semi;
                    } else if (c == ';') {
                        state = C::bws_after_semi;
                    } else if (c == '\r') {
                        state = C::line_lf;
                    } else {
                        return fail(pos,
                                    line_fault(c, "RFC 9112 7.1: chunk-size [ chunk-ext ] CRLF"));
                    }
                    break;
                case C::bws_before_semi:
                    if (c == ';') {
                        state = C::bws_after_semi;
                    } else if (!is_ws(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: BWS in a chunk line must be "
                                                    "followed by \";\" chunk-ext-name"));
                    }
                    break;
                case C::bws_after_semi:
                    if (is_tchar(c)) {
                        state = C::ext_name;
                    } else if (!is_ws(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: chunk-ext-name must be a "
                                                    "token"));
                    }
                    break;
                case C::ext_name:
                    if (is_tchar(c)) break;
                    if (is_ws(c)) {
                        state = C::bws_after_name;
                    } else if (c == '=') {
                        state = C::bws_after_eq;
                    } else if (c == ';') {
                        state = C::bws_after_semi;
                    } else if (c == '\r') {
                        state = C::line_lf;
                    } else {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: chunk-ext-name must be a "
                                                    "token"));
                    }
                    break;
                case C::bws_after_name:
                    if (c == '=') {
                        state = C::bws_after_eq;
                    } else if (c == ';') {
                        state = C::bws_after_semi;
                    } else if (!is_ws(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: BWS after chunk-ext-name "
                                                    "must be followed by \"=\" or \";\""));
                    }
                    break;
                case C::bws_after_eq:
                    if (is_tchar(c)) {
                        state = C::ext_token;
                    } else if (c == '"') {
                        state = C::ext_quoted;
                    } else if (!is_ws(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: chunk-ext-val = token / "
                                                    "quoted-string"));
                    }
                    break;
                case C::ext_token:
                    if (is_tchar(c)) break;
                    if (is_ws(c)) {
                        state = C::bws_before_semi;
                    } else if (c == ';') {
                        state = C::bws_after_semi;
                    } else if (c == '\r') {
                        state = C::line_lf;
                    } else {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: chunk-ext-val must be a "
                                                    "token"));
                    }
                    break;
                case C::ext_quoted:
                    if (c == '"') {
                        state = C::ext_after_quoted;
                    } else if (c == '\\') {
                        state = C::ext_quoted_pair;
                    } else if (!is_qdtext(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9110 5.6.4: octet not allowed in a "
                                                    "quoted-string"));
                    }
                    break;
                case C::ext_quoted_pair:
                    if (!is_quoted_pair_octet(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9110 5.6.4: quoted-pair = \"\\\" ( HTAB "
                                                    "/ SP / VCHAR / obs-text )"));
                    }
                    state = C::ext_quoted;
                    break;
                case C::ext_after_quoted:
                    if (is_ws(c)) {
                        state = C::bws_before_semi;
                    } else if (c == ';') {
                        state = C::bws_after_semi;
                    } else if (c == '\r') {
                        state = C::line_lf;
                    } else {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.1: after a quoted chunk-ext-val "
                                                    "only BWS \";\" or CRLF"));
                    }
                    break;
                case C::line_lf:
                    if (c != '\n') return fail(pos, kBareCr);
                    if (size > 0) {
                        remaining = size;
                        state = C::data;
                    } else {
                        state = C::trailer_start;  // that was the last-chunk
                    }
                    break;
                case C::data: {
                    // Take as much chunk-data as is there (it is opaque).
                    const std::uint64_t available = in_.size() - pos;
                    const std::uint64_t take = std::min(remaining, available);
                    remaining -= take;
                    pos += static_cast<std::size_t>(take) - 1;
                    if (remaining == 0) state = C::data_cr;
                    break;
                }
                case C::data_cr:
                    if (c != '\r') return fail(pos, kChunkDataEnd);
                    state = C::data_lf;
                    break;
                case C::data_lf:
                    if (c != '\n') return fail(pos, kChunkDataEnd);
                    state = C::size_first;
                    break;
                case C::trailer_start:
                    if (c == '\r') {
                        state = C::final_lf;
                    } else if (is_ws(c)) {
                        return fail(pos,
                                    "RFC 9112 7.1.2, 5.2: obs-fold in the trailer section is "
                                    "rejected");
                    } else if (is_tchar(c)) {
                        state = C::trailer_name;
                    } else {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.2, 5.1: trailer field-name must "
                                                    "be a token"));
                    }
                    break;
                case C::trailer_name:
                    if (c == ':') {
                        state = C::trailer_value;
                    } else if (is_ws(c)) {
                        return fail(pos,
                                    "RFC 9112 7.1.2, 5.1: no whitespace between a trailer "
                                    "field-name and colon");
                    } else if (!is_tchar(c)) {
                        return fail(pos, line_fault(c,
                                                    "RFC 9112 7.1.2, 5.1: trailer field-name must "
                                                    "be a token followed by \":\""));
                    }
                    break;
                case C::trailer_value:
                    if (c == '\r') {
                        state = C::trailer_lf;
                    } else if (!is_field_octet(c)) {
                        return fail(pos, line_fault(c, kFieldValue));
                    }
                    break;
                case C::trailer_lf:
                    if (c != '\n') return fail(pos, kBareCr);
                    state = C::trailer_start;
                    break;
                case C::final_lf:
                    if (c != '\n') return fail(pos, kBareCr);
                    state = C::done;
                    break;
                case C::done: break;  // not reached: the loop ends at done
            }
            const std::uint64_t consumed = pos + 1 - begin;
            if (sat_add(consumed, min_rest(state, size, remaining)) > policy_.max_body_bytes) {
                return fail(pos, kBodyTooLong);
            }
            if (state == C::done) {
                out.status = Status::done;
                out.end = pos + 1;
                return out;
            }
        }
        out.status = Status::incomplete;
        return out;
    }

    std::string_view in_;
    const Policy& policy_;
    const std::vector<std::string>& methods_;
    std::string pending_either_;  // see Result::incomplete_either
};

}  // namespace

// ---------------------------------------------------------------------------
// Public interface

namespace grammar {

bool is_token(std::string_view s) {
    return !s.empty() && token_end(s, 0) == s.size();
}

bool is_ipv4_address(std::string_view s) {
    std::size_t i = 0;
    for (int part = 0; part < 4; ++part) {
        const std::size_t dot = part < 3 ? s.find('.', i) : s.size();
        if (dot == npos || !is_dec_octet(s.substr(i, dot - i))) return false;
        i = dot + 1;
    }
    return true;
}

// IPv6address (RFC 3986 3.2.2): eight 16-bit pieces (the last two may be an
// IPv4address), or fewer around one "::" that stands for at least one piece.
bool is_ipv6_address(std::string_view s) {
    const std::size_t gap = s.find("::");
    if (gap == npos) return h16_pieces(s, true) == 8;
    if (s.find("::", gap + 1) != npos) return false;
    const std::string_view left = s.substr(0, gap);
    const std::string_view right = s.substr(gap + 2);
    const int l = left.empty() ? 0 : h16_pieces(left, false);
    const int r = right.empty() ? 0 : h16_pieces(right, true);
    return l >= 0 && r >= 0 && l + r <= 7;
}

bool is_ip_literal(std::string_view s) {
    if (s.size() < 2 || s.front() != '[' || s.back() != ']') return false;
    const std::string_view inner = s.substr(1, s.size() - 2);
    return is_ipv6_address(inner) || is_ipv_future(inner);
}

bool is_host_value(std::string_view s) {
    return parse_host_port(s).valid;
}

// origin-form = absolute-path [ "?" query ]; absolute-path = 1*( "/" segment )
bool is_origin_form(std::string_view s) {
    if (s.empty() || s[0] != '/') return false;
    const std::size_t q = s.find('?');
    if (!is_path_chars(s.substr(0, q))) return false;
    return q == npos || is_query(s.substr(q + 1));
}

bool is_absolute_uri(std::string_view s) {
    return parse_absolute_uri(s).valid;
}

bool is_authority_form(std::string_view s) {
    const HostPort hp = parse_host_port(s);
    return hp.valid && hp.has_colon;
}

bool is_quoted_string(std::string_view s) {
    std::size_t i = 0;
    return parse_quoted_string_at(s, i) && i == s.size();
}

bool is_transfer_coding_list(std::string_view s) {
    std::vector<Coding> codings;
    return parse_coding_list(s, codings);
}

}  // namespace grammar

const std::vector<std::string>& default_methods() {
    static const std::vector<std::string> kMethods = {
        "GET",         "HEAD",       "POST",       "PUT",   "DELETE",   "CONNECT", "OPTIONS",
        "TRACE",       "PATCH",      "COPY",       "LOCK",  "MKCOL",    "MOVE",    "PROPFIND",
        "PROPPATCH",   "SEARCH",     "UNLOCK",     "BIND",  "REBIND",   "UNBIND",  "ACL",
        "REPORT",      "MKACTIVITY", "CHECKOUT",   "MERGE", "M-SEARCH", "NOTIFY",  "SUBSCRIBE",
        "UNSUBSCRIBE", "PURGE",      "MKCALENDAR", "LINK",  "UNLINK",   "SOURCE"};
    return kMethods;
}

Result frame(std::string_view input, const Policy& policy) {
    return Framer(input, policy).run();
}

std::string_view to_string(Verdict verdict) {
    switch (verdict) {
        case Verdict::accept: return "accept";
        case Verdict::reject: return "reject";
        case Verdict::either: return "either";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& out, Verdict verdict) {
    return out << to_string(verdict);
}

std::string describe(const Result& result) {
    std::string out;
    for (std::size_t i = 0; i < result.messages.size(); ++i) {
        const Message& m = result.messages[i];
        // Appended piece by piece: g++ 12 -O3 warns (-Wrestrict, a false
        // positive) on "literal" + std::to_string(...).
        out += '#';
        out += std::to_string(i);
        out += ' ';
        out += to_string(m.verdict);
        out += m.verdict == Verdict::reject ? " at=" : " end=";
        out += std::to_string(m.end);
        if (m.verdict != Verdict::reject) out += m.persist ? " persist=yes" : " persist=no";
        if (!m.rule.empty()) out += " (" + m.rule + ")";
        out += "\n";
    }
    if (result.incomplete) {
        out += "incomplete";
        if (!result.incomplete_either.empty()) {
            out += " (either: ";
            out += result.incomplete_either;
            out += ')';
        }
        out += '\n';
    }
    if (out.empty()) out = "(no messages)\n";
    return out;
}

}  // namespace sm::test::rfc9112
