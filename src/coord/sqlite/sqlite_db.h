// SqliteDb: one connection to the database plus the backend's storage format (the
// schema and its upgrades, the row codecs) and the statements several operations share
// (internal to the SQLite backend). Keep the format: files written by earlier releases must
// keep working (tables, columns and encodings as in sqlite_db.cc's schema).
//
// Every method runs inside a transaction its caller opened (or is a single statement).
// Thread safety: none; the owner serialises use (SqliteStore's write mutex or a reader's mutex).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_DB_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_DB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "gnomon/sqlite_coordinator.h"
#include "src/coord/sqlite/sqlite_connection.h"

// The columns of a history record, in the order sqlite::ReadRun expects.
#define GNOMON_RUN_COLUMNS                                                              \
  "run_id, job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, node_id, " \
  "started_ms, finished_ms, outcome, exit_code, error, output, skip_reason, params, cause"

namespace gnomon {
namespace sqlite {

// The history record in a row of GNOMON_RUN_COLUMNS (Internal when its outcome is unknown).
Result<RunRecord> ReadRun(const Statement& row);
// Binds the fire's primary key (job_id, scheduled_ms, shard) to parameters 1-3.
void BindFire(Statement& s, const FireKey& fire);

}  // namespace sqlite

namespace coord {

class SqliteDb {
 public:
  // A `fires` row: the fire's claim key and current lease.
  struct FireRow {
    int shard_count = 1;
    int attempt = 1;
    int64_t fencing_token = 0;
    std::string node_id;
    Instant lease_expires_at;
    bool open = false;  // a lease is held
  };

  explicit SqliteDb(std::unique_ptr<sqlite::Connection> conn) : conn_(std::move(conn)) {}
  sqlite::Connection& conn() { return *conn_; }

  // Creates the schema, or upgrades an earlier one to kSchemaVersion.
  Status CreateSchema();
  Result<std::optional<FireRow>> LoadFire(const FireKey& fire);
  // Advances the job's fencing counter and returns the new token.
  Result<int64_t> NextToken(const std::string& job_id);
  // Writes (inserts or replaces) a history record, its output cut to kMaxOutputBytes.
  Status PutRun(const RunRecord& r);
  // Marks the fire's row closed (no lease held).
  Status CloseFire(const FireKey& fire);
  // The job's state (defaults when it has no row).
  Result<JobState> LoadJobState(const std::string& job_id);
  // Advances the jobs version and returns it.
  Result<int64_t> BumpJobsVersion();

 private:
  std::unique_ptr<sqlite::Connection> conn_;
};

}  // namespace coord
}  // namespace gnomon

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_DB_H_
