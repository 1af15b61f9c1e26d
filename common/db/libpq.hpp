// libpq, loaded when a database client is first wanted (--db), not at the
// process's start: a server without --db maps no libpq and none of what
// libpq pulls in (OpenSSL, Kerberos, LDAP: about 5 MiB of resident memory
// and most of the start-up's relocations). Internal to sm_db, like
// libpq-fe.h, whose declarations (types, and the functions' signatures) it
// uses; nothing links libpq.
//
// The functions sm_db calls are listed once here. Each becomes a member of
// Libpq (a pointer dlsym() fills in) and a reference of the same name in
// sm::db, which the sources' unqualified calls (PQfinish(c)) find before
// libpq-fe.h's global declaration: the call sites read as libpq's API.
#pragma once

#include <libpq-fe.h>

#include <optional>
#include <string>

namespace sm::db {

#define SM_LIBPQ_FUNCTIONS(X)                                                                  \
    X(PQcancel) X(PQclear) X(PQconnectPoll) X(PQconnectStartParams) X(PQconnectdbParams)      \
    X(PQconsumeInput) X(PQenterPipelineMode) X(PQerrorMessage) X(PQexecPrepared)              \
    X(PQexitPipelineMode) X(PQfformat) X(PQfinish) X(PQflush) X(PQfreeCancel) X(PQgetCancel)  \
    X(PQgetResult) X(PQgetisnull) X(PQgetlength) X(PQgetvalue) X(PQisBusy) X(PQnfields)       \
    X(PQntuples) X(PQpipelineSync) X(PQprepare) X(PQresStatus) X(PQresultErrorField)          \
    X(PQresultErrorMessage) X(PQresultStatus) X(PQsendPrepare) X(PQsendQueryPrepared)        \
    X(PQsetNoticeReceiver) X(PQsetnonblocking) X(PQsocket) X(PQstatus)

struct Libpq {
#define SM_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
    SM_LIBPQ_FUNCTIONS(SM_LIBPQ_MEMBER)
#undef SM_LIBPQ_MEMBER
};

// Filled in by load_libpq(); every pointer is set once it has succeeded.
extern Libpq libpq;

#define SM_LIBPQ_NAME(name) inline constexpr auto& name = libpq.name;
SM_LIBPQ_FUNCTIONS(SM_LIBPQ_NAME)
#undef SM_LIBPQ_NAME

// Loads libpq (once; thread-safe; later calls return the first answer):
// nothing, or why it cannot be used, for the log. The library is SM_LIBPQ
// from the environment when set (a path or a soname), else the soname the
// build found (CMake's SM_LIBPQ_SONAME, libpq.so.5 on Debian 12). It is the
// loader runtime::serve() calls with --db (registered in libpq.cpp).
std::optional<std::string> load_libpq() noexcept;
// The same for the clients' constructors: throws std::runtime_error with
// the reason.
void require_libpq();

}  // namespace sm::db
