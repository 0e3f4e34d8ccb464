// SqliteClaims: the fire operations (claim, renew, next attempt, report, resolve lost, skip,
// cancel, rerun, checkpoint, live output): the rules of src/coord/fire_ledger.h, each run in one
// BEGIN IMMEDIATE transaction on the write connection, over SqliteLedgerTxn, the ledger's
// storage in the `fires`, `runs`, `fences`, `job_state` and `counters` tables (schema:
// sqlite_db.cc). The clock is read once the write lock is held, so claims are ordered by it
// across processes sharing the file. Then the ClaimStore's reads and pausing.
#include "src/coord/sqlite/sqlite_claims.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <type_traits>

#include "src/coord/coordinator_util.h"
#include "src/coord/fire_ledger.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon::coord {
namespace {

using sqlite::BindFire;
using sqlite::ReadRun;
using sqlite::Statement;

// The fire ledger's storage (coord::LedgerTxn) over the write connection, inside the
// transaction Run opened. REQUIRES: the store's write mutex held (Run holds it).
class SqliteLedgerTxn final : public coord::LedgerTxn {
 public:
  SqliteLedgerTxn(SqliteDb& db, Clock& clock) : db_(db), clock_(clock) {}

  // `op` on a ledger over `c`'s write connection, in one transaction (rolled back on an error).
  template <class Op>
  static auto Run(SqliteStore& c, Op op) {
    using R = std::invoke_result_t<Op, coord::FireLedger&>;
    std::lock_guard<std::mutex> lock(c.write_mu());
    std::optional<R> out;
    Status status = c.writer().conn().Transaction([&]() -> Status {
      SqliteLedgerTxn txn(c.writer(), c.clock());
      coord::FireLedger ledger(txn);
      out.emplace(op(ledger));
      return coord::StatusOf(*out);
    });
    if (!status.ok()) return R(status);
    return std::move(*out);
  }

  Instant Now() override { return clock_.Now(); }

  Result<std::optional<coord::FireEntry>> LoadFire(const FireKey& fire, int) override {
    Result<std::optional<SqliteDb::FireRow>> row = db_.LoadFire(fire);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return std::optional<coord::FireEntry>();
    const SqliteDb::FireRow& r = **row;
    FireKey key = fire;
    key.shard_count = r.shard_count;
    return std::optional<coord::FireEntry>(
        coord::FireEntry{key, r.attempt, r.fencing_token, r.node_id, r.lease_expires_at, r.open});
  }

  Result<std::vector<coord::FireEntry>> LiveFires(const FireKey& fire, Instant now) override {
    Result<Statement> s = db_.conn().Prepare(
        "SELECT scheduled_ms, shard, shard_count, attempt, fencing_token, node_id, "
        "lease_expires_ms FROM fires WHERE job_id = ?1 AND open = 1 AND lease_expires_ms > ?2 "
        "AND scheduled_ms <> ?3 ORDER BY scheduled_ms, shard");
    if (!s.ok()) return s.status();
    s->BindText(1, fire.job_id).Bind(2, now.unix_millis()).Bind(3, fire.scheduled_at.unix_millis());
    std::vector<coord::FireEntry> out;
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return out;
      coord::FireEntry& e = out.emplace_back();
      e.key.job_id = fire.job_id;
      e.key.scheduled_at = Instant::FromUnixMillis(s->Int(0));
      e.key.shard = static_cast<int>(s->Int(1));
      e.key.shard_count = static_cast<int>(s->Int(2));
      e.attempt = static_cast<int>(s->Int(3));
      e.fencing_token = s->Int(4);
      e.node_id = s->Bytes(5);
      e.lease_expires_at = Instant::FromUnixMillis(s->Int(6));
      e.open = true;
    }
  }

  Status CreateFire(const FireKey& fire, const std::string& node_id, Instant now) override {
    Result<Statement> s = db_.conn().Prepare(
        "INSERT INTO fires (job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, "
        "node_id, lease_expires_ms, open) VALUES (?1, ?2, ?3, ?4, 1, 0, ?5, ?6, 0)");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    s->Bind(4, int64_t{fire.shard_count}).BindText(5, node_id).Bind(6, now.unix_millis());
    return s->Run();
  }

  Result<gnomon::Claim> StartAttempt(const FireKey& fire, int attempt, const std::string& node_id,
                                     Duration ttl, Instant now, const std::string& cause) override {
    Result<int64_t> token = db_.NextToken(fire.job_id);
    if (!token.ok()) return token.status();
    const Instant expires = now + ttl;
    {
      Result<Statement> s = db_.conn().Prepare(
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
    RunRecord running = coord::NewRecord(fire, attempt, *token, node_id, now, RunOutcome::kRunning);
    running.cause = cause;
    GNOMON_RETURN_IF_ERROR(db_.PutRun(running));
    return gnomon::Claim{fire, attempt, *token, node_id, expires};
  }

  Status ExtendLease(const coord::FireEntry& fire, Duration ttl, Instant now) override {
    return SetFireColumn(
        "UPDATE fires SET lease_expires_ms = ?4 WHERE job_id = ?1 AND scheduled_ms = ?2 AND "
        "shard = ?3",
        fire.key, [&](Statement& s) { s.Bind(4, (now + ttl).unix_millis()); });
  }

  Status CloseFire(const coord::FireEntry& fire) override { return db_.CloseFire(fire.key); }

  Result<std::optional<RunRecord>> LoadRecord(const FireKey& fire, int attempt) override {
    Result<Statement> s = db_.conn().Prepare(
        "SELECT " GNOMON_RUN_COLUMNS
        " FROM runs WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3 AND attempt = ?4");
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    s->Bind(4, int64_t{attempt});
    Result<bool> found = s->Step();
    if (!found.ok()) return found.status();
    if (!*found) return std::optional<RunRecord>();
    Result<RunRecord> r = sqlite::ReadRun(*s);
    if (!r.ok()) return r.status();
    return std::optional<RunRecord>(std::move(*r));
  }

  Status PutRecord(const RunRecord& record) override { return db_.PutRun(record); }

  Status PutCheckpoint(const FireKey& fire, const std::string& value) override {
    return SetFireColumn(
        "UPDATE fires SET checkpoint = ?4 WHERE job_id = ?1 AND scheduled_ms = ?2 AND shard = ?3",
        fire, [&](Statement& s) { s.BindBlob(4, value); });
  }

  Result<JobState> LoadJobState(const std::string& job_id) override {
    return db_.LoadJobState(job_id);
  }

  Result<std::optional<Instant>> MarkersPrunedBefore(const std::string& job_id) override {
    Result<Statement> s =
        db_.conn().Prepare("SELECT markers_pruned_ms FROM job_state WHERE job_id = ?1");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id);
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row || s->IsNull(0)) return std::optional<Instant>();
    return std::optional<Instant>(Instant::FromUnixMillis(s->Int(0)));
  }

  Status PutJobState(const std::string& job_id, const JobState& state) override {
    Result<Statement> s = db_.conn().Prepare(
        "INSERT INTO job_state (job_id, paused, pause_reason, consecutive_failures, "
        "last_scheduled_ms) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (job_id) DO UPDATE SET "
        "paused = excluded.paused, pause_reason = excluded.pause_reason, "
        "consecutive_failures = excluded.consecutive_failures, "
        "last_scheduled_ms = excluded.last_scheduled_ms");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id)
        .Bind(2, int64_t{state.paused ? 1 : 0})
        .BindBlob(3, state.pause_reason)
        .Bind(4, int64_t{state.consecutive_failures})
        .Bind(5, state.last_scheduled ? std::optional<int64_t>(state.last_scheduled->unix_millis())
                                      : std::nullopt);
    return s->Run();
  }

  Status BumpJobsVersion(const std::string&) override { return db_.BumpJobsVersion().status(); }

 private:
  // Runs `sql`, an UPDATE of the fire's row with its key bound to ?1-?3 and `bind` binding the
  // rest.
  template <class Bind>
  Status SetFireColumn(const char* sql, const FireKey& fire, Bind bind) {
    Result<Statement> s = db_.conn().Prepare(sql);
    if (!s.ok()) return s.status();
    BindFire(*s, fire);
    bind(*s);
    return s->Run();
  }

  SqliteDb& db_;
  Clock& clock_;
};

}  // namespace

Result<ClaimOutcome> SqliteClaims::Claim(const ClaimRequest& req) {
  return SqliteLedgerTxn::Run(store_, [&](coord::FireLedger& l) { return l.Claim(req); });
}

Status SqliteClaims::Renew(gnomon::Claim& claim, Duration ttl) {
  return coord::StoreRenewal(claim, SqliteLedgerTxn::Run(store_, [&](coord::FireLedger& l) {
                               return l.Renew(claim, ttl);
                             }));
}

Result<gnomon::Claim> SqliteClaims::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return SqliteLedgerTxn::Run(store_,
                              [&](coord::FireLedger& l) { return l.NextAttempt(claim, ttl); });
}

Status SqliteClaims::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return SqliteLedgerTxn::Run(store_,
                              [&](coord::FireLedger& l) { return l.Report(claim, record, final); });
}

Result<std::optional<gnomon::Claim>> SqliteClaims::ResolveLost(const ExpiredFire& expired,
                                                               const std::string& node_id,
                                                               LostPolicy policy, Duration ttl) {
  return SqliteLedgerTxn::Run(
      store_, [&](coord::FireLedger& l) { return l.ResolveLost(expired, node_id, policy, ttl); });
}

Status SqliteClaims::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                   const std::string& reason) {
  return SqliteLedgerTxn::Run(
      store_, [&](coord::FireLedger& l) { return l.RecordSkipped(fire, node_id, reason); });
}

Status SqliteClaims::CancelFire(const FireKey& fire, const std::string& reason) {
  return SqliteLedgerTxn::Run(store_,
                              [&](coord::FireLedger& l) { return l.CancelFire(fire, reason); });
}

Result<gnomon::Claim> SqliteClaims::RerunFire(const FireKey& fire, const std::string& node_id,
                                              Duration ttl, const std::string& cause) {
  return SqliteLedgerTxn::Run(
      store_, [&](coord::FireLedger& l) { return l.RerunFire(fire, node_id, ttl, cause); });
}

Status SqliteClaims::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return SqliteLedgerTxn::Run(store_,
                              [&](coord::FireLedger& l) { return l.SaveCheckpoint(claim, value); });
}

Status SqliteClaims::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return SqliteLedgerTxn::Run(
      store_, [&](coord::FireLedger& l) { return l.SaveLiveOutput(claim, output); });
}

Result<std::vector<ExpiredFire>> SqliteClaims::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  std::vector<ExpiredFire> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT job_id, scheduled_ms, shard, shard_count, attempt, fencing_token, node_id, "
        "lease_expires_ms FROM fires WHERE open = 1 AND lease_expires_ms <= ?1 "
        "ORDER BY lease_expires_ms, job_id, scheduled_ms, shard LIMIT ?2");
    if (!s.ok()) return s.status();
    s->Bind(1, store_.clock().Now().unix_millis()).Bind(2, int64_t{*page});
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

Result<std::optional<std::string>> SqliteClaims::LoadCheckpoint(const FireKey& fire) {
  std::optional<std::string> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
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

Result<JobState> SqliteClaims::GetJobState(const std::string& job_id) {
  JobState state;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
    Result<JobState> read = db.LoadJobState(job_id);
    if (!read.ok()) return read.status();
    state = std::move(*read);
    return Status::Ok();
  }));
  return state;
}

Status SqliteClaims::SetPaused(const std::string& job_id, bool paused, const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::lock_guard<std::mutex> lock(store_.write_mu());
  return store_.writer().conn().Transaction([&]() -> Status {
    {
      Result<Statement> s = store_.writer().conn().Prepare(
          "INSERT INTO job_state (job_id, paused, pause_reason) VALUES (?1, ?2, ?3) "
          "ON CONFLICT (job_id) DO UPDATE SET paused = excluded.paused, "
          "pause_reason = excluded.pause_reason");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id).Bind(2, int64_t{paused ? 1 : 0}).BindBlob(3, paused ? reason : "");
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    return store_.writer().BumpJobsVersion().status();
  });
}

Result<std::vector<bool>> SqliteClaims::FiresRecorded(const std::vector<FireKey>& fires) {
  for (const FireKey& f : fires) GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(f));
  std::lock_guard<std::mutex> lock(store_.write_mu());
  std::vector<bool> out;
  out.reserve(fires.size());
  GNOMON_RETURN_IF_ERROR(store_.writer().conn().Transaction([&]() -> Status {
    out.clear();
    for (const FireKey& f : fires) {
      Result<std::optional<SqliteDb::FireRow>> row = store_.writer().LoadFire(f);
      if (!row.ok()) return row.status();
      out.push_back(row->has_value());
    }
    return Status::Ok();
  }));
  return out;
}

}  // namespace gnomon::coord
