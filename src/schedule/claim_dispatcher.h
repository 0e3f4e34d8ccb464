// ClaimDispatcher: turns due fires into claims and claims into started runs. The fires this node
// owns at an instant are gathered into a batch claimed in one call (Coordinator::ClaimMany); the
// fires of other owners get a takeover timer and are claimed here only when they have no record
// after this node's rank of delays (one FiresRecorded call per batch of due takeovers). Those
// takeovers, the failed claims retried inside claim_grace and the catch-up of a job's one missed
// fire are claimed in batches too, so a fleet running late claims its fires at the cost of an
// on-time one; triggers, buffered fires' retries and catch-ups of several fires of a job (run in
// order) are claimed one by one by the RunDriver. Each answer goes through AcceptClaim (recorded
// skip, claim retry timer,
// failed claim, a buffered fire's wait, admission). A claimed fire is listed as unstarted until
// its run starts: at once when its instant has come, at its instant when it was claimed ahead
// (the loop starts it), and by Scheduler::Stop when the node stops first.
//
// Threads: the loop thread (...Locked: gathering, flushing, claimed-ahead starts), pool workers
// (claim batches, takeovers, AcceptClaim, StartClaimed), API callers (SubmitShards), and
// Scheduler::Stop (StartClaimedAhead, RecordUnstarted).
//
// Thread safety: thread-safe. Its state is guarded by JobTable::mu() (the engine lock); methods
// named ...Locked REQUIRE it, the others take it when they need it. Lock order: JobTable::mu()
// before WorkerPool::mu_; LeaseKeeper::mu_ is taken with JobTable::mu() released. No lock is
// held during a backend call.
#ifndef GNOMON_SRC_SCHEDULE_CLAIM_DISPATCHER_H_
#define GNOMON_SRC_SCHEDULE_CLAIM_DISPATCHER_H_

#include <atomic>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/schedule/job_table.h"

namespace gnomon::internal {

class LeaseKeeper;
class MisfireHandler;
class RunDriver;
class TimerLoop;

class ClaimDispatcher {
 public:
  ClaimDispatcher(EngineContext& ctx, JobTable& table, TimerLoop& loop, LeaseKeeper& lease,
                  RunDriver& driver)
      : ctx_(ctx), table_(table), loop_(loop), lease_(lease), driver_(driver) {}
  ClaimDispatcher(const ClaimDispatcher&) = delete;
  ClaimDispatcher& operator=(const ClaimDispatcher&) = delete;
  void Wire(MisfireHandler& misfire) { misfire_ = &misfire; }

  // An on-time fire: claimed now by its owner (gathered into the batch); the other nodes check
  // after their rank's delay from when it is due (a takeover timer). `job_slot`: the job's
  // JobEntry::slot (RunOptions::job_slot).
  void SubmitOwnedLocked(const SpecPtr& spec, Instant scheduled_at,
                         uint32_t job_slot = JobTable::kNoSlot) GNOMON_REQUIRES(table_.mu());
  // A fire held for its job's catch-up read (MisfireHandler::HoldLocked), released by a
  // catch-up step: as SubmitOwnedLocked, and the loop is woken to flush the batch.
  void SubmitHeldLocked(const SpecPtr& spec, Instant scheduled_at) GNOMON_REQUIRES(table_.mu());
  // A failed claim's fire, claimed again inside claim_grace (every shard) with the next batch.
  void SubmitRetryLocked(const SpecPtr& spec, Instant scheduled_at) GNOMON_REQUIRES(table_.mu());
  // The catch-up of a job's one missed fire (every shard), claimed with the next batch after
  // its on-time fires. A claim that finds the fire claimed already ends it (a node claimed or
  // recorded it: under `once` the latest missed fire was not missed after all), unless the
  // backend's claims may be withdrawn (ClaimsMayBeWithdrawn): then, under `once` (misfire =
  // once), shard 0 goes to MisfireHandler::Recheck, which reads its record as the catch-up of
  // several fires does.
  void SubmitCatchUpLocked(const SpecPtr& spec, Instant scheduled_at, bool once)
      GNOMON_REQUIRES(table_.mu());
  // Submits the gathered fires as claim batches (claim lane).
  void FlushClaimBatchLocked() GNOMON_REQUIRES(table_.mu());
  size_t BatchSizeLocked() const GNOMON_REQUIRES(table_.mu()) { return claim_batch_.size(); }
  // The earliest instant of a fire claimed ahead, if any.
  std::optional<Instant> NextStartLocked() const GNOMON_REQUIRES(table_.mu());
  // Starts the earliest fire claimed ahead if its instant has come; says whether it did.
  bool StartDueLocked() GNOMON_REQUIRES(table_.mu());

  // Fires of other owners, checked after this node's takeover delay: those still without a
  // record (the owner is gone, or slow) are claimed here. If the check fails, every one is
  // claimed (the claims decide). `due`: when this node's rank was to take over; claim_grace
  // after it, the takeover is late and the fire a misfire. The fires to claim go in batches.
  // Worker thread.
  void TakeOver(const std::vector<std::pair<FireKey, Instant>>& due) GNOMON_EXCLUDES(table_.mu());
  // Claims and runs a fire (each shard of it) on a worker (claim lane), one claim call each.
  void SubmitFire(const SpecPtr& spec, const FireKey& fire);
  void SubmitShards(const SpecPtr& spec, Instant scheduled_at);

  // Acts on the answer to this node's claim of `fire`: the claim to run, or nullopt when there
  // is nothing to run here (the answer is recorded, retried or announced). `catch_up`: a missed
  // fire run per `misfire` (its events say so). Worker thread.
  std::optional<Claim> AcceptClaim(const JobSpec& spec, const FireKey& fire,
                                   const Result<ClaimOutcome>& out, bool catch_up)
      GNOMON_EXCLUDES(table_.mu());
  // Runs a claimed fire on a worker at `start` (its instant, or when a scheduled fire is due:
  // its jitter offset later). `sent`: when its claim was sent (steady).
  void StartClaimed(const SpecPtr& spec, const Claim& claim, Duration sent, Instant start,
                    uint32_t job_slot = JobTable::kNoSlot) GNOMON_EXCLUDES(table_.mu());

  // overlap = buffer_one / buffer_all (docs/semantics.md "Overlap"): a fire whose claim found a
  // live run (kBusy) waits here and is claimed again every kBufferRetry. A kClaimRetry timer of
  // `fire` claims now unless an older fire of its job waits (buffer_all keeps the order): then
  // false. A job that is gone drops its waiting fires.
  static constexpr Duration kBufferRetry = std::chrono::seconds(1);
  bool RetryNowLocked(const FireKey& fire, bool job_defined) GNOMON_REQUIRES(table_.mu());

  // Scheduler::Stop, after the loop ended: starts each fire claimed ahead at its instant (at
  // most claim_ahead away): the claim is this node's; no other node may run the fire.
  void StartClaimedAhead() GNOMON_EXCLUDES(table_.mu());
  // Scheduler::Stop, after the pool is shut down: claimed fires that did not start within
  // shutdown_grace are recorded cancelled, their leases released.
  void RecordUnstarted() GNOMON_EXCLUDES(table_.mu());

 private:
  // Why a fire is in a claim batch.
  enum class Claiming {
    kOnTime,       // the owner's at its instant, a takeover, a failed claim's retry
    kCatchUp,      // misfire = all: the job's one missed fire
    kCatchUpOnce,  // misfire = once: the job's one missed fire (see SubmitCatchUpLocked)
  };
  struct Pending {
    SpecPtr spec;
    FireKey fire;
    Claiming why = Claiming::kOnTime;
    uint32_t job_slot = JobTable::kNoSlot;  // RunOptions::job_slot
  };
  // One claim call per part of the backend (ClaimStore::ClaimRoute), each a task of its own.
  void SubmitBatches(std::vector<Pending> fires);
  // Fires claimed in one call (on-time ones first); each claimed fire then runs as its own task.
  void ClaimBatch(std::vector<Pending> batch) GNOMON_EXCLUDES(table_.mu());
  void SubmitStartLocked(uint64_t id) GNOMON_REQUIRES(table_.mu());
  // kBusy: `fire` waits (claimed again later), or, beyond what the policy keeps waiting, is
  // recorded as skipped ("overlap"). The oldest fires wait: an older fire takes the place of
  // the newest waiting one, which is then recorded skipped.
  void Buffer(const JobSpec& spec, const FireKey& fire) GNOMON_EXCLUDES(table_.mu());

  EngineContext& ctx_;
  JobTable& table_;
  TimerLoop& loop_;
  LeaseKeeper& lease_;
  RunDriver& driver_;
  MisfireHandler* misfire_ = nullptr;  // set by Wire before the loop starts

  // Fires waiting to be claimed together (the loop flushes them).
  std::vector<Pending> claim_batch_ GNOMON_GUARDED_BY(table_.mu());
  // Claimed fires whose run has not started, by a sequence number.
  struct Unstarted {
    SpecPtr spec;
    Claim claim;
    Duration sent;  // steady: when the claim was sent (the lease counts from there)
    uint32_t job_slot = JobTable::kNoSlot;  // RunOptions::job_slot
  };
  std::unordered_map<uint64_t, Unstarted> unstarted_ GNOMON_GUARDED_BY(table_.mu());
  uint64_t unstarted_seq_ GNOMON_GUARDED_BY(table_.mu()) = 0;
  // Fires waiting under a buffer_* policy: the instants of each job's waiting fires.
  std::map<std::string, std::set<Instant>> waiting_ GNOMON_GUARDED_BY(table_.mu());
  // waiting_.size(), read without the lock: most claims have no wait to end.
  std::atomic<size_t> waiting_jobs_{0};
  // The ones claimed ahead, by instant (the loop hands each to a worker at its instant).
  std::priority_queue<std::pair<Instant, uint64_t>, std::vector<std::pair<Instant, uint64_t>>,
                      std::greater<>>
      start_at_ GNOMON_GUARDED_BY(table_.mu());
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_CLAIM_DISPATCHER_H_
