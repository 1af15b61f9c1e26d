// TechEmpower's Fortunes page, written out independently of common/http:
// the 12 rows of its Fortune table, the escaping, the page a server must
// answer for a source of rows, the page for TechEmpower's own rows written
// out whole, and a strict reader of a page's rows. Header only: the
// session's unit tests and the conformance suite both check pages against it.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/printable.hpp"

namespace sm::test::fortunes {

struct Fortune {
    std::int32_t id;
    std::string message;
};

// TechEmpower's Fortune table (its create-postgres.sql), written out here
// independently of common/http.
inline const std::vector<Fortune>& techempower_fortunes() {
    static const std::vector<Fortune> rows = {
        {1, "fortune: No such file or directory"},
        {2, "A computer scientist is someone who fixes things that aren't broken."},
        {3, "After enough decimal places, nobody gives a damn."},
        {4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"},
        {5, "A computer program does what you tell it to do, not what you want it to do."},
        {6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"},
        {7, "Any program that runs right is obsolete."},
        {8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"},
        {9, "Feature: A bug with seniority."},
        {10, "Computers make very fast, very accurate mistakes."},
        {11, "<script>alert(\"This should not be displayed in a browser alert box.\");</script>"},
        {12, "\u30D5\u30EC\u30FC\u30E0\u30EF\u30FC\u30AF\u306E\u30D9\u30F3\u30C1\u30DE\u30FC\u30AF"},
    };
    return rows;
}

// The whole page a server must answer for TechEmpower's 12 rows, written out
// by hand from the page TechEmpower's verifier accepts (valid_fortune in its
// toolset/test_types/fortune/fortune_html_parser.py): its rows in its order,
// here in the models' markup (one line, "<!DOCTYPE html>") and escaping
// ("&#39;", which the verifier reads as its "&apos;"). Not made from
// techempower_fortunes() nor expected_page(): a wrong row in one of those
// cannot agree with itself here. A row a line, as the verifier's page has them.
// clang-format off
inline constexpr std::string_view kTechEmpowerPage =
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td></tr>"
    "<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>"
    "<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>"
    "<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#39;t broken.</td></tr>"
    "<tr><td>8</td><td>A list is only as strong as its weakest link. — Donald Knuth</td></tr>"
    "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>"
    "<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>"
    "<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>"
    "<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>"
    "<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen</td></tr>"
    "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>"
    "<tr><td>1</td><td>fortune: No such file or directory</td></tr>"
    "<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>"
    "</table></body></html>";
// clang-format on

// Whether `rows` are TechEmpower's 12, id for id and byte for byte (then a
// page made from them must be kTechEmpowerPage).
inline bool are_techempower_rows(const std::vector<Fortune>& rows) {
    const std::vector<Fortune>& te = techempower_fortunes();
    return rows.size() == te.size() &&
           std::equal(rows.begin(), rows.end(), te.begin(), [](const Fortune& a, const Fortune& b) {
               return a.id == b.id && a.message == b.message;
           });
}

inline constexpr std::string_view kAddedFortune = "Additional fortune added at request time.";
inline constexpr std::string_view kPageHead =
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>";
inline constexpr std::string_view kPageTail = "</table></body></html>";

inline std::string escape_html(std::string_view s) {
    std::string out;
    for (const char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// The rows the page must show: `source` plus the added one, by message as bytes.
inline std::vector<Fortune> page_order(std::vector<Fortune> rows) {
    rows.push_back({0, std::string(kAddedFortune)});
    // std::string compares as unsigned bytes (char_traits<char>): UTF-8 by code point.
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Fortune& a, const Fortune& b) { return a.message < b.message; });
    return rows;
}

inline std::string expected_page(const std::vector<Fortune>& source) {
    std::string page(kPageHead);
    for (const Fortune& f : page_order(source))
        page += "<tr><td>" + std::to_string(f.id) + "</td><td>" + escape_html(f.message) +
                "</td></tr>";
    page += kPageTail;
    return page;
}

struct PageRow {
    std::string id;
    std::string raw;  // the message cell as sent
};

// The page's table rows, read strictly: the head, then only
// "<tr><td>ID</td><td>MESSAGE</td></tr>" rows, then the tail and nothing
// after it. Nothing (and `why`) when the page has another shape.
inline std::optional<std::vector<PageRow>> parse_page(std::string_view body, std::string& why) {
    if (!body.starts_with(kPageHead)) {
        why = "the page does not begin with the head and the table's header row";
        return std::nullopt;
    }
    body.remove_prefix(kPageHead.size());
    std::vector<PageRow> rows;
    constexpr std::string_view kOpen = "<tr><td>";
    constexpr std::string_view kMiddle = "</td><td>";
    constexpr std::string_view kClose = "</td></tr>";
    while (body.starts_with(kOpen)) {
        body.remove_prefix(kOpen.size());
        const auto middle = body.find(kMiddle);
        const auto close = body.find(kClose);
        if (middle == std::string_view::npos || close == std::string_view::npos || close < middle) {
            why = "row " + std::to_string(rows.size()) + " is not <tr><td>ID</td><td>MESSAGE</td></tr>";
            return std::nullopt;
        }
        PageRow row{std::string(body.substr(0, middle)),
                    std::string(body.substr(middle + kMiddle.size(), close - middle - kMiddle.size()))};
        if (row.id.empty() || !std::all_of(row.id.begin(), row.id.end(),
                                           [](unsigned char c) { return std::isdigit(c) != 0; })) {
            why = "row " + std::to_string(rows.size()) + ": id \"" + row.id + "\" is not a number";
            return std::nullopt;
        }
        rows.push_back(std::move(row));
        body.remove_prefix(close + kClose.size());
    }
    if (body != kPageTail) {
        why = "after " + std::to_string(rows.size()) + " rows the page goes on with \"" +
              printable(std::string(body), 120) + "\" instead of ending with the table";
        return std::nullopt;
    }
    return rows;
}

// A message cell read back: every '&' must begin one of the five character
// references the escaping writes, and no character HTML gives a meaning may
// appear raw. Nothing (and `why`) otherwise.
inline std::optional<std::string> unescape_html(std::string_view s, std::string& why) {
    if (const auto bad = s.find_first_of("<>\"'"); bad != std::string_view::npos) {
        why = std::string("a raw '") + s[bad] + "' in the message";
        return std::nullopt;
    }
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        if (s[i] != '&') {
            out += s[i++];
            continue;
        }
        bool matched = false;
        for (const auto& [ref, c] : {std::pair<std::string_view, char>{"&amp;", '&'},
                                     {"&lt;", '<'},
                                     {"&gt;", '>'},
                                     {"&quot;", '"'},
                                     {"&#39;", '\''}}) {
            if (s.substr(i, ref.size()) == ref) {
                out += c;
                i += ref.size();
                matched = true;
                break;
            }
        }
        if (!matched) {
            why = "an '&' that begins none of &amp; &lt; &gt; &quot; &#39; at \"" +
                  std::string(s.substr(i, 12)) + "\"";
            return std::nullopt;
        }
    }
    return out;
}

inline const PageRow* row_with_id(const std::vector<PageRow>& rows, std::int32_t id) {
    const std::string want = std::to_string(id);
    for (const PageRow& r : rows)
        if (r.id == want) return &r;
    return nullptr;
}

}  // namespace sm::test::fortunes
