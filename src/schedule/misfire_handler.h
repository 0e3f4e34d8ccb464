// MisfireHandler: what happens to fires that were not claimed on time (docs/semantics.md,
// "Misfires"): within the job's catchup_window they run per `misfire` (all: each, oldest first;
// once: the latest only), older ones (and all with misfire = skip) are recorded as skipped; a
// skip record that could not be written is kept and written again by housekeeping. Its sources:
// the timer loop (fires older than the takeover window), the start-up catch-up (fires missed
// while no node ran, from the backend's last_scheduled: StartCatchUpLocked), and housekeeping
// (fires whose claim failed: RetryFailedClaimsLocked).
//
// A job's claims wait for its catch-up read. The backend's last_scheduled, from which the
// catch-up tells which fires were missed, moves on with the job's next claim: read after this
// node's first claim of the job, it would hide the fires missed before it. So the fires the loop
// reaches for a job whose catch-up state is not read yet are held here (HoldLocked), the job's
// read goes before the queued chunks, and its answer releases them. A read that fails is kept
// and made again by the next housekeeping pass (RetryFailedCatchUpsLocked); the held fires wait
// for it, and those whose claim window passed meanwhile go through the policy as missed. A failed
// read of jobs that different parts of the backend answer (ClaimStore::ClaimRoute: the primaries
// of a Redis Cluster) is first made again at once, one read per part, so a part that cannot
// answer holds back only its own jobs.
//
// Threads: the loop thread and housekeeping (...Locked), API callers (a job added after Start),
// and pool workers (the submitted catch-up runs, skip records and state reads).
//
// Thread safety: thread-safe. Its catch-up queue is guarded by JobTable::mu() (the engine lock);
// methods named ...Locked REQUIRE it. Lock order: JobTable::mu() before WorkerPool::mu_. No lock
// is held during a backend call.
#ifndef GNOMON_SRC_SCHEDULE_MISFIRE_HANDLER_H_
#define GNOMON_SRC_SCHEDULE_MISFIRE_HANDLER_H_

#include <atomic>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "src/schedule/job_table.h"

namespace gnomon::internal {

class ClaimDispatcher;
class RunDriver;

class MisfireHandler {
 public:
  MisfireHandler(EngineContext& ctx, JobTable& table, ClaimDispatcher& dispatch, RunDriver& driver)
      : ctx_(ctx), table_(table), dispatch_(dispatch), driver_(driver) {}
  MisfireHandler(const MisfireHandler&) = delete;
  MisfireHandler& operator=(const MisfireHandler&) = delete;

  // Missed fires of `e` (ascending): within catchup_window, per policy; older ones are recorded
  // as skipped. Work is submitted to the claim lane.
  void ApplyLocked(const JobEntry& e, const std::vector<Instant>& missed, Instant now)
      GNOMON_REQUIRES(table_.mu());
  // At start (or when a job is added): fires missed while no node ran go through the policy.
  // The job states of many jobs are read together (512 per call), one call at a time: each next
  // chunk is queued behind the tasks submitted meanwhile, so the reads never hold back the
  // claims of on-time fires.
  // REQUIRES: each job's JobEntry::catchup_pending is set.
  void StartCatchUpLocked(std::vector<std::string> ids) GNOMON_REQUIRES(table_.mu());
  // The loop reached fires of `e` (ascending: `missed` ones, then `on_time` ones) while its
  // catch-up read is pending: they are held until that read is answered, and it is hurried.
  void HoldLocked(const JobEntry& e, const std::vector<Instant>& missed,
                  const std::vector<Instant>& on_time) GNOMON_REQUIRES(table_.mu());
  // Housekeeping: catch-up reads that failed are made again (the held jobs' first).
  void RetryFailedCatchUpsLocked() GNOMON_REQUIRES(table_.mu());
  // True (once) when a catch-up's state read failed since the last call: the state poll then
  // reads every job's pause state, whatever the jobs version.
  bool TakeStatesMissed() { return states_missed_.exchange(false); }
  // Housekeeping: fires whose claim failed on a backend error, and skip records that could not
  // be written, go through the policy again now that the backend may be back.
  void RetryFailedClaimsLocked() GNOMON_REQUIRES(table_.mu());
  // The catch-up of a job's one missed fire found it claimed already (misfire = once): decided
  // as the latest fire of a batch (SubmitCatchUpOnce). Worker thread.
  void Recheck(const SpecPtr& spec, Instant scheduled_at) GNOMON_EXCLUDES(table_.mu());
  // Records fires as skipped (`reason` "misfire", or "excluded": TimerLoop), keeping those whose
  // record failed for housekeeping. Work is submitted to the claim lane.
  void SubmitSkipRecords(const SpecPtr& spec, const std::vector<Instant>& skip,
                         std::string reason = "misfire");

 private:
  // Reads one queued chunk of job states and applies the policy; queues itself again while
  // chunks are left. Worker thread.
  void CatchUpStep() GNOMON_EXCLUDES(table_.mu());
  // Submits a CatchUpStep unless one is queued or running.
  void KickLocked() GNOMON_REQUIRES(table_.mu());
  // The next ids to read: held jobs' first, then the queue's front chunk; jobs read already (or
  // removed) are left out. Empty when none is left.
  std::vector<std::string> NextChunkLocked() GNOMON_REQUIRES(table_.mu());
  // The job is defined and its catch-up state not read yet (a removed job's held fires are
  // dropped).
  bool PendingLocked(const std::string& id) GNOMON_REQUIRES(table_.mu());
  // `e`'s catch-up state was read: the fires missed before it started (from last_scheduled) and
  // the fires held for it go through the policy, the held on-time ones are claimed.
  void CatchUpLocked(JobEntry& e, const JobState& state, Instant now) GNOMON_REQUIRES(table_.mu());
  // misfire = once: runs the latest missed fire of `batch` (ascending) and records the others
  // skipped (see the .cc for which fire is the latest missed).
  void SubmitCatchUpOnce(const SpecPtr& spec, std::vector<Instant> batch, Duration window);
  // Runs each shard of each fire, one after another (RunDriver::RunInOrder, catch_up).
  void RunCatchUp(const SpecPtr& spec, const std::vector<Instant>& fires);

  EngineContext& ctx_;
  JobTable& table_;
  ClaimDispatcher& dispatch_;
  RunDriver& driver_;
  std::deque<std::vector<std::string>> catchup_queue_ GNOMON_GUARDED_BY(table_.mu());
  bool catchup_busy_ GNOMON_GUARDED_BY(table_.mu()) = false;  // a CatchUpStep is queued/running
  // Fires held per job (HoldLocked), ascending, at most kMaxMisfires each.
  std::map<std::string, std::vector<Instant>> held_ GNOMON_GUARDED_BY(table_.mu());
  std::vector<std::string> hurry_ GNOMON_GUARDED_BY(table_.mu());        // held jobs to read
  std::vector<std::string> read_failed_ GNOMON_GUARDED_BY(table_.mu());  // read again later
  std::atomic<bool> states_missed_{false};                               // TakeStatesMissed
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_MISFIRE_HANDLER_H_
