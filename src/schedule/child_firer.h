// ChildFirer: the jobs a run fires when it ends (on_success, on_failure, on_complete;
// docs/semantics.md "Dependencies"). Each child's fire has the parent fire's instant, so the
// backend's claim makes it run once however many nodes fire it.
//
// Two paths fire a child: the node that reported the parent's final outcome, at once (Ended,
// from the RunReporter's hook); and every node's housekeeping pass (Sweep), which reads the
// recent runs of the jobs that name children, and of the jobs joins list, and fires each child
// fire that has no record yet, so a child is not lost when its parent's node died between the
// report and the child's claim, nor a join when its last two parents ended at once on two nodes
// (each may read the other's fire before it was recorded). Sweep also records the joins whose
// join_timeout passed.
//
// Threads: pool workers (Fire from the report's step; Sweep from the housekeeping pass).
//
// Thread safety: thread-safe. Lock order: JobTable::mu() before mu_ (Track runs under the engine
// lock); mu_ is a leaf: nothing is taken under it, and it is not held across a backend call.
#ifndef GNOMON_SRC_SCHEDULE_CHILD_FIRER_H_
#define GNOMON_SRC_SCHEDULE_CHILD_FIRER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/schedule/engine_context.h"
#include "src/schedule/job_table.h"

namespace gnomon::internal {

class RunDriver;

class ChildFirer {
 public:
  // How far back Sweep looks: children of parent runs that ended within it are fired.
  static constexpr Duration kSweepWindow = std::chrono::minutes(10);
  // The most recent parent records Sweep reads per job and pass.
  static constexpr int kSweepRuns = 50;

  ChildFirer(EngineContext& ctx, JobTable& table, RunDriver& driver)
      : ctx_(ctx), table_(table), driver_(driver) {}
  ChildFirer(const ChildFirer&) = delete;
  ChildFirer& operator=(const ChildFirer&) = delete;

  // A job was installed: Sweep looks at it while it names children.
  void Track(const JobSpec& job) GNOMON_EXCLUDES(mu_);
  // A run of `parent` ended with its final outcome (the RunReporter's hook): Fire, then, when it
  // succeeded, the joins that list it (Join). Nothing on a queue worker (it knows no jobs: the
  // scheduling nodes' Sweep fires the children of the runs it ran).
  void Ended(const JobSpec& parent, const FireKey& fire, RunOutcome outcome,
             const std::string& params);
  // The children of `parent`'s fire that ended with `outcome`, each claimed and run on this
  // node's pool, with `params` (the parent run's) merged over the child's own and a cause
  // naming the parent run.
  void Fire(const JobSpec& parent, const FireKey& fire, RunOutcome outcome,
            const std::string& params);
  // The join `job` (its `after`) at instant `t`, unless its fire has a record: run when every
  // listed job's fire of `t` succeeded; else, with `timeouts` and once its join_timeout passed,
  // recorded as skipped naming the listed jobs that did not succeed.
  void Join(const JobSpec& job, Instant t, bool timeouts);
  // The children of the tracked jobs' runs that ended within kSweepWindow (and after the job
  // was first tracked, or since kSweepWindow before Start for jobs known at Start) whose fire
  // has no record; and Join (with timeouts) for each instant of the tracked joins at which a
  // listed job's fire ended in that window, or whose join_timeout passed in it.
  void Sweep() GNOMON_EXCLUDES(mu_);

 private:
  // The final records (newest attempt of each fire) among `job`'s newest kSweepRuns records,
  // read once per Sweep (`read`: by job id): a job may be a parent and listed by joins.
  using Read = std::map<std::string, std::vector<RunRecord>>;
  const std::vector<RunRecord>& EndedFires(const JobSpec& job, Read& read);
  void SweepParent(const JobSpec& parent, Instant from, Read& read);
  void SweepJoin(const JobSpec& join, Instant from, Read& read);

  EngineContext& ctx_;
  JobTable& table_;
  RunDriver& driver_;
  Mutex mu_;
  // Jobs that name children or join others (or did: dropped by Sweep), with the instant from
  // which their (or their joined jobs') runs are swept; unset until the first Sweep after Start.
  std::map<std::string, std::optional<Instant>> tracked_ GNOMON_GUARDED_BY(mu_);
  // The joins that list each job (their `after`), as installed; Join reads the join's current
  // definition, so an entry left by a changed definition does nothing.
  std::map<std::string, std::set<std::string>> joins_of_ GNOMON_GUARDED_BY(mu_);
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_CHILD_FIRER_H_
