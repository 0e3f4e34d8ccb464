#include "src/server/quota.h"

#include <set>

namespace gnomon::server {

Result<Quotas> Quotas::Make(std::vector<NamespaceQuota> quotas, RunHistory& history) {
  GNOMON_RETURN_IF_ERROR(Validate(quotas));
  return Quotas(std::move(quotas), history);
}

Status Quotas::Validate(const std::vector<NamespaceQuota>& quotas) {
  std::set<std::string> seen;
  for (const NamespaceQuota& q : quotas) {
    if (q.ns.empty()) return InvalidArgumentError("quota: namespace is empty");
    if (!seen.insert(q.ns).second) {
      return InvalidArgumentError("quota: namespace \"" + q.ns + "\" has two quotas");
    }
    if (q.max_jobs < 0 || q.max_concurrent_runs < 0) {
      return InvalidArgumentError("quota " + q.ns + ": limits must be >= 0 (0 = no limit)");
    }
  }
  return Status::Ok();
}

const NamespaceQuota* Quotas::For(std::string_view job_id) const {
  const NamespaceQuota* best = nullptr;
  for (const NamespaceQuota& q : quotas_) {
    if (job_id.starts_with(q.ns) && (best == nullptr || q.ns.size() > best->ns.size())) best = &q;
  }
  return best;
}

Status Quotas::CheckCreate(const std::string& job_id) const {
  const NamespaceQuota* q = For(job_id);
  if (q == nullptr || q->max_jobs == 0) return Status::Ok();
  // The backend's definitions (every node's API jobs) plus this node's config-file jobs. A job
  // belongs to the quota of its longest matching namespace only.
  if (catalog_ == nullptr) return Status::Ok();
  Result<std::vector<std::string>> in =
      catalog_->JobIds([&](std::string_view id) { return For(id) == q; });
  if (!in.ok()) return in.status();
  std::set<std::string> ids(in->begin(), in->end());
  ids.erase(job_id);
  if (static_cast<int>(ids.size()) < q->max_jobs) return Status::Ok();
  return FailedPreconditionError("quota: namespace \"" + q->ns + "\" has " +
                                 std::to_string(ids.size()) +
                                 " jobs (max_jobs = " + std::to_string(q->max_jobs) + ")");
}

Result<int> Quotas::Running(const NamespaceQuota& q, int cap) const {
  int running = 0;
  if (scheduler_ == nullptr) return running;
  for (const JobView& v : scheduler_->Jobs()) {
    if (For(v.spec.id) != &q) continue;
    RunQuery query;
    query.job_id = v.spec.id;
    query.outcome = RunOutcome::kRunning;
    query.limit = cap - running;
    Result<RunPage> page = history_->ListRuns(query);
    if (!page.ok()) return page.status();
    running += static_cast<int>(page->runs.size());
    if (running >= cap) break;
  }
  return running;
}

Status Quotas::CheckTrigger(const std::string& job_id) const {
  const NamespaceQuota* q = For(job_id);
  if (q == nullptr || q->max_concurrent_runs == 0) return Status::Ok();
  Result<int> running = Running(*q, q->max_concurrent_runs);
  if (!running.ok()) return running.status();
  if (*running < q->max_concurrent_runs) return Status::Ok();
  return FailedPreconditionError(
      "quota: namespace \"" + q->ns + "\" has " + std::to_string(*running) +
      " runs running (max_concurrent_runs = " + std::to_string(q->max_concurrent_runs) + ")");
}

std::string Quotas::Admit(const JobSpec& job, const Claim& /*claim*/) const {
  const NamespaceQuota* q = For(job.id);
  if (q == nullptr || q->max_concurrent_runs == 0) return "";
  // This fire's own running record is counted: over the limit means one too many.
  Result<int> running = Running(*q, q->max_concurrent_runs + 1);
  if (!running.ok() || *running <= q->max_concurrent_runs) return "";
  return "quota: namespace \"" + q->ns +
         "\" is at max_concurrent_runs = " + std::to_string(q->max_concurrent_runs);
}

}  // namespace gnomon::server
