// Scheduler: the facade that wires the engine's parts (src/schedule/*.h; docs/architecture.md,
// "The engine's threads, locks and hand-offs"): the JobTable, the TimerLoop, the
// ClaimDispatcher, the RunDriver, the ChildFirer, the LeaseKeeper, Housekeeping and the
// MisfireHandler, with
// the EngineContext they share. It holds the lifecycle (Start, Stop) and the API callers' entry
// points; the work is the parts'.
#include "gnomon/scheduler.h"

#include <deque>
#include <set>

#include "src/schedule/child_firer.h"
#include "src/schedule/claim_dispatcher.h"
#include "src/schedule/engine_context.h"
#include "src/schedule/housekeeping.h"
#include "src/schedule/job_table.h"
#include "src/schedule/lease_keeper.h"
#include "src/schedule/live_output.h"
#include "src/schedule/misfire_handler.h"
#include "src/schedule/run_driver.h"
#include "src/schedule/timer_loop.h"

namespace gnomon {

using internal::kRunLane;
using internal::SpecPtr;

// Thread safety: the public methods are thread-safe; started_ is guarded by the engine lock
// (JobTable::mu()), which is never held across a backend call here.
class Scheduler::Impl {
 public:
  Impl(SchedulerOptions options, Coordinator& coordinator, Executor& executor, Clock& clock)
      : ctx_(std::move(options), coordinator, executor, clock),
        table_(ctx_),
        loop_(ctx_, table_),
        lease_(ctx_),
        live_output_(coordinator, clock, ctx_.options().live_output_interval),
        driver_(ctx_, table_, lease_, live_output_),
        children_(ctx_, table_, driver_),
        dispatch_(ctx_, table_, loop_, lease_, driver_),
        misfire_(ctx_, table_, dispatch_, driver_),
        housekeeping_(ctx_, table_, lease_, dispatch_, misfire_) {
    loop_.Wire(dispatch_, misfire_, housekeeping_);
    driver_.Wire(dispatch_);
    dispatch_.Wire(misfire_);
    driver_.OnEnded([this](const JobSpec& job, const FireKey& fire, const RunRecord& rec) {
      children_.Ended(job, fire, rec.outcome, job.params);
    });
    housekeeping_.Wire(children_);
  }

  ~Impl() { Stop(); }

  // ---------------------------------------------------------------------------------- jobs --
  // Jobs arrive checked and compiled (CompileJob): nothing is validated or parsed again here.
  Status AddJob(const CompiledJob& job) {
    MutexLock lock(table_.mu());
    InstallLocked(job);
    return Status::Ok();
  }

  Status SetJobs(const std::vector<CompiledJob>& jobs) {
    std::set<std::string> ids;
    for (const CompiledJob& job : jobs) {
      if (!ids.insert(job.spec.id).second) {
        return InvalidArgumentError("job \"" + job.spec.id + "\" is defined twice");
      }
    }
    MutexLock lock(table_.mu());
    table_.RetainLocked(ids);
    for (const CompiledJob& job : jobs) InstallLocked(job);
    return Status::Ok();
  }

  Status RemoveJob(const std::string& id) {
    if (!table_.Remove(id)) return NotFoundError("job \"" + id + "\" is not defined");
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------- lifecycle --
  Status Start() {
    {
      MutexLock lock(table_.mu());
      if (started_) return FailedPreconditionError("scheduler already started");
      if (ctx_.options().node_id.empty()) return InvalidArgumentError("node_id is required");
      started_ = true;
    }
    // Jobs added before Start were placed on the node's own clock: measure the skew, then
    // place them again on the backend's.
    ctx_.MeasureSkew();
    // The start-up catch-up below reads every job's state after this read of the version, so
    // the first state poll need not read them again unless it moved on.
    if (Result<int64_t> v = ctx_.coord().JobsVersion(); v.ok()) housekeeping_.SeedJobsVersion(*v);
    {
      MutexLock lock(table_.mu());
      ctx_.set_started_at(ctx_.Now());
      ctx_.StartPool();
      // A part of the backend that moved (a Cluster's failed primary replaced by its replica)
      // may take the claims that failed there: they are made again now, not at the next pass.
      routes_listener_ = ctx_.coord().AddRoutesListener([this] {
        ctx_.pool().Submit([this] { housekeeping_.RetryFailed(); }, internal::kControlLane);
      });
      std::vector<std::string> ids;
      for (auto& [id, e] : table_.EntriesLocked()) {
        e.cursor = table_.FirstCursor(*e.spec, ctx_.started_at());
        e.catchup_until = ctx_.started_at() - ctx_.options().claim_grace - Duration(1);
        e.catchup_pending = true;
        table_.RenewGenLocked(e);
        loop_.ScheduleNextLocked(e);
        ids.push_back(id);
        if (ids.size() == internal::kStateBatch) {
          misfire_.StartCatchUpLocked(std::exchange(ids, {}));
        }
      }
      if (!ids.empty()) misfire_.StartCatchUpLocked(std::move(ids));
    }
    loop_.Start(ctx_.started_at());
    lease_.Start();
    live_output_.Start();
    return Status::Ok();
  }

  // Graceful stop (docs/guarantees.md 9).
  void Stop() {
    {
      MutexLock lock(table_.mu());
      if (!started_ || ctx_.Stopping()) return;
      ctx_.SetStopping();
    }
    ctx_.coord().RemoveRoutesListener(routes_listener_);
    // Runs waiting for a retry or a report's retry go on at once (and end: they see the stop).
    lease_.WakeAll();
    loop_.Join();
    dispatch_.StartClaimedAhead();
    // Let runs finish (and claimed fires start) for up to shutdown_grace, then cancel the rest.
    lease_.WaitIdleThenCancel(ctx_.options().shutdown_grace);
    ctx_.pool().Shutdown(/*drop_pending=*/true);
    dispatch_.RecordUnstarted();
    lease_.Stop();
    live_output_.Stop();
  }

  // ---------------------------------------------------------------------------- controls --
  Status Pause(const std::string& id, const std::string& reason) {
    return SetPaused(id, true, reason);
  }
  Status Resume(const std::string& id) { return SetPaused(id, false, ""); }

  Status RunClaim(const JobSpec& spec, const Claim& claim, Duration renew_sent,
                  std::function<void()> done) {
    GNOMON_RETURN_IF_ERROR(Running());
    ctx_.pool().Submit(
        [this, spec = std::make_shared<const JobSpec>(spec), claim, renew_sent,
         done = std::move(done)] {
          driver_.RunFire(spec, claim.fire, claim, renew_sent, {.report_inline = true}, done);
        },
        kRunLane);
    return Status::Ok();
  }

  Result<int> Rerun(const FireKey& fire, const std::string& params, const std::string& cause) {
    Result<SpecPtr> spec = table_.SpecWithParams(fire.job_id, params);
    if (!spec.ok()) return spec.status();
    GNOMON_RETURN_IF_ERROR(Running());
    const Duration sent = ctx_.clock().SteadyNow();
    Result<Claim> claim =
        ctx_.coord().RerunFire(fire, ctx_.options().node_id, ctx_.options().lease_ttl, cause);
    if (!claim.ok()) return claim.status();
    const int attempt = claim->attempt;
    if (!ctx_.pool().Submit([this, spec = *spec, claim = *claim,
                             sent] { driver_.RunFire(spec, claim.fire, claim, sent, {}, nullptr); },
                            kRunLane)) {
      (void)ctx_.coord().Report(
          *claim,
          ctx_.NotRunRecord(*claim, RunOutcome::kCancelled,
                            std::string(internal::ReasonText(internal::StopReason::kShutdown)) +
                                " before the run started"),
          true);
      return FailedPreconditionError("scheduler is stopping");
    }
    return attempt;
  }

  Result<BackfillPlan> Backfill(const std::string& id, Instant from, Instant until,
                                int max_concurrent, int max_fires, const std::string& cause);

  Result<std::string> TriggerNow(const std::string& id, const std::string& params) {
    Result<SpecPtr> with_params = table_.SpecWithParams(id, params);
    if (!with_params.ok()) return with_params.status();
    SpecPtr spec = *with_params;
    Result<Schedule> sched = RunningSchedule(id);
    if (!sched.ok()) return sched.status();
    Instant now = ctx_.Now();
    // A trigger is a fire of its own: at an instant of the schedule it would be that scheduled
    // fire (the same run id, claimed once), so it takes the millisecond before (schedules have
    // whole seconds: no other scheduled instant is there; a later one would be claimed ahead).
    const Duration ms(1);
    if (sched->expr && sched->expr->Next(now - ms) == now) now = now - ms;
    dispatch_.SubmitShards(spec, now);
    return FireKey{id, now, 0, spec->shards}.RunId();
  }

  std::vector<JobView> Jobs() const { return table_.Views(); }
  std::optional<JobView> GetJob(const std::string& id) const { return table_.View(id); }
  int running() const { return lease_.running(); }
  std::vector<std::string> LiveNodes() const { return table_.LiveNodes(); }

 private:
  // Installs or replaces a job and queues its next fire; a job new after Start is caught up.
  void InstallLocked(const CompiledJob& job) GNOMON_REQUIRES(table_.mu()) {
    bool inserted = false;
    internal::JobEntry& e = table_.InstallLocked(job, inserted);
    children_.Track(job.spec);
    loop_.ScheduleNextLocked(e);
    loop_.WakeLocked();
    if (inserted && started_) {
      e.catchup_pending = true;
      misfire_.StartCatchUpLocked({job.spec.id});
    }
  }

  Status SetPaused(const std::string& id, bool paused, const std::string& reason) {
    if (!table_.Spec(id)) return NotFoundError("job \"" + id + "\" is not defined");
    GNOMON_RETURN_IF_ERROR(ctx_.coord().SetPaused(id, paused, reason));
    table_.SetPaused(id, paused, reason);
    return Status::Ok();
  }

  // FailedPrecondition unless started and not stopping.
  Status Running() const {
    MutexLock lock(table_.mu());
    if (!started_ || ctx_.Stopping()) return FailedPreconditionError("scheduler is not running");
    return Status::Ok();
  }

  // The job's compiled schedule and rules (expr null when it is not defined), once the
  // scheduler runs.
  struct Schedule {
    std::shared_ptr<const CronExpr> expr;
    std::shared_ptr<const FireRules> rules;
  };
  Result<Schedule> RunningSchedule(const std::string& id) const {
    MutexLock lock(table_.mu());
    if (!started_ || ctx_.Stopping()) return FailedPreconditionError("scheduler is not running");
    const internal::JobEntry* e = table_.FindLocked(id);
    return e ? Schedule{e->expr, e->rules} : Schedule{};
  }

  // A backfill's fires, run oldest first by at most `lanes` pool tasks at a time; each task runs
  // one fire to its end, then queues the next (so a long backfill never holds a worker).
  struct BackfillQueue {
    SpecPtr spec;
    std::string cause;
    Mutex mu;
    std::deque<FireKey> fires GNOMON_GUARDED_BY(mu);
  };
  void BackfillNext(const std::shared_ptr<BackfillQueue>& q);

  internal::EngineContext ctx_;
  internal::JobTable table_;
  internal::TimerLoop loop_;
  internal::LeaseKeeper lease_;
  // What running attempts print, published to the backend every live_output_interval.
  internal::LiveOutput live_output_;
  internal::RunDriver driver_;
  internal::ChildFirer children_;
  internal::ClaimDispatcher dispatch_;
  internal::MisfireHandler misfire_;
  internal::Housekeeping housekeeping_;
  bool started_ GNOMON_GUARDED_BY(table_.mu()) = false;
  int routes_listener_ = 0;  // ClaimStore::AddRoutesListener's handle (set in Start)
};

void Scheduler::Impl::BackfillNext(const std::shared_ptr<BackfillQueue>& q) {
  FireKey fire;
  {
    MutexLock lock(q->mu);
    if (q->fires.empty() || ctx_.Stopping()) return;
    fire = std::move(q->fires.front());
    q->fires.pop_front();
  }
  driver_.RunFire(q->spec, fire, std::nullopt, ctx_.clock().SteadyNow(),
                  {.report_inline = true, .cause = q->cause},
                  [this, q] { ctx_.pool().Submit([this, q] { BackfillNext(q); }, kRunLane); });
}

Result<BackfillPlan> Scheduler::Impl::Backfill(const std::string& id, Instant from, Instant until,
                                               int max_concurrent, int max_fires,
                                               const std::string& cause) {
  const int workers = ctx_.options().worker_threads;
  if (max_concurrent < 1 || max_concurrent > workers) {
    return InvalidArgumentError("max_concurrent: " + std::to_string(max_concurrent) +
                                " is out of range 1-" + std::to_string(workers));
  }
  if (!(from < until)) return InvalidArgumentError("from: must be before to");
  if (until > ctx_.Now()) return InvalidArgumentError("to: is in the future (backfill past fires)");
  SpecPtr spec = table_.Spec(id);
  Result<Schedule> sched = RunningSchedule(id);
  if (!sched.ok()) return sched.status();
  if (!spec || !sched->expr) return NotFoundError("job \"" + id + "\" is not defined");
  // The window's instants, counted up to a bound so that a window of years of seconds is
  // refused without being walked.
  constexpr int64_t kCountCap = 1000000;
  std::vector<Instant> instants;
  int64_t count = 0;
  // (Fires the job's rules exclude, or outside its window, are not fires: not backfilled.)
  const CronExpr& expr = *sched->expr;
  const FireRules* rules = sched->rules.get();
  for (std::optional<Instant> t = NextFire(expr, rules, from - Duration(1));
       t && *t < until && count <= kCountCap; t = NextFire(expr, rules, *t)) {
    if (++count <= max_fires) instants.push_back(*t);
  }
  const int64_t fires = count * spec->shards;
  if (fires > max_fires) {
    return InvalidArgumentError(
        "the window holds " +
        (count > kCountCap ? "more than " + std::to_string(kCountCap * spec->shards)
                           : std::to_string(fires)) +
        " fires, more than the " + std::to_string(max_fires) + " a backfill may run");
  }
  BackfillPlan plan;
  plan.fires = static_cast<int>(fires);
  std::vector<FireKey> keys;
  for (Instant t : instants) {
    for (int s = 0; s < spec->shards; ++s) keys.push_back(FireKey{id, t, s, spec->shards});
  }
  Result<std::vector<bool>> recorded = ctx_.coord().FiresRecorded(keys);
  if (!recorded.ok()) return recorded.status();
  // Its fires may overlap one another (max_concurrent bounds them), not the job's own runs.
  auto copy = std::make_shared<JobSpec>(*spec);
  copy->overlap = OverlapPolicy::kAllow;
  auto q = std::make_shared<BackfillQueue>();
  q->spec = std::move(copy);
  q->cause = cause;
  {
    MutexLock lock(q->mu);
    for (size_t i = 0; i < keys.size(); ++i) {
      if ((*recorded)[i]) {
        ++plan.recorded;
      } else {
        plan.run_ids.push_back(keys[i].RunId());
        q->fires.push_back(keys[i]);
      }
    }
  }
  const int lanes = std::min<int>(max_concurrent, static_cast<int>(plan.run_ids.size()));
  for (int i = 0; i < lanes; ++i) ctx_.pool().Submit([this, q] { BackfillNext(q); }, kRunLane);
  return plan;
}

Scheduler::Scheduler(SchedulerOptions options, Coordinator& coordinator, Executor& executor,
                     Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), coordinator, executor, clock)) {}
Scheduler::~Scheduler() = default;
Status Scheduler::AddJob(const CompiledJob& job) { return impl_->AddJob(job); }
Status Scheduler::AddJob(const JobSpec& job) {
  Result<CompiledJob> compiled = CompileJob(job);
  return compiled.ok() ? impl_->AddJob(*compiled) : compiled.status();
}
Status Scheduler::SetJobs(const std::vector<CompiledJob>& jobs) { return impl_->SetJobs(jobs); }
Status Scheduler::SetJobs(const std::vector<JobSpec>& jobs) {
  std::vector<CompiledJob> compiled;
  compiled.reserve(jobs.size());
  for (const JobSpec& job : jobs) {
    Result<CompiledJob> c = CompileJob(job);
    if (!c.ok()) return c.status();
    compiled.push_back(std::move(c).value());
  }
  return impl_->SetJobs(compiled);
}
Status Scheduler::RemoveJob(const std::string& id) { return impl_->RemoveJob(id); }
Status Scheduler::Pause(const std::string& id, const std::string& reason) {
  return impl_->Pause(id, reason);
}
Status Scheduler::Resume(const std::string& id) { return impl_->Resume(id); }
Result<int> Scheduler::Rerun(const FireKey& fire, const std::string& params,
                             const std::string& cause) {
  return impl_->Rerun(fire, params, cause);
}
Result<BackfillPlan> Scheduler::Backfill(const std::string& job_id, Instant from, Instant until,
                                         int max_concurrent, int max_fires,
                                         const std::string& cause) {
  return impl_->Backfill(job_id, from, until, max_concurrent, max_fires, cause);
}
Result<std::string> Scheduler::TriggerNow(const std::string& id, const std::string& params) {
  return impl_->TriggerNow(id, params);
}
Status Scheduler::Start() { return impl_->Start(); }
void Scheduler::Stop() { impl_->Stop(); }
std::vector<JobView> Scheduler::Jobs() const { return impl_->Jobs(); }
std::optional<JobView> Scheduler::GetJob(const std::string& id) const { return impl_->GetJob(id); }
int Scheduler::running() const { return impl_->running(); }
std::vector<std::string> Scheduler::LiveNodes() const { return impl_->LiveNodes(); }
Status Scheduler::RunClaim(const JobSpec& job, const Claim& claim, Duration renew_sent,
                           std::function<void()> done) {
  return impl_->RunClaim(job, claim, renew_sent, std::move(done));
}

}  // namespace gnomon
