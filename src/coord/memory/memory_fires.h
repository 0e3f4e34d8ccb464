// MemoryFires: the in-memory coordinator's fire operations (internal). Claim, Renew, NextAttempt,
// Report, ResolveLost, RecordSkipped, CancelFire, RerunFire, SaveCheckpoint and SaveLiveOutput
// run the rules of src/coord/fire_ledger.h over a transaction on the MemoryState maps, under
// its mutex; besides, the listing of expired fires, fire markers and checkpoints.
//
// Thread safety: safe from many threads; every method locks the shared MemoryState::mu for its
// whole run (the only lock).
#ifndef GNOMON_SRC_COORD_MEMORY_MEMORY_FIRES_H_
#define GNOMON_SRC_COORD_MEMORY_MEMORY_FIRES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/memory/memory_state.h"

namespace gnomon::coord::memory {

class MemoryFires {
 public:
  // REQUIRES: `state` outlives this object.
  explicit MemoryFires(MemoryState& state) : s_(state) {}

  // As the Coordinator methods of the same names.
  Result<ClaimOutcome> Claim(const ClaimRequest& req);
  Status Renew(gnomon::Claim& claim, Duration ttl);
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl);
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final);
  Status CancelFire(const FireKey& key, const std::string& reason);
  Result<gnomon::Claim> RerunFire(const FireKey& key, const std::string& node_id, Duration ttl,
                                  const std::string& cause);
  Result<std::vector<ExpiredFire>> ListExpired(int limit);
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& expired,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl);
  Status RecordSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason);
  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value);
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output);
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire);
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires);

 private:
  MemoryState& s_;
};

}  // namespace gnomon::coord::memory

#endif  // GNOMON_SRC_COORD_MEMORY_MEMORY_FIRES_H_
