#include "src/coord/memory/memory_history.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::memory {

Result<RunPage> MemoryHistory::ListRuns(const RunQuery& query) {
  Result<int> limit = coord::PageLimit(query.limit);
  if (!limit.ok()) return limit.status();
  Result<std::optional<coord::RunPosition>> start = coord::PageStart(query.cursor);
  if (!start.ok()) return start.status();
  const std::optional<coord::RunPosition> after = *start;
  std::lock_guard<std::mutex> lock(s_.mu);
  auto it = s_.runs.begin();
  if (after) {
    it = s_.runs.upper_bound(
        RunKey{-after->scheduled_ms, after->job_id, after->shard, -after->attempt});
  }
  RunPage page;
  for (; it != s_.runs.end(); ++it) {
    const RunRecord& r = it->second;
    if (!query.job_id.empty() && r.job_id != query.job_id) continue;
    if (query.outcome && r.outcome != *query.outcome) continue;
    if (query.scheduled_from && r.scheduled_at < *query.scheduled_from) continue;
    if (query.scheduled_until && r.scheduled_at >= *query.scheduled_until) continue;
    if (page.runs.size() == static_cast<size_t>(*limit)) {
      page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
      break;
    }
    page.runs.push_back(r);
  }
  return page;
}

Result<std::vector<RunRecord>> MemoryHistory::GetRun(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(s_.mu);
  std::vector<RunRecord> out;
  for (const auto& [key, record] : s_.runs) {
    if (record.run_id == run_id) out.push_back(record);
  }
  if (out.empty()) return NotFoundError("run " + run_id.substr(0, 200) + " has no record");
  std::sort(out.begin(), out.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.attempt < b.attempt; });
  return out;
}

Status MemoryHistory::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
  if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
  std::lock_guard<std::mutex> lock(s_.mu);
  const Instant cutoff = s_.clock.Now() - max_age;
  // Fires (scheduled, shard) in listing order; the first keep_last are kept.
  int fires_seen = 0;
  std::optional<std::pair<int64_t, int>> current;
  for (auto it = s_.runs.begin(); it != s_.runs.end();) {
    const RunRecord& r = it->second;
    if (r.job_id != job_id) {
      ++it;
      continue;
    }
    std::pair<int64_t, int> fire{r.scheduled_at.unix_millis(), r.shard};
    if (current != fire) {
      current = fire;
      ++fires_seen;
    }
    const bool prune = fires_seen > keep_last || r.scheduled_at < cutoff;
    if (prune && r.outcome != RunOutcome::kRunning) {
      it = s_.runs.erase(it);
    } else {
      ++it;
    }
  }
  // Fire records are the claim keys that stop a second claim; they go only with max_age. A prune
  // that drops any stores its cutoff, so that no claim by schedule reaches behind it
  // (FireLedger::Claim).
  for (auto it = s_.fires.begin(); it != s_.fires.end();) {
    if (std::get<0>(it->first) == job_id && !it->second.open &&
        it->second.key.scheduled_at < cutoff) {
      std::optional<Instant>& pruned = s_.jobs[job_id].markers_pruned_before;
      if (!pruned || *pruned < cutoff) pruned = cutoff;
      it = s_.fires.erase(it);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

}  // namespace gnomon::coord::memory
