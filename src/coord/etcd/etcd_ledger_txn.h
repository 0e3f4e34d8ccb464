// EtcdLedgerTxn: the fire ledger's storage (src/coord/fire_ledger.h) as one round of an
// optimistic etcd transaction (internal). Reads go into a Snapshot at their mod revisions (read
// once per round; Prefetch batches an operation's reads into one request); writes are buffered
// in Writes. The round's runner (EtcdFires) then commits the writes only if no key read changed,
// and retries the whole operation otherwise. A key read is not re-read within a round, and the
// ledger never reads a key after writing it in the same round.
//
// Storage: a fire record is its marker key (always) plus its open key while an attempt holds it;
// the attempt's live key, attached to the attempt's etcd lease, says that lease still holds
// (FireEntry::backend_lease). A token is the revision of the commit that started its attempt
// (its running record's create_revision): StartAttempt returns claims with token 0, and the
// runner fills in the commit's revision.
//
// Thread safety: one round of one operation, on one thread.
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_LEDGER_TXN_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_LEDGER_TXN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"
#include "src/coord/fire_ledger.h"

namespace gnomon::coord::etcd {

// The token of `fire`'s attempt `attempt` as read into `s`: its record's create revision (0 when
// the record was not read or is gone).
int64_t TokenOf(const Snapshot& s, const EtcdKeyspace& keys, const FireKey& fire, int attempt);
// Whether the attempt whose open record is `f` still holds `fire` at `now`: its etcd lease holds
// the live key (as read into `s`) and its deadline has not passed.
bool Holds(const Snapshot& s, const EtcdKeyspace& keys, const FireKey& fire, const FireRec& f,
           Instant now);

class EtcdLedgerTxn final : public LedgerTxn {
 public:
  // `now`: the backend clock. `lease`: the etcd lease of an attempt this operation starts,
  // granted on first use and kept across the operation's rounds. REQUIRES: all outlive this.
  EtcdLedgerTxn(EtcdKv& kv, const EtcdKeyspace& keys, const std::function<Instant()>& now,
                std::optional<EtcdKv::Lease>& lease)
      : kv_(kv), keys_(keys), now_(now), lease_(lease) {}

  // What the round read and wants to write.
  const Snapshot& snapshot() const { return s_; }
  const Writes& writes() const { return w_; }
  // Whether the round adds history records (its commit then counts them for the caps).
  bool adds_records() const { return adds_records_; }
  // The etcd lease of the claim this round makes (a new fire's attempt 1), if any.
  std::optional<int64_t> claim_lease() const { return claim_lease_; }

  Instant Now() override { return now_(); }
  Status Prefetch(const FireKey& fire, int attempt, bool job_state, bool live_fires) override;
  Result<std::optional<FireEntry>> LoadFire(const FireKey& fire, int attempt_hint) override;
  Result<std::vector<FireEntry>> LiveFires(const FireKey& fire, Instant now) override;
  Result<int> LastAttempt(const FireEntry& fire) override;
  Status CreateFire(const FireKey& fire, const std::string& node_id, Instant now) override;
  Result<Claim> StartAttempt(const FireKey& fire, int attempt, const std::string& node_id,
                             Duration ttl, Instant now, const std::string& cause) override;
  Status ExtendLease(const FireEntry& fire, Duration ttl, Instant now) override;
  Status CloseFire(const FireEntry& fire) override;
  Result<std::optional<RunRecord>> LoadRecord(const FireKey& fire, int attempt) override;
  Status PutRecord(const RunRecord& record) override;
  Status PutCheckpoint(const FireKey& fire, const std::string& value) override;
  Result<JobState> LoadJobState(const std::string& job_id) override;
  Result<std::optional<Instant>> MarkersPrunedBefore(const std::string& job_id) override;
  Status PutJobState(const std::string& job_id, const JobState& state) override;
  Status BumpJobsVersion(const std::string& job_id) override;

 private:
  // Reads those of `keys` not read yet this round, and `prefixes` not read yet, in one request.
  Status Ensure(std::vector<std::string> keys, std::vector<std::string> prefixes = {});

  EtcdKv& kv_;
  const EtcdKeyspace& keys_;
  const std::function<Instant()>& now_;
  std::optional<EtcdKv::Lease>& lease_;
  Snapshot s_;
  Writes w_;
  std::map<std::string, FireRec> open_;  // open key -> its decoded value, as read
  bool created_fire_ = false;
  bool adds_records_ = false;
  std::optional<int64_t> claim_lease_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_LEDGER_TXN_H_
