// A thin, error-as-value wrapper over one sqlite3 connection (internal to the SQLite backend):
// cached prepared statements with bound parameters only, BEGIN IMMEDIATE transactions, and the
// mapping of SQLite result codes to gnomon Status codes.
//
// Thread safety: none; the owner serialises all use of a Connection and its Statements.
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_CONNECTION_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gnomon/status.h"
#include "gnomon/time.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gnomon::sqlite {

// The Status for SQLite result code `rc` (primary or extended) from an operation on the
// database at `path`; `what` says which operation, `detail` is sqlite3_errmsg when available.
// BUSY/LOCKED (another connection held the lock past the busy timeout), FULL (disk full),
// IOERR, CANTOPEN, READONLY, PROTOCOL and NOLFS are Unavailable; everything else is Internal.
Status StatusFromSqlite(int rc, std::string_view path, std::string_view what,
                        std::string_view detail);

class Connection;

// One execution of a cached prepared statement. Binding indices are 1-based, as in SQLite.
// Destroying it resets the statement so that it can be used again. Move-only.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& BindText(int index, std::string_view value);
  Statement& BindBlob(int index, std::string_view value);
  Statement& BindNull(int index);
  // Binds the value or NULL.
  Statement& Bind(int index, const std::optional<int64_t>& value);

  // Advances: true when a row is available, false when done. The first binding error, if any,
  // is returned here.
  Result<bool> Step();
  // Steps to completion, expecting no row (an INSERT/UPDATE/DELETE).
  Status Run();

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  // Text or blob bytes (empty for NULL).
  std::string Bytes(int column) const;

 private:
  friend class Connection;
  Statement(Connection* conn, sqlite3_stmt* stmt, const char* sql, bool* in_use);
  void RecordBindError(int rc, int index);

  Connection* conn_;
  sqlite3_stmt* stmt_;  // null once moved from
  const char* sql_;
  bool* in_use_;  // the cache entry's flag, cleared on destruction
  Status bind_error_;
};

class Connection {
 public:
  // Opens (creating if needed) the file at `path` with the given busy timeout.
  static Result<std::unique_ptr<Connection>> Open(const std::string& path, Duration busy_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The cached statement for `sql` (prepared on first use). REQUIRES: `sql` outlives the
  // Connection (a string literal) and no other Statement for it is alive.
  Result<Statement> Prepare(const char* sql);
  // Runs one or more statements without parameters or results (schema, pragmas).
  Status Exec(const char* sql);
  // Runs `body` in one BEGIN IMMEDIATE transaction: committed when it returns OK, rolled back
  // (nothing partial) when it returns an error or the commit fails.
  Status Transaction(const std::function<Status()>& body);

  // The Status for `rc` with this connection's error message.
  Status Error(int rc, std::string_view what) const;
  const std::string& path() const { return path_; }

 private:
  friend class Statement;
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  sqlite3* db_;
  std::string path_;
  std::map<std::string, Cached, std::less<>> statements_;
};

}  // namespace gnomon::sqlite

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_CONNECTION_H_
