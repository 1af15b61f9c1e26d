// The per-request JSON body. TechEmpower's rule is that an object mapping
// "message" to "Hello, World!" is instantiated and serialized per request.
// nlohmann::json allocates a map node, two strings and the output per call;
// this writer serializes into caller memory with no allocation and produces
// byte-identical output (tests/unit/test_json.cpp compares the two).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace sm::http {

inline constexpr std::string_view kHelloWorld = "Hello, World!";

struct Message {
    std::string_view message;
};

// Bytes needed in the worst case (every byte escaped as \u00XX).
constexpr std::size_t json_string_max_size(std::size_t n) noexcept {
    return 2 + 6 * n;
}
constexpr std::size_t json_max_size(const Message& m) noexcept {
    return sizeof(R"({"message":})") - 1 + json_string_max_size(m.message.size());
}

// Writes s as a JSON string (RFC 8259 escaping, as nlohmann::json::dump() does
// by default: UTF-8 passed through, control bytes as \u00xx) and returns the end.
// out must hold json_string_max_size(s.size()) bytes.
char* write_json_string(char* out, std::string_view s) noexcept;

// Serializes {"message":"..."}; out must hold json_max_size(m) bytes. Returns the length.
std::size_t serialize(const Message& m, std::span<char> out) noexcept;

}  // namespace sm::http
