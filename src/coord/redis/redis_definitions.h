// RedisDefinitions (internal): RedisCoordinator's DefinitionStore (gnomon/definition_store.h):
// job definitions in the hash B:jobs (job -> "<version>\n<definition json>"), the jobs version in
// B:meta jobs_version, both written by the put/delete scripts (versions follow the fencing-token
// scheme, so a re-created job never reuses one), which PUBLISH the new version on B:events.
// WaitJobsChange listens there on a second, subscriber-only connection made on first use.
//
// Thread safety: safe to call from many threads at once; WaitJobsChange serves one waiter at a
// time (watch_mu_ guards the subscriber connection).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_DEFINITIONS_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_DEFINITIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/redis/redis_connection.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord {

class RedisDefinitions {
 public:
  // `store` must outlive this object.
  explicit RedisDefinitions(RedisStore& store) : store_(store) {}
  RedisDefinitions(const RedisDefinitions&) = delete;
  RedisDefinitions& operator=(const RedisDefinitions&) = delete;

  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version);
  Status DeleteJob(const std::string& job_id, int64_t expected_version);
  Result<StoredJob> GetJob(const std::string& job_id);
  Result<std::vector<StoredJob>> ListJobs();
  Result<int64_t> JobsVersion();
  // The fallback wait (polling) used while the subscriber connection cannot be had.
  using PollFn = std::function<Result<int64_t>(int64_t since, Duration timeout)>;
  // Wakes on the PUBLISH on B:events; calls `poll` while the subscriber connection is down.
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout, const PollFn& poll);

 private:
  RedisStore& store_;
  std::mutex watch_mu_;                          // one waiter at a time
  std::unique_ptr<RedisConnection> subscriber_;  // guarded by watch_mu_
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_DEFINITIONS_H_
