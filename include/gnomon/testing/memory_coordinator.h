// MemoryCoordinator: the in-memory Coordinator (gnomon/coordinator.h) for tests, of the engine
// and of embedders' code. It keeps every promise of the interface within one process (it passes
// the conformance suite, src/coord/coordinator_conformance.h) and loses everything when
// destroyed; "never goes backwards across restarts" holds only for the object's lifetime.
//
// The backend clock is the Clock given to the constructor (usually a FakeClock): lease expiry,
// the early-fire guard, heartbeats and max_age pruning read it, so a test moves them all by
// advancing that clock.
//
// Thread safety: every method is safe to call from many threads at once (one mutex, shared by
// the role parts in src/coord/memory/: MemoryFires, MemoryHistory, MemoryDefinitions,
// MemoryNodes, MemoryAudit over one MemoryState).
#ifndef GNOMON_TESTING_MEMORY_COORDINATOR_H_
#define GNOMON_TESTING_MEMORY_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"

namespace gnomon::testing {

class MemoryCoordinator final : public Coordinator {
 public:
  // `clock` is the backend clock. REQUIRES: `clock` outlives this object.
  explicit MemoryCoordinator(Clock& clock);
  ~MemoryCoordinator() override;
  MemoryCoordinator(const MemoryCoordinator&) = delete;
  MemoryCoordinator& operator=(const MemoryCoordinator&) = delete;

  Result<Instant> Now() override;

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override;
  Status Renew(gnomon::Claim& claim, Duration ttl) override;
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) override;
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override;
  Result<std::vector<ExpiredFire>> ListExpired(int limit) override;
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl) override;
  Status RecordSkipped(const FireKey& fire, const std::string& node_id,
                       const std::string& reason) override;
  Status CancelFire(const FireKey& fire, const std::string& reason) override;
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause) override;

  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) override;
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) override;
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire) override;

  Result<JobState> GetJobState(const std::string& job_id) override;
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason) override;

  Result<RunPage> ListRuns(const RunQuery& query) override;
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) override;
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override;

  Status Heartbeat(const NodeInfo& node, Duration ttl) override;
  Result<std::vector<NodeInfo>> ListNodes() override;

  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version) override;
  Status DeleteJob(const std::string& job_id, int64_t expected_version) override;
  Result<StoredJob> GetJob(const std::string& job_id) override;
  Result<std::vector<StoredJob>> ListJobs() override;
  Result<int64_t> JobsVersion() override;
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout) override;
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) override;

  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) override;
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) override;

 private:
  struct Parts;  // the shared state and the role parts over it (memory_coordinator.cc)
  std::unique_ptr<Parts> parts_;
};

}  // namespace gnomon::testing

#endif  // GNOMON_TESTING_MEMORY_COORDINATOR_H_
