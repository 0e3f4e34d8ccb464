// MemoryState: the whole state of a MemoryCoordinator (gnomon/testing/memory_coordinator.h)
// under its one mutex (internal). The role parts (MemoryFires, MemoryHistory,
// MemoryDefinitions, MemoryNodes, MemoryAudit) each hold a reference to it and lock `mu` for
// every operation, so each operation is atomic against all the others, as before the split.
//
// Thread safety: every field but `clock` is guarded by `mu`; there is no other lock, so no
// lock order.
#ifndef GNOMON_SRC_COORD_MEMORY_MEMORY_STATE_H_
#define GNOMON_SRC_COORD_MEMORY_MEMORY_STATE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "gnomon/coordinator.h"

namespace gnomon::coord::memory {

// (job id, scheduled unix ms, shard): a fire's identity.
using FireId = std::tuple<std::string, int64_t, int>;
// (-scheduled unix ms, job id, shard, -attempt): map order is ListRuns order.
using RunKey = std::tuple<int64_t, std::string, int, int>;

inline FireId IdOf(const FireKey& fire) {
  return {fire.job_id, fire.scheduled_at.unix_millis(), fire.shard};
}
inline RunKey RunKeyOf(const FireKey& fire, int attempt) {
  return {-fire.scheduled_at.unix_millis(), fire.job_id, fire.shard, -attempt};
}

struct MemoryState {
  // The fire record: its current attempt and lease. `open` is false once the fire is done
  // (finally reported, resolved as lost, revoked by overlap = replace, or skipped).
  struct Fire {
    FireKey key;
    int attempt = 1;
    int64_t fencing_token = 0;
    std::string node_id;
    Instant lease_expires_at;
    bool open = false;
    std::optional<std::string> checkpoint;
  };
  struct Job {
    JobState state;
    int64_t last_token = 0;  // the fencing counter
    // The latest PruneHistory cutoff: closed fire markers before it are gone.
    std::optional<Instant> markers_pruned_before;
  };
  struct Node {
    NodeInfo info;
    Instant expires_at;
  };

  // REQUIRES: `backend_clock` outlives this object.
  explicit MemoryState(Clock& backend_clock) : clock(backend_clock) {}

  Clock& clock;  // the backend clock
  std::mutex mu;
  std::map<FireId, Fire> fires;
  std::map<RunKey, RunRecord> runs;
  std::map<std::string, Job> jobs;
  std::map<std::string, Node> nodes;
  std::map<std::string, StoredJob> definitions;
  int64_t jobs_version = 0;
  std::condition_variable jobs_changed;  // notified when jobs_version changes
  std::deque<AuditRecord> audit[2];      // [not done]: oldest first
  int64_t audit_seq = 0;
};

}  // namespace gnomon::coord::memory

#endif  // GNOMON_SRC_COORD_MEMORY_MEMORY_STATE_H_
