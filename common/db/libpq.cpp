#include "db/libpq.hpp"

#include "runtime/server.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>

namespace sm::db {

Libpq libpq;

namespace {

std::string load() {
    const char* from_env = std::getenv("SM_LIBPQ");
    const std::string name = from_env != nullptr && *from_env != '\0' ? from_env : SM_LIBPQ_SONAME;
    // Never closed: the connections' memory and callbacks belong to it.
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = ::dlerror();
        return "cannot load libpq (" + std::string(why != nullptr ? why : name) +
               "; Debian: libpq5)";
    }
    Libpq found;
    std::string missing;
#define SM_LIBPQ_LOOKUP(fn)                                                       \
    found.fn = reinterpret_cast<decltype(found.fn)>(::dlsym(handle, #fn));        \
    if (found.fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#fn);
    SM_LIBPQ_FUNCTIONS(SM_LIBPQ_LOOKUP)
#undef SM_LIBPQ_LOOKUP
    if (!missing.empty())
        return name + " lacks " + missing + " (pipeline mode needs libpq 14 or later)";
    libpq = found;
    return {};
}

}  // namespace

std::optional<std::string> load_libpq() noexcept {
    try {
        static const std::string why = load();
        if (why.empty()) return std::nullopt;
        return why;
    } catch (const std::exception& e) {
        return std::string(e.what());
    }
}

void require_libpq() {
    if (auto why = load_libpq()) throw std::runtime_error("db: " + *why);
}

namespace {

// Every model that links a database client gets the loader runtime::serve()
// calls with --db (this file is linked with the clients, which call
// require_libpq()).
[[maybe_unused]] const bool registered = (runtime::register_database_loader(&load_libpq), true);

}  // namespace

}  // namespace sm::db
