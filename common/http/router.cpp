#include "http/router.hpp"

namespace sm::http {

std::string_view target_path(std::string_view target) noexcept {
    if (target.empty()) return {};
    if (target.front() != '/') {
        // absolute-form: scheme "://" authority [path]
        const auto scheme_end = target.find("://");
        if (scheme_end == std::string_view::npos) return {};  // "*" or "host:port"
        const auto path_start = target.find('/', scheme_end + 3);
        if (path_start == std::string_view::npos) return "/";
        target.remove_prefix(path_start);
    }
    // A plain loop: find_first_of calls memchr once per character, and
    // targets are short.
    for (std::size_t i = 0; i < target.size(); ++i)
        if (target[i] == '?' || target[i] == '#') return target.substr(0, i);
    return target;
}

Endpoint endpoint_for_path(std::string_view path) noexcept {
    if (path == "/plaintext") return Endpoint::plaintext;
    if (path == "/json") return Endpoint::json;
    if (path == "/") return Endpoint::root;
    if (path == "/fortunes") return Endpoint::fortunes;
    if (path == "/db") return Endpoint::db;
    if (path == "/queries") return Endpoint::queries;
    return Endpoint::none;
}

Route route(Method method, std::string_view target) noexcept {
    return route_path(method, target_path(target));
}

Route route_path(Method method, std::string_view path) noexcept {
    Route r;
    r.endpoint = endpoint_for_path(path);
    r.head = method == Method::head;
    r.method_allowed = r.endpoint != Endpoint::none && method != Method::other;
    return r;
}

}  // namespace sm::http
