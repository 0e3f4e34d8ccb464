// JobTable: the jobs this scheduler knows: each one's definition, compiled schedule, cursor (the
// last fire handled), pause state, running count, and the fires waiting for the backend (failed
// claims, unwritten skip records); with the live node set that sharded ownership ranks.
//
// Its mutex, mu(), is the engine lock: it also guards the TimerLoop's heap, the
// ClaimDispatcher's batch and claimed-ahead fires and the MisfireHandler's catch-up queue, whose
// work reads and moves the jobs' cursors in the same step. Methods named ...Locked REQUIRE it;
// the others take it themselves.
//
// Threads: the loop thread (timers), pool workers (claims, catch-up, housekeeping, state poll,
// runs counting themselves) and API callers (Scheduler::AddJob, Pause, Jobs, ...).
//
// Jobs arrive compiled (CompileJob, which shares one expression per schedule and zone).
//
// Lock order: mu() before WorkerPool::mu_ (tasks are submitted under it). mu() is never held
// together with LeaseKeeper::mu_ or RunDriver's reports_mu_, and never across a backend or
// executor call.
#ifndef GNOMON_SRC_SCHEDULE_JOB_TABLE_H_
#define GNOMON_SRC_SCHEDULE_JOB_TABLE_H_

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gnomon/cron.h"
#include "src/schedule/engine_context.h"

namespace gnomon::internal {

// One job's entry. Guarded by JobTable::mu().
struct JobEntry {
  SpecPtr spec;
  std::shared_ptr<const CronExpr> expr;
  std::shared_ptr<const FireRules> rules;  // window, exclusions, jitter; null when none
  // Unique over the table's life: taken anew on every change (JobTable::InstallLocked,
  // RenewGenLocked), so a timer queued before it, or for an earlier job in the same slot, is
  // dropped (JobTable::AtLocked).
  uint64_t gen = 0;
  Instant cursor;  // fires at or before this were handled
  std::optional<Instant> next;
  bool paused = false;
  // Its catch-up state (start, or added after) is not read yet: the loop holds its fires
  // (MisfireHandler::HoldLocked).
  bool catchup_pending = false;
  std::string pause_reason;
  int running = 0;
  // Fires waiting for the backend (allocated only while there are some: a million jobs mostly
  // have none; JobTable::WaitingLocked allocates it and lists the job in BackloggedLocked).
  struct Backlog {
    std::set<Instant> failed;      // fires whose claim failed on a backend error (retried)
    std::set<Instant> retried;     // failed fires claimed again on time (once), until settled
    std::set<Instant> unrecorded;  // skipped fires whose record failed to be written (retried)
    std::set<Instant> unrecorded_excluded;  // the same, of excluded instants (record_excluded)
    bool parked = false;                    // listed in JobTable's parked set (ParkLocked)
  };
  std::unique_ptr<Backlog> backlog;
  // Attempts this node reported since the job's history was last pruned (capped).
  uint16_t runs_since_prune = 0;
  // The paused state above came from the state read (or local change) with this sequence
  // number: an older read, answered late, does not overwrite it (JobTable::SetPausedLocked).
  uint32_t state_seq = 0;
  // Its place in JobTable's slots: timers name their job by slot and generation, found without a
  // search of the table (JobTable::AtLocked).
  uint32_t slot = 0;
  // The catch-up pass covers the fires due up to here (claim_grace before the job was installed
  // or the scheduler started); the loop leaves them to it.
  Instant catchup_until;
};

class JobTable {
 public:
  static constexpr uint32_t kNoSlot = UINT32_MAX;  // no slot known
  explicit JobTable(EngineContext& ctx) : ctx_(ctx) {}
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  // The engine lock (see above).
  Mutex& mu() const GNOMON_RETURN_CAPABILITY(mu_) { return mu_; }

  // Installs or replaces a job; `inserted` says whether it is new. A new job starts at
  // FirstCursor: fires due within the grace are claimed, older ones are the misfire pass's
  // business; a changed schedule starts now. The caller queues its next fire.
  JobEntry& InstallLocked(const CompiledJob& job, bool& inserted) GNOMON_REQUIRES(mu_);
  // Where a job's cursor starts at `now` (installed, or the scheduler started): fires due within
  // claim_grace are still to be handled, so now - claim_grace - jitter (the loop leaves those due
  // before to the catch-up pass: JobEntry::catchup_until).
  Instant FirstCursor(const JobSpec& job, Instant now) const;
  // Drops every job whose id is not in `ids` (SetJobs).
  void RetainLocked(const std::set<std::string>& ids) GNOMON_REQUIRES(mu_);
  bool Remove(const std::string& id) GNOMON_EXCLUDES(mu_);
  // Null when not defined.
  JobEntry* FindLocked(const std::string& id) GNOMON_REQUIRES(mu_);
  const JobEntry* FindLocked(const std::string& id) const GNOMON_REQUIRES(mu_);
  // The entry in `slot` if it is still at generation `gen` (a timer's job, as queued); null when
  // the job changed, was removed, or its slot went to another job since. No search: a timer is
  // due for some job every few microseconds at a million jobs, and a search of the table per
  // timer was a quarter of a node's CPU (docs/benchmarks.md "Scale").
  JobEntry* AtLocked(uint32_t slot, uint64_t gen) GNOMON_REQUIRES(mu_);
  // Gives the entry a new generation: the timers queued for it are dropped.
  void RenewGenLocked(JobEntry& e) GNOMON_REQUIRES(mu_) { e.gen = ++gen_seq_; }
  std::map<std::string, JobEntry>& EntriesLocked() GNOMON_REQUIRES(mu_) { return jobs_; }
  // The job's definition; null when it is not defined.
  SpecPtr Spec(const std::string& id) const GNOMON_EXCLUDES(mu_);
  // The job's definition with `params` merged over its default params (a copy; the fire runs
  // it), or as it is when there are none. NotFound when it is not defined.
  Result<SpecPtr> SpecWithParams(const std::string& id, const std::string& params) const
      GNOMON_EXCLUDES(mu_);
  std::vector<std::string> Ids() const GNOMON_EXCLUDES(mu_);

  // The job's first fire after `after` (its schedule under its rules). Jobs that share a compiled
  // schedule (and have no rules) fire together and ask the same questions in a row, so the last
  // answers are kept.
  std::optional<Instant> NextLocked(const JobEntry& e, Instant after) GNOMON_REQUIRES(mu_);
  // The job's last fire before `before`.
  static std::optional<Instant> PrevOf(const JobEntry& e, Instant before) {
    return PrevFire(*e.expr, e.rules.get(), before);
  }

  // A fire that was not claimed on time (a backend error, a late takeover or claim batch): kept
  // in its job's failed claims, which housekeeping hands to the misfire policy.
  void KeepFailedLocked(const FireKey& fire) GNOMON_REQUIRES(mu_);
  // Retries of failed claims (MisfireHandler::RetryFailedClaimsLocked), each fire once: the
  // fire is in its job's Backlog::retried until the backlog is dropped. RetriesAwaited() tells,
  // without the lock, whether any may be (so that the claim path takes the lock only then).
  void NoteRetryLocked(JobEntry& e, Instant fire) GNOMON_REQUIRES(mu_);
  // The job's backlog, allocated if it has none; a parked job is listed again.
  JobEntry::Backlog& WaitingLocked(JobEntry& e) GNOMON_REQUIRES(mu_);
  void DropBacklogLocked(JobEntry& e) GNOMON_REQUIRES(mu_);
  // A job whose backlog holds only failed claims that this node keeps for when it owns the job
  // (MisfireHandler::RetryFailedClaimsLocked): left out of BackloggedLocked until the live set
  // changes (the ranks may change with it, SetLiveNodes) or other work joins its backlog
  // (WaitingLocked). Its failed claims still gather (KeepFailedLocked). A fleet that runs late
  // keeps the late takeovers of many jobs on every node, and a housekeeping pass walked them all
  // under the engine lock each time (docs/benchmarks.md "Scale").
  // REQUIRES: e.backlog.
  void ParkLocked(JobEntry& e) GNOMON_REQUIRES(mu_);
  // The jobs that have a backlog and are not parked, in id order: what a housekeeping pass looks
  // at (MisfireHandler::RetryFailedClaimsLocked) instead of a walk over every job.
  const std::set<std::string>& BackloggedLocked() const GNOMON_REQUIRES(mu_) { return backlogged_; }
  bool RetriesAwaited() const { return retries_.load(std::memory_order_relaxed) > 0; }
  // The answer to this node's claim of `fire`, if that was a retry: recorded here (claimed,
  // skipped for overlap or pause) settles it; claimed elsewhere puts it back in the failed
  // claims, since that claim may still be withdrawn (a peer's whose batch too few replicas
  // acknowledged, wait_replicas): the misfire policy reads its record once it is settled.
  void SettleRetryLocked(const FireKey& fire, bool elsewhere) GNOMON_REQUIRES(mu_);

  // The live set (housekeeping), and its largest size of the last minute. A set that differs
  // from the last one (in any order) lists the parked jobs again.
  void SetLiveNodes(std::vector<std::string> ids) GNOMON_EXCLUDES(mu_);
  std::vector<std::string> LiveNodes() const GNOMON_EXCLUDES(mu_);
  // This node's rendezvous rank for the job's shard (0 = owner; always 0 without takeovers).
  int RankLocked(const std::string& job_id, int shard) const GNOMON_REQUIRES(mu_);
  // How late after its instant a fire may still be claimed as on time: claim_grace, plus the
  // takeover delays of the other live nodes. The live set counted is the largest of the last
  // minute: in an outage the heartbeats lapse and nodes come back one by one, while the fires of
  // that time were ranked over all of them.
  Duration TakeoverWindowLocked() const GNOMON_REQUIRES(mu_);

  // A job's paused state is read by the catch-up pass, the state poll, the breaker, and changed
  // by Pause and Resume, on different threads. Each read or change takes a sequence number
  // before it goes to the backend, or right after a local change is written; a state is applied
  // only if its number is newer than the job's, so a read answered late cannot undo a newer one.
  uint32_t NextStateSeqLocked() GNOMON_REQUIRES(mu_) { return ++state_seq_; }
  uint32_t NextStateSeq() GNOMON_EXCLUDES(mu_);
  static void SetPausedLocked(JobEntry& e, uint32_t seq, bool paused, std::string reason);
  // Applies a local change (Pause, Resume, breaker) with a fresh sequence number.
  void SetPaused(const std::string& id, bool paused, const std::string& reason)
      GNOMON_EXCLUDES(mu_);

  // Counts attempts running here; `ran`: also marks the job's history as grown (MarkRan).
  // `slot`: where the job's entry was (JobEntry::slot, carried by the run: RunOptions::job_slot,
  // ActiveRun::job_slot), checked against the id before it is used, so that a run's start and
  // end need no search of the table. Returns the entry's slot (kNoSlot when not defined).
  uint32_t AdjustRunning(const std::string& id, int delta, bool ran, uint32_t slot = kNoSlot)
      GNOMON_EXCLUDES(mu_);
  // A job whose history grew here since it was last pruned.
  void MarkRan(const std::string& id) GNOMON_EXCLUDES(mu_);
  // The jobs a housekeeping pass prunes: those whose history this node added a quarter of their
  // history_keep to since their last pruning, each within a minute, and every job once an hour,
  // both walked in slices, one per pass.
  std::vector<SpecPtr> PruneSlice() GNOMON_EXCLUDES(mu_);

  std::vector<JobView> Views() const GNOMON_EXCLUDES(mu_);
  std::optional<JobView> View(const std::string& id) const GNOMON_EXCLUDES(mu_);

 private:
  static void CountRunLocked(JobEntry& e);
  // Frees the entry's slot. REQUIRES: the entry is about to be erased.
  void ReleaseSlotLocked(const JobEntry& e) GNOMON_REQUIRES(mu_);

  EngineContext& ctx_;
  mutable Mutex mu_;
  std::map<std::string, JobEntry> jobs_ GNOMON_GUARDED_BY(mu_);
  // Each entry at its JobEntry::slot (std::map keeps an entry in place until it is erased); free
  // slots are null and listed in free_slots_ for reuse.
  std::vector<JobEntry*> slots_ GNOMON_GUARDED_BY(mu_);
  std::vector<uint32_t> free_slots_ GNOMON_GUARDED_BY(mu_);
  uint64_t gen_seq_ GNOMON_GUARDED_BY(mu_) = 0;  // the last generation given
  // NextLocked's last answers.
  struct NextMemo {
    std::shared_ptr<const CronExpr> expr;
    Instant after;
    std::optional<Instant> next;
  };
  std::array<NextMemo, 2> next_memo_ GNOMON_GUARDED_BY(mu_);
  size_t next_memo_victim_ GNOMON_GUARDED_BY(mu_) = 0;
  std::vector<std::string> live_nodes_ GNOMON_GUARDED_BY(mu_);  // with a live heartbeat
  std::set<std::string> backlogged_ GNOMON_GUARDED_BY(mu_);     // jobs with a backlog, unparked
  std::set<std::string> parked_ GNOMON_GUARDED_BY(mu_);         // ParkLocked
  std::atomic<int64_t> retries_{0};                  // entries of the Backlog::retried sets
  size_t live_peak_ GNOMON_GUARDED_BY(mu_) = 1;      // the largest live set of the last minute
  Duration live_peak_at_ GNOMON_GUARDED_BY(mu_){0};  // steady time of that peak
  uint32_t state_seq_ GNOMON_GUARDED_BY(mu_) = 0;    // the last job-state sequence number given
  std::string prune_cursor_ GNOMON_GUARDED_BY(mu_);  // the last job the minute's walk visited
  std::string sweep_cursor_ GNOMON_GUARDED_BY(mu_);  // the last job the hourly sweep visited
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_JOB_TABLE_H_
