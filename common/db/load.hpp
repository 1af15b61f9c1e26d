// Loading the database client's library, for the models (without
// libpq-fe.h): runtime::Model::database is &db::load_libpq.
#pragma once

#include <optional>
#include <string>

namespace sm::db {

// Loads libpq (once; thread-safe; later calls return the first answer):
// nothing, or why it cannot be used, for the log. The library is SM_LIBPQ
// from the environment when set (a path or a soname), else the soname the
// build found (CMake's SM_LIBPQ_SONAME, libpq.so.5 on Debian 12).
std::optional<std::string> load_libpq() noexcept;
// The same for the clients' constructors: throws std::runtime_error with
// the reason.
void require_libpq();

}  // namespace sm::db
