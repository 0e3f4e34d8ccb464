// SqliteCoordinator: the Coordinator (gnomon/coordinator.h) on one SQLite database file, for one
// host with any number of gnomon processes (docs/configuration.md "Backend URLs":
// `sqlite:///path/gnomon.db`).
//
// Durability: the file is in WAL mode with synchronous=FULL, so a claim, once returned, survives
// a crash of the process or of the machine. Every operation that reads and then writes runs in
// one `BEGIN IMMEDIATE` transaction: processes sharing the file are serialised by SQLite's file
// lock, and an operation either happens whole or not at all. Fencing tokens come from a durable
// per-job counter that is also never below the largest token in the history, so they never go
// backwards across restarts.
//
// Time: the backend clock is the Clock given to Open (SystemClock in production). Processes
// sharing a file share the host's clock. Instants are stored as integer unix milliseconds.
//
// Errors: a lock held by another connection for longer than `busy_timeout`, a full disk and I/O
// errors are Unavailable (retry later; nothing was written); a damaged file is Internal; a file
// written by a newer gnomon (schema version above this one's) is FailedPrecondition.
//
// Connections: every operation that writes (and FiresRecorded, which needs one snapshot of
// several rows) runs on one write connection, one call at a time. Reads of a single statement
// (ListRuns, GetRun, ListJobs, JobsVersion, ListNodes, GetJobState, ListAudit, LoadCheckpoint,
// ListExpired) run on a small pool of read-only connections beside it: in WAL mode they neither
// wait for a write in progress (here or in another process) nor block one, and each sees
// everything committed before it started, so a caller always reads its own returned writes.
//
// Thread safety: safe to call from many threads at once (each connection is used by one thread
// at a time, under its own mutex). Do not keep a SqliteCoordinator across fork(); open a new one
// in the child.
#ifndef GNOMON_SQLITE_COORDINATOR_H_
#define GNOMON_SQLITE_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"

namespace gnomon {
namespace coord {
class SqliteAudit;
class SqliteClaims;
class SqliteDefinitions;
class SqliteNodes;
class SqliteRunHistory;
class SqliteStore;
}  // namespace coord

struct SqliteOptions {
  // How long one statement waits for another connection's write lock before giving up with
  // Unavailable. Default 5 s. Must be >= 0.
  Duration busy_timeout = std::chrono::seconds(5);
  // Read-only connections for the reads listed above; a read waits only when all of them are
  // busy with other reads. More than the cores: a thread descheduled while it holds one then
  // rarely makes another wait (with 4, that wait was the HTTP API's p99 under load; each
  // connection caches up to ~2 MB of pages). Default 16. Must be >= 1.
  int read_connections = 16;
};

class SqliteCoordinator final : public Coordinator {
 public:
  // Opens (creating if missing) the database at `path` and its schema. `clock` is the backend
  // clock and must outlive the result. Errors: InvalidArgument for an empty path, a negative
  // busy_timeout or read_connections < 1; Unavailable when the file cannot be opened or written;
  // FailedPrecondition when its schema is newer than this build's; Internal when it is not a gnomon
  // database.
  static Result<std::unique_ptr<SqliteCoordinator>> Open(const std::string& path, Clock& clock,
                                                         SqliteOptions options = {});
  ~SqliteCoordinator() override;
  SqliteCoordinator(const SqliteCoordinator&) = delete;
  SqliteCoordinator& operator=(const SqliteCoordinator&) = delete;

  // The schema version this build writes (PRAGMA user_version).
  static constexpr int kSchemaVersion = 5;

  Result<Instant> Now() override;

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override;
  Status Renew(gnomon::Claim& claim, Duration ttl) override;
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) override;
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override;
  Result<std::vector<ExpiredFire>> ListExpired(int limit) override;
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl) override;
  Status RecordSkipped(const FireKey& fire, const std::string& node_id,
                       const std::string& reason) override;
  Status CancelFire(const FireKey& fire, const std::string& reason) override;
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause) override;

  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) override;
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) override;
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire) override;

  Result<JobState> GetJobState(const std::string& job_id) override;
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason) override;

  Result<RunPage> ListRuns(const RunQuery& query) override;
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) override;
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override;

  Status Heartbeat(const NodeInfo& node, Duration ttl) override;
  Result<std::vector<NodeInfo>> ListNodes() override;

  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version) override;
  Status DeleteJob(const std::string& job_id, int64_t expected_version) override;
  Result<StoredJob> GetJob(const std::string& job_id) override;
  Result<std::vector<StoredJob>> ListJobs() override;
  Result<int64_t> JobsVersion() override;

  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) override;
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) override;
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) override;

 private:
  explicit SqliteCoordinator(std::unique_ptr<coord::SqliteStore> store);

  // The clock and connections every part shares (src/coord/sqlite/sqlite_store.h); declared
  // first, so destroyed last.
  const std::unique_ptr<coord::SqliteStore> store_;
  // One part per role, each over store_ (src/coord/sqlite/sqlite_<role>.h).
  const std::unique_ptr<coord::SqliteClaims> claims_;
  const std::unique_ptr<coord::SqliteRunHistory> history_;
  const std::unique_ptr<coord::SqliteDefinitions> definitions_;
  const std::unique_ptr<coord::SqliteAudit> audit_;
  const std::unique_ptr<coord::SqliteNodes> nodes_;
};

}  // namespace gnomon

#endif  // GNOMON_SQLITE_COORDINATOR_H_
