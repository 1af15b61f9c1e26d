// Maps a request's method and target to what the server answers. The suite has
// three Hello World endpoints and three workloads (http/work.hpp); everything
// else is 404, other methods on them 405.
#pragma once

#include <cstdint>
#include <string_view>

namespace sm::http {

enum class Endpoint : std::uint8_t { root, plaintext, json, fortunes, db, queries, none };
enum class Method : std::uint8_t { get, head, other };

struct Route {
    Endpoint endpoint = Endpoint::none;
    bool method_allowed = false;  // GET and HEAD on a known endpoint
    bool head = false;            // answer without a body
};

// The path of a request target: origin-form "/p?q" gives "/p", absolute-form
// "http://host/p?q" gives "/p"; asterisk- and authority-form give "".
std::string_view target_path(std::string_view target) noexcept;

Endpoint endpoint_for_path(std::string_view path) noexcept;

Route route(Method method, std::string_view target) noexcept;
// The same for a path already cut from its target (no query or fragment).
Route route_path(Method method, std::string_view path) noexcept;

// The Allow header value for known endpoints.
inline constexpr std::string_view kAllowedMethods = "GET, HEAD";

}  // namespace sm::http
