// LeaseKeeper: the registry of the runs this node holds a lease for, and the two threads that
// keep those leases: the watchdog and the renewer.
//
// The watchdog watches every run's deadlines on the monotonic clock: it self-fences a run at
// ttl - margin after its last successful renewal, enforces timeouts, hands due renewals to the
// renewer, and submits a run's resume task (a retry's backoff, a report's retry: ResumeAfter) to
// the pool's run lane when its time comes. It never calls the backend, so a renewal blocked on a
// dead connection cannot delay a self-fence (docs/reliability.md F5). The renewer renews the
// queued leases one at a time, with no lock held during the call.
//
// Threads: the watchdog and renewer (its own), pool workers (runs register, end attempts, ask for
// resumes), the state poll (RenewAllNow), Scheduler::Stop (WaitIdleThenCancel, Stop).
//
// Thread safety: thread-safe. Lock order: mu_ is taken with no other engine lock held, and no
// backend call is made under it; a run's std::stop_source::request_stop is called under it, so an
// executor's stop callback must not call back into the scheduler. Submitting a resume task takes
// WorkerPool::mu_ with mu_ released.
#ifndef GNOMON_SRC_SCHEDULE_LEASE_KEEPER_H_
#define GNOMON_SRC_SCHEDULE_LEASE_KEEPER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>

#include "src/schedule/engine_context.h"

namespace gnomon::internal {

// A run this node holds a lease for, from its first attempt to its final report. Its fields are
// LeaseKeeper's, read and written under LeaseKeeper::mu_ (through LeaseKeeper's methods); `stop`
// is thread-safe.
struct ActiveRun {
  Claim claim;  // current attempt
  std::stop_source stop;
  Duration last_ok_sent{0};  // steady: when the last successful claim/renew was sent
  Duration next_renew{0};
  std::optional<Duration> timeout_at;
  StopReason reason = StopReason::kNone;
  bool lost = false;
  bool renewing = false;  // queued for, or inside, a Renew call
  // The final report is under way: a renewal answered after it may find the fire closed by it
  // ("released"), which is no lease loss.
  bool reporting = false;
  // A task to submit at resume_at (steady), or at once when the scheduler stops.
  std::optional<Duration> resume_at;
  std::function<void()> resume;
  // The job's JobEntry::slot when the run started (a hint for JobTable::AdjustRunning).
  uint32_t job_slot = UINT32_MAX;
};

class LeaseKeeper {
 public:
  explicit LeaseKeeper(EngineContext& ctx) : ctx_(ctx) {}
  ~LeaseKeeper() { Stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts the watchdog and renewer threads. REQUIRES: not started.
  void Start();
  // Stops and joins them (pending resumes are dropped: Scheduler::Stop waited for them).
  // Idempotent.
  void Stop() GNOMON_EXCLUDES(mu_);

  // A run's lease is kept from Register (its claim sent at run->last_ok_sent) to Unregister.
  void Register(const std::shared_ptr<ActiveRun>& run) GNOMON_EXCLUDES(mu_);
  void Unregister(const std::shared_ptr<ActiveRun>& run) GNOMON_EXCLUDES(mu_);
  Claim CurrentClaim(const ActiveRun& run) const GNOMON_EXCLUDES(mu_);
  // The steady instant the run cancels itself unless a renewal succeeds first.
  Duration FenceDeadline(const ActiveRun& run) const GNOMON_EXCLUDES(mu_);

  // An attempt starts: its timeout (steady) is enforced from now on.
  void ArmTimeout(ActiveRun& run, Duration at) GNOMON_EXCLUDES(mu_);
  // An attempt ended: its timeout is disarmed; returns why the run was stopped, if it was.
  StopReason EndAttempt(ActiveRun& run) GNOMON_EXCLUDES(mu_);
  // After an attempt ended: whether it is retried (`wants_retry`, and the run was neither fenced
  // nor stopped by the shutdown). When not, the run is marked reporting (neither renewed nor
  // fenced from now on). `claim`: the claim the report goes under.
  bool DecideRetry(ActiveRun& run, bool wants_retry, Claim& claim) GNOMON_EXCLUDES(mu_);
  // A retry's claim (Coordinator::NextAttempt) replaces the run's.
  void NextClaim(ActiveRun& run, const Claim& claim) GNOMON_EXCLUDES(mu_);
  // Submits `task` to the pool's run lane (kept) `delay` from now on the monotonic clock, or at
  // once when the scheduler stops (WakeAll). A timer, so that no worker waits for a retry.
  // REQUIRES: `run` is registered and has no resume pending.
  void ResumeAfter(ActiveRun& run, Duration delay, std::function<void()> task) GNOMON_EXCLUDES(mu_);

  // Stops the local runs of `fire` (overlap = replace).
  void CancelLocalRun(const FireKey& fire, StopReason reason) GNOMON_EXCLUDES(mu_);
  // Renews every lease now (the state poll saw a change, maybe an operator's cancel).
  void RenewAllNow() GNOMON_EXCLUDES(mu_);
  // Makes the watchdog look again (the scheduler is stopping: resumes are due at once).
  void WakeAll() GNOMON_EXCLUDES(mu_);

  // Claimed fires whose run has not returned yet (ClaimDispatcher::StartClaimed).
  void BeginStarting() GNOMON_EXCLUDES(mu_);
  void EndStarting() GNOMON_EXCLUDES(mu_);
  // Graceful stop: waits up to `grace` for every run to end and every starting fire to start and
  // end, then stops the runs left (and every run registered from now on).
  void WaitIdleThenCancel(Duration grace) GNOMON_EXCLUDES(mu_);

  // Runs registered (attempts running, or reporting, or between attempts).
  int running() const GNOMON_EXCLUDES(mu_);

 private:
  void Watchdog() GNOMON_EXCLUDES(mu_);
  void Renewer() GNOMON_EXCLUDES(mu_);
  Duration FenceDeadlineLocked(const ActiveRun& run) const GNOMON_REQUIRES(mu_);
  // Makes the watchdog recompute its next deadline.
  void WakeLocked() GNOMON_REQUIRES(mu_);
  // A run got the steady deadline `due`: the watchdog recomputes only when that is before the
  // one it sleeps until (a fire's runs register in bursts: waking it for each would cost a
  // thread switch and a scan of every run, per run).
  void WakeLocked(Duration due) GNOMON_REQUIRES(mu_);
  // The earliest deadline of the runs. Resumes are due at once while stopping.
  Duration NextDueLocked() const GNOMON_REQUIRES(mu_);

  EngineContext& ctx_;
  mutable Mutex mu_;
  std::condition_variable cv_;        // wakes the watchdog, and Stop when the last run ended
  std::condition_variable renew_cv_;  // wakes the renewer
  std::map<ActiveRun*, std::shared_ptr<ActiveRun>> active_ GNOMON_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<ActiveRun>> renew_queue_ GNOMON_GUARDED_BY(mu_);
  int starting_ GNOMON_GUARDED_BY(mu_) = 0;
  bool stop_ GNOMON_GUARDED_BY(mu_) = false;
  bool cancel_all_ GNOMON_GUARDED_BY(mu_) = false;  // graceful stop cancelled every run
  uint64_t version_ GNOMON_GUARDED_BY(mu_) = 0;
  // The steady deadline the watchdog sleeps until; Duration::min() while it is awake.
  Duration due_ GNOMON_GUARDED_BY(mu_) = Duration::min();
  std::jthread watchdog_thread_;
  std::jthread renewer_thread_;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_LEASE_KEEPER_H_
