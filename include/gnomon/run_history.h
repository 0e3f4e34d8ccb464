// RunHistory: the role of the coordinator that keeps the record of every attempt of every fire
// (written by ClaimStore's claims, reports, skips and lost-run resolution, gnomon/claim_store.h)
// and answers the queries of the API and the dashboard. Part of Coordinator
// (gnomon/coordinator.h).
//
// Thread safety: implementations are safe to call from many threads at once.
#ifndef GNOMON_RUN_HISTORY_H_
#define GNOMON_RUN_HISTORY_H_

#include <optional>
#include <string>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

struct RunQuery {
  std::string job_id;  // empty = all jobs
  std::optional<RunOutcome> outcome;
  std::optional<Instant> scheduled_from;   // inclusive
  std::optional<Instant> scheduled_until;  // exclusive
  int limit = 50;                          // capped at 1000 by implementations
  std::string cursor;                      // from RunPage::next_cursor; empty = newest first
};

struct RunPage {
  std::vector<RunRecord> runs;  // newest scheduled_at first, then attempt descending
  std::string next_cursor;      // empty when there is no more
};

// One prune of PruneHistoryMany: the arguments of PruneHistory.
struct PruneRequest {
  std::string job_id;
  int keep_last = 100;
  Duration max_age = std::chrono::days(7);
};

class RunHistory {
 public:
  virtual ~RunHistory() = default;

  // The records matching `query`, one page. InvalidArgument for a bad cursor or limit < 1.
  virtual Result<RunPage> ListRuns(const RunQuery& query) = 0;
  // All attempts of one fire, attempt ascending. NotFound when none.
  virtual Result<std::vector<RunRecord>> GetRun(const std::string& run_id) = 0;
  // Deletes the job's finished records beyond the newest `keep_last` fires or older than
  // `max_age` (by scheduled_at, backend clock). Running records are never pruned. A backend
  // that keeps closed fire markers as long as their history (memory, SQLite, etcd) drops those
  // older than `max_age` too, and from then on refuses a claim of any fire before
  // that cutoff (ClaimOutcome::kTooOld): a fire whose marker is gone is never claimed again.
  virtual Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) = 0;
  // PruneHistory of each request, in as few backend calls as the backend can (by default one
  // each; Redis: one script call per batch of jobs). -> one Status per request, in order.
  virtual std::vector<Status> PruneHistoryMany(const std::vector<PruneRequest>& reqs);
};

inline std::vector<Status> RunHistory::PruneHistoryMany(const std::vector<PruneRequest>& reqs) {
  std::vector<Status> out;
  out.reserve(reqs.size());
  for (const PruneRequest& r : reqs) out.push_back(PruneHistory(r.job_id, r.keep_last, r.max_age));
  return out;
}

}  // namespace gnomon

#endif  // GNOMON_RUN_HISTORY_H_
