// SqliteClaims (internal): SqliteCoordinator's ClaimStore (gnomon/claim_store.h). The fire
// operations (claim, renew, next attempt, report, resolve lost, skip, cancel, rerun, checkpoint,
// live output) run the rules of src/coord/fire_ledger.h in one BEGIN IMMEDIATE transaction on the
// write connection, over the tables `fires`, `runs`, `fences`, `job_state` and `counters`
// (schema: sqlite_db.cc); the clock is read once the write lock is held, so claims are ordered by
// it across processes sharing the file. ListExpired, LoadCheckpoint and GetJobState are one
// statement on a read connection; FiresRecorded reads on the write connection (one snapshot of
// several rows); SetPaused writes the job's state and bumps the jobs version.
//
// Thread safety: safe to call from many threads at once (each write holds the store's write mutex
// for its transaction).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_CLAIMS_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_CLAIMS_H_

#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/sqlite/sqlite_store.h"

namespace gnomon::coord {

class SqliteClaims {
 public:
  // `store` must outlive this object.
  explicit SqliteClaims(SqliteStore& store) : store_(store) {}
  SqliteClaims(const SqliteClaims&) = delete;
  SqliteClaims& operator=(const SqliteClaims&) = delete;

  Result<ClaimOutcome> Claim(const ClaimRequest& req);
  Status Renew(gnomon::Claim& claim, Duration ttl);
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl);
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final);
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl);
  Status RecordSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason);
  Status CancelFire(const FireKey& fire, const std::string& reason);
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause);
  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value);
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output);

  Result<std::vector<ExpiredFire>> ListExpired(int limit);
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire);
  Result<JobState> GetJobState(const std::string& job_id);
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason);
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires);

 private:
  SqliteStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_CLAIMS_H_
