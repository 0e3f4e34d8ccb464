// FireLedger: the rules of a fire's claim and lease, written once for every backend that runs
// them in C++ (memory, SQLite, etcd; Redis runs the same rules as Lua scripts on the server,
// src/coord/redis/redis_scripts.h). Internal to src/coord; not part of the public API.
//
// The rules are those of gnomon/coordinator.h: a fire is claimed once (already recorded, too
// early, too old to check, paused, overlap forbid/replace, then the marker, attempt 1 and the job's
// last instant), every write of a run is fenced on its claim's token, a retry or a lost-run rerun
// starts the next attempt with a new token, a final report closes the fire and moves the job's
// consecutive-failure count, an operator may cancel a running fire or re-run an ended one.
//
// A backend provides the storage as a LedgerTxn: one transaction's reads and writes of the fire
// records, history records, checkpoints and job states. FireLedger runs one operation inside one
// transaction that its backend opened:
//   memory: under the coordinator's mutex;
//   SQLite: in one BEGIN IMMEDIATE transaction;
//   etcd:   reads recorded at their mod revisions, writes buffered, then one compare-and-swap
//           txn, the whole operation retried when another caller committed first.
// An operation's answer holds only once its transaction commits; an operation that returns an
// error writes nothing that the backend may commit.
//
// Thread safety: a FireLedger and its LedgerTxn belong to one transaction on one thread.
#ifndef GNOMON_SRC_COORD_FIRE_LEDGER_H_
#define GNOMON_SRC_COORD_FIRE_LEDGER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"

namespace gnomon::coord {

// A fire's record as the ledger sees it: its current (or, once closed, last) attempt and lease.
struct FireEntry {
  FireKey key;      // shard_count as stored when the fire was claimed or skipped
  int attempt = 1;  // the current attempt (0 when a closed fire's backend does not keep it)
  int64_t fencing_token = 0;  // the current attempt's token (0 = none or unknown)
  std::string node_id;        // the current attempt's holder
  Instant lease_expires_at;   // backend clock
  bool open = false;          // an attempt holds the fire: not released, revoked or closed
  // Whether the backend's own lease of the attempt still holds (etcd: the attempt's etcd lease
  // keeps its live key); always true on backends without one.
  bool backend_lease = true;

  // Whether an attempt holds the fire at `now`.
  bool HeldAt(Instant now) const { return open && backend_lease && lease_expires_at > now; }
};

// The storage of one transaction. Every method reads or writes within that transaction; reads
// see the transaction's own earlier writes. Errors (Unavailable, Internal) abort the operation.
class LedgerTxn {
 public:
  virtual ~LedgerTxn() = default;

  // The backend clock, read once the transaction holds what it needs to order claims.
  virtual Instant Now() = 0;
  // What the operation is about to read: `fire` (and the record of `attempt`, 0 = unknown), the
  // job's state when `job_state`, the job's open fires when `live_fires`. A backend paying a
  // round trip per read batches them here; the default reads nothing ahead.
  virtual Status Prefetch(const FireKey& fire, int attempt, bool job_state, bool live_fires);

  // The fire's record, or nullopt when it has none. `attempt_hint`: the attempt the caller
  // expects to find (0 = unknown), so that a backend can read its token in the same round trip.
  virtual Result<std::optional<FireEntry>> LoadFire(const FireKey& fire, int attempt_hint) = 0;
  // The fires of `fire`'s job at other instants than `fire`'s that an attempt holds at `now`,
  // by scheduled instant then shard.
  virtual Result<std::vector<FireEntry>> LiveFires(const FireKey& fire, Instant now) = 0;
  // The last attempt of a closed fire (0 when it has no history record left). The default is
  // `fire.attempt`, for backends that keep it in the fire record.
  virtual Result<int> LastAttempt(const FireEntry& fire);

  // Creates the fire's record, closed, as a fire skipped by `node_id` at `now` (StartAttempt
  // then opens it for a claim). REQUIRES: the fire has no record.
  virtual Status CreateFire(const FireKey& fire, const std::string& node_id, Instant now) = 0;
  // Opens attempt `attempt` of the (existing) fire record for `node_id`: a fencing token above
  // every earlier one of the job, a lease until now + ttl and a running history record carrying
  // `cause`. The returned claim's token is 0 on a backend that assigns it when the transaction
  // commits (etcd: the commit's revision); that backend fills it in.
  virtual Result<Claim> StartAttempt(const FireKey& fire, int attempt, const std::string& node_id,
                                     Duration ttl, Instant now, const std::string& cause) = 0;
  // Moves the open attempt's lease to now + ttl. LeaseLost when the backend's own lease ended.
  virtual Status ExtendLease(const FireEntry& fire, Duration ttl, Instant now) = 0;
  // Ends the attempt holding the fire: the fire is closed (released, revoked or done).
  virtual Status CloseFire(const FireEntry& fire) = 0;

  // History record of one attempt, nullopt when absent.
  virtual Result<std::optional<RunRecord>> LoadRecord(const FireKey& fire, int attempt) = 0;
  // Writes (creates or replaces) the history record of record.attempt.
  virtual Status PutRecord(const RunRecord& record) = 0;
  virtual Status PutCheckpoint(const FireKey& fire, const std::string& value) = 0;

  // The job's state (default values when it has none).
  virtual Result<JobState> LoadJobState(const std::string& job_id) = 0;
  // The instant before which the job's closed fire markers may be gone: the latest cutoff of
  // the backend's PruneHistory, which drops them with their history (nullopt: never pruned).
  virtual Result<std::optional<Instant>> MarkersPrunedBefore(const std::string& job_id) = 0;
  virtual Status PutJobState(const std::string& job_id, const JobState& state) = 0;
  // Changes Coordinator::JobsVersion (an operator action every node should see soon).
  virtual Status BumpJobsVersion(const std::string& job_id) = 0;
};

// The Coordinator's fire operations over one transaction. Each method validates its arguments
// and answers as the method of the same name in gnomon/coordinator.h does, except Renew, which
// returns the new lease expiry for the caller to store in its claim once committed.
class FireLedger {
 public:
  // REQUIRES: `txn` outlives this object.
  explicit FireLedger(LedgerTxn& txn) : txn_(txn) {}

  Result<ClaimOutcome> Claim(const ClaimRequest& req);
  Result<Instant> Renew(const gnomon::Claim& claim, Duration ttl);
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl);
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final);
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& expired,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl);
  Status RecordSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason);
  Status CancelFire(const FireKey& fire, const std::string& reason);
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause);
  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value);
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output);

 private:
  // The open fire `claim` holds at `now`, or LeaseLost saying why not.
  Result<FireEntry> Fenced(const gnomon::Claim& claim, Instant now);
  // Records `fire` as skipped for `reason` (a closed record and one skipped history record).
  Status Skip(const FireKey& fire, const std::string& node_id, const std::string& reason,
              Instant now, JobState state);
  // Closes the record of `fire`'s current attempt with `outcome` if it is still running.
  Status FinishRunning(const FireEntry& fire, RunOutcome outcome, const std::string& error,
                       Instant now);
  // `state` with last_scheduled at least `fire`'s instant, written back.
  Status AdvanceLastScheduled(const FireKey& fire, JobState state);
  Status AddFailure(const std::string& job_id, RunOutcome outcome);

  LedgerTxn& txn_;
};

// Stores a committed FireLedger::Renew's expiry in `claim`; its error otherwise.
Status StoreRenewal(gnomon::Claim& claim, const Result<Instant>& expires);

// The status of an operation's answer (a transaction commits only when it is OK).
inline const Status& StatusOf(const Status& s) { return s; }
template <class T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_FIRE_LEDGER_H_
