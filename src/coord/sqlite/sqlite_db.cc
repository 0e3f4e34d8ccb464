#include "src/coord/sqlite/sqlite_db.h"

#include "src/coord/coordinator_util.h"

namespace gnomon {
namespace {

// Schema version 1. Instants are unix milliseconds. A `fires` row is a fire's claim key and
// current lease (open = 1 while a lease is held); `runs` holds one history record per attempt;
// `fences` the per-job fencing counter; `counters` the jobs version.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE fires (
  job_id TEXT NOT NULL,
  scheduled_ms INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  shard_count INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  fencing_token INTEGER NOT NULL,
  node_id TEXT NOT NULL,
  lease_expires_ms INTEGER NOT NULL,
  open INTEGER NOT NULL,
  checkpoint BLOB,
  PRIMARY KEY (job_id, scheduled_ms, shard)
) WITHOUT ROWID;
CREATE INDEX fires_open_by_expiry ON fires (lease_expires_ms) WHERE open = 1;
CREATE INDEX fires_open_by_job ON fires (job_id, lease_expires_ms) WHERE open = 1;
CREATE INDEX fires_by_token ON fires (job_id, fencing_token);
CREATE TABLE runs (
  job_id TEXT NOT NULL,
  scheduled_ms INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  run_id TEXT NOT NULL,
  shard_count INTEGER NOT NULL,
  fencing_token INTEGER NOT NULL,
  node_id TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  finished_ms INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  exit_code INTEGER,
  error BLOB NOT NULL,
  output BLOB NOT NULL,
  skip_reason BLOB NOT NULL,
  PRIMARY KEY (job_id, scheduled_ms, shard, attempt)
) WITHOUT ROWID;
CREATE INDEX runs_by_time ON runs (scheduled_ms DESC, job_id, shard, attempt DESC);
CREATE INDEX runs_by_run_id ON runs (run_id, attempt);
CREATE INDEX runs_by_token ON runs (job_id, fencing_token);
CREATE TABLE fences (
  job_id TEXT PRIMARY KEY,
  last_token INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE job_state (
  job_id TEXT PRIMARY KEY,
  paused INTEGER NOT NULL DEFAULT 0,
  pause_reason BLOB NOT NULL DEFAULT '',
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  last_scheduled_ms INTEGER
) WITHOUT ROWID;
CREATE TABLE nodes (
  node_id TEXT PRIMARY KEY,
  host BLOB NOT NULL,
  version BLOB NOT NULL,
  started_ms INTEGER NOT NULL,
  last_heartbeat_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  running INTEGER NOT NULL,
  clock_skew_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE jobs (
  job_id TEXT PRIMARY KEY,
  definition BLOB NOT NULL,
  version INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE counters (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES ('jobs_version', 0);
PRAGMA user_version = 1;
)sql";

// Schema version 2 adds the audit log (seq never reused: AUTOINCREMENT).
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  who BLOB NOT NULL,
  action BLOB NOT NULL,
  target BLOB NOT NULL,
  status INTEGER NOT NULL,
  before_json BLOB NOT NULL,
  after_json BLOB NOT NULL
);
PRAGMA user_version = 2;
)sql";

// Schema version 3 bounds failed calls (status >= 400) apart from the others in the audit log:
// each class is trimmed along this index.
constexpr const char* kSchemaV3 = R"sql(
CREATE INDEX audit_by_class ON audit ((status >= 400), seq);
PRAGMA user_version = 3;
)sql";

// Schema version 4 keeps each run's parameters (JSON object text; '' = none) and cause.
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE runs ADD COLUMN params BLOB NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN cause BLOB NOT NULL DEFAULT '';
PRAGMA user_version = 4;
)sql";

// Schema version 5 keeps each job's latest prune cutoff: fire rows before it may be gone, so a
// claim by schedule before it is refused.
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE job_state ADD COLUMN markers_pruned_ms INTEGER;
PRAGMA user_version = 5;
)sql";

}  // namespace

namespace sqlite {

Result<RunRecord> ReadRun(const Statement& row) {
  RunRecord r;
  r.run_id = row.Bytes(0);
  r.job_id = row.Bytes(1);
  r.scheduled_at = Instant::FromUnixMillis(row.Int(2));
  r.shard = static_cast<int>(row.Int(3));
  r.shard_count = static_cast<int>(row.Int(4));
  r.attempt = static_cast<int>(row.Int(5));
  r.fencing_token = row.Int(6);
  r.node_id = row.Bytes(7);
  r.started_at = Instant::FromUnixMillis(row.Int(8));
  r.finished_at = Instant::FromUnixMillis(row.Int(9));
  Result<RunOutcome> outcome = ParseRunOutcome(row.Bytes(10));
  if (!outcome.ok()) {
    return InternalError("run " + r.run_id + ": stored outcome: " + outcome.status().message());
  }
  r.outcome = *outcome;
  if (!row.IsNull(11)) r.exit_code = static_cast<int>(row.Int(11));
  r.error = row.Bytes(12);
  r.output = row.Bytes(13);
  r.skip_reason = row.Bytes(14);
  r.params = row.Bytes(15);
  r.cause = row.Bytes(16);
  return r;
}

// Binds the fire's primary key to parameters 1-3.
void BindFire(Statement& s, const FireKey& fire) {
  s.BindText(1, fire.job_id).Bind(2, fire.scheduled_at.unix_millis()).Bind(3, int64_t{fire.shard});
}

}  // namespace sqlite

using sqlite::BindFire;
using sqlite::Connection;
using sqlite::Statement;

Status coord::SqliteDb::CreateSchema() {
  return conn_->Transaction([&]() -> Status {
    Result<Statement> version = conn_->Prepare("PRAGMA user_version");
    if (!version.ok()) return version.status();
    Result<bool> row = version->Step();
    if (!row.ok()) return row.status();
    const int64_t v = *row ? version->Int(0) : 0;
    if (v == SqliteCoordinator::kSchemaVersion) return Status::Ok();
    if (v > SqliteCoordinator::kSchemaVersion) {
      return FailedPreconditionError("sqlite " + conn_->path() + ": schema version " +
                                     std::to_string(v) + " is newer than this gnomon's (" +
                                     std::to_string(SqliteCoordinator::kSchemaVersion) + ")");
    }
    if (v < 0 || v > 4) {
      return InternalError("sqlite " + conn_->path() + ": unknown schema version " +
                           std::to_string(v));
    }
    if (v < 1) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV1));
    if (v < 2) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV2));
    if (v < 3) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV3));
    if (v < 4) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV4));
    return conn_->Exec(kSchemaV5);
  });
}

Result<std::optional<coord::SqliteDb::FireRow>> coord::SqliteDb::LoadFire(const FireKey& fire) {
  Result<Statement> s = conn_->Prepare(
      "SELECT shard_count, attempt, fencing_token, node_id, lease_expires_ms, open FROM fires "
      "WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
  if (!s.ok()) return s.status();
  BindFire(*s, fire);
  Result<bool> row = s->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<FireRow>();
  return std::optional<FireRow>(FireRow{static_cast<int>(s->Int(0)), static_cast<int>(s->Int(1)),
                                        s->Int(2), s->Bytes(3), Instant::FromUnixMillis(s->Int(4)),
                                        s->Int(5) != 0});
}

// Advances the job's fencing counter: above its stored value and above every token in the
// history and the fire rows, so it never goes backwards even if the counter row was lost.
Result<int64_t> coord::SqliteDb::NextToken(const std::string& job_id) {
  Result<Statement> s = conn_->Prepare(
      "INSERT INTO fences (job_id, last_token) VALUES (?1, 1 + max("
      "  coalesce((SELECT max(fencing_token) FROM runs WHERE job_id = ?1), 0),"
      "  coalesce((SELECT max(fencing_token) FROM fires WHERE job_id = ?1), 0))) "
      "ON CONFLICT (job_id) DO UPDATE SET last_token = max(last_token + 1, excluded.last_token) "
      "RETURNING last_token");
  if (!s.ok()) return s.status();
  s->BindText(1, job_id);
  Result<bool> row = s->Step();
  if (!row.ok()) return row.status();
  if (!*row) return InternalError("fencing counter update returned no row");
  const int64_t token = s->Int(0);
  GNOMON_RETURN_IF_ERROR(s->Run());
  return token;
}

Status coord::SqliteDb::PutRun(const RunRecord& r) {
  Result<Statement> s = conn_->Prepare(
      "INSERT OR REPLACE INTO runs (" GNOMON_RUN_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
  if (!s.ok()) return s.status();
  s->BindText(1, r.run_id)
      .BindText(2, r.job_id)
      .Bind(3, r.scheduled_at.unix_millis())
      .Bind(4, int64_t{r.shard})
      .Bind(5, int64_t{r.shard_count})
      .Bind(6, int64_t{r.attempt})
      .Bind(7, r.fencing_token)
      .BindText(8, r.node_id)
      .Bind(9, r.started_at.unix_millis())
      .Bind(10, r.finished_at.unix_millis())
      .BindText(11, ToString(r.outcome))
      .Bind(12, r.exit_code ? std::optional<int64_t>(*r.exit_code) : std::nullopt)
      .BindBlob(13, r.error)
      .BindBlob(14, coord::TruncateOutput(r.output))
      .BindBlob(15, r.skip_reason)
      .BindBlob(16, r.params)
      .BindBlob(17, r.cause);
  return s->Run();
}

Status coord::SqliteDb::CloseFire(const FireKey& fire) {
  Result<Statement> s = conn_->Prepare(
      "UPDATE fires SET open = 0 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
  if (!s.ok()) return s.status();
  BindFire(*s, fire);
  return s->Run();
}

Result<int64_t> coord::SqliteDb::BumpJobsVersion() {
  Result<Statement> s = conn_->Prepare(
      "UPDATE counters SET value = value + 1 WHERE name = 'jobs_version' RETURNING value");
  if (!s.ok()) return s.status();
  Result<bool> row = s->Step();
  if (!row.ok()) return row.status();
  if (!*row) return InternalError("sqlite " + conn_->path() + ": jobs_version row missing");
  const int64_t v = s->Int(0);
  GNOMON_RETURN_IF_ERROR(s->Run());
  return v;
}

Result<JobState> coord::SqliteDb::LoadJobState(const std::string& job_id) {
  Result<Statement> s = conn_->Prepare(
      "SELECT paused, pause_reason, consecutive_failures, last_scheduled_ms FROM job_state "
      "WHERE job_id = ?1");
  if (!s.ok()) return s.status();
  s->BindText(1, job_id);
  Result<bool> row = s->Step();
  if (!row.ok()) return row.status();
  JobState state;
  if (!*row) return state;
  state.paused = s->Int(0) != 0;
  state.pause_reason = s->Bytes(1);
  state.consecutive_failures = static_cast<int>(s->Int(2));
  if (!s->IsNull(3)) state.last_scheduled = Instant::FromUnixMillis(s->Int(3));
  return state;
}

}  // namespace gnomon
