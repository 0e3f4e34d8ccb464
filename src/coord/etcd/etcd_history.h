// EtcdHistory: the etcd backend's history records (internal): listing and fetching them, the
// caps on their number (EtcdOptions::max_records_per_job and max_records_total, enforced after
// each write that adds records) and pruning. Records live under <p>runs/ (all jobs, newest
// first) with a per-job index under <p>jobruns/<job>/ (etcd_keyspace.h).
//
// Thread safety: safe from many threads (it keeps no state of its own besides the caps).
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_HISTORY_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_HISTORY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"

namespace gnomon::coord::etcd {

class EtcdHistory {
 public:
  // REQUIRES: `kv` and `keys` outlive this object; both caps >= 1.
  EtcdHistory(EtcdKv& kv, const EtcdKeyspace& keys, int64_t max_records_per_job,
              int64_t max_records_total)
      : kv_(kv),
        keys_(keys),
        max_records_per_job_(max_records_per_job),
        max_records_total_(max_records_total) {}

  // Count-only ranges of the job's and all history records: the `extra` ops of a commit that
  // adds records, whose answers TrimAfter reads.
  json CountOps(const std::string& job) const;
  // Trims the records beyond the caps after commit `c` of a write that carried CountOps(job)
  // (best effort: a failure leaves a few records too many until the next write).
  void TrimAfter(const std::string& job, const EtcdKv::Committed& c);

  Result<RunPage> ListRuns(const RunQuery& query);
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id);
  // Coordinator::PruneHistory, with `now` the backend clock.
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age, Instant now);

 private:
  // Stores `cutoff_ms` as the job's pruned-markers instant unless a later one is stored.
  Status RaisePrunedBefore(const std::string& job_id, int64_t cutoff_ms);
  // Deletes the records named by `index` (per-job index key -> mod_revision) unless their index
  // entry changed since it was read. Best effort per batch.
  Status DeleteRecords(const std::string& job,
                       const std::vector<std::pair<std::string, int64_t>>& index);
  Status TrimJob(const std::string& job, int64_t excess);
  Status TrimTotal(int64_t excess);

  EtcdKv& kv_;
  const EtcdKeyspace& keys_;
  const int64_t max_records_per_job_;
  const int64_t max_records_total_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_HISTORY_H_
