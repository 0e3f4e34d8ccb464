// MemoryHistory: the in-memory coordinator's run history (internal): listing and fetching
// records (MemoryState::runs, in ListRuns order) and pruning them and old fire markers.
//
// Thread safety: safe from many threads; every method locks the shared MemoryState::mu for its
// whole run (the only lock).
#ifndef GNOMON_SRC_COORD_MEMORY_MEMORY_HISTORY_H_
#define GNOMON_SRC_COORD_MEMORY_MEMORY_HISTORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/memory/memory_state.h"

namespace gnomon::coord::memory {

class MemoryHistory {
 public:
  // REQUIRES: `state` outlives this object.
  explicit MemoryHistory(MemoryState& state) : s_(state) {}

  // As the Coordinator methods of the same names.
  Result<RunPage> ListRuns(const RunQuery& query);
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id);
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age);

 private:
  MemoryState& s_;
};

}  // namespace gnomon::coord::memory

#endif  // GNOMON_SRC_COORD_MEMORY_MEMORY_HISTORY_H_
