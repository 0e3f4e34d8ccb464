// MemoryDefinitions: the in-memory coordinator's job definitions and job state (internal):
// the DefinitionStore operations and GetJobState/SetPaused. Every definition or pause change
// moves MemoryState::jobs_version and wakes WaitJobsChange.
//
// Thread safety: safe from many threads; every method locks the shared MemoryState::mu for its
// whole run (the only lock).
#ifndef GNOMON_SRC_COORD_MEMORY_MEMORY_DEFINITIONS_H_
#define GNOMON_SRC_COORD_MEMORY_MEMORY_DEFINITIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/memory/memory_state.h"

namespace gnomon::coord::memory {

class MemoryDefinitions {
 public:
  // REQUIRES: `state` outlives this object.
  explicit MemoryDefinitions(MemoryState& state) : s_(state) {}

  // As the Coordinator methods of the same names.
  Result<JobState> GetJobState(const std::string& job_id);
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason);
  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version);
  Status DeleteJob(const std::string& job_id, int64_t expected_version);
  Result<StoredJob> GetJob(const std::string& job_id);
  Result<std::vector<StoredJob>> ListJobs();
  Result<int64_t> JobsVersion();
  // `timeout` is real time (a bound on a wait for another thread's change), whatever the
  // backend clock is.
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout);

 private:
  MemoryState& s_;
};

}  // namespace gnomon::coord::memory

#endif  // GNOMON_SRC_COORD_MEMORY_MEMORY_DEFINITIONS_H_
