// ForwardingCoordinator: passes every call to another Coordinator. Override single methods to
// inject faults (a partitioned node whose renewals fail, a backend that is down) in tests.
#ifndef GNOMON_TESTING_FORWARDING_COORDINATOR_H_
#define GNOMON_TESTING_FORWARDING_COORDINATOR_H_

#include "gnomon/coordinator.h"

namespace gnomon::testing {

class ForwardingCoordinator : public Coordinator {
 public:
  // REQUIRES: `target` outlives this object.
  explicit ForwardingCoordinator(Coordinator& target) : t_(target) {}

  Result<Instant> Now() override { return t_.Now(); }
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override { return t_.Claim(req); }
  std::string ClaimRoute(const std::string& job_id) const override { return t_.ClaimRoute(job_id); }
  bool ClaimsMayBeWithdrawn() const override { return t_.ClaimsMayBeWithdrawn(); }
  int AddRoutesListener(std::function<void()> listener) override {
    return t_.AddRoutesListener(std::move(listener));
  }
  void RemoveRoutesListener(int handle) override { t_.RemoveRoutesListener(handle); }
  Status Renew(gnomon::Claim& claim, Duration ttl) override { return t_.Renew(claim, ttl); }
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) override {
    return t_.NextAttempt(claim, ttl);
  }
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override {
    return t_.Report(claim, record, final);
  }
  Result<std::vector<ExpiredFire>> ListExpired(int limit) override { return t_.ListExpired(limit); }
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl) override {
    return t_.ResolveLost(fire, node_id, policy, ttl);
  }
  Status RecordSkipped(const FireKey& fire, const std::string& node_id,
                       const std::string& reason) override {
    return t_.RecordSkipped(fire, node_id, reason);
  }
  Status CancelFire(const FireKey& fire, const std::string& reason) override {
    return t_.CancelFire(fire, reason);
  }
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause) override {
    return t_.RerunFire(fire, node_id, ttl, cause);
  }
  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) override {
    return t_.SaveCheckpoint(claim, value);
  }
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) override {
    return t_.SaveLiveOutput(claim, output);
  }
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire) override {
    return t_.LoadCheckpoint(fire);
  }
  Result<JobState> GetJobState(const std::string& job_id) override {
    return t_.GetJobState(job_id);
  }
  Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& job_ids) override {
    return t_.GetJobStates(job_ids);
  }
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason) override {
    return t_.SetPaused(job_id, paused, reason);
  }
  Result<RunPage> ListRuns(const RunQuery& query) override { return t_.ListRuns(query); }
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) override {
    return t_.GetRun(run_id);
  }
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override {
    return t_.PruneHistory(job_id, keep_last, max_age);
  }
  Status Heartbeat(const NodeInfo& node, Duration ttl) override { return t_.Heartbeat(node, ttl); }
  Result<std::vector<NodeInfo>> ListNodes() override { return t_.ListNodes(); }
  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version) override {
    return t_.PutJob(job_id, definition, expected_version);
  }
  Status DeleteJob(const std::string& job_id, int64_t expected_version) override {
    return t_.DeleteJob(job_id, expected_version);
  }
  Result<StoredJob> GetJob(const std::string& job_id) override { return t_.GetJob(job_id); }
  Result<std::vector<StoredJob>> ListJobs() override { return t_.ListJobs(); }
  Result<int64_t> JobsVersion() override { return t_.JobsVersion(); }
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) override {
    return t_.FiresRecorded(fires);
  }
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout) override {
    return t_.WaitJobsChange(since, timeout);
  }
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) override {
    return t_.AppendAudit(record, keep);
  }
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) override {
    return t_.ListAudit(limit, before_seq);
  }

 protected:
  Coordinator& target() { return t_; }

 private:
  Coordinator& t_;
};

}  // namespace gnomon::testing

#endif  // GNOMON_TESTING_FORWARDING_COORDINATOR_H_
