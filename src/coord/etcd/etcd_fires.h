// EtcdFires: the etcd backend's fire operations (internal). Claim, Renew, NextAttempt, Report,
// ResolveLost, RecordSkipped, CancelFire, RerunFire, SaveCheckpoint and SaveLiveOutput run the
// rules of src/coord/fire_ledger.h over an EtcdLedgerTxn, one optimistic round at a time: the
// round's reads, then one txn that commits its writes only if none of the keys read changed
// (retried up to kMaxRounds, then Unavailable). A commit that adds history records also counts
// them and trims beyond the caps (EtcdHistory). Besides: the listing of expired fires, fire
// markers and checkpoints, and the adoption of a claim whose answer was lost.
//
// Thread safety: safe from many threads (the lost-answer memory has its own mutex).
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_FIRES_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_FIRES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/etcd/etcd_history.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"
#include "src/coord/fire_ledger.h"

namespace gnomon::coord::etcd {

class EtcdFires {
 public:
  // `now`: the backend clock. REQUIRES: all arguments outlive this object.
  EtcdFires(EtcdKv& kv, const EtcdKeyspace& keys, EtcdHistory& history,
            std::function<Instant()> now)
      : kv_(kv), keys_(keys), history_(history), now_(std::move(now)) {}

  // As the Coordinator methods of the same names.
  Result<ClaimOutcome> Claim(const ClaimRequest& req);
  Status Renew(gnomon::Claim& claim, Duration ttl);
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl);
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final);
  Result<std::vector<ExpiredFire>> ListExpired(int limit);
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& expired,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl);
  Status RecordSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason);
  Status CancelFire(const FireKey& fire, const std::string& reason);
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause);
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires);
  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value);
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output);
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire);

 private:
  // `op` on a ledger over one round's EtcdLedgerTxn, committed (retried while another caller
  // committed first); `what` names the operation in the Unavailable answer after kMaxRounds.
  template <class Op>
  auto Run(const std::string& what, const FireKey& fire, Op op);

  // This node claimed `req`'s fire on lease `lid` but the answer was lost. If that claim was
  // applied (late: a frozen server that resumed) and its lease still holds the fire, it is this
  // node's: adopt it with a fresh lease rather than leave an orphan for ResolveLost.
  Result<std::optional<gnomon::Claim>> Adopt(const ClaimRequest& req, int64_t lid);

  // Claims whose commit got no answer (it may have been applied, or be applied later by a
  // server that was frozen): fire marker key -> the etcd lease it attached.
  void RememberUncertain(const std::string& fire_key, int64_t lease_id);
  std::optional<int64_t> Uncertain(const std::string& fire_key);
  void ForgetUncertain(const std::string& fire_key);

  EtcdKv& kv_;
  const EtcdKeyspace& keys_;
  EtcdHistory& history_;
  const std::function<Instant()> now_;
  std::mutex uncertain_mu_;
  std::map<std::string, int64_t> uncertain_;  // guarded by uncertain_mu_
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_FIRES_H_
