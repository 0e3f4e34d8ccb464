#include "src/coord/sqlite/sqlite_connection.h"

#include <sqlite3.h>

#include <utility>

namespace gnomon::sqlite {

Status StatusFromSqlite(int rc, std::string_view path, std::string_view what,
                        std::string_view detail) {
  std::string message = "sqlite " + std::string(path) + ": " + std::string(what) + ": ";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      message += "the database is locked by another connection (busy timeout reached)";
      break;
    case SQLITE_FULL:
      message += "the disk is full (nothing was written)";
      break;
    case SQLITE_IOERR:
      message += "I/O error (nothing was written)";
      break;
    case SQLITE_CANTOPEN:
      message += "cannot open the database file";
      break;
    case SQLITE_READONLY:
      message += "the database is read-only";
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      message += "the file is damaged or not a database";
      break;
    default:
      message += sqlite3_errstr(rc);
      break;
  }
  if (!detail.empty() && detail != sqlite3_errstr(rc)) {
    message += " (" + std::string(detail) + ")";
  }
  message += " [sqlite code " + std::to_string(rc) + "]";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS:
      return UnavailableError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

// --- Statement -------------------------------------------------------------------------------

Statement::Statement(Connection* conn, sqlite3_stmt* stmt, const char* sql, bool* in_use)
    : conn_(conn), stmt_(stmt), sql_(sql), in_use_(in_use) {}

Statement::Statement(Statement&& other) noexcept
    : conn_(other.conn_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(other.sql_),
      in_use_(std::exchange(other.in_use_, nullptr)),
      bind_error_(std::move(other.bind_error_)) {}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  if (in_use_ != nullptr) *in_use_ = false;
}

void Statement::RecordBindError(int rc, int index) {
  if (rc == SQLITE_OK || !bind_error_.ok()) return;
  bind_error_ = conn_->Error(rc, "binding parameter " + std::to_string(index) + " of \"" +
                                     std::string(sql_).substr(0, 60) + "\"");
}

Statement& Statement::Bind(int index, int64_t value) {
  RecordBindError(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::BindText(int index, std::string_view value) {
  RecordBindError(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view value) {
  // A zero-length blob, not NULL, for an empty value.
  int rc = value.empty()
               ? sqlite3_bind_zeroblob(stmt_, index, 0)
               : sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT);
  RecordBindError(rc, index);
  return *this;
}

Statement& Statement::BindNull(int index) {
  RecordBindError(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

Statement& Statement::Bind(int index, const std::optional<int64_t>& value) {
  return value ? Bind(index, *value) : BindNull(index);
}

Result<bool> Statement::Step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return conn_->Error(rc, "\"" + std::string(sql_).substr(0, 60) + "...\"");
}

Status Statement::Run() {
  for (;;) {
    Result<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::Bytes(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr || size <= 0) return std::string();
  return std::string(static_cast<const char*>(data), static_cast<size_t>(size));
}

// --- Connection ------------------------------------------------------------------------------

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& path,
                                                     Duration busy_timeout) {
  sqlite3* db = nullptr;
  // NOMUTEX: the owner serialises use of the connection.
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = StatusFromSqlite(rc, path, "open", db ? sqlite3_errmsg(db) : "");
    sqlite3_close_v2(db);
    return s;
  }
  std::unique_ptr<Connection> conn(new Connection(db, path));
  sqlite3_extended_result_codes(db, 1);
  const int64_t timeout_ms = busy_timeout.count();
  sqlite3_busy_timeout(db, static_cast<int>(std::min<int64_t>(timeout_ms, INT32_MAX)));
  return conn;
}

Connection::~Connection() {
  for (auto& [sql, cached] : statements_) sqlite3_finalize(cached.stmt);
  sqlite3_close_v2(db_);
}

Status Connection::Error(int rc, std::string_view what) const {
  return StatusFromSqlite(rc, path_, what, sqlite3_errmsg(db_));
}

Result<Statement> Connection::Prepare(const char* sql) {
  auto it = statements_.find(std::string_view(sql));
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return Error(rc, "preparing \"" + std::string(sql).substr(0, 60) + "...\"");
    }
    it = statements_.emplace(sql, Cached{stmt, false}).first;
  }
  GNOMON_CHECK(!it->second.in_use);
  it->second.in_use = true;
  return Statement(this, it->second.stmt, sql, &it->second.in_use);
}

Status Connection::Exec(const char* sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return Status::Ok();
  Status s = StatusFromSqlite(rc, path_, "\"" + std::string(sql).substr(0, 40) + "...\"",
                              error ? error : "");
  sqlite3_free(error);
  return s;
}

Status Connection::Transaction(const std::function<Status()>& body) {
  GNOMON_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status status = body();
  if (status.ok()) {
    status = Exec("COMMIT");
    if (status.ok()) return status;
  }
  // Rolls back whatever the body or a failed COMMIT left (SQLite may already have rolled back
  // by itself after some errors, in which case this is a harmless no-op error).
  if (!sqlite3_get_autocommit(db_)) {
    char* error = nullptr;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, &error);
    sqlite3_free(error);
  }
  return status;
}

}  // namespace gnomon::sqlite
