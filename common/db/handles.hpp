// Owning handles for libpq's connection and result, without libpq-fe.h in
// the headers the models include (libpq's PGconn and PGresult are typedefs
// of these two structs).
#pragma once

#include <memory>

extern "C" {
struct pg_conn;
struct pg_result;
struct pg_cancel;
}

namespace sm::db {

struct ConnectionFree {
    void operator()(pg_conn* connection) const noexcept;  // PQfinish
};
struct ResultFree {
    void operator()(pg_result* result) const noexcept;  // PQclear
};
struct CancelFree {
    void operator()(pg_cancel* cancel) const noexcept;  // PQfreeCancel
};
using ConnectionHandle = std::unique_ptr<pg_conn, ConnectionFree>;
using ResultHandle = std::unique_ptr<pg_result, ResultFree>;

}  // namespace sm::db
