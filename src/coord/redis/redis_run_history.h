// RedisRunHistory (internal): RedisCoordinator's RunHistory (gnomon/run_history.h): listing from
// the indexes B:runs (all jobs) and B:{job}:runs (members in listing order), one record by run id,
// and the per-job retention (the prune batch script). Records themselves are written by claims and
// reports (RedisClaims, RedisFires).
//
// Thread safety: safe to call from many threads at once (state lives on the server).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_RUN_HISTORY_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_RUN_HISTORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord {

class RedisRunHistory {
 public:
  // `store` must outlive this object.
  explicit RedisRunHistory(RedisStore& store) : store_(store) {}
  RedisRunHistory(const RedisRunHistory&) = delete;
  RedisRunHistory& operator=(const RedisRunHistory&) = delete;

  Result<RunPage> ListRuns(const RunQuery& query);
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id);
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age);
  // Prunes in script calls of at most kPruneChunk jobs (under a Cluster, one per primary).
  std::vector<Status> PruneHistoryMany(const std::vector<PruneRequest>& reqs);
  static constexpr size_t kPruneChunk = 64;

 private:
  // Under a Cluster: the all-jobs page (kListRuns' reply: OK, then member and record pairs) from
  // `start` (ZRANGEBYLEX bound), of `outcome` ("" = any), instants from `from_ms` ("" = any),
  // at most `want` records.
  Result<RedisReply> ListAllRuns(std::string start, const std::string& outcome,
                                 const std::string& from_ms, int want);
  // The encoded record of listing member `member` (its parts), or nullopt when it has none.
  Result<std::optional<std::string>> RecordAt(const std::string& member,
                                              const redis::MemberParts& parts);

  RedisStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_RUN_HISTORY_H_
