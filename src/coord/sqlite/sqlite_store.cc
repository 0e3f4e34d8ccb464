#include "src/coord/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <utility>

namespace gnomon::coord {

using sqlite::Connection;
using sqlite::Statement;

struct SqliteStore::Reader {
  std::mutex mu;
  std::unique_ptr<SqliteDb> db;  // guarded by mu
};

SqliteStore::SqliteStore(std::unique_ptr<SqliteDb> db, std::vector<std::unique_ptr<Reader>> readers,
                         Clock& clock)
    : clock_(clock), db_(std::move(db)), readers_(std::move(readers)) {}

SqliteStore::~SqliteStore() = default;

Status SqliteStore::Read(const std::function<Status(SqliteDb&)>& body) {
  for (const std::unique_ptr<Reader>& reader : readers_) {
    std::unique_lock<std::mutex> lock(reader->mu, std::try_to_lock);
    if (lock.owns_lock()) return body(*reader->db);
  }
  // All busy: queue on one, spreading the waiters over the pool.
  Reader& reader =
      *readers_[next_reader_.fetch_add(1, std::memory_order_relaxed) % readers_.size()];
  std::lock_guard<std::mutex> lock(reader.mu);
  return body(*reader.db);
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, Clock& clock,
                                                       const SqliteOptions& options) {
  if (path.empty()) return InvalidArgumentError("sqlite: the database path is empty");
  if (options.busy_timeout < Duration(0)) {
    return InvalidArgumentError("sqlite: busy_timeout is negative");
  }
  if (options.read_connections < 1) {
    return InvalidArgumentError("sqlite: read_connections must be at least 1");
  }
  // A new database file is created readable by its owner only (SQLite gives its -wal and -shm
  // files the same mode): it holds every definition, pause state and run output.
  if (const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); fd >= 0) {
    ::close(fd);
  }
  Result<std::unique_ptr<Connection>> conn = Connection::Open(path, options.busy_timeout);
  if (!conn.ok()) return conn.status();
  auto db = std::make_unique<SqliteDb>(std::move(*conn));
  // WAL lets readers run beside the one writer and, with synchronous=FULL, makes every
  // committed claim durable across a crash (power loss included). Switching a new file to WAL
  // can answer SQLITE_BUSY without calling the busy handler while another process opens the
  // same file, so it is retried (on the Clock) until busy_timeout.
  const Duration give_up = clock.SteadyNow() + options.busy_timeout;
  std::mutex retry_mu;
  std::condition_variable retry_cv;
  for (int attempt = 0;; ++attempt) {
    Result<Statement> wal = db->conn().Prepare("PRAGMA journal_mode = WAL");
    Result<bool> row = wal.ok() ? wal->Step() : Result<bool>(wal.status());
    if (row.ok()) {
      const std::string mode = *row ? wal->Bytes(0) : "";
      if (mode != "wal") {
        return FailedPreconditionError("sqlite " + path + ": cannot use WAL journal mode (got \"" +
                                       mode + "\")");
      }
      break;
    }
    if (row.status().code() != StatusCode::kUnavailable || clock.SteadyNow() >= give_up) {
      return row.status();
    }
    std::unique_lock<std::mutex> lock(retry_mu);
    clock.WaitFor(lock, retry_cv, std::chrono::milliseconds(5 << std::min(attempt, 4)),
                  [] { return false; });
  }
  GNOMON_RETURN_IF_ERROR(db->conn().Exec("PRAGMA synchronous = FULL"));
  GNOMON_RETURN_IF_ERROR(db->CreateSchema());
  // The read connections open the file the write connection has created and switched to WAL
  // (a persistent mode); query_only makes any write on them an error instead of a second writer.
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < options.read_connections; ++i) {
    Result<std::unique_ptr<Connection>> read = Connection::Open(path, options.busy_timeout);
    if (!read.ok()) return read.status();
    GNOMON_RETURN_IF_ERROR((*read)->Exec("PRAGMA query_only = ON"));
    readers.push_back(std::make_unique<Reader>());
    readers.back()->db = std::make_unique<SqliteDb>(std::move(*read));
  }
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(db), std::move(readers), clock));
}

}  // namespace gnomon::coord
