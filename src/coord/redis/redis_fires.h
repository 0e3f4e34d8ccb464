// RedisFires (internal): the rest of RedisCoordinator's ClaimStore (gnomon/claim_store.h): job
// state and pausing, lost fires, skips, checkpoints and live output (fenced by the token), cancel,
// rerun and the fire-marker check of an ownership takeover. Each is one script call (or one read)
// whose arguments are built against the scripts' one description (redis_scripts.h); the rules run
// on the server, in the Lua of redis_scripts.cc (those of src/coord/fire_ledger.h).
//
// Thread safety: safe to call from many threads at once (state lives on the server).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_FIRES_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_FIRES_H_

#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord {

class RedisFires {
 public:
  // `store` must outlive this object.
  explicit RedisFires(RedisStore& store) : store_(store) {}
  RedisFires(const RedisFires&) = delete;
  RedisFires& operator=(const RedisFires&) = delete;

  Result<JobState> GetJobState(const std::string& job_id);
  Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& job_ids);
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason);

  Result<std::vector<ExpiredFire>> ListExpired(int limit);
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl);
  Status RecordSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason);
  Status CancelFire(const FireKey& fire, const std::string& reason);
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause);

  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value);
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output);
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire);

  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires);

 private:
  // Runs the fenced save script `script` (a redis_scripts id: checkpoint, live output) of
  // `value` for `claim`; `what` names it in errors.
  Status SaveFenced(int script, const gnomon::Claim& claim, const std::string& value,
                    const char* what);
  // Under a Cluster, the second step of a pause-state change: the jobs version in the shared
  // slot (on one primary the script did it).
  Status BumpJobsVersion();
  // Appends to `out` up to `limit` expired leases: of the lease index under `index_base`, or,
  // with `groups` (all of one primary; index_base one of theirs), of those groups' indexes in
  // one call.
  Status ListExpiredIn(const std::string& index_base, int limit, std::vector<ExpiredFire>& out,
                       const std::vector<int>& groups = {});

  // A runs_new member older than this was left by a copy that failed (RedisStore::CopyNewRuns):
  // ListExpired's sweep copies it.
  static constexpr Duration kSweepAge = std::chrono::seconds(1);

  RedisStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_FIRES_H_
