// The scheduler engine: timer queue + loop thread, worker pool, lease watchdog, policies.
#include "gnomon/scheduler.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <unordered_map>

#include "gnomon/cron.h"
#include "src/schedule/live_output.h"
#include "src/schedule/rendezvous.h"
#include "src/schedule/worker_pool.h"

namespace gnomon {
namespace {

// Why the scheduler stopped a run.
enum class StopReason { kNone, kTimeout, kLeaseLost, kSelfFenced, kReplaced, kShutdown };

std::string_view ReasonText(StopReason r) {
  switch (r) {
    case StopReason::kNone:
      return "";
    case StopReason::kTimeout:
      return "timed out";
    case StopReason::kLeaseLost:
      return "lease lost: fenced off by the backend";
    case StopReason::kSelfFenced:
      return "self-fenced: could not renew the lease before ttl - margin";
    case StopReason::kReplaced:
      return "replaced by a newer fire (overlap = replace)";
    case StopReason::kShutdown:
      return "cancelled by graceful shutdown";
  }
  return "";
}

// A clock-skew sample whose round trip took longer than this is ignored.
constexpr Duration kMaxSkewSampleRtt = std::chrono::milliseconds(250);

// Most missed fires handled (run or recorded) per job per pass; the rest are dropped from view
// (and counted in the event detail).
constexpr int kMaxMisfires = 1000;

}  // namespace

class Scheduler::Impl {
 public:
  Impl(SchedulerOptions options, Coordinator& coordinator, Executor& executor, Clock& clock)
      : options_(std::move(options)),
        coord_(coordinator),
        exec_(executor),
        clock_(clock),
        margin_(options_.lease_margin.value_or(options_.lease_ttl / 3)),
        ahead_(std::clamp(options_.claim_ahead, Duration(0), options_.skew_tolerance / 2)),
        rng_(options_.random_seed ? options_.random_seed : std::random_device{}()) {}

  ~Impl() { Stop(); }

  // The backend's clock as this node estimates it: its own clock minus the skew measured at start
  // and by every housekeeping pass. *When* to fire is decided on this clock, so a node whose clock
  // is off neither runs fires early (the backend would refuse) nor late, nor takes future fires
  // for missed ones.
  Instant Now() const { return clock_.Now() - Duration(skew_ms_.load()); }

  // Measures node clock minus backend clock (at the midpoint of one call) and adopts it.
  Duration MeasureSkew() {
    const Instant before = clock_.Now();
    Result<Instant> backend_now = coord_.Now();
    const Instant after = clock_.Now();
    // A slow answer (a hung backend) says little about the clocks: its midpoint may be off by
    // seconds, which would move every fire. Keep the last good value then.
    if (!backend_now.ok() || after - before > kMaxSkewSampleRtt) return Duration(skew_ms_.load());
    const Duration skew = (before + (after - before) / 2) - *backend_now;
    skew_ms_ = skew.count();
    return skew;
  }

  // ---------------------------------------------------------------------------------- jobs --
  // A job's definition, shared (never copied) by its timers' fires, batches and runs.
  using SpecPtr = std::shared_ptr<const JobSpec>;

  struct JobEntry {
    SpecPtr spec;
    std::shared_ptr<const CronExpr> expr;
    uint64_t gen = 0;  // bumps on every change; stale timers are dropped
    Instant cursor;    // fires at or before this were handled
    std::optional<Instant> next;
    bool paused = false;
    std::string pause_reason;
    int running = 0;
    // Fires waiting for the backend (allocated only while there are some: a million jobs
    // mostly have none).
    struct Backlog {
      std::set<Instant> failed;      // fires whose claim failed on a backend error (retried)
      std::set<Instant> unrecorded;  // skipped fires whose record failed to be written (retried)
    };
    std::unique_ptr<Backlog> backlog;
    Backlog& Waiting() {
      if (!backlog) backlog = std::make_unique<Backlog>();
      return *backlog;
    }
    // Attempts this node reported since the job's history was last pruned (capped).
    uint16_t runs_since_prune = 0;
    // The paused state above came from the state read (or local change) with this sequence
    // number: an older read, answered late, does not overwrite it (see SetPausedLocked).
    uint32_t state_seq = 0;
    Instant catchup_until;  // the catch-up pass covers fires up to here (the install cursor)
  };

  Status AddJob(const CompiledJob& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      InstallLocked(job.spec, job.schedule);
    }
    cv_.notify_all();
    return Status::Ok();
  }

  Status SetJobs(const std::vector<CompiledJob>& jobs) {
    std::set<std::string> ids;
    for (const CompiledJob& job : jobs) {
      if (!ids.insert(job.spec.id).second) {
        return InvalidArgumentError("job \"" + job.spec.id + "\" is defined twice");
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = jobs_.begin(); it != jobs_.end();) {
        it = ids.count(it->first) ? std::next(it) : jobs_.erase(it);
      }
      for (const CompiledJob& job : jobs) InstallLocked(job.spec, job.schedule);
    }
    cv_.notify_all();
    return Status::Ok();
  }

  Status RemoveJob(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (jobs_.erase(id) == 0) return NotFoundError("job \"" + id + "\" is not defined");
    return Status::Ok();
  }

  // Installs or replaces a job. A new job starts at now - claim_grace: fires within the grace
  // are claimed, older ones are the misfire pass's business (CatchUp).
  void InstallLocked(const JobSpec& job, std::shared_ptr<const CronExpr> expr) {
    const Instant now = Now();
    auto [it, inserted] = jobs_.try_emplace(job.id);
    JobEntry& e = it->second;
    const bool schedule_changed =
        inserted || e.spec->schedule != job.schedule || e.spec->timezone != job.timezone;
    e.spec = std::make_shared<const JobSpec>(job);
    e.expr = std::move(expr);
    ++e.gen;
    if (inserted) {
      e.cursor = now - options_.claim_grace - Duration(1);
      e.catchup_until = e.cursor;
    }
    if (schedule_changed && !inserted) e.cursor = std::max(e.cursor, now - Duration(1));
    ScheduleNextLocked(job.id, e);
    wake_ = true;
    if (inserted && pool_) SubmitCatchUpLocked({job.id});
  }

  // Queues the job's next fire after its cursor. `known`: that fire, when the caller has it.
  void ScheduleNextLocked(const std::string& id, JobEntry& e,
                          std::optional<std::optional<Instant>> known = std::nullopt) {
    if (!e.spec->enabled) {
      e.next.reset();
    } else {
      e.next = known ? *known : NextLocked(e, e.cursor);
    }
    if (e.next) {
      timers_.push(
          Timer{*e.next - AheadOf(*e.spec), TimerKind::kFire, e.gen, FireKey{id, {}, 0, 1}});
    }
  }

  // How long before its instant a fire of `spec` is claimed (SchedulerOptions::claim_ahead).
  Duration AheadOf(const JobSpec& spec) const {
    return spec.overlap == OverlapPolicy::kAllow ? ahead_ : Duration(0);
  }

  // e.expr->Next(after). Jobs that share a compiled schedule (Compile) fire together and ask the
  // same questions in a row, so the last answers are kept. REQUIRES: mu_ held.
  std::optional<Instant> NextLocked(const JobEntry& e, Instant after) {
    for (const NextMemo& m : next_memo_) {
      if (m.expr == e.expr && m.after == after) return m.next;
    }
    NextMemo& slot = next_memo_[next_memo_victim_++ % next_memo_.size()];
    slot = NextMemo{e.expr, after, e.expr->Next(after)};
    return slot.next;
  }

  // ----------------------------------------------------------------------------- lifecycle --
  Status Start() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (started_) return FailedPreconditionError("scheduler already started");
      if (options_.node_id.empty()) return InvalidArgumentError("node_id is required");
      started_ = true;
    }
    // Jobs added before Start were placed on the node's own clock: measure the skew, then
    // place them again on the backend's.
    MeasureSkew();
    {
      std::lock_guard<std::mutex> lock(mu_);
      started_at_ = Now();
      pool_ = std::make_unique<internal::WorkerPool>(std::max(1, options_.worker_threads));
      std::vector<std::string> ids;
      for (auto& [id, e] : jobs_) {
        e.cursor = e.catchup_until = started_at_ - options_.claim_grace - Duration(1);
        ++e.gen;
        ScheduleNextLocked(id, e);
        ids.push_back(id);
        if (ids.size() == kStateBatch) SubmitCatchUpLocked(std::exchange(ids, {}));
      }
      if (!ids.empty()) SubmitCatchUpLocked(std::move(ids));
      timers_.push(Timer{started_at_, TimerKind::kHousekeeping, 0, {}});
      timers_.push(Timer{started_at_, TimerKind::kStatePoll, 0, {}});
    }
    loop_thread_ = std::jthread([this] { Loop(); });
    watchdog_thread_ = std::jthread([this] { Watchdog(); });
    renewer_thread_ = std::jthread([this] { Renewer(); });
    live_output_.Start();
    return Status::Ok();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (loop_thread_.joinable()) loop_thread_.join();
    {
      // Fires claimed ahead are this node's to run: each starts at its instant (at most
      // claim_ahead away).
      std::unique_lock<std::mutex> lock(mu_);
      while (!start_at_.empty()) {
        const auto [at, id] = start_at_.top();
        if (at > Now()) {
          clock_.WaitUntil(lock, cv_, at + Duration(skew_ms_.load()), [] { return false; });
          continue;
        }
        SubmitStartLocked(id);
        start_at_.pop();
      }
    }
    {
      // Let runs finish (and claimed fires start) for up to shutdown_grace, then cancel what is
      // left.
      std::unique_lock<std::mutex> lock(wd_mu_);
      clock_.WaitFor(lock, wd_cv_, options_.shutdown_grace,
                     [&] { return active_.empty() && starting_ == 0; });
      cancel_all_ = true;
      for (auto& [key, run] : active_) {
        if (run->reason == StopReason::kNone) run->reason = StopReason::kShutdown;
        run->stop.request_stop();
      }
    }
    pool_->Shutdown(/*drop_pending=*/true);
    RecordUnstarted();
    {
      std::lock_guard<std::mutex> lock(wd_mu_);
      wd_stop_ = true;
    }
    wd_cv_.notify_all();
    renew_cv_.notify_all();
    if (watchdog_thread_.joinable()) watchdog_thread_.join();
    if (renewer_thread_.joinable()) renewer_thread_.join();
    live_output_.Stop();
  }

  // Claimed fires that did not start within shutdown_grace (still queued for a worker): recorded
  // cancelled, their leases released.
  void RecordUnstarted() {
    std::vector<Unstarted> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, u] : unstarted_) left.push_back(std::move(u));
      unstarted_.clear();
    }
    for (const Unstarted& u : left) {
      const RunRecord rec =
          NotRunRecord(u.claim, RunOutcome::kCancelled,
                       std::string(ReasonText(StopReason::kShutdown)) + " before the run started");
      if (Status s = coord_.Report(u.claim, rec, true); !s.ok()) {
        Emit(SchedulerEvent::Kind::kError, u.claim.fire, "report: " + s.ToString());
      }
    }
  }

  // --------------------------------------------------------------------------------- loop --
  enum class TimerKind { kFire, kClaimRetry, kTakeover, kHousekeeping, kStatePoll };
  struct Timer {
    Instant due;
    TimerKind kind;
    uint64_t gen;
    FireKey fire;  // kFire: only its job_id; kClaimRetry, kTakeover: the fire
    bool operator>(const Timer& o) const { return due > o.due; }
  };
  // The timer min-heap (earliest due on top), as std::priority_queue but popping by move.
  class TimerHeap {
   public:
    bool empty() const { return heap_.empty(); }
    const Timer& top() const { return heap_.front(); }
    void push(Timer t) {
      heap_.push_back(std::move(t));
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    Timer pop() {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      Timer t = std::move(heap_.back());
      heap_.pop_back();
      return t;
    }

   private:
    std::vector<Timer> heap_;
  };

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      const Instant due = std::min(timers_.empty() ? Instant::Max() : timers_.top().due,
                                   start_at_.empty() ? Instant::Max() : start_at_.top().first);
      if (due > Now()) {
        // Owned fires due together are claimed together: whatever was gathered goes before the
        // loop sleeps (checked here, not after the last due timer: Now() moves with the
        // measured skew, so "nothing else is due" cannot be decided there).
        FlushClaimBatchLocked();
        // Timers are on the backend's clock; the wait is on the node's.
        const Instant node_due = due == Instant::Max() ? due : due + Duration(skew_ms_.load());
        clock_.WaitUntil(lock, cv_, node_due, [&] { return stopping_.load() || wake_; });
        wake_ = false;
        continue;
      }
      if (!start_at_.empty() && start_at_.top().first <= Now()) {
        SubmitStartLocked(start_at_.top().second);
        start_at_.pop();
        continue;
      }
      HandleTimerLocked(timers_.pop());
      if (claim_batch_.size() >= kClaimBatch) FlushClaimBatchLocked();
    }
  }

  // Submits the gathered on-time fires as one claim batch. REQUIRES: mu_ held.
  void FlushClaimBatchLocked() {
    if (claim_batch_.empty()) return;
    pool_->Submit(
        [this, batch = std::move(claim_batch_)]() mutable { ClaimBatch(std::move(batch)); },
        kClaimLane);
    claim_batch_.clear();
  }

  void HandleTimerLocked(const Timer& t) {
    const Instant now = Now();
    if (t.kind == TimerKind::kHousekeeping) {
      timers_.push(Timer{now + options_.housekeeping_interval, TimerKind::kHousekeeping, 0, {}});
      pool_->Submit([this] { Housekeeping(); }, kControlLane);
      return;
    }
    if (t.kind == TimerKind::kStatePoll) {
      timers_.push(Timer{now + options_.state_poll_interval, TimerKind::kStatePoll, 0, {}});
      pool_->Submit([this] { RefreshJobStates(); }, kControlLane);
      return;
    }
    if (t.kind == TimerKind::kTakeover) {
      // Every takeover due now goes in one batch: one FiresRecorded call for all of them.
      std::vector<std::pair<FireKey, Instant>> batch{{t.fire, t.due}};
      while (!timers_.empty() && timers_.top().kind == TimerKind::kTakeover &&
             timers_.top().due <= now) {
        Timer next = timers_.pop();
        batch.emplace_back(std::move(next.fire), next.due);
      }
      pool_->Submit([this, batch = std::move(batch)] { TakeOver(batch); }, kClaimLane);
      return;
    }
    auto it = jobs_.find(t.fire.job_id);
    if (it == jobs_.end()) return;
    JobEntry& e = it->second;
    if (t.kind == TimerKind::kClaimRetry) {
      SubmitFire(e.spec, t.fire);
      return;
    }
    if (t.gen != e.gen) return;  // superseded by a change of the job
    // Every fire in (cursor, now]: on-time ones are claimed, older ones are misfires (this node
    // stalled, or its clock stepped forward).
    // (Scratch vectors kept between timers: most timers have one fire and no misfire.)
    std::vector<Instant>& missed = missed_scratch_;
    std::vector<Instant>& on_time = on_time_scratch_;
    missed.clear();
    on_time.clear();
    // With sharded ownership the other nodes take over a fire up to (nodes - 1) takeover delays
    // after its instant: a late owner still claims within that, rather than recording a misfire
    // for a fire a peer may be running (the claims decide who runs it).
    const Duration grace = TakeoverWindowLocked();
    // The first fire after the last one handled, once the loop ends without a break: the next
    // timer's instant, Next(cursor).
    std::optional<std::optional<Instant>> next;
    const Instant horizon = now + AheadOf(*e.spec);  // fires up to here are claimed now
    for (std::optional<Instant> f = NextLocked(e, e.cursor);; f = NextLocked(e, *f)) {
      if (!f || *f > horizon) {
        next = f;
        break;
      }
      if (missed.size() + on_time.size() == kMaxMisfires) {
        // A long stall of a high-frequency job: the latest fire stands for the rest.
        f = e.expr->Prev(now + Duration(1));
      }
      (*f < now - grace ? missed : on_time).push_back(*f);
      e.cursor = *f;
      if (missed.size() + on_time.size() > kMaxMisfires) break;
    }
    ApplyMisfirePolicyLocked(e, missed, now);
    for (Instant f : on_time) SubmitOwnedLocked(e.spec, f);
    ScheduleNextLocked(t.fire.job_id, e, next);
  }

  // An on-time fire: claimed now by its owner; the other nodes check after their rank's delay.
  void SubmitOwnedLocked(const SpecPtr& spec, Instant scheduled_at) {
    for (int s = 0; s < spec->shards; ++s) {
      FireKey fire{spec->id, scheduled_at, s, spec->shards};
      const int rank = options_.takeover_delay > Duration(0)
                           ? internal::RendezvousRank(live_nodes_, options_.node_id, spec->id, s)
                           : 0;
      if (rank == 0) {
        claim_batch_.emplace_back(spec, std::move(fire));  // claimed together (Loop flushes)
      } else {
        timers_.push(Timer{scheduled_at + options_.takeover_delay * rank, TimerKind::kTakeover, 0,
                           std::move(fire)});
      }
    }
  }

  // Fires of other owners, checked after this node's takeover delay: those still without a record
  // (the owner is gone, or slow) are claimed here. If the check fails, every one is claimed (the
  // claims decide).
  // `due`: when this node's rank was to take over; claim_grace after it, the takeover is late.
  void TakeOver(const std::vector<std::pair<FireKey, Instant>>& due) {
    std::vector<FireKey> fires;
    for (const auto& [fire, at] : due) fires.push_back(fire);
    Result<std::vector<bool>> recorded = coord_.FiresRecorded(fires);
    for (size_t i = 0; i < fires.size(); ++i) {
      if (recorded.ok() && i < recorded->size() && (*recorded)[i]) continue;
      SpecPtr spec = Spec(fires[i].job_id);
      if (!spec || spec->shards != fires[i].shard_count) continue;  // removed or changed since
      {
        // Late (the check itself was slow: a hung backend), the fire is a misfire: it goes to
        // the failed claims, which the job's owner handles per `misfire`, rather than being
        // claimed late beside the owner's catch-up. Measured from this node's own turn, not from
        // the live set's window now: that shrinks when heartbeats lapse in an outage.
        std::lock_guard<std::mutex> lock(mu_);
        if (Now() - due[i].second > options_.claim_grace) {
          KeepFailedLocked(fires[i]);
          continue;
        }
      }
      SubmitFire(spec, fires[i]);
    }
  }

  // A fire that was not claimed on time (a backend error, a late takeover or claim batch): kept in
  // its job's failed claims, which housekeeping hands to the misfire policy (RetryFailedClaims).
  // REQUIRES: mu_ held.
  void KeepFailedLocked(const FireKey& fire) {
    auto it = jobs_.find(fire.job_id);
    if (it != jobs_.end() && it->second.Waiting().failed.size() < kMaxMisfires) {
      it->second.Waiting().failed.insert(fire.scheduled_at);
    }
  }

  // How late after its instant a fire may still be claimed as on time: claim_grace, plus the
  // takeover delays of the other live nodes. REQUIRES: mu_ held.
  // The live set counted is the largest of the last minute: in an outage the heartbeats lapse
  // and nodes come back one by one, while the fires of that time were ranked over all of them.
  Duration TakeoverWindowLocked() const {
    return options_.claim_grace +
           options_.takeover_delay * static_cast<int64_t>(live_peak_ > 1 ? live_peak_ - 1 : 0);
  }

  // Missed fires: within catchup_window, per policy; older ones are recorded as skipped.
  void ApplyMisfirePolicyLocked(const JobEntry& e, const std::vector<Instant>& missed,
                                Instant now) {
    if (missed.empty()) return;
    std::vector<Instant> run;
    std::vector<Instant> skip;
    for (Instant f : missed) {
      (f >= now - e.spec->catchup_window && e.spec->misfire != MisfirePolicy::kSkip ? run : skip)
          .push_back(f);
    }
    if (e.spec->misfire == MisfirePolicy::kOnce && !run.empty()) {
      SubmitSkipRecords(e.spec, skip);
      SubmitCatchUpOnce(e.spec, std::move(run), TakeoverWindowLocked());
      return;
    }
    // Catch-up runs go one after another, oldest first, so that overlap = forbid does not skip
    // them against each other.
    if (!run.empty()) {
      pool_->Submit(
          [this, spec = e.spec, run] {
            for (Instant f : run) {
              for (int s = 0; s < spec->shards; ++s) {
                RunFire(spec, FireKey{spec->id, f, s, spec->shards}, std::nullopt,
                        clock_.SteadyNow(), true);
              }
            }
          },
          kClaimLane);
    }
    SubmitSkipRecords(e.spec, skip);
  }

  // misfire = once: runs the latest missed fire of `batch` (ascending) and records the others
  // skipped. The latest fire this node failed to claim may have been claimed on time by a peer
  // after all (within `window` of its instant: a takeover, or the backend came back for the peer
  // first); then it was not missed and the next older one is the latest missed. A fire already
  // recorded late (another node's catch-up of this batch) ends the search: the batch is handled.
  void SubmitCatchUpOnce(const SpecPtr& spec, std::vector<Instant> batch, Duration window) {
    pool_->Submit(
        [this, spec, batch = std::move(batch), window] {
          std::optional<Instant> latest;
          size_t i = batch.size();
          while (i > 0) {
            const Instant f = batch[--i];
            Result<std::vector<RunRecord>> rec =
                coord_.GetRun(FireKey{spec->id, f, 0, spec->shards}.RunId());
            if (!rec.ok() && rec.status().code() != StatusCode::kNotFound) {
              // The backend cannot tell: decide again on a later pass.
              std::lock_guard<std::mutex> lock(mu_);
              if (auto it = jobs_.find(spec->id); it != jobs_.end()) {
                std::set<Instant>& failed = it->second.Waiting().failed;
                for (size_t k = 0; k <= i && failed.size() < kMaxMisfires; ++k) {
                  failed.insert(batch[k]);
                }
              }
              return;
            }
            if (!rec.ok() || rec->empty()) {
              latest = f;
              break;
            }
            if (rec->front().started_at - f > window) break;  // recorded late: handled
          }
          SubmitSkipRecords(spec, std::vector<Instant>(batch.begin(), batch.begin() + i));
          if (!latest) return;
          for (int s = 0; s < spec->shards; ++s) {
            RunFire(spec, FireKey{spec->id, *latest, s, spec->shards}, std::nullopt,
                    clock_.SteadyNow(), true);
          }
        },
        kClaimLane);
  }

  // Records fires as skipped ("misfire"). A record that could not be written (backend down) is
  // kept and written again by housekeeping, so no missed fire goes without its record.
  void SubmitSkipRecords(const SpecPtr& spec, const std::vector<Instant>& skip) {
    if (skip.empty()) return;
    pool_->Submit(
        [this, spec, skip] {
          std::vector<Instant> unwritten;
          for (Instant f : skip) {
            for (int s = 0; s < spec->shards; ++s) {
              const FireKey fire{spec->id, f, s, spec->shards};
              Status st = coord_.RecordSkipped(fire, options_.node_id, "misfire");
              if (st.ok()) {
                Emit(SchedulerEvent::Kind::kSkipped, fire, "misfire");
              } else if (st.code() != StatusCode::kAlreadyExists) {
                Emit(SchedulerEvent::Kind::kError, fire, "record skipped: " + st.ToString());
                if (unwritten.empty() || unwritten.back() != f) unwritten.push_back(f);
              }
            }
          }
          if (unwritten.empty()) return;
          std::lock_guard<std::mutex> lock(mu_);
          if (auto it = jobs_.find(spec->id); it != jobs_.end()) {
            for (Instant f : unwritten) {
              std::set<Instant>& unrecorded = it->second.Waiting().unrecorded;
              if (unrecorded.size() < kMaxMisfires) unrecorded.insert(f);
            }
          }
        },
        kClaimLane);
  }

  // At start (or when a job is added): fires missed while no node ran, from the backend's
  // last_scheduled up to this node's start, go through the misfire policy.
  // The job states of many jobs are read together (a node starting with a million jobs reads
  // them 512 per call), one call at a time: each next chunk is queued behind the tasks submitted
  // meanwhile, so the reads never hold back the claims of on-time fires (a thousand chunks queued
  // at once did, for the minute they took, and the fires they delayed became misfires).
  // REQUIRES: mu_ held.
  void SubmitCatchUpLocked(std::vector<std::string> ids) {
    if (!catchup_queue_.empty() && catchup_queue_.back().size() + ids.size() <= kStateBatch) {
      auto& back = catchup_queue_.back();
      back.insert(back.end(), std::make_move_iterator(ids.begin()),
                  std::make_move_iterator(ids.end()));
    } else {
      catchup_queue_.push_back(std::move(ids));
    }
    if (catchup_busy_) return;
    catchup_busy_ = true;
    pool_->Submit([this] { CatchUpStep(); }, kClaimLane);
  }

  // Reads one queued chunk of job states and applies the misfire policy; then queues itself again
  // while chunks are left.
  void CatchUpStep() {
    std::vector<std::string> ids;
    uint32_t seq = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (catchup_queue_.empty()) {
        catchup_busy_ = false;
        return;
      }
      ids = std::move(catchup_queue_.front());
      catchup_queue_.pop_front();
      seq = NextStateSeqLocked();
    }
    Result<std::vector<JobState>> states = coord_.GetJobStates(ids);
    std::lock_guard<std::mutex> lock(mu_);
    if (states.ok() && states->size() == ids.size()) {
      const Instant now = Now();
      for (size_t i = 0; i < ids.size(); ++i) {
        const JobState& state = (*states)[i];
        auto it = jobs_.find(ids[i]);
        if (it == jobs_.end()) continue;
        JobEntry& e = it->second;
        SetPausedLocked(e, seq, state.paused, state.pause_reason);
        if (!state.last_scheduled || !e.spec->enabled) continue;
        // Newest first, so a long outage of a frequent job keeps the fires inside the window.
        std::vector<Instant> missed;
        for (std::optional<Instant> f = e.expr->Prev(e.catchup_until + Duration(1));
             f && *f > *state.last_scheduled && missed.size() < kMaxMisfires;
             f = e.expr->Prev(*f)) {
          missed.push_back(*f);
        }
        std::reverse(missed.begin(), missed.end());
        ApplyMisfirePolicyLocked(e, missed, now);
      }
    }
    if (catchup_queue_.empty() || !pool_->Submit([this] { CatchUpStep(); }, kClaimLane)) {
      catchup_busy_ = false;
    }
  }

  void SubmitShards(const SpecPtr& spec, Instant scheduled_at) {
    for (int s = 0; s < spec->shards; ++s) {
      SubmitFire(spec, FireKey{spec->id, scheduled_at, s, spec->shards});
    }
  }

  void SubmitFire(const SpecPtr& spec, const FireKey& fire) {
    pool_->Submit([this, spec, fire] { RunFire(spec, fire, std::nullopt, clock_.SteadyNow()); },
                  kClaimLane);
  }

  // ------------------------------------------------------------------------------ running --
  struct ActiveRun {
    Claim claim;  // current attempt (guarded by wd_mu_)
    std::stop_source stop;
    Duration last_ok_sent{0};  // steady: when the last successful claim/renew was sent
    Duration next_renew{0};
    std::optional<Duration> timeout_at;
    StopReason reason = StopReason::kNone;
    bool lost = false;
    bool renewing = false;  // queued for, or inside, a Renew call
    // The final report is under way: a renewal answered after it may find the fire closed by it
    // ("released"), which is no lease loss (guarded by wd_mu_).
    bool reporting = false;
  };

  ClaimRequest RequestFor(const JobSpec& spec, const FireKey& fire) const {
    return ClaimRequest{fire, options_.node_id, options_.lease_ttl, options_.skew_tolerance,
                        spec.overlap};
  }

  // Acts on the answer to this node's claim of `fire`: the claim to run, or nullopt when there
  // is nothing to run here (the answer is recorded, retried or announced).
  std::optional<Claim> AcceptClaim(const JobSpec& spec, const FireKey& fire,
                                   const Result<ClaimOutcome>& out, bool catch_up) {
    // Events of a catch-up's claim say so (SchedulerEvent::catch_up).
    auto emit = [&](SchedulerEvent::Kind kind, std::string detail) {
      if (!options_.observer) return;
      SchedulerEvent ev = MakeEvent(kind, fire);
      ev.detail = std::move(detail);
      ev.catch_up = catch_up;
      Notify(ev);
    };
    if (!out.ok()) {
      emit(SchedulerEvent::Kind::kError, "claim: " + out.status().ToString());
      std::lock_guard<std::mutex> lock(mu_);
      KeepFailedLocked(fire);
      return std::nullopt;
    }
    switch (out->result) {
      case ClaimOutcome::Result::kClaimed:
        break;
      case ClaimOutcome::Result::kAlreadyClaimed:
        emit(SchedulerEvent::Kind::kClaimLost, "");
        return std::nullopt;
      case ClaimOutcome::Result::kOverlap:
        emit(SchedulerEvent::Kind::kSkipped, "overlap");
        return std::nullopt;
      case ClaimOutcome::Result::kPaused:
        emit(SchedulerEvent::Kind::kSkipped, "paused");
        return std::nullopt;
      case ClaimOutcome::Result::kTooEarly: {
        // Our clock is ahead of the backend's: try again when the backend reaches the instant.
        emit(SchedulerEvent::Kind::kSkipped, "early-guard");
        const Duration wait =
            std::max(Duration(10), fire.scheduled_at - options_.skew_tolerance - out->backend_now);
        std::lock_guard<std::mutex> lock(mu_);
        timers_.push(Timer{Now() + wait, TimerKind::kClaimRetry, 0, fire});
        wake_ = true;
        cv_.notify_all();
        return std::nullopt;
      }
    }
    const Claim claim = *out->claim;
    for (const FireKey& old : out->replaced) CancelLocalRun(old, StopReason::kReplaced);
    if (options_.observer) {
      SchedulerEvent ev = MakeEvent(SchedulerEvent::Kind::kClaimed, fire);
      ev.attempt = claim.attempt;
      ev.fencing_token = claim.fencing_token;
      ev.duration = ev.at - fire.scheduled_at;  // lateness
      ev.catch_up = catch_up;
      Notify(ev);
    }
    if (options_.admit) {
      if (const std::string why = options_.admit(spec, claim); !why.empty()) {
        RunRecord skipped = BaseRecord(fire, claim);
        skipped.outcome = RunOutcome::kSkipped;
        skipped.skip_reason = why;
        skipped.finished_at = Now();
        if (Status s = coord_.Report(claim, skipped, true); !s.ok()) {
          Emit(SchedulerEvent::Kind::kError, fire, "report: " + s.ToString());
        }
        Emit(SchedulerEvent::Kind::kSkipped, fire, why.substr(0, why.find(':')));
        return std::nullopt;
      }
    }
    return claim;
  }

  // The owner's on-time fires of one instant (or a few due together), claimed in one backend
  // call (Coordinator::ClaimMany); each claimed fire then runs as its own task.
  // A batch that waited past the takeover window for a worker (the node is overloaded: more
  // fires are due than the backend claims) is no longer on time: its fires go to their jobs'
  // failed claims, which housekeeping hands to the misfire policy, as a late takeover's do.
  void ClaimBatch(std::vector<std::pair<SpecPtr, FireKey>> batch) {
    if (Stopping()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Instant late = Now() - TakeoverWindowLocked();
      std::erase_if(batch, [&](const std::pair<SpecPtr, FireKey>& f) {
        if (f.second.scheduled_at >= late) return false;
        KeepFailedLocked(f.second);
        return true;
      });
    }
    if (batch.empty()) return;
    std::vector<ClaimRequest> reqs;
    reqs.reserve(batch.size());
    for (const auto& [spec, fire] : batch) reqs.push_back(RequestFor(*spec, fire));
    const Duration sent = clock_.SteadyNow();
    std::vector<Result<ClaimOutcome>> outs = coord_.ClaimMany(reqs);
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& [spec, fire] = batch[i];
      const Result<ClaimOutcome> out =
          i < outs.size() ? std::move(outs[i]) : Result<ClaimOutcome>(InternalError("no answer"));
      if (std::optional<Claim> won = AcceptClaim(*spec, fire, out, false)) {
        StartClaimed(spec, *won, sent);
      }
    }
  }

  // Runs a claimed fire on a worker, at its instant (a fire claimed ahead waits for it in
  // start_at_). Until its run starts it is listed in unstarted_: a graceful stop starts it too
  // (the claim is this node's; no other node may run the fire), and one the stop could not start
  // within shutdown_grace is recorded cancelled and its lease released, not left to expire.
  void StartClaimed(const SpecPtr& spec, const Claim& claim, Duration sent) {
    {
      std::lock_guard<std::mutex> lock(wd_mu_);
      ++starting_;
    }
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = ++unstarted_seq_;
    unstarted_.emplace(id, Unstarted{spec, claim, sent});
    if (claim.fire.scheduled_at <= Now()) {
      SubmitStartLocked(id);
      return;
    }
    start_at_.emplace(claim.fire.scheduled_at, id);
    if (start_at_.top().second == id) {  // earlier than what the loop waits for: wake it
      wake_ = true;
      cv_.notify_all();
    }
  }

  // REQUIRES: mu_ held.
  void SubmitStartLocked(uint64_t id) {
    pool_->Submit(
        [this, id] {
          std::optional<Unstarted> u;
          {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = unstarted_.find(id);
            if (it == unstarted_.end()) return;  // recorded cancelled by Stop
            u = std::move(it->second);
            unstarted_.erase(it);
          }
          RunFire(u->spec, u->claim.fire, u->claim, u->sent);
          std::lock_guard<std::mutex> lock(wd_mu_);
          if (--starting_ == 0) wd_cv_.notify_all();
        },
        kRunLane);
  }

  // `catch_up`: a missed fire run per `misfire` (its claim's events say so: catch_up).
  // `report_inline` (and for a catch-up): the final report is sent by this call before it returns
  // (a queue worker acknowledges the fire after it); otherwise it is a task of its own.
  void RunFire(const SpecPtr& job, const FireKey& fire, std::optional<Claim> resumed,
               Duration claim_sent, bool catch_up = false, bool report_inline = false,
               const std::string& cause = "") {
    Claim claim;
    if (resumed) {
      // A claim this node holds already runs also during a graceful stop (which waits for it).
      claim = *resumed;
    } else {
      if (Stopping()) return;
      claim_sent = clock_.SteadyNow();
      ClaimRequest req = RequestFor(*job, fire);
      req.cause = cause;  // the running record says why from the start (a backfill)
      std::optional<Claim> won = AcceptClaim(*job, fire, coord_.Claim(req), catch_up);
      if (!won) return;
      if (fire.scheduled_at > Now()) {  // claimed ahead (or early, within skew_tolerance)
        StartClaimed(job, *won, claim_sent);
        return;
      }
      claim = *won;
    }
    if (options_.dispatch) {
      // Queue mode: a worker runs it (and renews and reports it from now on).
      if (Status d = options_.dispatch(*job, claim); !d.ok()) {
        Emit(SchedulerEvent::Kind::kError, fire, "dispatch: " + d.ToString());
        (void)coord_.Report(
            claim, NotRunRecord(claim, RunOutcome::kFailed, "dispatch: " + d.message()), true);
      }
      return;
    }
    // Kill a self-fenced process before the lease can end (the job's shared definition is copied
    // only when the cap changes it).
    std::optional<JobSpec> capped;
    if (job->kill_grace > margin_ / 2) {
      capped.emplace(*job);
      capped->kill_grace = margin_ / 2;
    }
    const JobSpec& spec = capped ? *capped : *job;

    auto run = std::make_shared<ActiveRun>();
    run->claim = claim;
    run->last_ok_sent = claim_sent;
    RegisterRun(run);
    AdjustRunning(fire.job_id, +1, false);
    RunOutcome final_outcome = RunOutcome::kRunning;
    while (true) {
      const Claim current = CurrentClaim(*run);
      Duration took{0};
      std::string traceparent;
      RunRecord rec = Attempt(spec, fire, current, *run, took, traceparent);
      bool retry;
      Claim reporting;
      {
        std::lock_guard<std::mutex> lock(wd_mu_);
        const StopReason reason = run->reason;
        const bool fenced = reason == StopReason::kLeaseLost || reason == StopReason::kSelfFenced ||
                            reason == StopReason::kReplaced;
        retry = !fenced && reason != StopReason::kShutdown &&
                (rec.outcome == RunOutcome::kFailed || rec.outcome == RunOutcome::kTimedOut) &&
                current.attempt <= spec.retries && !Stopping();
        if (!retry) run->reporting = true;
        reporting = run->claim;
      }
      if (!retry) {
        // The final report is not sent by this worker: it joins the reports queue, sent
        // together by a task queued behind the fires already waiting for a worker (QueueReport),
        // so a worker that ran an attempt does not hold back the start of the next fire. The run
        // stays registered, its lease renewed, until its report is in (EndReported).
        auto done = std::make_shared<FinishedAttempt>(FinishedAttempt{
            job, fire, run, current, reporting, std::move(rec), took, std::move(traceparent)});
        // Catch-up runs are reported inline: they go one after another (ApplyMisfirePolicyLocked).
        if (report_inline || catch_up) {
          FinishRun(*done);
        } else {
          QueueReport(std::move(done));
        }
        return;
      }
      Status reported = ReportWhileHeld(*run, reporting, rec, false);
      MarkRan(fire.job_id);
      AnnounceFinished(fire, current, rec, took, traceparent);
      final_outcome = rec.outcome;
      if (!reported.ok()) {
        Emit(SchedulerEvent::Kind::kError, fire, "report: " + reported.ToString());
        break;
      }
      // Full jitter: uniform in [0, min(cap, backoff * 2^(attempt-1))].
      const Duration cap = std::min<Duration>(
          kMaxRetryBackoff, spec.retry_backoff * (int64_t{1} << std::min(current.attempt - 1, 20)));
      const Duration delay = Duration(RandomBelow(cap.count() + 1));
      SchedulerEvent ev = MakeEvent(SchedulerEvent::Kind::kRetryScheduled, fire);
      ev.attempt = current.attempt + 1;
      ev.duration = delay;
      Notify(ev);
      {
        std::unique_lock<std::mutex> lock(mu_);
        clock_.WaitFor(lock, cv_, delay, [&] { return stopping_.load(); });
      }
      Result<Claim> next = coord_.NextAttempt(CurrentClaim(*run), options_.lease_ttl);
      if (!next.ok()) {
        Emit(SchedulerEvent::Kind::kError, fire, "next attempt: " + next.status().ToString());
        break;
      }
      next->cause = CurrentClaim(*run).cause;  // the retries of a rerun are the rerun's too
      {
        std::lock_guard<std::mutex> lock(wd_mu_);
        run->claim = *next;
        run->reason = StopReason::kNone;
        run->timeout_at.reset();
      }
      if (Stopping()) {
        // Shutdown during the backoff: the retry is recorded as cancelled, the lease released.
        (void)coord_.Report(
            *next,
            NotRunRecord(*next, RunOutcome::kCancelled,
                         std::string(ReasonText(StopReason::kShutdown)) + " before the retry"),
            true);
        break;
      }
    }
    EndRun(*job, fire, run, final_outcome);
  }

  // A run's last attempt, ended, and the claim its report goes under.
  struct FinishedAttempt {
    SpecPtr job;
    FireKey fire;
    std::shared_ptr<ActiveRun> run;
    Claim attempt;
    Claim reporting;
    RunRecord rec;
    Duration took;
    std::string traceparent;
  };

  // Sends the final report of a run (while its lease holds), then ends the run.
  void FinishRun(FinishedAttempt& a) {
    EndReported(a, ReportWhileHeld(*a.run, a.reporting, a.rec, true));
  }

  // Once its final report is answered: announces the run's end and ends it.
  void EndReported(FinishedAttempt& a, const Status& reported) {
    AnnounceFinished(a.fire, a.attempt, a.rec, a.took, a.traceparent);
    if (!reported.ok())
      Emit(SchedulerEvent::Kind::kError, a.fire, "report: " + reported.ToString());
    EndRun(*a.job, a.fire, a.run, a.rec.outcome);
  }

  // Final reports go to the backend together (Coordinator::ReportMany: one script call per
  // chunk on Redis): the first report queued while no drain is pending queues one drain task in
  // the run lane, behind the fires already waiting to start; the drain sends every report queued
  // by then in one call, and again while more come. No worker waits for its own report's answer
  // (a wake-up per report), and the fires that end together are reported together.
  void QueueReport(std::shared_ptr<FinishedAttempt> done) {
    {
      std::lock_guard<std::mutex> lock(reports_mu_);
      reports_.push_back(std::move(done));
      if (report_drain_queued_) return;
      report_drain_queued_ = true;
    }
    // A drain dropped by a stopped pool would strand the queue: this caller drains instead.
    if (!pool_->Submit([this] { DrainReports(); }, kRunLane, /*kept=*/true)) DrainReports();
  }

  void DrainReports() {
    while (true) {
      std::vector<std::shared_ptr<FinishedAttempt>> batch;
      {
        std::lock_guard<std::mutex> lock(reports_mu_);
        if (reports_.empty()) {
          report_drain_queued_ = false;
          return;
        }
        const size_t n = std::min(reports_.size(), kReportBatch);
        batch.assign(std::make_move_iterator(reports_.begin()),
                     std::make_move_iterator(reports_.begin() + static_cast<ptrdiff_t>(n)));
        reports_.erase(reports_.begin(), reports_.begin() + static_cast<ptrdiff_t>(n));
      }
      std::vector<ReportRequest> reqs;
      reqs.reserve(batch.size());
      for (const auto& a : batch) reqs.push_back({&a->reporting, &a->rec, true});
      const std::vector<Status> out = coord_.ReportMany(reqs);
      for (size_t i = 0; i < batch.size(); ++i) {
        const Status s = i < out.size() ? out[i] : InternalError("report: no answer");
        // Unreachable backend: this report retries on its own, as long as its lease may still
        // hold (ReportWhileHeld), without holding back the others.
        if (s.code() == StatusCode::kUnavailable &&
            pool_->Submit([this, a = batch[i]] { FinishRun(*a); }, kRunLane, /*kept=*/true)) {
          continue;
        }
        EndReported(*batch[i], s);
      }
    }
  }

  // Announced once recorded, so whoever hears it can read it back from the backend.
  void AnnounceFinished(const FireKey& fire, const Claim& attempt, const RunRecord& rec,
                        Duration took, const std::string& traceparent) {
    if (!options_.observer) return;
    SchedulerEvent finished = MakeEvent(SchedulerEvent::Kind::kRunFinished, fire, attempt);
    finished.traceparent = traceparent;
    finished.outcome = rec.outcome;
    finished.duration = took;
    finished.detail = rec.error;
    Notify(finished);
  }

  void EndRun(const JobSpec& spec, const FireKey& fire, const std::shared_ptr<ActiveRun>& run,
              RunOutcome final_outcome) {
    UnregisterRun(run);
    // The last attempt's history mark (MarkRan) goes with the end of the run, one lock less.
    AdjustRunning(fire.job_id, -1, true);
    if ((final_outcome == RunOutcome::kFailed || final_outcome == RunOutcome::kTimedOut) &&
        spec.max_consecutive_failures > 0) {
      Breaker(spec);
    }
  }

  // The final record of an attempt that was claimed but never executed.
  RunRecord NotRunRecord(const Claim& claim, RunOutcome outcome, std::string error) {
    RunRecord rec = BaseRecord(claim.fire, claim);
    rec.outcome = outcome;
    rec.error = std::move(error);
    rec.finished_at = Now();
    return rec;
  }

  RunRecord BaseRecord(const FireKey& fire, const Claim& claim) {
    RunRecord rec;
    rec.run_id = fire.RunId();
    rec.job_id = fire.job_id;
    rec.scheduled_at = fire.scheduled_at;
    rec.shard = fire.shard;
    rec.shard_count = fire.shard_count;
    rec.attempt = claim.attempt;
    rec.fencing_token = claim.fencing_token;
    rec.node_id = options_.node_id;
    rec.started_at = Now();
    rec.cause = claim.cause;
    return rec;
  }

  // One attempt: run the executor with the watchdog watching; the record of how it ended.
  RunRecord Attempt(const JobSpec& spec, const FireKey& fire, const Claim& claim, ActiveRun& run,
                    Duration& took, std::string& traceparent) {
    RunRecord rec = BaseRecord(fire, claim);
    RunContext ctx;
    ctx.job_id = fire.job_id;
    ctx.run_id = rec.run_id;
    ctx.node_id = options_.node_id;
    ctx.scheduled_at = fire.scheduled_at;
    ctx.fencing_token = claim.fencing_token;
    ctx.attempt = claim.attempt;
    ctx.shard_index = fire.shard;
    ctx.shard_count = fire.shard_count;
    if (spec.timeout.count() > 0) ctx.deadline = rec.started_at + spec.timeout;
    // Attempt 1 follows a fresh claim of a fire that had no record, so it has no checkpoint:
    // only later attempts (retries, re-runs after a lost lease) read it (one round trip less).
    if (Result<std::optional<std::string>> cp =
            claim.attempt > 1 ? coord_.LoadCheckpoint(fire)
                              : Result<std::optional<std::string>>(std::optional<std::string>());
        cp.ok()) {
      ctx.checkpoint = *cp;
    }
    ctx.traceparent = TraceParent();
    if (!spec.params.empty()) ctx.params = spec.params;
    rec.params = spec.params;
    ctx.stop = run.stop.get_token();
    ctx.save_checkpoint = [this, &run](const std::string& value) {
      return coord_.SaveCheckpoint(CurrentClaim(run), value);
    };
    const std::shared_ptr<internal::LiveOutput::Tail> tail = live_output_.Open(claim);
    ctx.on_output = [&tail](std::string_view text) { tail->Append(text); };
    if (spec.timeout.count() > 0) {
      std::lock_guard<std::mutex> lock(wd_mu_);
      run.timeout_at = clock_.SteadyNow() + spec.timeout;
      WakeWatchdogLocked(*run.timeout_at);
    }
    if (options_.observer) {
      SchedulerEvent started = MakeEvent(SchedulerEvent::Kind::kRunStarted, fire, claim);
      started.traceparent = ctx.traceparent;
      started.duration = started.at - fire.scheduled_at;  // lateness
      Notify(started);
    }
    traceparent = ctx.traceparent;
    const Duration began = clock_.SteadyNow();
    ExecResult r = exec_.Execute(spec, ctx);
    took = clock_.SteadyNow() - began;
    live_output_.Close(tail);
    rec.finished_at = Now();
    rec.exit_code = r.exit_code;
    rec.output = r.output.empty() ? tail->Contents() : std::move(r.output);
    rec.error = std::move(r.error);
    rec.outcome = r.outcome;
    StopReason reason;
    {
      std::lock_guard<std::mutex> lock(wd_mu_);
      reason = run.reason;
      run.timeout_at.reset();
    }
    if (reason != StopReason::kNone && rec.outcome != RunOutcome::kSucceeded) {
      rec.outcome = reason == StopReason::kTimeout ? RunOutcome::kTimedOut : RunOutcome::kCancelled;
      rec.error = std::string(ReasonText(reason)) + (rec.error.empty() ? "" : ": " + rec.error);
    }
    return rec;
  }

  void Breaker(const JobSpec& spec) {
    Result<JobState> state = coord_.GetJobState(spec.id);
    if (!state.ok() || state->paused ||
        state->consecutive_failures < spec.max_consecutive_failures) {
      return;
    }
    if (coord_.SetPaused(spec.id, true, "max_consecutive_failures").ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = jobs_.find(spec.id); it != jobs_.end()) {
          SetPausedLocked(it->second, NextStateSeqLocked(), true, "max_consecutive_failures");
        }
      }
      SchedulerEvent ev = MakeEvent(SchedulerEvent::Kind::kAutoPaused, FireKey{spec.id, {}, 0, 1});
      ev.detail = "paused after " + std::to_string(state->consecutive_failures) +
                  " consecutive failures (max_consecutive_failures = " +
                  std::to_string(spec.max_consecutive_failures) + ")";
      Notify(ev);
    }
  }

  // ----------------------------------------------------------------------------- watchdog --
  // REQUIRES: wd_mu_ held. Makes the watchdog recompute its next deadline.
  void WakeWatchdogLocked() {
    ++wd_version_;
    wd_cv_.notify_all();
  }
  // REQUIRES: wd_mu_ held. A run got the steady deadline `due`: the watchdog recomputes only when
  // that is before the one it sleeps until (a fire's runs register in bursts: waking it for each
  // would cost a thread switch and a scan of every run, per run).
  void WakeWatchdogLocked(Duration due) {
    if (due < wd_due_) WakeWatchdogLocked();
  }

  void RegisterRun(const std::shared_ptr<ActiveRun>& run) {
    std::lock_guard<std::mutex> lock(wd_mu_);
    run->next_renew = run->last_ok_sent + options_.lease_ttl / 3;
    active_[run.get()] = run;
    if (cancel_all_) {  // claimed while a shutdown was cancelling runs
      run->reason = StopReason::kShutdown;
      run->stop.request_stop();
    }
    WakeWatchdogLocked(std::min(run->next_renew, FenceDeadline(*run)));
  }

  void UnregisterRun(const std::shared_ptr<ActiveRun>& run) {
    std::lock_guard<std::mutex> lock(wd_mu_);
    active_.erase(run.get());
    // A removed run moves no deadline earlier; only a graceful stop waits for the last one.
    if (active_.empty()) wd_cv_.notify_all();
  }

  Claim CurrentClaim(const ActiveRun& run) {
    std::lock_guard<std::mutex> lock(wd_mu_);
    return run.claim;
  }

  void CancelLocalRun(const FireKey& fire, StopReason reason) {
    std::lock_guard<std::mutex> lock(wd_mu_);
    for (auto& [key, run] : active_) {
      if (run->claim.fire == fire && run->reason == StopReason::kNone) {
        run->reason = reason;
        run->stop.request_stop();
      }
    }
  }

  // Watches every run's deadlines on the monotonic clock: self-fences at ttl - margin after the
  // last successful renewal, enforces timeouts, and hands due renewals to the renewer thread.
  // It never calls the backend itself, so a renewal blocked on a dead connection cannot delay a
  // self-fence (docs/reliability.md F5).
  void Watchdog() {
    std::unique_lock<std::mutex> lock(wd_mu_);
    while (!wd_stop_) {
      Duration due = Duration::max() / 2;
      // A run whose final report is under way has nothing left to stop: it is neither renewed
      // nor self-fenced (the backend fences the report itself).
      for (const auto& [key, run] : active_) {
        if (!run->lost && !run->reporting) {
          due = std::min(due, FenceDeadline(*run));
          if (!run->renewing) due = std::min(due, run->next_renew);
        }
        if (run->timeout_at && run->reason == StopReason::kNone)
          due = std::min(due, *run->timeout_at);
      }
      if (due > clock_.SteadyNow()) {
        const uint64_t seen = wd_version_;
        wd_due_ = due;
        clock_.WaitUntilSteady(lock, wd_cv_, due, [&] { return wd_stop_ || wd_version_ != seen; });
        // Awake (the lock may be let go below): whatever changes is seen by the next scan.
        wd_due_ = Duration::min();
        if (wd_stop_) return;
      }
      const Duration now = clock_.SteadyNow();
      std::vector<FireKey> fenced;
      bool queued = false;
      for (auto& [key, run] : active_) {
        if (run->timeout_at && now >= *run->timeout_at && run->reason == StopReason::kNone) {
          run->reason = StopReason::kTimeout;
          run->stop.request_stop();
        }
        if (!run->lost && !run->reporting && now >= FenceDeadline(*run)) {
          run->lost = true;
          if (run->reason == StopReason::kNone || run->reason == StopReason::kTimeout) {
            run->reason = StopReason::kSelfFenced;
          }
          run->stop.request_stop();
          fenced.push_back(run->claim.fire);
        }
        if (!run->lost && !run->renewing && !run->reporting && now >= run->next_renew) {
          run->renewing = true;
          renew_queue_.push_back(run);
          queued = true;
        }
      }
      if (queued) renew_cv_.notify_all();
      if (!fenced.empty()) {
        lock.unlock();
        for (const FireKey& f : fenced) Emit(SchedulerEvent::Kind::kSelfFenced, f, "");
        lock.lock();
      }
    }
  }

  // Renews the leases the watchdog queued, one at a time (a call may block up to the backend's
  // timeouts), and records the outcome for the watchdog.
  void Renewer() {
    std::unique_lock<std::mutex> lock(wd_mu_);
    while (true) {
      renew_cv_.wait(lock, [&] { return wd_stop_ || !renew_queue_.empty(); });
      if (wd_stop_) return;
      std::shared_ptr<ActiveRun> run = std::move(renew_queue_.front());
      renew_queue_.pop_front();
      Claim claim = run->claim;
      lock.unlock();
      const Duration sent = clock_.SteadyNow();
      Status s = coord_.Renew(claim, options_.lease_ttl);
      lock.lock();
      run->renewing = false;
      WakeWatchdogLocked();
      if (run->claim.fencing_token != claim.fencing_token || run->lost || run->reporting) continue;
      if (s.ok()) {
        run->claim.lease_expires_at = claim.lease_expires_at;
        run->last_ok_sent = sent;
        run->next_renew = sent + options_.lease_ttl / 3;
      } else if (s.code() == StatusCode::kLeaseLost) {
        run->lost = true;
        if (run->reason == StopReason::kNone) run->reason = StopReason::kLeaseLost;
        run->stop.request_stop();
      } else {
        // Backend trouble: try again soon; the fence deadline still applies.
        run->next_renew = clock_.SteadyNow() +
                          std::min<Duration>(options_.lease_ttl / 10, std::chrono::seconds(1));
      }
      lock.unlock();
      Emit(s.ok() ? SchedulerEvent::Kind::kLeaseRenewed : SchedulerEvent::Kind::kLeaseRenewFailed,
           claim.fire, s.ok() ? "" : s.ToString());
      lock.lock();
    }
  }

  Duration FenceDeadline(const ActiveRun& run) const {
    return run.last_ok_sent + options_.lease_ttl - margin_;
  }

  // Reports `rec`, sending it again after a transient backend error (Unavailable) while the
  // claim may still hold (until the run's self-fence deadline), 100 ms doubling to 1 s apart: a
  // run that finished during a short outage is recorded with its outcome instead of being
  // resolved as lost later (and, with on_lost = "rerun", run again). The backend still checks
  // the lease; a retry of a report that was applied after all is refused (the fire is closed)
  // and logged as an error, never recorded twice.
  Status ReportWhileHeld(const ActiveRun& run, const Claim& claim, const RunRecord& rec,
                         bool final) {
    Duration backoff = std::chrono::milliseconds(100);
    while (true) {
      Status s = coord_.Report(claim, rec, final);
      if (s.ok() || s.code() != StatusCode::kUnavailable) return s;
      Duration fence_at;
      {
        std::lock_guard<std::mutex> lock(wd_mu_);
        fence_at = FenceDeadline(run);
      }
      if (clock_.SteadyNow() + backoff >= fence_at || Stopping()) return s;
      {
        std::unique_lock<std::mutex> lock(mu_);
        clock_.WaitFor(lock, cv_, backoff, [&] { return stopping_.load(); });
      }
      backoff = std::min<Duration>(backoff * 2, std::chrono::seconds(1));
    }
  }

  // ------------------------------------------------------------------------- housekeeping --
  void Housekeeping() {
    // One pass at a time, even if a slow backend makes a pass longer than the interval: a pass
    // due while one runs is skipped (the next comes an interval later). Not coalesced like the
    // state poll: a pass right after a slow one (a backend outage) would retry the outage's
    // failed claims sooner; that once let an older fire be claimed on time after a newer one,
    // which RetryFailedClaims now prevents itself (a fire overtaken by a newer claim is a
    // misfire), but the skipping is what every chaos and CI run since has exercised.
    std::unique_lock<std::mutex> one(housekeeping_mu_, std::try_to_lock);
    if (!one.owns_lock()) return;
    const Duration skew = MeasureSkew();
    NodeInfo node{options_.node_id, options_.host, options_.version, started_at_, {},
                  running(),        skew};
    if (!options_.heartbeat) {
      // A queue worker: no heartbeat, no live set, no lost-run scan (it knows no jobs).
      return;
    }
    if (Status s = coord_.Heartbeat(node, options_.housekeeping_interval * 3); !s.ok()) {
      Emit(SchedulerEvent::Kind::kError, FireKey{}, "heartbeat: " + s.ToString());
    }
    // The live set that sharded ownership ranks (kept when the backend cannot be read).
    if (Result<std::vector<NodeInfo>> nodes = coord_.ListNodes(); nodes.ok()) {
      std::vector<std::string> ids;
      for (const NodeInfo& n : *nodes) ids.push_back(n.node_id);
      std::lock_guard<std::mutex> lock(mu_);
      live_nodes_ = std::move(ids);
      const Duration steady = clock_.SteadyNow();
      if (live_nodes_.size() >= live_peak_ || steady - live_peak_at_ > std::chrono::minutes(1)) {
        live_peak_ = live_nodes_.size();
        live_peak_at_ = steady;
      }
    }
    ResolveLostRuns();
    RetryFailedClaims();
    // Pruning is heavier than the rest: every job about once a minute, spread over the passes
    // (a slice of the jobs per pass), so a node with many jobs never prunes them all at once.
    PruneHistorySlice();
  }

  void ResolveLostRuns() {
    Result<std::vector<ExpiredFire>> expired = coord_.ListExpired(100);
    if (!expired.ok()) return;
    for (const ExpiredFire& e : *expired) {
      SpecPtr spec = Spec(e.fire.job_id);
      if (!spec) continue;  // a node that knows the job resolves it
      const Duration sent = clock_.SteadyNow();
      Result<std::optional<Claim>> r =
          coord_.ResolveLost(e, options_.node_id, spec->on_lost, options_.lease_ttl);
      if (!r.ok()) continue;  // another node got there first
      SchedulerEvent ev = MakeEvent(SchedulerEvent::Kind::kLostRun, e.fire);
      ev.attempt = e.attempt;
      ev.fencing_token = e.fencing_token;
      ev.detail = std::string(ToString(spec->on_lost)) + " (holder " + e.node_id + ")";
      Notify(ev);
      if (*r) {
        StartClaimed(spec, **r, sent);
      }
    }
  }

  // Re-reads pause states when the backend's JobsVersion changed; announces it (jobs_reloaded).
  // One pass at a time; a slow backend simply makes passes rarer.
  void RefreshJobStates() {
    state_polls_.Run([this] { RefreshJobStatesPass(); });
  }
  void RefreshJobStatesPass() {
    Result<int64_t> version = coord_.JobsVersion();
    if (!version.ok() || *version == jobs_version_) return;
    jobs_version_ = *version;
    {
      // The change may be an operator's cancel (Coordinator::CancelFire), which revoked a lease:
      // every lease held here is renewed now, so the holder of a revoked one learns it (LeaseLost
      // stops its run) within a state poll and a renewal instead of at its next renewal.
      std::lock_guard<std::mutex> lock(wd_mu_);
      const Duration now = clock_.SteadyNow();
      for (auto& [key, run] : active_) run->next_renew = std::min(run->next_renew, now);
      WakeWatchdogLocked();
    }
    std::vector<std::string> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [id, e] : jobs_) ids.push_back(id);
    }
    for (size_t from = 0; from < ids.size(); from += kStateBatch) {
      const std::vector<std::string> chunk(
          ids.begin() + static_cast<std::ptrdiff_t>(from),
          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), from + kStateBatch)));
      uint32_t seq;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seq = NextStateSeqLocked();
      }
      Result<std::vector<JobState>> st = coord_.GetJobStates(chunk);
      if (!st.ok() || st->size() != chunk.size()) continue;
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < chunk.size(); ++i) {
        if (auto it = jobs_.find(chunk[i]); it != jobs_.end()) {
          SetPausedLocked(it->second, seq, (*st)[i].paused, (*st)[i].pause_reason);
        }
      }
    }
    Emit(SchedulerEvent::Kind::kJobsReloaded, FireKey{},
         "jobs version " + std::to_string(*version));
  }

  // Fires whose claim failed on a backend error go through the misfire policy again, now that
  // the backend may be back.
  void RetryFailedClaims() {
    std::lock_guard<std::mutex> lock(mu_);
    const Instant now = Now();
    for (auto& [id, e] : jobs_) {
      if (!e.backlog) continue;
      std::set<Instant>& unrecorded = e.backlog->unrecorded;
      std::set<Instant>& failed = e.backlog->failed;
      if (!unrecorded.empty()) {
        SubmitSkipRecords(e.spec, std::vector<Instant>(unrecorded.begin(), unrecorded.end()));
        unrecorded.clear();
      }
      if (failed.empty()) {
        e.backlog.reset();
        continue;
      }
      // The misfire decision for a job's failed claims is its owner's alone (nodes come back
      // from an outage at different moments, each with its own failed set: one decider keeps
      // "once" once). The others keep theirs for when they become the owner.
      if (options_.takeover_delay > Duration(0) &&
          internal::RendezvousRank(live_nodes_, options_.node_id, id, 0) != 0) {
        continue;
      }
      // A failed fire still inside claim_grace is not a misfire yet: it is claimed again, as on
      // time, unless a newer fire of the job was handed out already (claimed ahead, or the job
      // fires more often than claim_grace): an on-time claim now would give the older fire a
      // higher fencing token than the newer one, so it is a misfire. The others form the
      // outage's batch, decided per `misfire` once it is closed: while the fire after the
      // batch's latest is still inside its claim window (a peer or a later pass may claim it, or
      // it fails too and becomes the batch's latest), which fire is "the latest missed" is not
      // known yet.
      const Duration window = TakeoverWindowLocked();
      std::vector<Instant> missed;
      std::vector<Instant> on_time;
      for (Instant f : failed) {
        const std::optional<Instant> newer = NextLocked(e, f);
        const bool overtaken = newer && *newer <= e.cursor;
        (now - f < options_.claim_grace && !overtaken ? on_time : missed).push_back(f);
      }
      if (!missed.empty()) {
        const std::optional<Instant> after = e.expr->Next(missed.back());
        if (after && *after <= now && now < *after + window &&
            !std::binary_search(on_time.begin(), on_time.end(), *after)) {
          continue;  // all kept as failed, for a later pass
        }
      }
      e.backlog.reset();
      ApplyMisfirePolicyLocked(e, missed, now);
      for (Instant f : on_time) SubmitShards(e.spec, f);
    }
  }

  // A job whose history grew here since it was last pruned.
  static void CountRunLocked(JobEntry& e) {
    if (e.runs_since_prune < UINT16_MAX) ++e.runs_since_prune;
  }

  void MarkRan(const std::string& job_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(job_id); it != jobs_.end()) CountRunLocked(it->second);
  }

  // Prunes the jobs whose history this node added a quarter of their history_keep to since their
  // last pruning, each within a minute (each node prunes what it wrote, so this costs in
  // proportion to the runs, not to the number of jobs); and every job once an hour, for max_age of
  // jobs that stopped running. Both walk the jobs in slices, one per pass: the hourly sweep of a
  // million jobs is spread over the hour (about 1,400 a pass), not one call per job in the node's
  // first minute.
  void PruneHistorySlice() {
    std::vector<SpecPtr> specs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.empty()) return;
      const Duration interval = std::max(options_.housekeeping_interval, Duration(1));
      // The jobs a pass visits so that every job is visited once per `period` (at least 1).
      auto slice_of = [&](Duration period) {
        const int64_t passes = std::max<int64_t>(1, period / interval);
        return std::min(
            jobs_.size(),
            static_cast<size_t>((static_cast<int64_t>(jobs_.size()) + passes - 1) / passes));
      };
      auto it = jobs_.upper_bound(prune_cursor_);
      for (size_t n = 0, slice = slice_of(std::chrono::minutes(1)); n < slice; ++n, ++it) {
        if (it == jobs_.end()) it = jobs_.begin();
        // A job is pruned once its history may have grown by a quarter of what it keeps (at
        // least one run): a job that keeps 100 fires every 25 of its runs, not after each.
        if (it->second.runs_since_prune >= std::max(1, it->second.spec->history_keep / 4)) {
          specs.push_back(it->second.spec);
          it->second.runs_since_prune = 0;
        }
        prune_cursor_ = it->first;
      }
      it = jobs_.upper_bound(sweep_cursor_);
      for (size_t n = 0, slice = slice_of(std::chrono::hours(1)); n < slice; ++n, ++it) {
        if (it == jobs_.end()) it = jobs_.begin();
        specs.push_back(it->second.spec);
        sweep_cursor_ = it->first;
      }
    }
    for (const SpecPtr& s : specs) {
      (void)coord_.PruneHistory(s->id, s->history_keep, s->history_max_age);
    }
  }

  // ---------------------------------------------------------------------------- controls --
  // A job's paused state is read by the catch-up pass, the state poll, the breaker, and changed
  // by Pause and Resume, on different threads. Each read or change takes a sequence number
  // (NextStateSeqLocked) before it goes to the backend, or right after a local change is
  // written; a state is applied only if its number is newer than the job's, so a read answered
  // late cannot undo a newer one. REQUIRES: mu_ held.
  uint32_t NextStateSeqLocked() { return ++state_seq_; }
  static void SetPausedLocked(JobEntry& e, uint32_t seq, bool paused, std::string reason) {
    if (seq <= e.state_seq) return;
    e.state_seq = seq;
    e.paused = paused;
    e.pause_reason = std::move(reason);
  }

  Status Pause(const std::string& id, const std::string& reason) {
    if (!Spec(id)) return NotFoundError("job \"" + id + "\" is not defined");
    GNOMON_RETURN_IF_ERROR(coord_.SetPaused(id, true, reason));
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      SetPausedLocked(it->second, NextStateSeqLocked(), true, reason);
    }
    return Status::Ok();
  }

  Status Resume(const std::string& id) {
    if (!Spec(id)) return NotFoundError("job \"" + id + "\" is not defined");
    GNOMON_RETURN_IF_ERROR(coord_.SetPaused(id, false, ""));
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      SetPausedLocked(it->second, NextStateSeqLocked(), false, "");
    }
    return Status::Ok();
  }

  Status RunClaim(const JobSpec& spec, const Claim& claim, Duration renew_sent,
                  std::function<void()> done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || stopping_) return FailedPreconditionError("scheduler is not running");
    }
    pool_->Submit(
        [this, spec = std::make_shared<const JobSpec>(spec), claim, renew_sent,
         done = std::move(done)] {
          RunFire(spec, claim.fire, claim, renew_sent, false, /*report_inline=*/true);
          if (done) done();
        },
        kRunLane);
    return Status::Ok();
  }

  // The job's definition with `params` merged over its default params (a copy; the fire runs
  // it), or as it is when there are none.
  Result<SpecPtr> WithParams(const std::string& id, const std::string& params) const {
    SpecPtr spec = Spec(id);
    if (!spec) return NotFoundError("job \"" + id + "\" is not defined");
    if (params.empty()) return spec;
    Result<std::string> merged = MergeParams(spec->params, params);
    if (!merged.ok()) return merged.status();
    auto with_params = std::make_shared<JobSpec>(*spec);
    with_params->params = std::move(*merged);
    return SpecPtr(std::move(with_params));
  }

  Result<int> Rerun(const FireKey& fire, const std::string& params, const std::string& cause) {
    Result<SpecPtr> spec = WithParams(fire.job_id, params);
    if (!spec.ok()) return spec.status();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || stopping_) return FailedPreconditionError("scheduler is not running");
    }
    const Duration sent = clock_.SteadyNow();
    Result<Claim> claim = coord_.RerunFire(fire, options_.node_id, options_.lease_ttl, cause);
    if (!claim.ok()) return claim.status();
    const int attempt = claim->attempt;
    if (!pool_->Submit(
            [this, spec = *spec, claim = *claim, sent] { RunFire(spec, claim.fire, claim, sent); },
            kRunLane)) {
      (void)coord_.Report(
          *claim,
          NotRunRecord(*claim, RunOutcome::kCancelled,
                       std::string(ReasonText(StopReason::kShutdown)) + " before the run started"),
          true);
      return FailedPreconditionError("scheduler is stopping");
    }
    return attempt;
  }

  // A backfill's fires, run oldest first by at most `lanes` pool tasks at a time; each task runs
  // one fire to its end, then queues the next (so a long backfill never holds a worker).
  struct BackfillQueue {
    SpecPtr spec;
    std::string cause;
    std::mutex mu;
    std::deque<FireKey> fires;  // guarded by mu
  };

  void BackfillNext(const std::shared_ptr<BackfillQueue>& q) {
    FireKey fire;
    {
      std::lock_guard<std::mutex> lock(q->mu);
      if (q->fires.empty() || Stopping()) return;
      fire = std::move(q->fires.front());
      q->fires.pop_front();
    }
    RunFire(q->spec, fire, std::nullopt, clock_.SteadyNow(), /*catch_up=*/false,
            /*report_inline=*/true, q->cause);
    pool_->Submit([this, q] { BackfillNext(q); }, kRunLane);
  }

  Result<BackfillPlan> Backfill(const std::string& id, Instant from, Instant until,
                                int max_concurrent, int max_fires, const std::string& cause) {
    if (max_concurrent < 1 || max_concurrent > options_.worker_threads) {
      return InvalidArgumentError("max_concurrent: " + std::to_string(max_concurrent) +
                                  " is out of range 1-" + std::to_string(options_.worker_threads));
    }
    if (!(from < until)) return InvalidArgumentError("from: must be before to");
    if (until > Now()) return InvalidArgumentError("to: is in the future (backfill past fires)");
    SpecPtr spec = Spec(id);
    std::shared_ptr<const CronExpr> expr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || stopping_) return FailedPreconditionError("scheduler is not running");
      if (auto it = jobs_.find(id); it != jobs_.end()) expr = it->second.expr;
    }
    if (!spec || !expr) return NotFoundError("job \"" + id + "\" is not defined");
    // The window's instants, counted up to a bound so that a window of years of seconds is
    // refused without being walked.
    constexpr int64_t kCountCap = 1000000;
    std::vector<Instant> instants;
    int64_t count = 0;
    for (std::optional<Instant> t = expr->Next(from - Duration(1));
         t && *t < until && count <= kCountCap; t = expr->Next(*t)) {
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
    Result<std::vector<bool>> recorded = coord_.FiresRecorded(keys);
    if (!recorded.ok()) return recorded.status();
    // Its fires may overlap one another (max_concurrent bounds them), not the job's own runs.
    auto copy = std::make_shared<JobSpec>(*spec);
    copy->overlap = OverlapPolicy::kAllow;
    auto q = std::make_shared<BackfillQueue>();
    q->spec = std::move(copy);
    q->cause = cause;
    {
      std::lock_guard<std::mutex> lock(q->mu);
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
    for (int i = 0; i < lanes; ++i) pool_->Submit([this, q] { BackfillNext(q); }, kRunLane);
    return plan;
  }

  Result<std::string> TriggerNow(const std::string& id, const std::string& params) {
    Result<SpecPtr> with_params = WithParams(id, params);
    if (!with_params.ok()) return with_params.status();
    SpecPtr spec = *with_params;
    std::shared_ptr<const CronExpr> expr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || stopping_) return FailedPreconditionError("scheduler is not running");
      if (auto it = jobs_.find(id); it != jobs_.end()) expr = it->second.expr;
    }
    Instant now = Now();
    // A trigger is a fire of its own: at an instant of the schedule it would be that scheduled
    // fire (the same run id, claimed once), so it takes the millisecond before (schedules have
    // whole seconds: no other scheduled instant is there; a later one would be claimed ahead).
    const Duration ms(1);
    if (expr && expr->Next(now - ms) == now) now = now - ms;
    SubmitShards(spec, now);
    return FireKey{id, now, 0, spec->shards}.RunId();
  }

  std::vector<JobView> Jobs() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<JobView> out;
    for (const auto& [id, e] : jobs_) out.push_back(View(e));
    return out;
  }

  std::optional<JobView> GetJob(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    return View(it->second);
  }

  int running() const {
    std::lock_guard<std::mutex> lock(wd_mu_);
    return static_cast<int>(active_.size());
  }

  std::vector<std::string> LiveNodes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_nodes_;
  }

 private:
  static JobView View(const JobEntry& e) {
    return JobView{*e.spec, e.expr, e.next, e.paused, e.pause_reason, e.running};
  }

  // The job's definition; null when it is not defined.
  SpecPtr Spec(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return nullptr;
    return it->second.spec;
  }

  bool Stopping() const { return stopping_.load(); }

  // Counts attempts running here; `ran`: also marks the job's history as grown (MarkRan).
  void AdjustRunning(const std::string& id, int delta, bool ran) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      it->second.running += delta;
      if (ran) CountRunLocked(it->second);
    }
  }

  int64_t RandomBelow(int64_t n) {
    std::lock_guard<std::mutex> lock(rng_mu_);
    return std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(0, n - 1))(rng_);
  }

  // "00-<trace id: 32 hex>-<span id: 16 hex>-01" (one per attempt: formatted by hand).
  std::string TraceParent() {
    uint64_t trace_hi, trace_lo, span;
    {
      std::lock_guard<std::mutex> lock(rng_mu_);
      trace_hi = rng_() | 1;
      trace_lo = rng_();
      span = rng_() | 1;
    }
    std::string out = "00-00000000000000000000000000000000-0000000000000000-01";
    auto hex = [&out](size_t at, uint64_t v) {
      for (int i = 15; i >= 0; --i, v >>= 4) out[at + i] = "0123456789abcdef"[v & 0xf];
    };
    hex(3, trace_hi);
    hex(19, trace_lo);
    hex(36, span);
    return out;
  }

  SchedulerEvent MakeEvent(SchedulerEvent::Kind kind, const FireKey& fire) {
    SchedulerEvent ev{};
    ev.kind = kind;
    ev.job_id = fire.job_id;
    ev.run_id = fire.job_id.empty() ? "" : fire.RunId();
    ev.scheduled_at = fire.scheduled_at;
    ev.at = Now();
    return ev;
  }
  SchedulerEvent MakeEvent(SchedulerEvent::Kind kind, const FireKey& fire, const Claim& claim) {
    SchedulerEvent ev = MakeEvent(kind, fire);
    ev.attempt = claim.attempt;
    ev.fencing_token = claim.fencing_token;
    return ev;
  }
  // Events are built only when someone listens (a run id is formatted for each).
  void Emit(SchedulerEvent::Kind kind, const FireKey& fire, std::string detail) {
    if (!options_.observer) return;
    SchedulerEvent ev = MakeEvent(kind, fire);
    ev.detail = std::move(detail);
    Notify(ev);
  }
  void Notify(const SchedulerEvent& ev) {
    if (options_.observer) options_.observer->OnEvent(ev);
  }

  const SchedulerOptions options_;
  Coordinator& coord_;
  Executor& exec_;
  Clock& clock_;
  const Duration margin_;
  const Duration ahead_;  // claim_ahead, capped

  std::atomic<int64_t> skew_ms_{0};  // node clock minus backend clock (MeasureSkew)
  mutable std::mutex mu_;            // jobs_, timers_, flags
  std::condition_variable cv_;
  std::map<std::string, JobEntry> jobs_;
  TimerHeap timers_;
  // NextLocked's last answers (guarded by mu_).
  struct NextMemo {
    std::shared_ptr<const CronExpr> expr;
    Instant after;
    std::optional<Instant> next;
  };
  std::array<NextMemo, 2> next_memo_;
  size_t next_memo_victim_ = 0;
  // HandleTimerLocked's fires of one timer, kept for their capacity (guarded by mu_).
  std::vector<Instant> missed_scratch_;
  std::vector<Instant> on_time_scratch_;
  std::vector<std::string> live_nodes_;  // guarded by mu_: node ids with a live heartbeat
  // Owned on-time fires waiting to be claimed together (guarded by mu_; Loop flushes them).
  std::vector<std::pair<SpecPtr, FireKey>> claim_batch_;
  static constexpr size_t kClaimBatch = 256;
  static constexpr size_t kStateBatch = 512;  // job states read per backend call
  size_t live_peak_ = 1;      // guarded by mu_: the largest live set of the last minute
  Duration live_peak_at_{0};  // guarded by mu_: steady time of that peak
  bool started_ = false;
  std::atomic<bool> stopping_{false};  // written under mu_ (a wait predicate), read anywhere
  bool wake_ = false;
  Instant started_at_;

  mutable std::mutex wd_mu_;  // active_ and every ActiveRun's fields
  std::condition_variable wd_cv_;
  std::map<ActiveRun*, std::shared_ptr<ActiveRun>> active_;
  bool wd_stop_ = false;
  std::condition_variable renew_cv_;
  std::deque<std::shared_ptr<ActiveRun>> renew_queue_;  // guarded by wd_mu_
  bool cancel_all_ = false;  // graceful stop reached its grace: every run is cancelled
  uint64_t wd_version_ = 0;
  // The steady deadline the watchdog sleeps until; Duration::min() while it is awake (wd_mu_).
  Duration wd_due_ = Duration::min();

  std::mutex rng_mu_;
  std::mt19937_64 rng_;

  std::mutex housekeeping_mu_;
  std::deque<std::vector<std::string>> catchup_queue_;  // job states to read (guarded by mu_)
  bool catchup_busy_ = false;  // a CatchUpStep is queued or running (guarded by mu_)
  internal::OnePassAtATime state_polls_;
  int64_t jobs_version_ = -1;  // used by one state poll pass at a time
  uint32_t state_seq_ = 0;     // the last job-state sequence number given (guarded by mu_)
  // Final reports waiting to be sent (QueueReport); a drain task is queued or running while
  // report_drain_queued_.
  static constexpr size_t kReportBatch = 128;
  std::mutex reports_mu_;
  std::deque<std::shared_ptr<FinishedAttempt>> reports_;  // guarded by reports_mu_
  bool report_drain_queued_ = false;                      // guarded by reports_mu_
  std::string prune_cursor_;  // the last job the minute's walk visited; guarded by mu_
  std::string sweep_cursor_;  // the last job the hourly sweep visited; guarded by mu_

  // Claimed fires whose run has not started (StartClaimed), by a sequence number (guarded by mu_).
  struct Unstarted {
    SpecPtr spec;
    Claim claim;
    Duration sent;  // steady: when the claim was sent (the lease counts from there)
  };
  std::unordered_map<uint64_t, Unstarted> unstarted_;
  uint64_t unstarted_seq_ = 0;
  // The ones claimed ahead, by instant (guarded by mu_; Loop hands each to a worker at its
  // instant).
  std::priority_queue<std::pair<Instant, uint64_t>, std::vector<std::pair<Instant, uint64_t>>,
                      std::greater<>>
      start_at_;
  int starting_ = 0;  // StartClaimed fires whose RunFire has not returned (guarded by wd_mu_)

  std::unique_ptr<internal::WorkerPool> pool_;
  static constexpr auto kRunLane = internal::WorkerPool::Lane::kRun;
  static constexpr auto kControlLane = internal::WorkerPool::Lane::kControl;
  static constexpr auto kClaimLane = internal::WorkerPool::Lane::kClaim;
  std::jthread loop_thread_;
  // What running attempts print, published to the backend every live_output_interval.
  internal::LiveOutput live_output_{coord_, clock_, options_.live_output_interval};
  std::jthread watchdog_thread_;
  std::jthread renewer_thread_;
};

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
