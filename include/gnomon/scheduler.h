// Scheduler: the engine. One timer queue keyed by the next fire instant and one loop thread that
// waits on the injected Clock until the earliest deadline (woken when jobs change); a bounded
// worker pool that claims fires through the Coordinator and runs them through the Executor; one
// lease watchdog thread that renews leases every ttl/3 on the monotonic clock, self-fences runs
// that cannot renew before ttl - margin, and enforces timeouts. No thread per job, no scanning.
//
// Guarantees (docs/guarantees.md 1-10) come from the combination: the Coordinator decides who runs
// a fire (at most one claim, early-fire guard on the backend clock, fencing); the Scheduler claims
// every fire within claim_grace while it runs, applies misfire/overlap/retry/breaker policies,
// resolves lost runs of vanished nodes, and stops gracefully.
//
// Thread safety: all public methods are thread-safe.
#ifndef GNOMON_SCHEDULER_H_
#define GNOMON_SCHEDULER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/executor.h"
#include "gnomon/job.h"
#include "gnomon/observer.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

struct SchedulerOptions {
  // This node's id, unique in the cluster (required).
  std::string node_id;
  // A fire is claimed within this of its instant; older unclaimed fires are misfires. Default 1 s.
  Duration claim_grace = std::chrono::seconds(1);
  // Early-fire guard tolerance against the backend clock. Default 500 ms.
  Duration skew_tolerance = std::chrono::milliseconds(500);
  // Claim ahead: fires of jobs with overlap = "allow" are claimed up to this long before their
  // instant (on the backend's clock) and started at the instant, so neither the claim's round
  // trip nor a burst of claims due at one instant (a thousand jobs every second) makes them late.
  // Capped at half of skew_tolerance (the backend refuses a claim earlier than that). Jobs with
  // overlap forbid or replace are claimed at their instant: whether a run is still going is
  // decided then. A fire claimed ahead is this node's: a stop before its instant waits for it
  // (within shutdown_grace) and runs it. Default 200 ms; 0 = claim at the instant.
  Duration claim_ahead = std::chrono::milliseconds(200);
  // Lease length; renewed every ttl/3. Default 30 s.
  Duration lease_ttl = std::chrono::seconds(30);
  // A run that could not renew by (last successful renew sent) + ttl - margin cancels itself.
  // Process runs are killed within margin/2 (kill_grace is capped there). Default ttl/3.
  std::optional<Duration> lease_margin;
  // Workers that claim and run fires (runs of long jobs occupy one each). Default 16.
  int worker_threads = 16;
  // Graceful stop: how long running runs may finish before they are cancelled. Default 30 s.
  Duration shutdown_grace = std::chrono::seconds(30);
  // Heartbeat, lost-run scan and history pruning period. Default 5 s.
  Duration housekeeping_interval = std::chrono::seconds(5);
  // How often the backend's JobsVersion is polled; when it changed, pause states are re-read and
  // every lease held here is renewed at once, so a pause or resume on one node reaches every
  // node, and an operator's cancel (Coordinator::CancelFire) the run's holder, within this (and a
  // renewal). Default 500 ms.
  Duration state_poll_interval = std::chrono::milliseconds(500);
  // How often what running attempts printed is published to the backend, so that any node's API
  // shows it while they run (Coordinator::SaveLiveOutput): one write per running attempt per
  // interval at most, and only when it printed something new (docs/semantics.md "Live output").
  // 0 = not published (output shows when the attempt ends). Default 1 s.
  Duration live_output_interval = std::chrono::seconds(1);
  // Sharded ownership (docs/architecture.md): every node ranks the live nodes (heartbeats, read
  // every housekeeping pass) for each job shard by rendezvous hashing. The top-ranked node claims
  // a fire at its instant; the node of rank r checks at instant + r * takeover_delay whether the
  // fire has a record (one batched FiresRecorded call for all fires due then) and claims it if
  // not. Claims remain the only authority: nodes that disagree on the live set cost a refused
  // claim, never a duplicate run. Duration(0) = every node claims every fire at its instant.
  // Default 500 ms.
  Duration takeover_delay = std::chrono::milliseconds(500);
  // Queue mode (`gnomon serve --mode schedule`): when set, a claimed fire (or a lost run's rerun
  // claim) is handed to this function instead of being run here; it publishes the claim for a
  // worker, which renews, runs and reports it (Scheduler::RunClaim). This node then neither
  // renews nor reports it. A non-OK answer records the attempt as failed ("dispatch: ...").
  // Called on worker threads. Default: none (run locally).
  std::function<Status(const JobSpec& job, const Claim& claim)> dispatch;
  // Heartbeat into the backend's live set (and read it for ownership). Queue workers set false:
  // they run what they are handed and own no fires. Default true.
  bool heartbeat = true;
  // Receives events (logs, metrics, alerts). Not owned; may be null.
  Observer* observer = nullptr;
  // Admission control (e.g. namespace quotas), asked after a fire is claimed and before its first
  // attempt runs, with the claim held (so the fire's running record is visible to every node's
  // count). A non-empty answer is why the fire must not run: it is recorded as skipped with that
  // reason and its lease released, and the skipped event's reason is the answer's text up to the
  // first ':' (e.g. "quota"). Not asked for a rerun after a lost lease. Called on worker threads
  // at once: must be thread-safe. Default: none (every claimed fire runs).
  std::function<std::string(const JobSpec& job, const Claim& claim)> admit;
  // Seed for retry jitter; 0 = random.
  uint64_t random_seed = 0;
  // Reported in the node's heartbeat.
  std::string host;
  std::string version = "0.1.0";
};

// What Scheduler::Backfill found in its window.
struct BackfillPlan {
  int fires = 0;                     // fires of the schedule in the window (shards counted)
  int recorded = 0;                  // of those, the ones that already had a record
  std::vector<std::string> run_ids;  // the others, oldest first: these are being run
};

// A job as the scheduler sees it.
struct JobView {
  JobSpec spec;
  std::shared_ptr<const CronExpr> schedule;  // spec.schedule as compiled (never null)
  std::optional<Instant> next_fire;
  bool paused = false;
  std::string pause_reason;
  int running = 0;                         // attempts of this job running on this node
  std::shared_ptr<const FireRules> rules;  // window, exclusions, jitter; null when none
};

class Scheduler {
 public:
  // `coordinator`, `executor` and `clock` must outlive the scheduler.
  Scheduler(SchedulerOptions options, Coordinator& coordinator, Executor& executor, Clock& clock);
  ~Scheduler();  // Stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Adds or replaces a job, checked and compiled once by CompileJob (the JobSpec form compiles
  // it here). A running fire keeps the definition it started with. Works before and after
  // Start().
  Status AddJob(const CompiledJob& job);
  Status AddJob(const JobSpec& job);
  // Replaces the whole set of jobs (reload): ids must be unique (and, in the JobSpec form, all
  // are compiled first); nothing changes on error.
  Status SetJobs(const std::vector<CompiledJob>& jobs);
  Status SetJobs(const std::vector<JobSpec>& jobs);
  Status RemoveJob(const std::string& job_id);

  // Pause/resume cluster-wide (stored in the backend). Fires of a paused job are recorded as
  // skipped ("paused").
  Status Pause(const std::string& job_id, const std::string& reason = "api");
  Status Resume(const std::string& job_id);
  // Fires the job now (a fire at the current instant, ms precision), through a normal claim.
  // `params` (a JSON object as text; "" = none) is merged over the job's default params for this
  // fire (MergeParams; InvalidArgument when it is not an object or too large). Returns the run id.
  Result<std::string> TriggerNow(const std::string& job_id, const std::string& params = "");
  // Runs `fire`, which ended, again as its next attempt on this node (Coordinator::RerunFire: a
  // new, higher fencing token; the same run id), with the job's current definition, `params`
  // merged over its default params as for TriggerNow and `cause` in its records ("rerun by ops").
  // Returns the attempt number. NotFound when the job is not defined here or the fire has no
  // record; FailedPrecondition while the fire runs, or when the scheduler is not running.
  Result<int> Rerun(const FireKey& fire, const std::string& params, const std::string& cause);
  // Runs every fire of the job's schedule in [from, until) that has no record (claimed, run,
  // skipped), oldest first, at most `max_concurrent` (1 - worker_threads) at a time, on this
  // node's workers; fires recorded meanwhile by anyone are left as they are (their claim is
  // refused), so a backfill sent twice, or to two nodes, runs each fire once. The fires are
  // claimed with overlap = "allow" (they may overlap the job's own runs) and their records carry
  // `cause` ("backfill by ops"). InvalidArgument when the window is empty or reversed, ends in the
  // future, or holds more than `max_fires` fires (counting shards; the message names the count);
  // NotFound for a job not defined here. Returns at once with what was found.
  Result<BackfillPlan> Backfill(const std::string& job_id, Instant from, Instant until,
                                int max_concurrent, int max_fires, const std::string& cause);

  // Queue workers: runs a claim handed over by a scheduling node (renew it first: `renew_sent` is
  // the monotonic time, SteadyNow() of the scheduler's clock, when that successful renew was
  // sent), with this scheduler's lease watchdog, timeout, retries and fenced reports, on the
  // worker pool. `done` is called once the attempt(s) are over and the final outcome was reported
  // (or could not be). FailedPrecondition when not running.
  Status RunClaim(const JobSpec& job, const Claim& claim, Duration renew_sent,
                  std::function<void()> done);

  // Starts the threads. REQUIRES: not started.
  Status Start();
  // Graceful stop (docs/guarantees.md 9): stops claiming, waits up to shutdown_grace for runs,
  // cancels the rest, records their outcome and releases leases. Idempotent.
  void Stop();

  std::vector<JobView> Jobs() const;
  std::optional<JobView> GetJob(const std::string& job_id) const;
  // Attempts running on this node.
  int running() const;
  // The live nodes sharded ownership ranks, as this node last read them (housekeeping).
  std::vector<std::string> LiveNodes() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gnomon

#endif  // GNOMON_SCHEDULER_H_
