// ClaimStore: the role of the coordinator that decides which node runs each fire (docs/
// guarantees.md 1-10): claims and leases, fenced reports, lost runs, checkpoints, live output and
// each job's state (pause, failures). Part of Coordinator (gnomon/coordinator.h).
//
// Model. A *fire* (job, scheduled instant, shard) has at most one *fire record* in the backend,
// created by the first successful Claim (or by RecordSkipped). While it runs, the record holds a
// *lease* (holder node, fencing token, expiry on the backend's clock). Every write for a run
// (Renew, NextAttempt, Report, SaveCheckpoint, SaveLiveOutput) is *fenced*: it carries the
// claim's token and is rejected with LeaseLost when the fire's current token differs, the lease
// is released, revoked or expired. Fencing tokens strictly increase per job across all claims and
// attempts and never go backwards, also across backend restarts. The records a claim writes are
// read through RunHistory (gnomon/run_history.h).
//
// Time. Lease expiry and the early-fire guard use the backend's clock (Now()); callers measure
// their own renew deadlines on their monotonic clock.
//
// Thread safety: implementations are safe to call from many threads at once.
#ifndef GNOMON_CLAIM_STORE_H_
#define GNOMON_CLAIM_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

// A held claim on one fire, for one attempt. Returned by Claim/NextAttempt/ResolveLost; passed
// back on every fenced write.
struct Claim {
  FireKey fire;
  int attempt = 1;
  int64_t fencing_token = 0;
  std::string node_id;
  Instant lease_expires_at;  // backend clock
  // Why this attempt runs when not by schedule (RerunFire: "rerun by ops"); its records carry it.
  std::string cause;
};

// One report of ReportMany: the arguments of Report, pointing into the caller's data for the
// duration of the call (a record carries up to 64 KiB of output: not copied).
struct ReportRequest {
  const gnomon::Claim* claim = nullptr;
  const RunRecord* record = nullptr;
  bool final = false;
};

struct ClaimRequest {
  FireKey fire;
  std::string node_id;
  Duration lease_ttl = std::chrono::seconds(30);
  // Early-fire guard: refused (kTooEarly) when fire.scheduled_at > backend Now() + this.
  Duration skew_tolerance = std::chrono::milliseconds(500);
  // kForbid: refused (kOverlap) while another fire of the same job holds a live lease, and the
  // fire is recorded as skipped ("overlap") in the same step. kReplace: the other fires' leases
  // are revoked (their holders' next fenced write fails with LeaseLost) and the claim proceeds.
  // kBufferOne, kBufferAll: refused (kBusy) while another fire holds a live lease, and nothing is
  // recorded: the caller claims it again later. kAllow: no check.
  OverlapPolicy overlap = OverlapPolicy::kForbid;
  // Why the fire runs when not by schedule (at most kMaxCauseBytes; "" = by schedule), kept in
  // the claim's running record and in Claim::cause, e.g. "backfill by ops".
  std::string cause;
};

struct ClaimOutcome {
  enum class Result {
    kClaimed,         // `claim` is set; the caller runs the fire
    kAlreadyClaimed,  // the fire has a record already (someone else claimed or skipped it)
    kTooEarly,        // early-fire guard: try again at scheduled_at - skew_tolerance (backend)
    kOverlap,         // overlap = forbid and a run is live: recorded as skipped (once)
    kPaused,          // the job is paused: recorded as skipped ("paused") (once)
    kBusy,            // overlap = buffer_*, a run is live: nothing recorded; claim again later
    // A fire (by schedule or a backfill) older than the backend keeps its closed markers. Its
    // marker may be gone, so whether it ran cannot be told: nothing is claimed or recorded. Redis:
    // scheduled_at <= backend Now() - RedisOptions::fire_retention (markers expire on their
    // own). Memory, SQLite, etcd: scheduled_at before the cutoff of the job's latest
    // PruneHistory (now - max_age then), which drops closed markers with their history.
    kTooOld,
  } result = Result::kAlreadyClaimed;
  std::optional<Claim> claim;
  Instant backend_now;            // the backend's clock at the claim
  std::vector<FireKey> replaced;  // overlap = replace: fires whose leases were revoked
};

// A fire whose lease expired without a final Report.
struct ExpiredFire {
  FireKey fire;
  int attempt = 1;
  int64_t fencing_token = 0;
  std::string node_id;       // the vanished holder
  Instant lease_expired_at;  // backend clock
};

struct JobState {
  bool paused = false;
  std::string pause_reason;  // "api", "max_consecutive_failures", ...
  int consecutive_failures = 0;
  std::optional<Instant> last_scheduled;  // latest scheduled instant claimed or recorded
};

class ClaimStore {
 public:
  // Inside this class `Claim` names the method; the type is spelled gnomon::Claim.
  virtual ~ClaimStore() = default;

  // The backend's clock (for SQLite/memory: the clock they were given).
  virtual Result<Instant> Now() = 0;

  // Claims attempt 1 of `req.fire` for `req.node_id` if no record of the fire exists, the job is
  // not paused and the early-fire guard and overlap policy allow it. On kClaimed the fire's
  // record exists (outcome running), the job's fencing counter advanced, and
  // JobState::last_scheduled is at least the fire's instant.
  virtual Result<ClaimOutcome> Claim(const ClaimRequest& req) = 0;
  // Claim of each request, in order (one answer per request): the same outcomes as calling
  // Claim for each, in fewer round trips where the backend can (Redis: one script call per
  // chunk). The default calls Claim for each.
  virtual std::vector<Result<ClaimOutcome>> ClaimMany(const std::vector<ClaimRequest>& reqs);
  // The part of the backend that answers `job_id`'s claims. The scheduler sends one ClaimMany
  // per part, each from a thread of its own, so that a slow or unreachable part holds back only
  // its own jobs' fires. The default, "", is one part for every job; RedisCoordinator over a
  // Cluster answers the address of the primary owning the job's key group.
  virtual std::string ClaimRoute(const std::string& job_id) const {
    (void)job_id;
    return "";
  }
  // Whether a claim this store granted may still be taken back by the node that made it, its
  // fire then reading as never claimed: RedisCoordinator with wait_replicas (a batch that too few
  // replicas acknowledged). The scheduler then reads the record of a fire whose catch-up found it
  // claimed, rather than take that claim as final (docs/semantics.md "Misfires"). Default false:
  // a granted claim stands.
  virtual bool ClaimsMayBeWithdrawn() const { return false; }
  // Calls `listener` each time a part of the backend (ClaimRoute) moved to another server or
  // its server, found unreachable, answers again: Redis Sentinel named a new primary, a Redis
  // Cluster's slot map gave slots to another primary (a failed primary's replica was promoted,
  // or slots were moved), or a Cluster's primary held down answered a probe. Claims that failed
  // before may succeed now, and the scheduler makes them again at once rather than at its next
  // housekeeping pass. Called from the store's own threads; it must not block. Returns a handle
  // for RemoveRoutesListener, after which it is not called (a call under way is waited for).
  // The default never calls: one part, which does not move.
  virtual int AddRoutesListener(std::function<void()> listener) {
    (void)listener;
    return 0;
  }
  virtual void RemoveRoutesListener(int handle) { (void)handle; }

  // Extends the lease to backend Now() + ttl. LeaseLost when fenced off (see the file comment).
  // On success, `claim.lease_expires_at` is updated.
  virtual Status Renew(gnomon::Claim& claim, Duration ttl) = 0;

  // For a retry by the same holder: a new attempt (attempt + 1) with a new, higher fencing
  // token and a lease of `ttl`. Fenced on `claim`.
  virtual Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) = 0;

  // Appends the history record of `claim`'s attempt (record.run_id/attempt/fencing_token must
  // match the claim). When `final` is true the lease is released and the fire is done; otherwise
  // the lease is kept (a retry follows). Updates JobState::consecutive_failures (reset on
  // success, +1 on failed/timed out/lost; unchanged for cancelled/skipped) when final. Fenced.
  virtual Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) = 0;
  // Report of each request, in order (one status per request): the same outcomes as calling
  // Report for each, in fewer round trips where the backend can (Redis: one script call per
  // chunk). The default calls Report for each.
  virtual std::vector<Status> ReportMany(const std::vector<ReportRequest>& reqs);

  // Fires whose lease expired (backend clock) and that were not finally reported, oldest first,
  // at most `limit`.
  virtual Result<std::vector<ExpiredFire>> ListExpired(int limit) = 0;

  // Handles one expired fire, exactly once across all callers (compare-and-set on its token):
  // on_lost = fail: records a `lost` history record (attempt, token, vanished node) and closes
  //   the fire; returns nullopt.
  // on_lost = rerun: records the `lost` attempt and returns a claim of the next attempt for
  //   `node_id` with a higher token and a lease of `ttl`.
  // FailedPrecondition when the fire was already resolved or renewed meanwhile.
  virtual Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                           const std::string& node_id,
                                                           LostPolicy policy, Duration ttl) = 0;

  // Records a fire that was not run (misfire, disabled ...) with outcome skipped, if the fire has
  // no record yet. Returns AlreadyExists if it had one. Advances JobState::last_scheduled.
  virtual Status RecordSkipped(const FireKey& fire, const std::string& node_id,
                               const std::string& reason) = 0;

  // Operator cancel (POST /api/v1/runs/{run_id}/cancel): ends a fire that is running or waiting
  // for its retry, in one step: its lease is revoked (the holder's next fenced write fails with
  // LeaseLost, as with overlap = replace), the fire is closed (no retry, no lost-run rerun) and
  // its current attempt's record ends `cancelled` with `reason` as its error (an attempt that
  // had already failed keeps its outcome; its error says the retry was cancelled). JobsVersion
  // changes, so every node's state poll renews its leases at once and the holder stops the run.
  // The fire's shard_count is not needed. NotFound when the fire has no record;
  // FailedPrecondition when it already ended (nothing changes).
  virtual Status CancelFire(const FireKey& fire, const std::string& reason) = 0;

  // Operator re-run (POST /api/v1/runs/{run_id}/rerun): a fire that ended (succeeded, failed,
  // cancelled, lost or skipped) runs again as its next attempt, claimed by `node_id` like a
  // retry: attempt = its last + 1, a new fencing token above every earlier one of the job, a
  // running record carrying `cause` (<= 256 bytes; Claim::cause too). The claim is then held like
  // any other (renew, report; lost if its holder vanishes). The fire's shard_count is not needed.
  // NotFound when the fire has no record (kept as long as its history); FailedPrecondition while
  // it runs or waits for a retry (nothing changes).
  virtual Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id,
                                          Duration ttl, const std::string& cause) = 0;

  // Whether each fire has a record (claimed, running, done or skipped): one answer per fire, in
  // order. Sharded ownership uses it to take over, in one call, the fires whose owner did not
  // claim them. Backends answer from their fire markers in one round trip (Coordinator has a
  // default over RunHistory::GetRun).
  virtual Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) = 0;

  // --- Checkpoints ---------------------------------------------------------------------------
  // Saves the fire's checkpoint value (fenced on `claim`).
  virtual Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) = 0;
  // The fire's last saved checkpoint, if any.
  virtual Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire) = 0;

  // --- Live output ---------------------------------------------------------------------------
  // What `claim`'s attempt has printed so far (its last kMaxOutputBytes; longer is cut to them),
  // written into the attempt's running record (fenced on `claim`), so that GetRun and ListRuns
  // show it on every node while the attempt runs; the attempt's Report replaces it. The scheduler
  // sends it at most once per SchedulerOptions::live_output_interval per running attempt, and
  // only when new output arrived. The default stores nothing (output then shows at the end).
  virtual Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output);

  // --- Job state -----------------------------------------------------------------------------
  // The job's pause state, failure count and latest scheduled instant (defaults for a job never
  // seen: not paused, no failures, no instant).
  virtual Result<JobState> GetJobState(const std::string& job_id) = 0;
  // GetJobState of each id, in order, in fewer round trips where the backend can (Redis: one
  // call per chunk). The default calls GetJobState for each.
  virtual Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& job_ids);
  // Pauses (with `reason`, e.g. "api") or resumes the job; a paused job's fires are skipped
  // (ClaimOutcome::kPaused). Changes DefinitionStore::JobsVersion in a backend that keeps both.
  virtual Status SetPaused(const std::string& job_id, bool paused, const std::string& reason) = 0;
};

inline Result<std::vector<JobState>> ClaimStore::GetJobStates(
    const std::vector<std::string>& job_ids) {
  std::vector<JobState> out;
  out.reserve(job_ids.size());
  for (const std::string& id : job_ids) {
    Result<JobState> s = GetJobState(id);
    if (!s.ok()) return s.status();
    out.push_back(std::move(*s));
  }
  return out;
}

inline std::vector<Result<ClaimOutcome>> ClaimStore::ClaimMany(
    const std::vector<ClaimRequest>& reqs) {
  std::vector<Result<ClaimOutcome>> out;
  out.reserve(reqs.size());
  for (const ClaimRequest& r : reqs) out.push_back(Claim(r));
  return out;
}

inline std::vector<Status> ClaimStore::ReportMany(const std::vector<ReportRequest>& reqs) {
  std::vector<Status> out;
  out.reserve(reqs.size());
  for (const ReportRequest& r : reqs) out.push_back(Report(*r.claim, *r.record, r.final));
  return out;
}

inline Status ClaimStore::SaveLiveOutput(const gnomon::Claim&, const std::string&) {
  return Status::Ok();
}

}  // namespace gnomon

#endif  // GNOMON_CLAIM_STORE_H_
