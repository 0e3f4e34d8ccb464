// JobList: the scheduler's jobs as the API lists them, sorted by id, copied at most once per
// `max_age` and shared by the requests meanwhile (copying 10,000 jobs takes milliseconds under the
// scheduler's lock). A change made through the catalog (on this node, or synced from another)
// makes the next request copy again, so it shows at once; next_fire, paused and running may lag
// by up to max_age. Each job's JSON is rendered once per copy and view (with or without secret
// values), by the first request that shows it: the list's cost is in copying text.
//
// Thread safety: thread-safe; snapshots are immutable and shared.
#ifndef GNOMON_SRC_SERVER_JOB_LIST_H_
#define GNOMON_SRC_SERVER_JOB_LIST_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/scheduler.h"
#include "gnomon/time.h"
#include "src/server/job_catalog.h"

namespace gnomon::server {

// The API's view of one job: {id, spec, executor, schedule_description, timezone, next_fire,
// paused, pause_reason, running, read_only, source, version}; env and HTTP header values are
// kSecretPlaceholder unless `with_secrets`.
nlohmann::json JobViewJson(const JobView& v, std::optional<int64_t> version, bool with_secrets);

class JobList {
 public:
  struct Entry {
    JobView view;
    std::optional<int64_t> version;  // a dynamic job's backend version; nullopt when static

    // JobViewJson(view, version, with_secrets) as text. Thread-safe.
    const std::string& Rendered(bool with_secrets) const;

   private:
    mutable std::once_flag once_[2];
    mutable std::string rendered_[2];
  };
  struct Snapshot {
    std::vector<Entry> jobs;  // sorted by id
    uint64_t changes = 0;     // JobCatalog::changes() + Invalidate()s when the copy began
    Duration taken_at{0};     // the clock's SteadyNow() then
  };

  // Not owned; must outlive this object. max_age 0 = a fresh copy for every request.
  JobList(const Scheduler& scheduler, const JobCatalog& catalog, Duration max_age,
          const Clock& clock);

  std::shared_ptr<const Snapshot> Now();
  // A change the catalog does not see (pause, resume, trigger through the API): the next request
  // copies again.
  void Invalidate() { local_changes_.fetch_add(1); }

 private:
  const Scheduler& scheduler_;
  const JobCatalog& catalog_;
  const Duration max_age_;
  const Clock& clock_;
  // Held while a copy is taken, so concurrent requests wait for one copy.
  std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_;  // guarded by mu_
  std::atomic<uint64_t> local_changes_{0};
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_JOB_LIST_H_
