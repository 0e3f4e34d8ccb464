#include "src/coord/sqlite/sqlite_audit.h"

#include <mutex>

#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon::coord {

using sqlite::Statement;

Result<int64_t> SqliteAudit::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  std::lock_guard<std::mutex> lock(store_.write_mu());
  int64_t seq = 0;
  GNOMON_RETURN_IF_ERROR(store_.writer().conn().Transaction([&]() -> Status {
    {
      Result<Statement> s = store_.writer().conn().Prepare(
          "INSERT INTO audit (at_ms, who, action, target, status, before_json, after_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING seq");
      if (!s.ok()) return s.status();
      s->Bind(1, store_.clock().Now().unix_millis())
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
    Result<Statement> s = store_.writer().conn().Prepare(
        "DELETE FROM audit WHERE (status >= 400) = ?1 AND seq <= (SELECT seq FROM audit WHERE "
        "(status >= 400) = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)");
    if (!s.ok()) return s.status();
    s->Bind(1, int64_t{record.result == AuditResult::kOk ? 0 : 1}).Bind(2, int64_t{keep});
    return s->Run();
  }));
  return seq;
}

Result<std::vector<AuditRecord>> SqliteAudit::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  std::vector<AuditRecord> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
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

}  // namespace gnomon::coord
