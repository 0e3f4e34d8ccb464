// RedisCoordinator: the public API of the Redis backend. Each role's work is done by its part
// (src/coord/redis/redis_<role>.h), all over one RedisStore; this file opens the store and
// forwards every call to its part.
#include "gnomon/redis_coordinator.h"

#include <set>

#include "src/coord/redis/redis_audit.h"
#include "src/coord/redis/redis_claims.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_definitions.h"
#include "src/coord/redis/redis_fires.h"
#include "src/coord/redis/redis_layout.h"
#include "src/coord/redis/redis_nodes.h"
#include "src/coord/redis/redis_run_history.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon {

Result<coord::RedisConnectionConfig> RedisCoordinator::ConnectionConfigOf(
    const RedisOptions& options) {
  return coord::RedisStore::ConnectionConfigOf(options);
}

Result<std::unique_ptr<RedisCoordinator>> RedisCoordinator::Open(const RedisOptions& options) {
  Result<std::unique_ptr<coord::RedisStore>> store = coord::RedisStore::Open(options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<RedisCoordinator>(new RedisCoordinator(std::move(*store)));
}

Result<KeyGroupMigration> RedisCoordinator::MigrateKeyGroups(const RedisOptions& options) {
  if (!coord::redis::IsValidKeyPart(options.prefix) || !coord::redis::IsValidKeyPart(options.ns)) {
    return InvalidArgumentError("redis: prefix and ns must match [A-Za-z0-9_.-]{1,64}");
  }
  Result<coord::RedisConnectionConfig> config = coord::RedisStore::ConnectionConfigOf(options);
  if (!config.ok()) return config.status();
  const std::string base = options.prefix + ":" + options.ns;
  KeyGroupMigration done;
  done.already_done = true;
  if (!options.cluster_seeds.empty()) {
    // A Cluster held key groups from its start: only the move to the ledger layout can be due.
    Result<std::unique_ptr<coord::RedisClusterClient>> cluster =
        coord::RedisClusterClient::Connect(*config, options.cluster_seeds, 1, {});
    if (!cluster.ok()) return cluster.status();
    coord::RedisClusterClient& client = **cluster;
    // One key of each primary (a key group's probe key) to send its SCAN to.
    std::vector<std::string> scan_keys;
    std::set<std::string> primaries;
    for (int g = 0; g < coord::redis::kKeyGroups; ++g) {
      const std::string key = coord::redis::GroupBase(base, g) + ":probe";
      if (primaries.insert(client.OwnerOf(coord::ClusterKeySlot(key))).second) {
        scan_keys.push_back(key);
      }
    }
    const coord::redis::KeyCommand command = [&](const std::string& key,
                                                 const std::vector<std::string>& argv) {
      return client.Command(coord::ClusterKeySlot(key), argv);
    };
    GNOMON_RETURN_IF_ERROR(coord::redis::MoveToLedger(command, scan_keys, base, "cluster", done));
    return done;
  }
  Result<std::unique_ptr<coord::RedisConnectionPool>> conn =
      coord::RedisConnectionPool::Connect(*config, 1);
  if (!conn.ok()) return conn.status();
  Result<KeyGroupMigration> groups = coord::redis::MigrateToGroups(**conn, base);
  if (!groups.ok()) return groups.status();
  done = *groups;
  const coord::redis::KeyCommand command = [&](const std::string&,
                                               const std::vector<std::string>& argv) {
    return (*conn)->Command(argv);
  };
  GNOMON_RETURN_IF_ERROR(
      coord::redis::MoveToLedger(command, {base}, base, (*conn)->address(), done));
  return done;
}

RedisCoordinator::RedisCoordinator(std::unique_ptr<coord::RedisStore> store)
    : store_(std::move(store)),
      unsafe_persistence_(store_->unsafe_persistence()),
      claims_(std::make_unique<coord::RedisClaims>(*store_)),
      fires_(std::make_unique<coord::RedisFires>(*store_)),
      history_(std::make_unique<coord::RedisRunHistory>(*store_)),
      definitions_(std::make_unique<coord::RedisDefinitions>(*store_)),
      audit_(std::make_unique<coord::RedisAudit>(*store_)),
      nodes_(std::make_unique<coord::RedisNodes>(*store_)) {}

RedisCoordinator::~RedisCoordinator() = default;

Result<Instant> RedisCoordinator::Now() { return store_->Now(); }

// --- ClaimStore: RedisClaims and RedisFires ----------------------------------------------------

Result<ClaimOutcome> RedisCoordinator::Claim(const ClaimRequest& req) {
  return claims_->Claim(req);
}
std::vector<Result<ClaimOutcome>> RedisCoordinator::ClaimMany(
    const std::vector<ClaimRequest>& reqs) {
  return claims_->ClaimMany(reqs);
}
std::string RedisCoordinator::ClaimRoute(const std::string& job_id) const {
  if (!store_->cluster()) return "";
  return store_->AddressOf(store_->IndexBase(job_id));
}
bool RedisCoordinator::ClaimsMayBeWithdrawn() const { return store_->options().wait_replicas > 0; }
int RedisCoordinator::AddRoutesListener(std::function<void()> listener) {
  return store_->routes().Add(std::move(listener));
}
void RedisCoordinator::RemoveRoutesListener(int handle) { store_->routes().Remove(handle); }
Status RedisCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return claims_->Renew(claim, ttl);
}
Result<gnomon::Claim> RedisCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return claims_->NextAttempt(claim, ttl);
}
Status RedisCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return claims_->Report(claim, record, final);
}
std::vector<Status> RedisCoordinator::ReportMany(const std::vector<ReportRequest>& reqs) {
  return claims_->ReportMany(reqs);
}

Result<JobState> RedisCoordinator::GetJobState(const std::string& job_id) {
  return fires_->GetJobState(job_id);
}
Result<std::vector<JobState>> RedisCoordinator::GetJobStates(
    const std::vector<std::string>& job_ids) {
  return fires_->GetJobStates(job_ids);
}
Status RedisCoordinator::SetPaused(const std::string& job_id, bool paused,
                                   const std::string& reason) {
  return fires_->SetPaused(job_id, paused, reason);
}
Result<std::vector<ExpiredFire>> RedisCoordinator::ListExpired(int limit) {
  return fires_->ListExpired(limit);
}
Result<std::optional<gnomon::Claim>> RedisCoordinator::ResolveLost(const ExpiredFire& fire,
                                                                   const std::string& node_id,
                                                                   LostPolicy policy,
                                                                   Duration ttl) {
  return fires_->ResolveLost(fire, node_id, policy, ttl);
}
Status RedisCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                       const std::string& reason) {
  return fires_->RecordSkipped(fire, node_id, reason);
}
Status RedisCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  return fires_->CancelFire(fire, reason);
}
Result<gnomon::Claim> RedisCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                  Duration ttl, const std::string& cause) {
  return fires_->RerunFire(fire, node_id, ttl, cause);
}
Status RedisCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return fires_->SaveCheckpoint(claim, value);
}
Status RedisCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return fires_->SaveLiveOutput(claim, output);
}
Result<std::optional<std::string>> RedisCoordinator::LoadCheckpoint(const FireKey& fire) {
  return fires_->LoadCheckpoint(fire);
}
Result<std::vector<bool>> RedisCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  return fires_->FiresRecorded(fires);
}

// --- RunHistory: RedisRunHistory ---------------------------------------------------------------

Result<RunPage> RedisCoordinator::ListRuns(const RunQuery& query) {
  return history_->ListRuns(query);
}
Result<std::vector<RunRecord>> RedisCoordinator::GetRun(const std::string& run_id) {
  return history_->GetRun(run_id);
}
Status RedisCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return history_->PruneHistory(job_id, keep_last, max_age);
}

std::vector<Status> RedisCoordinator::PruneHistoryMany(const std::vector<PruneRequest>& reqs) {
  return history_->PruneHistoryMany(reqs);
}

// --- NodeRegistry: RedisNodes ------------------------------------------------------------------

Status RedisCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  return nodes_->Heartbeat(node, ttl);
}
Result<std::vector<NodeInfo>> RedisCoordinator::ListNodes() { return nodes_->ListNodes(); }

// --- DefinitionStore: RedisDefinitions ---------------------------------------------------------

Result<int64_t> RedisCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                         int64_t expected_version) {
  return definitions_->PutJob(job_id, definition, expected_version);
}
Status RedisCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  return definitions_->DeleteJob(job_id, expected_version);
}
Result<StoredJob> RedisCoordinator::GetJob(const std::string& job_id) {
  return definitions_->GetJob(job_id);
}
Result<std::vector<StoredJob>> RedisCoordinator::ListJobs() { return definitions_->ListJobs(); }
Result<int64_t> RedisCoordinator::JobsVersion() { return definitions_->JobsVersion(); }
// While the subscriber connection is down, the Coordinator's polling wait stands in.
Result<int64_t> RedisCoordinator::WaitJobsChange(int64_t since, Duration timeout) {
  return definitions_->WaitJobsChange(
      since, timeout, [this](int64_t s, Duration t) { return Coordinator::WaitJobsChange(s, t); });
}

// --- AuditStore: RedisAudit --------------------------------------------------------------------

Result<int64_t> RedisCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  return audit_->AppendAudit(record, keep);
}
Result<std::vector<AuditRecord>> RedisCoordinator::ListAudit(int limit, int64_t before_seq) {
  return audit_->ListAudit(limit, before_seq);
}

}  // namespace gnomon
