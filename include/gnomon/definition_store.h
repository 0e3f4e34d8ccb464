// DefinitionStore: the role of the coordinator that keeps the job definitions made at run time
// (through the API), each with a version for optimistic concurrency, and tells every node when
// they change. Part of Coordinator (gnomon/coordinator.h).
//
// A definition is opaque bytes to the store: it is kept and returned byte for byte, never
// parsed (gnomon's server stores a job's JSON there).
//
// Thread safety: implementations are safe to call from many threads at once.
#ifndef GNOMON_DEFINITION_STORE_H_
#define GNOMON_DEFINITION_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

// One stored job definition.
struct StoredJob {
  std::string job_id;
  std::string definition;  // opaque bytes, as given to PutJob
  int64_t version = 0;     // increases on every change; used for optimistic concurrency
};

class DefinitionStore {
 public:
  virtual ~DefinitionStore() = default;

  // Creates (expected_version = 0) or replaces (expected_version = current) a definition;
  // returns the new version, which no earlier definition of any job had (a re-created job never
  // reuses a version). AlreadyExists / FailedPrecondition on a version mismatch;
  // InvalidArgument for an invalid job id or a negative expected_version.
  virtual Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                                 int64_t expected_version) = 0;
  // Deletes a definition (expected_version = current, or -1 for any). NotFound if absent;
  // FailedPrecondition on a version mismatch.
  virtual Status DeleteJob(const std::string& job_id, int64_t expected_version) = 0;
  // One definition. NotFound if absent (an invalid id is absent too).
  virtual Result<StoredJob> GetJob(const std::string& job_id) = 0;
  // Every definition, by job id.
  virtual Result<std::vector<StoredJob>> ListJobs() = 0;
  // A number that changes whenever a definition changes, or (in a backend that also keeps job
  // state, gnomon/claim_store.h) a pause state or a cancelled fire; cheap to poll.
  virtual Result<int64_t> JobsVersion() = 0;
  // Waits until JobsVersion() may differ from `since`, at most about `timeout`, and returns the
  // current JobsVersion(). Backends that can be notified (Redis pub/sub, etcd watch) return soon
  // after a change made by any node; this default (src/coord/coordinator.cc) polls JobsVersion()
  // every 100 ms. A spurious early return is allowed; callers loop.
  virtual Result<int64_t> WaitJobsChange(int64_t since, Duration timeout);
};

}  // namespace gnomon

#endif  // GNOMON_DEFINITION_STORE_H_
