// SqliteRunHistory (internal): SqliteCoordinator's RunHistory (gnomon/run_history.h) over the
// `runs` table: listing (one statement on a read connection), one run by id, and the per-job
// retention (PruneHistory, one transaction on the write connection). Records themselves are
// written by the fire ledger (SqliteClaims).
//
// Thread safety: safe to call from many threads at once (writes hold the store's write mutex for
// their transaction; reads use a read connection of the store).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_RUN_HISTORY_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_RUN_HISTORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/sqlite/sqlite_store.h"

namespace gnomon::coord {

class SqliteRunHistory {
 public:
  // `store` must outlive this object.
  explicit SqliteRunHistory(SqliteStore& store) : store_(store) {}
  SqliteRunHistory(const SqliteRunHistory&) = delete;
  SqliteRunHistory& operator=(const SqliteRunHistory&) = delete;

  Result<RunPage> ListRuns(const RunQuery& query);
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id);
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age);

 private:
  SqliteStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_RUN_HISTORY_H_
