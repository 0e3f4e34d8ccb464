#include "gnomon/sqlite_coordinator.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <utility>

#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon {

using sqlite::BindFire;
using sqlite::Connection;
using sqlite::ReadRun;
using sqlite::Statement;

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

// --- Expired fires and checkpoints (the fire operations: sqlite_ledger_txn.cc)
// -----------------------------------------------------------------------------

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
    Result<JobState> read = db.LoadJobState(job_id);
    if (!read.ok()) return read.status();
    state = std::move(*read);
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
      Result<std::optional<Db::FireRow>> row = db_->LoadFire(f);
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
