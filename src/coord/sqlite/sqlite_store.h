// SqliteStore (internal): what every part of SqliteCoordinator shares: the backend clock, the one
// write connection (with the mutex that serialises its use) and the pool of read-only
// connections. The role classes (SqliteClaims, SqliteRunHistory, SqliteDefinitions, SqliteAudit,
// SqliteNodes) each hold a reference to one SqliteStore; the tables are those of sqlite_db.cc.
//
// Thread safety: safe to use from many threads at once. A writer holds write_mu() for the whole
// of its transaction on writer(); Read runs its body under one reader's own mutex. Lock order:
// none is needed, since no lock is taken while another is held (a body run by Read must not take
// write_mu(), and a writer does not call Read).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_STORE_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_STORE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gnomon/sqlite_coordinator.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon::coord {

class SqliteStore {
 public:
  // Opens (creating if missing) the database at `path`, switches it to WAL, creates or upgrades
  // the schema and opens the read connections; errors as SqliteCoordinator::Open's. `clock` must
  // outlive the result.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path, Clock& clock,
                                                   const SqliteOptions& options);
  ~SqliteStore();
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Clock& clock() { return clock_; }
  // Serialises use of writer().
  std::mutex& write_mu() { return mu_; }
  // The write connection. REQUIRES: write_mu() held.
  SqliteDb& writer() { return *db_; }
  // Runs `body` on a read connection: the first free one, else (all busy) it waits for one.
  Status Read(const std::function<Status(SqliteDb&)>& body);

 private:
  struct Reader;  // a read-only SqliteDb and the mutex that guards it

  SqliteStore(std::unique_ptr<SqliteDb> db, std::vector<std::unique_ptr<Reader>> readers,
              Clock& clock);

  Clock& clock_;
  std::mutex mu_;                 // serialises use of db_
  std::unique_ptr<SqliteDb> db_;  // guarded by mu_
  // Destroyed before db_, so the write connection is the last to close (it checkpoints the WAL).
  const std::vector<std::unique_ptr<Reader>> readers_;
  std::atomic<size_t> next_reader_{0};  // round-robin choice when every reader is busy
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_STORE_H_
