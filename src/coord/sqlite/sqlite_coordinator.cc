#include "gnomon/sqlite_coordinator.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <utility>

#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_connection.h"

namespace gnomon {
namespace {

using sqlite::Connection;
using sqlite::Statement;

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

// The columns of a history record, in the order ReadRun expects.
#define GNOMON_RUN_COLUMNS                                                              \
  "run_id, job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, node_id, " \
  "started_ms, finished_ms, outcome, exit_code, error, output, skip_reason, params, cause"

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

// The fire row's lease state.
struct FireRow {
  int shard_count = 1;
  int attempt = 1;
  int64_t fencing_token = 0;
  std::string node_id;
  Instant lease_expires_at;
  bool open = false;
};

// `fire` with the shard count its row was claimed with.
FireKey StoredKey(FireKey fire, const FireRow& row) {
  fire.shard_count = row.shard_count;
  return fire;
}

}  // namespace

// The connection plus the backend's multi-statement building blocks. Every method runs inside
// a transaction its caller opened (or is a single statement).
class SqliteCoordinator::Db {
 public:
  explicit Db(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
  Connection& conn() { return *conn_; }

  Status CreateSchema() {
    return conn_->Transaction([&]() -> Status {
      Result<Statement> version = conn_->Prepare("PRAGMA user_version");
      if (!version.ok()) return version.status();
      Result<bool> row = version->Step();
      if (!row.ok()) return row.status();
      const int64_t v = *row ? version->Int(0) : 0;
      if (v == kSchemaVersion) return Status::Ok();
      if (v > kSchemaVersion) {
        return FailedPreconditionError("sqlite " + conn_->path() + ": schema version " +
                                       std::to_string(v) + " is newer than this gnomon's (" +
                                       std::to_string(kSchemaVersion) + ")");
      }
      if (v < 0 || v > 3) {
        return InternalError("sqlite " + conn_->path() + ": unknown schema version " +
                             std::to_string(v));
      }
      if (v < 1) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV1));
      if (v < 2) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV2));
      if (v < 3) GNOMON_RETURN_IF_ERROR(conn_->Exec(kSchemaV3));
      return conn_->Exec(kSchemaV4);
    });
  }

  Result<std::optional<FireRow>> LoadFire(const FireKey& fire) {
    Result<Statement> s = conn_->Prepare(
        "SELECT shard_count, attempt, fencing_token, node_id, lease_expires_ms, open FROM fires "
        "WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row) return std::optional<FireRow>();
    return std::optional<FireRow>(FireRow{static_cast<int>(s->Int(0)), static_cast<int>(s->Int(1)),
                                          s->Int(2), s->Bytes(3),
                                          Instant::FromUnixMillis(s->Int(4)), s->Int(5) != 0});
  }

  // The fire row `claim` holds a live lease on, or LeaseLost.
  Result<FireRow> Fenced(const gnomon::Claim& claim, Instant now) {
    Result<std::optional<FireRow>> fire = LoadFire(claim.fire);
    if (!fire.ok()) return fire.status();
    const std::string what =
        claim.fire.RunId() + " (token " + std::to_string(claim.fencing_token) + ")";
    if (!fire->has_value()) return LeaseLostError(what + ": the fire has no claim");
    const FireRow& row = **fire;
    if (row.fencing_token != claim.fencing_token) {
      return LeaseLostError(what + ": fenced off by token " + std::to_string(row.fencing_token));
    }
    if (!row.open) return LeaseLostError(what + ": the lease was released or revoked");
    if (row.lease_expires_at <= now) return LeaseLostError(what + ": the lease expired");
    return row;
  }

  // Advances the job's fencing counter: above its stored value and above every token in the
  // history and the fire rows, so it never goes backwards even if the counter row was lost.
  Result<int64_t> NextToken(const std::string& job_id) {
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

  Status PutRun(const RunRecord& r) {
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

  Status AdvanceLastScheduled(const FireKey& fire) {
    Result<Statement> s = conn_->Prepare(
        "INSERT INTO job_state (job_id, last_scheduled_ms) VALUES (?1, ?2) "
        "ON CONFLICT (job_id) DO UPDATE SET last_scheduled_ms = "
        "max(coalesce(last_scheduled_ms, excluded.last_scheduled_ms), "
        "excluded.last_scheduled_ms)");
    if (!s.ok()) return s.status();
    s->BindText(1, fire.job_id).Bind(2, fire.scheduled_at.unix_millis());
    return s->Run();
  }

  // A closed fire row with one skipped record. REQUIRES: the fire has no row.
  Status InsertSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason,
                       Instant now) {
    {
      Result<Statement> s = conn_->Prepare(
          "INSERT INTO fires (job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, "
          "node_id, lease_expires_ms, open) VALUES (?1, ?2, ?3, ?4, 1, 0, ?5, ?6, 0)");
      if (!s.ok()) return s.status();
      BindFire(*s, fire);
      s->Bind(4, int64_t{fire.shard_count}).BindText(5, node_id).Bind(6, now.unix_millis());
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    RunRecord record = coord::NewRecord(fire, 1, 0, node_id, now, RunOutcome::kSkipped);
    record.skip_reason = reason;
    GNOMON_RETURN_IF_ERROR(PutRun(record));
    return AdvanceLastScheduled(fire);
  }

  // Starts attempt `attempt` of the (existing) fire row for `node_id` with a new token.
  Result<gnomon::Claim> StartAttempt(const FireKey& fire, int attempt, const std::string& node_id,
                                     Duration ttl, Instant now) {
    Result<int64_t> token = NextToken(fire.job_id);
    if (!token.ok()) return token.status();
    const Instant expires = now + ttl;
    {
      Result<Statement> s = conn_->Prepare(
          "UPDATE fires SET attempt = ?4, fencing_token = ?5, node_id = ?6, "
          "lease_expires_ms = ?7, open = 1 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
      if (!s.ok()) return s.status();
      BindFire(*s, fire);
      s->Bind(4, int64_t{attempt})
          .Bind(5, *token)
          .BindText(6, node_id)
          .Bind(7, expires.unix_millis());
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    GNOMON_RETURN_IF_ERROR(
        PutRun(coord::NewRecord(fire, attempt, *token, node_id, now, RunOutcome::kRunning)));
    return gnomon::Claim{fire, attempt, *token, node_id, expires};
  }

  // Closes attempt `attempt`'s record with `outcome` if it is still running.
  Status FinishRunning(const FireKey& fire, int attempt, RunOutcome outcome,
                       const std::string& error, Instant now) {
    Result<Statement> s = conn_->Prepare(
        "UPDATE runs SET outcome = ?5, finished_ms = ?6, error = ?7 WHERE job_id = ?1 AND "
        "scheduled_ms = ?2 AND shard = ?3 AND attempt = ?4 AND outcome = 'running'");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    s->Bind(4, int64_t{attempt})
        .BindText(5, ToString(outcome))
        .Bind(6, now.unix_millis())
        .BindBlob(7, error);
    return s->Run();
  }

  Status CloseFire(const FireKey& fire) {
    Result<Statement> s = conn_->Prepare(
        "UPDATE fires SET open = 0 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    return s->Run();
  }

  Status ApplyFailureEffect(const std::string& job_id, coord::FailureEffect effect) {
    const char* sql = nullptr;
    switch (effect) {
      case coord::FailureEffect::kUnchanged:
        return Status::Ok();
      case coord::FailureEffect::kReset:
        sql =
            "INSERT INTO job_state (job_id) VALUES (?1) "
            "ON CONFLICT (job_id) DO UPDATE SET consecutive_failures = 0";
        break;
      case coord::FailureEffect::kIncrement:
        sql =
            "INSERT INTO job_state (job_id, consecutive_failures) VALUES (?1, 1) "
            "ON CONFLICT (job_id) DO UPDATE SET consecutive_failures = consecutive_failures + 1";
        break;
    }
    Result<Statement> s = conn_->Prepare(sql);
    if (!s.ok()) return s.status();
    s->BindText(1, job_id);
    return s->Run();
  }

  Result<int64_t> BumpJobsVersion() {
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

 private:
  std::unique_ptr<Connection> conn_;
};

struct SqliteCoordinator::Reader {
  std::mutex mu;
  std::unique_ptr<Db> db;  // guarded by mu
};

// --- Open ------------------------------------------------------------------------------------

SqliteCoordinator::SqliteCoordinator(std::unique_ptr<Db> db,
                                     std::vector<std::unique_ptr<Reader>> readers, Clock& clock)
    : clock_(clock), db_(std::move(db)), readers_(std::move(readers)) {}

SqliteCoordinator::~SqliteCoordinator() = default;

Status SqliteCoordinator::Read(const std::function<Status(Db&)>& body) {
  for (const std::unique_ptr<Reader>& reader : readers_) {
    std::unique_lock<std::mutex> lock(reader->mu, std::try_to_lock);
    if (lock.owns_lock()) return body(*reader->db);
  }
  // All busy: queue on one, spreading the waiters over the pool.
  Reader& reader =
      *readers_[next_reader_.fetch_add(1, std::memory_order_relaxed) % readers_.size()];
  std::lock_guard<std::mutex> lock(reader.mu);
  return body(*reader.db);
}

Result<std::unique_ptr<SqliteCoordinator>> SqliteCoordinator::Open(const std::string& path,
                                                                   Clock& clock,
                                                                   SqliteOptions options) {
  if (path.empty()) return InvalidArgumentError("sqlite: the database path is empty");
  if (options.busy_timeout < Duration(0)) {
    return InvalidArgumentError("sqlite: busy_timeout is negative");
  }
  if (options.read_connections < 1) {
    return InvalidArgumentError("sqlite: read_connections must be at least 1");
  }
  // A new database file is created readable by its owner only (SQLite gives its -wal and -shm
  // files the same mode): it holds every definition, pause state and run output.
  if (const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); fd >= 0) {
    ::close(fd);
  }
  Result<std::unique_ptr<Connection>> conn = Connection::Open(path, options.busy_timeout);
  if (!conn.ok()) return conn.status();
  auto db = std::make_unique<Db>(std::move(*conn));
  // WAL lets readers run beside the one writer and, with synchronous=FULL, makes every
  // committed claim durable across a crash (power loss included). Switching a new file to WAL
  // can answer SQLITE_BUSY without calling the busy handler while another process opens the
  // same file, so it is retried (on the Clock) until busy_timeout.
  const Duration give_up = clock.SteadyNow() + options.busy_timeout;
  std::mutex retry_mu;
  std::condition_variable retry_cv;
  for (int attempt = 0;; ++attempt) {
    Result<Statement> wal = db->conn().Prepare("PRAGMA journal_mode = WAL");
    Result<bool> row = wal.ok() ? wal->Step() : Result<bool>(wal.status());
    if (row.ok()) {
      const std::string mode = *row ? wal->Bytes(0) : "";
      if (mode != "wal") {
        return FailedPreconditionError("sqlite " + path + ": cannot use WAL journal mode (got \"" +
                                       mode + "\")");
      }
      break;
    }
    if (row.status().code() != StatusCode::kUnavailable || clock.SteadyNow() >= give_up) {
      return row.status();
    }
    std::unique_lock<std::mutex> lock(retry_mu);
    clock.WaitFor(lock, retry_cv, std::chrono::milliseconds(5 << std::min(attempt, 4)),
                  [] { return false; });
  }
  GNOMON_RETURN_IF_ERROR(db->conn().Exec("PRAGMA synchronous = FULL"));
  GNOMON_RETURN_IF_ERROR(db->CreateSchema());
  // The read connections open the file the write connection has created and switched to WAL
  // (a persistent mode); query_only makes any write on them an error instead of a second writer.
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < options.read_connections; ++i) {
    Result<std::unique_ptr<Connection>> read = Connection::Open(path, options.busy_timeout);
    if (!read.ok()) return read.status();
    GNOMON_RETURN_IF_ERROR((*read)->Exec("PRAGMA query_only = ON"));
    readers.push_back(std::make_unique<Reader>());
    readers.back()->db = std::make_unique<Db>(std::move(*read));
  }
  return std::unique_ptr<SqliteCoordinator>(
      new SqliteCoordinator(std::move(db), std::move(readers), clock));
}

Result<Instant> SqliteCoordinator::Now() { return clock_.Now(); }

// --- Claims and leases -----------------------------------------------------------------------

Result<ClaimOutcome> SqliteCoordinator::Claim(const ClaimRequest& req) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateClaimRequest(req));
  using R = ClaimOutcome::Result;
  std::lock_guard<std::mutex> lock(mu_);
  ClaimOutcome out;
  Status status = db_->conn().Transaction([&]() -> Status {
    // Read the clock once the write lock is held: claims are ordered by it across processes.
    const Instant now = clock_.Now();
    out = coord::MakeOutcome(R::kClaimed, now);
    Result<std::optional<FireRow>> existing = db_->LoadFire(req.fire);
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) {
      out.result = R::kAlreadyClaimed;
      return Status::Ok();
    }
    if (req.fire.scheduled_at > now + req.skew_tolerance) {
      out.result = R::kTooEarly;
      return Status::Ok();
    }
    {
      Result<Statement> s = db_->conn().Prepare("SELECT paused FROM job_state WHERE job_id = ?1");
      if (!s.ok()) return s.status();
      s->BindText(1, req.fire.job_id);
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (*row && s->Int(0) != 0) out.result = R::kPaused;
    }
    if (out.result == R::kPaused) return db_->InsertSkipped(req.fire, req.node_id, "paused", now);
    if (req.overlap != OverlapPolicy::kAllow) {
      // Live fires of the same job at other instants (sibling shards of this instant run
      // together).
      std::vector<std::pair<FireKey, int>> live;  // fire, attempt
      {
        Result<Statement> s = db_->conn().Prepare(
            "SELECT scheduled_ms, shard, shard_count, attempt FROM fires WHERE job_id = ?1 AND "
            "open = 1 AND lease_expires_ms > ?2 AND scheduled_ms <> ?3 "
            "ORDER BY scheduled_ms, shard");
        if (!s.ok()) return s.status();
        s->BindText(1, req.fire.job_id)
            .Bind(2, now.unix_millis())
            .Bind(3, req.fire.scheduled_at.unix_millis());
        for (;;) {
          Result<bool> row = s->Step();
          if (!row.ok()) return row.status();
          if (!*row) break;
          FireKey other;
          other.job_id = req.fire.job_id;
          other.scheduled_at = Instant::FromUnixMillis(s->Int(0));
          other.shard = static_cast<int>(s->Int(1));
          other.shard_count = static_cast<int>(s->Int(2));
          live.emplace_back(std::move(other), static_cast<int>(s->Int(3)));
        }
      }
      if (!live.empty() && req.overlap == OverlapPolicy::kForbid) {
        out.result = R::kOverlap;
        return db_->InsertSkipped(req.fire, req.node_id, "overlap", now);
      }
      for (const auto& [other, attempt] : live) {
        GNOMON_RETURN_IF_ERROR(db_->FinishRunning(other, attempt, RunOutcome::kCancelled,
                                                  "replaced by " + req.fire.RunId(), now));
        GNOMON_RETURN_IF_ERROR(db_->CloseFire(other));
        out.replaced.push_back(other);
      }
    }
    {
      Result<Statement> s = db_->conn().Prepare(
          "INSERT INTO fires (job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, "
          "node_id, lease_expires_ms, open) VALUES (?1, ?2, ?3, ?4, 0, 0, '', 0, 0)");
      if (!s.ok()) return s.status();
      BindFire(*s, req.fire);
      s->Bind(4, int64_t{req.fire.shard_count});
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    Result<gnomon::Claim> claim = db_->StartAttempt(req.fire, 1, req.node_id, req.lease_ttl, now);
    if (!claim.ok()) return claim.status();
    out.claim = std::move(*claim);
    if (!req.cause.empty()) {
      out.claim->cause = req.cause;
      Result<Statement> s = db_->conn().Prepare(
          "UPDATE runs SET cause = ?4 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3 AND "
          "attempt = 1");
      if (!s.ok()) return s.status();
      BindFire(*s, req.fire);
      s->BindBlob(4, req.cause);
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    return db_->AdvanceLastScheduled(req.fire);
  });
  if (!status.ok()) return status;
  return out;
}

Status SqliteCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "renew: ttl"));
  std::lock_guard<std::mutex> lock(mu_);
  Instant expires;
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    const Instant now = clock_.Now();
    Result<FireRow> fire = db_->Fenced(claim, now);
    if (!fire.ok()) return fire.status();
    expires = now + ttl;
    Result<Statement> s = db_->conn().Prepare(
        "UPDATE fires SET lease_expires_ms = ?4 WHERE job_id = ?1 AND scheduled_ms = ?2 AND "
        "shard = ?3");
    if (!s.ok()) return s.status();
    BindFire(*s, claim.fire);
    s->Bind(4, expires.unix_millis());
    return s->Run();
  }));
  claim.lease_expires_at = expires;
  return Status::Ok();
}

Result<gnomon::Claim> SqliteCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "next attempt: ttl"));
  std::lock_guard<std::mutex> lock(mu_);
  gnomon::Claim next;
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    const Instant now = clock_.Now();
    Result<FireRow> fire = db_->Fenced(claim, now);
    if (!fire.ok()) return fire.status();
    GNOMON_RETURN_IF_ERROR(db_->FinishRunning(
        claim.fire, fire->attempt, RunOutcome::kFailed,
        "superseded by attempt " + std::to_string(fire->attempt + 1) + " without a report", now));
    Result<gnomon::Claim> started =
        db_->StartAttempt(StoredKey(claim.fire, *fire), fire->attempt + 1, claim.node_id, ttl, now);
    if (!started.ok()) return started.status();
    next = std::move(*started);
    return Status::Ok();
  }));
  return next;
}

Status SqliteCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateReport(claim, record, final));
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    Result<FireRow> fire = db_->Fenced(claim, clock_.Now());
    if (!fire.ok()) return fire.status();
    GNOMON_RETURN_IF_ERROR(db_->PutRun(record));
    if (!final) return Status::Ok();
    GNOMON_RETURN_IF_ERROR(db_->CloseFire(claim.fire));
    return db_->ApplyFailureEffect(claim.fire.job_id, coord::FailureEffectOf(record.outcome));
  });
}

Result<std::vector<ExpiredFire>> SqliteCoordinator::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  std::vector<ExpiredFire> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, node_id, "
        "lease_expires_ms FROM fires WHERE open = 1 AND lease_expires_ms <= ?1 "
        "ORDER BY lease_expires_ms, job_id, scheduled_ms, shard LIMIT ?2");
    if (!s.ok()) return s.status();
    s->Bind(1, clock_.Now().unix_millis()).Bind(2, int64_t{*page});
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      ExpiredFire e;
      e.fire.job_id = s->Bytes(0);
      e.fire.scheduled_at = Instant::FromUnixMillis(s->Int(1));
      e.fire.shard = static_cast<int>(s->Int(2));
      e.fire.shard_count = static_cast<int>(s->Int(3));
      e.attempt = static_cast<int>(s->Int(4));
      e.fencing_token = s->Int(5);
      e.node_id = s->Bytes(6);
      e.lease_expired_at = Instant::FromUnixMillis(s->Int(7));
      out.push_back(std::move(e));
    }
  }));
  return out;
}

Result<std::optional<gnomon::Claim>> SqliteCoordinator::ResolveLost(const ExpiredFire& expired,
                                                                    const std::string& node_id,
                                                                    LostPolicy policy,
                                                                    Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateResolveLost(expired, node_id, policy, ttl));
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<gnomon::Claim> out;
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    const Instant now = clock_.Now();
    Result<std::optional<FireRow>> fire = db_->LoadFire(expired.fire);
    if (!fire.ok()) return fire.status();
    if (!fire->has_value()) {
      return NotFoundError("fire " + expired.fire.RunId() + " has no record");
    }
    const FireRow& row = **fire;
    if (!row.open || row.fencing_token != expired.fencing_token || row.lease_expires_at > now) {
      return FailedPreconditionError("fire " + expired.fire.RunId() + " (token " +
                                     std::to_string(expired.fencing_token) +
                                     ") was resolved, renewed or taken over meanwhile");
    }
    GNOMON_RETURN_IF_ERROR(db_->FinishRunning(expired.fire, row.attempt, RunOutcome::kLost,
                                              "lease expired; holder " + row.node_id + " vanished",
                                              now));
    if (policy == LostPolicy::kFail) {
      GNOMON_RETURN_IF_ERROR(db_->CloseFire(expired.fire));
      return db_->ApplyFailureEffect(expired.fire.job_id, coord::FailureEffect::kIncrement);
    }
    Result<gnomon::Claim> next =
        db_->StartAttempt(StoredKey(expired.fire, row), row.attempt + 1, node_id, ttl, now);
    if (!next.ok()) return next.status();
    out = std::move(*next);
    return Status::Ok();
  }));
  return out;
}

Status SqliteCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                        const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    Result<std::optional<FireRow>> existing = db_->LoadFire(fire);
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) {
      return AlreadyExistsError("fire " + fire.RunId() + " already has a record");
    }
    return db_->InsertSkipped(fire, node_id, reason, clock_.Now());
  });
}

Status SqliteCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    Result<std::optional<FireRow>> row = db_->LoadFire(fire);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return coord::NoSuchFire(fire);
    if (!(*row)->open) return coord::FireEnded(fire);
    std::optional<RunRecord> current;
    {
      Result<Statement> s = db_->conn().Prepare(
          "SELECT " GNOMON_RUN_COLUMNS
          " FROM runs WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3 AND attempt = ?4");
      if (!s.ok()) return s.status();
      BindFire(*s, fire);
      s->Bind(4, int64_t{(*row)->attempt});
      Result<bool> found = s->Step();
      if (!found.ok()) return found.status();
      if (*found) {
        Result<RunRecord> r = ReadRun(*s);
        if (!r.ok()) return r.status();
        current = std::move(*r);
      }
    }
    if (current) {
      coord::CancelRecord(*current, reason, clock_.Now());
      GNOMON_RETURN_IF_ERROR(db_->PutRun(*current));
    }
    GNOMON_RETURN_IF_ERROR(db_->CloseFire(fire));
    return db_->BumpJobsVersion().status();
  });
}

Result<gnomon::Claim> SqliteCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                   Duration ttl, const std::string& cause) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateRerun(fire, node_id, ttl, cause));
  std::lock_guard<std::mutex> lock(mu_);
  gnomon::Claim claim;
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    Result<std::optional<FireRow>> row = db_->LoadFire(fire);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return coord::NoSuchFire(fire);
    if ((*row)->open) return coord::FireNotEnded(fire);
    Result<gnomon::Claim> started =
        db_->StartAttempt(StoredKey(fire, **row), (*row)->attempt + 1, node_id, ttl, clock_.Now());
    if (!started.ok()) return started.status();
    claim = std::move(*started);
    claim.cause = cause;
    Result<Statement> s = db_->conn().Prepare(
        "UPDATE runs SET cause = ?5 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3 AND "
        "attempt = ?4");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    s->Bind(4, int64_t{claim.attempt}).BindBlob(5, cause);
    return s->Run();
  }));
  return claim;
}

// --- Checkpoints -----------------------------------------------------------------------------

Status SqliteCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    Result<FireRow> fire = db_->Fenced(claim, clock_.Now());
    if (!fire.ok()) return fire.status();
    Result<Statement> s = db_->conn().Prepare(
        "UPDATE fires SET checkpoint = ?4 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
    if (!s.ok()) return s.status();
    BindFire(*s, claim.fire);
    s->BindBlob(4, value);
    return s->Run();
  });
}

Status SqliteCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    Result<FireRow> fire = db_->Fenced(claim, clock_.Now());
    if (!fire.ok()) return fire.status();
    Result<Statement> s = db_->conn().Prepare(
        "UPDATE runs SET output = ?5 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3 AND "
        "attempt = ?4 AND outcome = 'running'");
    if (!s.ok()) return s.status();
    BindFire(*s, claim.fire);
    s->Bind(4, int64_t{claim.attempt});
    s->BindBlob(5, coord::TruncateOutput(output));
    return s->Run();
  });
}

Result<std::optional<std::string>> SqliteCoordinator::LoadCheckpoint(const FireKey& fire) {
  std::optional<std::string> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT checkpoint FROM fires WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (*row && !s->IsNull(0)) out = s->Bytes(0);
    return Status::Ok();
  }));
  return out;
}

// --- Job state -------------------------------------------------------------------------------

Result<JobState> SqliteCoordinator::GetJobState(const std::string& job_id) {
  JobState state;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT paused, pause_reason, consecutive_failures, last_scheduled_ms FROM job_state "
        "WHERE job_id = ?1");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id);
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    state.paused = s->Int(0) != 0;
    state.pause_reason = s->Bytes(1);
    state.consecutive_failures = static_cast<int>(s->Int(2));
    if (!s->IsNull(3)) state.last_scheduled = Instant::FromUnixMillis(s->Int(3));
    return Status::Ok();
  }));
  return state;
}

Status SqliteCoordinator::SetPaused(const std::string& job_id, bool paused,
                                    const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    {
      Result<Statement> s = db_->conn().Prepare(
          "INSERT INTO job_state (job_id, paused, pause_reason) VALUES (?1, ?2, ?3) "
          "ON CONFLICT (job_id) DO UPDATE SET paused = excluded.paused, "
          "pause_reason = excluded.pause_reason");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id).Bind(2, int64_t{paused ? 1 : 0}).BindBlob(3, paused ? reason : "");
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    return db_->BumpJobsVersion().status();
  });
}

// --- History ---------------------------------------------------------------------------------

Result<RunPage> SqliteCoordinator::ListRuns(const RunQuery& query) {
  Result<int> limit = coord::PageLimit(query.limit);
  if (!limit.ok()) return limit.status();
  Result<std::optional<coord::RunPosition>> start = coord::PageStart(query.cursor);
  if (!start.ok()) return start.status();
  const std::optional<coord::RunPosition> after = *start;
  // Keyset pagination in the listing order (scheduled desc, job, shard, attempt desc): a page
  // starts strictly after the cursor's record, so records written meanwhile cause neither
  // duplicates nor gaps.
  // One job's runs say `job_id = ?1`, so SQLite searches the primary key (job_id, scheduled_ms,
  // ...); in the `?1 IS NULL OR job_id = ?1` form it would walk the whole history by time.
#define GNOMON_LIST_RUNS_REST                                                       \
  " AND (?2 IS NULL OR outcome = ?2) "                                              \
  "AND (?3 IS NULL OR scheduled_ms >= ?3) AND (?4 IS NULL OR scheduled_ms < ?4) "   \
  "AND (?5 IS NULL OR scheduled_ms < ?5 OR (scheduled_ms = ?5 AND (job_id > ?6 OR " \
  "(job_id = ?6 AND (shard > ?7 OR (shard = ?7 AND attempt < ?8)))))) "             \
  "ORDER BY scheduled_ms DESC, job_id ASC, shard ASC, attempt DESC LIMIT ?9"
  const char* const sql =
      query.job_id.empty()
          ? "SELECT " GNOMON_RUN_COLUMNS " FROM runs WHERE ?1 IS NULL" GNOMON_LIST_RUNS_REST
          : "SELECT " GNOMON_RUN_COLUMNS " FROM runs WHERE job_id = ?1" GNOMON_LIST_RUNS_REST;
#undef GNOMON_LIST_RUNS_REST
  RunPage page;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare(sql);
    if (!s.ok()) return s.status();
    if (query.job_id.empty()) {
      s->BindNull(1);
    } else {
      s->BindText(1, query.job_id);
    }
    if (query.outcome) {
      s->BindText(2, ToString(*query.outcome));
    } else {
      s->BindNull(2);
    }
    auto ms = [](const std::optional<Instant>& t) {
      return t ? std::optional<int64_t>(t->unix_millis()) : std::nullopt;
    };
    s->Bind(3, ms(query.scheduled_from)).Bind(4, ms(query.scheduled_until));
    if (after) {
      s->Bind(5, after->scheduled_ms)
          .BindText(6, after->job_id)
          .Bind(7, int64_t{after->shard})
          .Bind(8, int64_t{after->attempt});
    } else {
      s->BindNull(5).BindNull(6).BindNull(7).BindNull(8);
    }
    s->Bind(9, int64_t{*limit} + 1);  // one more tells whether a next page exists
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      if (page.runs.size() == static_cast<size_t>(*limit)) {
        page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
        return Status::Ok();
      }
      Result<RunRecord> record = ReadRun(*s);
      if (!record.ok()) return record.status();
      page.runs.push_back(std::move(*record));
    }
  }));
  return page;
}

Result<std::vector<RunRecord>> SqliteCoordinator::GetRun(const std::string& run_id) {
  std::vector<RunRecord> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare("SELECT " GNOMON_RUN_COLUMNS
                                            " FROM runs WHERE run_id = ?1 ORDER BY attempt");
    if (!s.ok()) return s.status();
    s->BindText(1, run_id);
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      Result<RunRecord> record = ReadRun(*s);
      if (!record.ok()) return record.status();
      out.push_back(std::move(*record));
    }
  }));
  if (out.empty()) return NotFoundError("run " + run_id.substr(0, 200) + " has no record");
  return out;
}

Status SqliteCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
  if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    const int64_t cutoff_ms = (clock_.Now() - max_age).unix_millis();
    {
      Result<Statement> s = db_->conn().Prepare(
          "DELETE FROM runs WHERE job_id = ?1 AND outcome <> 'running' AND "
          "(scheduled_ms < ?2 OR (scheduled_ms, shard) NOT IN ("
          "SELECT DISTINCT scheduled_ms, shard FROM runs WHERE job_id = ?1 "
          "ORDER BY scheduled_ms DESC, shard ASC LIMIT ?3))");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id).Bind(2, cutoff_ms).Bind(3, int64_t{keep_last});
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    // Fire rows are the claim keys that refuse a second claim: they go only with max_age.
    Result<Statement> s = db_->conn().Prepare(
        "DELETE FROM fires WHERE job_id = ?1 AND open = 0 AND scheduled_ms < ?2");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id).Bind(2, cutoff_ms);
    return s->Run();
  });
}

// --- Nodes -----------------------------------------------------------------------------------

Status SqliteCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    const Instant now = clock_.Now();
    {
      Result<Statement> s = db_->conn().Prepare("DELETE FROM nodes WHERE expires_ms <= ?1");
      if (!s.ok()) return s.status();
      s->Bind(1, now.unix_millis());
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    Result<Statement> s = db_->conn().Prepare(
        "INSERT OR REPLACE INTO nodes (node_id, host, version, started_ms, last_heartbeat_ms, "
        "expires_ms, running, clock_skew_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    if (!s.ok()) return s.status();
    s->BindText(1, node.node_id)
        .BindBlob(2, node.host)
        .BindBlob(3, node.version)
        .Bind(4, node.started_at.unix_millis())
        .Bind(5, now.unix_millis())
        .Bind(6, (now + ttl).unix_millis())
        .Bind(7, int64_t{node.running})
        .Bind(8, int64_t{node.clock_skew.count()});
    return s->Run();
  });
}

Result<std::vector<NodeInfo>> SqliteCoordinator::ListNodes() {
  std::vector<NodeInfo> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT node_id, host, version, started_ms, last_heartbeat_ms, running, clock_skew_ms "
        "FROM nodes WHERE expires_ms > ?1 ORDER BY node_id");
    if (!s.ok()) return s.status();
    s->Bind(1, clock_.Now().unix_millis());
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      NodeInfo n;
      n.node_id = s->Bytes(0);
      n.host = s->Bytes(1);
      n.version = s->Bytes(2);
      n.started_at = Instant::FromUnixMillis(s->Int(3));
      n.last_heartbeat = Instant::FromUnixMillis(s->Int(4));
      n.running = static_cast<int>(s->Int(5));
      n.clock_skew = Duration(s->Int(6));
      out.push_back(std::move(n));
    }
  }));
  return out;
}

// --- Dynamic job definitions -----------------------------------------------------------------

Result<int64_t> SqliteCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                          int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  std::lock_guard<std::mutex> lock(mu_);
  int64_t version = 0;
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    std::optional<int64_t> current;
    {
      Result<Statement> s = db_->conn().Prepare("SELECT version FROM jobs WHERE job_id = ?1");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id);
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (*row) current = s->Int(0);
    }
    if (!current && expected_version != 0) {
      return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                     std::to_string(expected_version) + ")");
    }
    if (current && expected_version == 0) {
      return AlreadyExistsError("job " + job_id + " already exists");
    }
    if (current && *current != expected_version) {
      return FailedPreconditionError("job " + job_id + " is at version " +
                                     std::to_string(*current) + ", not " +
                                     std::to_string(expected_version));
    }
    // Versions come from the global jobs counter, so a re-created job never reuses one.
    Result<int64_t> next = db_->BumpJobsVersion();
    if (!next.ok()) return next.status();
    version = *next;
    Result<Statement> s = db_->conn().Prepare(
        "INSERT OR REPLACE INTO jobs (job_id, definition, version) VALUES (?1, ?2, ?3)");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id).BindBlob(2, definition).Bind(3, version);
    return s->Run();
  }));
  return version;
}

Status SqliteCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  std::lock_guard<std::mutex> lock(mu_);
  return db_->conn().Transaction([&]() -> Status {
    std::optional<int64_t> current;
    {
      Result<Statement> s = db_->conn().Prepare("SELECT version FROM jobs WHERE job_id = ?1");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id);
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (*row) current = s->Int(0);
    }
    if (!current) return NotFoundError("job " + job_id + " does not exist");
    if (expected_version != -1 && *current != expected_version) {
      return FailedPreconditionError("job " + job_id + " is at version " +
                                     std::to_string(*current) + ", not " +
                                     std::to_string(expected_version));
    }
    {
      Result<Statement> s = db_->conn().Prepare("DELETE FROM jobs WHERE job_id = ?1");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id);
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    return db_->BumpJobsVersion().status();
  });
}

Result<StoredJob> SqliteCoordinator::GetJob(const std::string& job_id) {
  std::optional<StoredJob> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s =
        db.conn().Prepare("SELECT job_id, definition, version FROM jobs WHERE job_id = ?1");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id);
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (*row) out = StoredJob{s->Bytes(0), s->Bytes(1), s->Int(2)};
    return Status::Ok();
  }));
  if (!out) return coord::JobNotFound(job_id);
  return *out;
}

Result<std::vector<StoredJob>> SqliteCoordinator::ListJobs() {
  std::vector<StoredJob> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s =
        db.conn().Prepare("SELECT job_id, definition, version FROM jobs ORDER BY job_id");
    if (!s.ok()) return s.status();
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      out.push_back(StoredJob{s->Bytes(0), s->Bytes(1), s->Int(2)});
    }
  }));
  return out;
}

Result<int64_t> SqliteCoordinator::JobsVersion() {
  int64_t version = 0;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s =
        db.conn().Prepare("SELECT value FROM counters WHERE name = 'jobs_version'");
    if (!s.ok()) return s.status();
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row) return InternalError("sqlite " + db.conn().path() + ": jobs_version row missing");
    version = s->Int(0);
    return Status::Ok();
  }));
  return version;
}

// --- Ownership takeover ----------------------------------------------------------------------

Result<std::vector<bool>> SqliteCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  for (const FireKey& f : fires) GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(f));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> out;
  out.reserve(fires.size());
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    out.clear();
    for (const FireKey& f : fires) {
      Result<std::optional<FireRow>> row = db_->LoadFire(f);
      if (!row.ok()) return row.status();
      out.push_back(row->has_value());
    }
    return Status::Ok();
  }));
  return out;
}

// --- Audit log -------------------------------------------------------------------------------

Result<int64_t> SqliteCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  std::lock_guard<std::mutex> lock(mu_);
  int64_t seq = 0;
  GNOMON_RETURN_IF_ERROR(db_->conn().Transaction([&]() -> Status {
    {
      Result<Statement> s = db_->conn().Prepare(
          "INSERT INTO audit (at_ms, who, action, target, status, before_json, after_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING seq");
      if (!s.ok()) return s.status();
      s->Bind(1, clock_.Now().unix_millis())
          .BindBlob(2, record.who)
          .BindBlob(3, record.action)
          .BindBlob(4, record.target)
          .Bind(5, coord::AuditStoredCode(record.result))
          .BindBlob(6, record.before)
          .BindBlob(7, record.after);
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return InternalError("sqlite audit insert returned no seq");
      seq = s->Int(0);
    }
    // The oldest records of this record's class beyond the newest `keep` of it.
    Result<Statement> s = db_->conn().Prepare(
        "DELETE FROM audit WHERE (status >= 400) = ?1 AND seq <= (SELECT seq FROM audit WHERE "
        "(status >= 400) = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)");
    if (!s.ok()) return s.status();
    s->Bind(1, int64_t{record.result == AuditResult::kOk ? 0 : 1}).Bind(2, int64_t{keep});
    return s->Run();
  }));
  return seq;
}

Result<std::vector<AuditRecord>> SqliteCoordinator::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  std::vector<AuditRecord> out;
  GNOMON_RETURN_IF_ERROR(Read([&](Db& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT seq, at_ms, who, action, target, status, before_json, after_json FROM audit "
        "WHERE ?1 = 0 OR seq < ?1 ORDER BY seq DESC LIMIT ?2");
    if (!s.ok()) return s.status();
    s->Bind(1, before_seq).Bind(2, int64_t{*page});
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      AuditRecord r;
      r.seq = s->Int(0);
      r.at = Instant::FromUnixMillis(s->Int(1));
      r.who = s->Bytes(2);
      r.action = s->Bytes(3);
      r.target = s->Bytes(4);
      r.result = coord::AuditResultOfStoredCode(s->Int(5));
      r.before = s->Bytes(6);
      r.after = s->Bytes(7);
      out.push_back(std::move(r));
    }
  }));
  return out;
}

}  // namespace gnomon
