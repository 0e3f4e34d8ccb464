// SqliteCoordinator: the public API of the SQLite backend. Each role's work is done by its part
// (src/coord/sqlite/sqlite_<role>.h), all over one SqliteStore; this file opens the store and
// forwards every call to its part.
#include "gnomon/sqlite_coordinator.h"

#include <utility>

#include "src/coord/sqlite/sqlite_audit.h"
#include "src/coord/sqlite/sqlite_claims.h"
#include "src/coord/sqlite/sqlite_definitions.h"
#include "src/coord/sqlite/sqlite_nodes.h"
#include "src/coord/sqlite/sqlite_run_history.h"
#include "src/coord/sqlite/sqlite_store.h"

namespace gnomon {

Result<std::unique_ptr<SqliteCoordinator>> SqliteCoordinator::Open(const std::string& path,
                                                                   Clock& clock,
                                                                   SqliteOptions options) {
  Result<std::unique_ptr<coord::SqliteStore>> store =
      coord::SqliteStore::Open(path, clock, options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<SqliteCoordinator>(new SqliteCoordinator(std::move(*store)));
}

SqliteCoordinator::SqliteCoordinator(std::unique_ptr<coord::SqliteStore> store)
    : store_(std::move(store)),
      claims_(std::make_unique<coord::SqliteClaims>(*store_)),
      history_(std::make_unique<coord::SqliteRunHistory>(*store_)),
      definitions_(std::make_unique<coord::SqliteDefinitions>(*store_)),
      audit_(std::make_unique<coord::SqliteAudit>(*store_)),
      nodes_(std::make_unique<coord::SqliteNodes>(*store_)) {}

SqliteCoordinator::~SqliteCoordinator() = default;

Result<Instant> SqliteCoordinator::Now() { return store_->clock().Now(); }

// --- ClaimStore: SqliteClaims ------------------------------------------------------------------

Result<ClaimOutcome> SqliteCoordinator::Claim(const ClaimRequest& req) {
  return claims_->Claim(req);
}
Status SqliteCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return claims_->Renew(claim, ttl);
}
Result<gnomon::Claim> SqliteCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return claims_->NextAttempt(claim, ttl);
}
Status SqliteCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return claims_->Report(claim, record, final);
}
Result<std::vector<ExpiredFire>> SqliteCoordinator::ListExpired(int limit) {
  return claims_->ListExpired(limit);
}
Result<std::optional<gnomon::Claim>> SqliteCoordinator::ResolveLost(const ExpiredFire& fire,
                                                                    const std::string& node_id,
                                                                    LostPolicy policy,
                                                                    Duration ttl) {
  return claims_->ResolveLost(fire, node_id, policy, ttl);
}
Status SqliteCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                        const std::string& reason) {
  return claims_->RecordSkipped(fire, node_id, reason);
}
Status SqliteCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  return claims_->CancelFire(fire, reason);
}
Result<gnomon::Claim> SqliteCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                   Duration ttl, const std::string& cause) {
  return claims_->RerunFire(fire, node_id, ttl, cause);
}
Status SqliteCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return claims_->SaveCheckpoint(claim, value);
}
Status SqliteCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return claims_->SaveLiveOutput(claim, output);
}
Result<std::optional<std::string>> SqliteCoordinator::LoadCheckpoint(const FireKey& fire) {
  return claims_->LoadCheckpoint(fire);
}
Result<JobState> SqliteCoordinator::GetJobState(const std::string& job_id) {
  return claims_->GetJobState(job_id);
}
Status SqliteCoordinator::SetPaused(const std::string& job_id, bool paused,
                                    const std::string& reason) {
  return claims_->SetPaused(job_id, paused, reason);
}
Result<std::vector<bool>> SqliteCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  return claims_->FiresRecorded(fires);
}

// --- RunHistory: SqliteRunHistory --------------------------------------------------------------

Result<RunPage> SqliteCoordinator::ListRuns(const RunQuery& query) {
  return history_->ListRuns(query);
}
Result<std::vector<RunRecord>> SqliteCoordinator::GetRun(const std::string& run_id) {
  return history_->GetRun(run_id);
}
Status SqliteCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return history_->PruneHistory(job_id, keep_last, max_age);
}

// --- NodeRegistry: SqliteNodes -----------------------------------------------------------------

Status SqliteCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  return nodes_->Heartbeat(node, ttl);
}
Result<std::vector<NodeInfo>> SqliteCoordinator::ListNodes() { return nodes_->ListNodes(); }

// --- DefinitionStore: SqliteDefinitions --------------------------------------------------------

Result<int64_t> SqliteCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                          int64_t expected_version) {
  return definitions_->PutJob(job_id, definition, expected_version);
}
Status SqliteCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  return definitions_->DeleteJob(job_id, expected_version);
}
Result<StoredJob> SqliteCoordinator::GetJob(const std::string& job_id) {
  return definitions_->GetJob(job_id);
}
Result<std::vector<StoredJob>> SqliteCoordinator::ListJobs() { return definitions_->ListJobs(); }
Result<int64_t> SqliteCoordinator::JobsVersion() { return definitions_->JobsVersion(); }

// --- AuditStore: SqliteAudit -------------------------------------------------------------------

Result<int64_t> SqliteCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  return audit_->AppendAudit(record, keep);
}
Result<std::vector<AuditRecord>> SqliteCoordinator::ListAudit(int limit, int64_t before_seq) {
  return audit_->ListAudit(limit, before_seq);
}

}  // namespace gnomon
