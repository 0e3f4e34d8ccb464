// Namespace quotas of `gnomon serve` (docs/http-api.md, "Quotas"): per job-id prefix, at most
// `max_jobs` jobs and at most `max_concurrent_runs` runs running at once across the cluster.
//
// max_concurrent_runs is checked after a fire is claimed (Scheduler admission), counting the
// namespace's running records in the backend, this fire's own included: it runs only when the
// count is within the limit, else it is recorded as skipped ("quota: ..."). Because every node
// counts after its own claim is visible, the limit is never exceeded: of any set of runs running
// at once, the last to be claimed counted all the others. Two claims at the same moment may both
// see each other and both be skipped (the limit errs on the safe side). Runs of a vanished node
// count until they are resolved as lost. A trigger through the API is refused with 429 when the
// namespace is already at its limit. Cost: one history query per job of the namespace per fire,
// for jobs in a namespace with max_concurrent_runs only. When that count fails (backend
// unreachable), the fire runs (a quota never makes a scheduled fire silently disappear).
//
// max_jobs is checked when a job is created through the API (403): the JobCatalog's count of the
// config-file jobs of this node plus the definitions stored in the backend. Two creates on
// different nodes at the same moment may both pass (the limit can be exceeded by the number of
// concurrent creates).
//
// Thread safety: const methods may be called from many threads at once after Bind.
#ifndef GNOMON_SRC_SERVER_QUOTA_H_
#define GNOMON_SRC_SERVER_QUOTA_H_

#include <string>
#include <string_view>
#include <vector>

#include "gnomon/run_history.h"
#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "src/server/job_catalog.h"

namespace gnomon::server {

struct NamespaceQuota {
  std::string ns;               // job-id prefix
  int max_jobs = 0;             // 0 = no limit
  int max_concurrent_runs = 0;  // 0 = no limit
};

class Quotas {
 public:
  // `history` must outlive this object. InvalidArgument for an empty or duplicate namespace
  // or a negative limit.
  static Result<Quotas> Make(std::vector<NamespaceQuota> quotas, RunHistory& history);
  // The checks of Make, without making anything.
  static Status Validate(const std::vector<NamespaceQuota>& quotas);

  // The scheduler whose jobs' runs are counted and the catalog whose jobs are counted; before any
  // other call. Must outlive this object.
  void Bind(const Scheduler* scheduler, const JobCatalog* catalog) {
    scheduler_ = scheduler;
    catalog_ = catalog;
  }

  // The quota of the longest namespace that prefixes `job_id`, or null.
  const NamespaceQuota* For(std::string_view job_id) const;

  // Creating `job_id` through the API: FailedPrecondition "quota: ..." when its namespace has
  // max_jobs jobs already; Unavailable when the backend cannot be read.
  Status CheckCreate(const std::string& job_id) const;
  // Triggering `job_id` now: FailedPrecondition "quota: ..." when its namespace already has
  // max_concurrent_runs runs running; Unavailable when the backend cannot be read.
  Status CheckTrigger(const std::string& job_id) const;
  // Scheduler admission (SchedulerOptions::admit): "" to run, else "quota: ..." (see above).
  std::string Admit(const JobSpec& job, const Claim& claim) const;

 private:
  Quotas(std::vector<NamespaceQuota> quotas, RunHistory& history)
      : quotas_(std::move(quotas)), history_(&history) {}
  // Runs running in `q`'s namespace, counting at most `cap` (the count stops there).
  Result<int> Running(const NamespaceQuota& q, int cap) const;

  std::vector<NamespaceQuota> quotas_;
  RunHistory* history_;
  const Scheduler* scheduler_ = nullptr;
  const JobCatalog* catalog_ = nullptr;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_QUOTA_H_
