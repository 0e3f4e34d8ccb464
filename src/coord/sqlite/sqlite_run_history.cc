#include "src/coord/sqlite/sqlite_run_history.h"

#include <mutex>

#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon::coord {

using sqlite::ReadRun;
using sqlite::Statement;

Result<RunPage> SqliteRunHistory::ListRuns(const RunQuery& query) {
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
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
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

Result<std::vector<RunRecord>> SqliteRunHistory::GetRun(const std::string& run_id) {
  std::vector<RunRecord> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
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

Status SqliteRunHistory::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
  if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
  std::lock_guard<std::mutex> lock(store_.write_mu());
  return store_.writer().conn().Transaction([&]() -> Status {
    const int64_t cutoff_ms = (store_.clock().Now() - max_age).unix_millis();
    {
      Result<Statement> s = store_.writer().conn().Prepare(
          "DELETE FROM runs WHERE job_id = ?1 AND outcome <> 'running' AND "
          "(scheduled_ms < ?2 OR (scheduled_ms, shard) NOT IN ("
          "SELECT DISTINCT scheduled_ms, shard FROM runs WHERE job_id = ?1 "
          "ORDER BY scheduled_ms DESC, shard ASC LIMIT ?3))");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id).Bind(2, cutoff_ms).Bind(3, int64_t{keep_last});
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    // Fire rows are the claim keys that refuse a second claim: they go only with max_age. A
    // prune that drops any stores its cutoff, so that no claim by schedule reaches behind it
    // (FireLedger::Claim).
    {
      Result<Statement> s = store_.writer().conn().Prepare(
          "INSERT INTO job_state (job_id, markers_pruned_ms) SELECT ?1, ?2 WHERE EXISTS ("
          "SELECT 1 FROM fires WHERE job_id = ?1 AND open = 0 AND scheduled_ms < ?2) "
          "ON CONFLICT (job_id) DO UPDATE SET markers_pruned_ms = "
          "max(coalesce(markers_pruned_ms, excluded.markers_pruned_ms), "
          "excluded.markers_pruned_ms)");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id).Bind(2, cutoff_ms);
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    Result<Statement> s = store_.writer().conn().Prepare(
        "DELETE FROM fires WHERE job_id = ?1 AND open = 0 AND scheduled_ms < ?2");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id).Bind(2, cutoff_ms);
    return s->Run();
  });
}

}  // namespace gnomon::coord
