#include "gnomon/testing/memory_coordinator.h"

#include "src/coord/memory/memory_audit.h"
#include "src/coord/memory/memory_definitions.h"
#include "src/coord/memory/memory_fires.h"
#include "src/coord/memory/memory_history.h"
#include "src/coord/memory/memory_nodes.h"
#include "src/coord/memory/memory_state.h"

namespace gnomon::testing {

// The state under one mutex and the role parts that hold a reference to it (declared after it,
// so destroyed before it).
struct MemoryCoordinator::Parts {
  explicit Parts(Clock& clock) : state(clock) {}
  coord::memory::MemoryState state;
  coord::memory::MemoryFires fires{state};
  coord::memory::MemoryHistory history{state};
  coord::memory::MemoryDefinitions definitions{state};
  coord::memory::MemoryNodes nodes{state};
  coord::memory::MemoryAudit audit{state};
};

MemoryCoordinator::MemoryCoordinator(Clock& clock) : parts_(std::make_unique<Parts>(clock)) {}
MemoryCoordinator::~MemoryCoordinator() = default;

Result<Instant> MemoryCoordinator::Now() { return parts_->state.clock.Now(); }

Result<ClaimOutcome> MemoryCoordinator::Claim(const ClaimRequest& req) {
  return parts_->fires.Claim(req);
}
Status MemoryCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return parts_->fires.Renew(claim, ttl);
}
Result<gnomon::Claim> MemoryCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return parts_->fires.NextAttempt(claim, ttl);
}
Status MemoryCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return parts_->fires.Report(claim, record, final);
}
Result<std::vector<ExpiredFire>> MemoryCoordinator::ListExpired(int limit) {
  return parts_->fires.ListExpired(limit);
}
Result<std::optional<gnomon::Claim>> MemoryCoordinator::ResolveLost(const ExpiredFire& fire,
                                                                    const std::string& node_id,
                                                                    LostPolicy policy,
                                                                    Duration ttl) {
  return parts_->fires.ResolveLost(fire, node_id, policy, ttl);
}
Status MemoryCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                        const std::string& reason) {
  return parts_->fires.RecordSkipped(fire, node_id, reason);
}
Status MemoryCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  return parts_->fires.CancelFire(fire, reason);
}
Result<gnomon::Claim> MemoryCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                   Duration ttl, const std::string& cause) {
  return parts_->fires.RerunFire(fire, node_id, ttl, cause);
}
Status MemoryCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return parts_->fires.SaveCheckpoint(claim, value);
}
Status MemoryCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return parts_->fires.SaveLiveOutput(claim, output);
}
Result<std::optional<std::string>> MemoryCoordinator::LoadCheckpoint(const FireKey& fire) {
  return parts_->fires.LoadCheckpoint(fire);
}
Result<JobState> MemoryCoordinator::GetJobState(const std::string& job_id) {
  return parts_->definitions.GetJobState(job_id);
}
Status MemoryCoordinator::SetPaused(const std::string& job_id, bool paused,
                                    const std::string& reason) {
  return parts_->definitions.SetPaused(job_id, paused, reason);
}
Result<RunPage> MemoryCoordinator::ListRuns(const RunQuery& query) {
  return parts_->history.ListRuns(query);
}
Result<std::vector<RunRecord>> MemoryCoordinator::GetRun(const std::string& run_id) {
  return parts_->history.GetRun(run_id);
}
Status MemoryCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return parts_->history.PruneHistory(job_id, keep_last, max_age);
}
Status MemoryCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  return parts_->nodes.Heartbeat(node, ttl);
}
Result<std::vector<NodeInfo>> MemoryCoordinator::ListNodes() { return parts_->nodes.ListNodes(); }
Result<int64_t> MemoryCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                          int64_t expected_version) {
  return parts_->definitions.PutJob(job_id, definition, expected_version);
}
Status MemoryCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  return parts_->definitions.DeleteJob(job_id, expected_version);
}
Result<StoredJob> MemoryCoordinator::GetJob(const std::string& job_id) {
  return parts_->definitions.GetJob(job_id);
}
Result<std::vector<StoredJob>> MemoryCoordinator::ListJobs() {
  return parts_->definitions.ListJobs();
}
Result<int64_t> MemoryCoordinator::JobsVersion() { return parts_->definitions.JobsVersion(); }
Result<int64_t> MemoryCoordinator::WaitJobsChange(int64_t since, Duration timeout) {
  return parts_->definitions.WaitJobsChange(since, timeout);
}
Result<std::vector<bool>> MemoryCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  return parts_->fires.FiresRecorded(fires);
}
Result<int64_t> MemoryCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  return parts_->audit.AppendAudit(record, keep);
}
Result<std::vector<AuditRecord>> MemoryCoordinator::ListAudit(int limit, int64_t before_seq) {
  return parts_->audit.ListAudit(limit, before_seq);
}

}  // namespace gnomon::testing
