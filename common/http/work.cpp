#include "http/work.hpp"

#include <array>

namespace sm::http {

std::span<const FortuneRow> builtin_fortunes() noexcept {
    // TechEmpower's Fortune table (its create-postgres.sql), row for row.
    static constexpr std::array<FortuneRow, 12> kRows = {{
        {1, "fortune: No such file or directory"},
        {2, "A computer scientist is someone who fixes things that aren't broken."},
        {3, "After enough decimal places, nobody gives a damn."},
        {4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"},
        {5, "A computer program does what you tell it to do, not what you want it to do."},
        {6, "Emacs is a nice operating system, but I prefer UNIX. \xe2\x80\x94 Tom Christaensen"},
        {7, "Any program that runs right is obsolete."},
        {8, "A list is only as strong as its weakest link. \xe2\x80\x94 Donald Knuth"},
        {9, "Feature: A bug with seniority."},
        {10, "Computers make very fast, very accurate mistakes."},
        {11, "<script>alert(\"This should not be displayed in a browser alert box.\");</script>"},
        {12, "\xe3\x83\x95\xe3\x83\xac\xe3\x83\xbc\xe3\x83\xa0\xe3\x83\xaf\xe3\x83\xbc\xe3\x82\xaf"
             "\xe3\x81\xae\xe3\x83\x99\xe3\x83\xb3\xe3\x83\x81\xe3\x83\x9e\xe3\x83\xbc\xe3\x82\xaf"},
    }};
    return kRows;
}

std::string_view job_error_text(JobError e) noexcept {
    switch (e) {
        case JobError::none: return {};
        case JobError::unavailable: return "database unavailable";
        case JobError::lost: return "database connection lost";
        case JobError::failed: return "database error";
        case JobError::timeout: return "database timeout";
    }
    return "database error";
}

std::uint16_t parse_queries(std::string_view query) noexcept {
    // The first "queries=" parameter; its value is read as TechEmpower's
    // implementations do: digits only, anything else (empty, "foo", "-3")
    // counts as 1, then clamped to 1..500.
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view param = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        constexpr std::string_view kName = "queries=";
        if (param.substr(0, kName.size()) != kName) continue;
        const std::string_view value = param.substr(kName.size());
        if (value.empty()) return 1;
        std::uint32_t n = 0;
        for (const char c : value) {
            if (c < '0' || c > '9') return 1;
            n = n * 10 + static_cast<std::uint32_t>(c - '0');
            if (n > kMaxQueries) n = kMaxQueries + 1;  // no overflow, whatever the length
        }
        if (n < 1) return 1;
        return n > kMaxQueries ? kMaxQueries : static_cast<std::uint16_t>(n);
    }
    return 1;
}

}  // namespace sm::http
