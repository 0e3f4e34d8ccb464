// EtcdDefinitions: the etcd backend's job definitions and job state (internal): the
// DefinitionStore operations on <p>jobs/<job> and <p>jobsver, and the pause state under
// <p>state/<job> (GetJobState, SetPaused). Every definition or pause change also rewrites
// <p>jobsver in the same txn, so JobsVersion() (its mod_revision) moves with either and
// WaitJobsChange watches one key.
//
// Thread safety: safe from many threads (no state of its own).
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_DEFINITIONS_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_DEFINITIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"

namespace gnomon::coord::etcd {

class EtcdDefinitions {
 public:
  // REQUIRES: `kv` and `keys` outlive this object.
  EtcdDefinitions(EtcdKv& kv, const EtcdKeyspace& keys) : kv_(kv), keys_(keys) {}

  // As the Coordinator methods of the same names.
  Result<JobState> GetJobState(const std::string& job_id);
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason);
  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version);
  Status DeleteJob(const std::string& job_id, int64_t expected_version);
  Result<StoredJob> GetJob(const std::string& job_id);
  Result<std::vector<StoredJob>> ListJobs();
  // JobsVersion (the mod_revision of <p>jobsver) and the revision it was read at.
  Result<std::pair<int64_t, int64_t>> VersionAt();
  // Coordinator::WaitJobsChange: watches <p>jobsver from the revision after VersionAt's; when
  // the watch cannot be set up, falls back to `self`'s polling default
  // (DefinitionStore::WaitJobsChange). REQUIRES: `self` is the coordinator this belongs to.
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout, DefinitionStore& self);

 private:
  EtcdKv& kv_;
  const EtcdKeyspace& keys_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_DEFINITIONS_H_
