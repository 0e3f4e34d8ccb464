// JobCatalog: every job definition of a node, and the one place that changes them.
//
// Two kinds of definitions (docs/http-api.md "Jobs"):
// - static: from the config and jobs files on disk (SetStaticJobs, at start and on SIGHUP);
//   read-only in the API. A static id wins over a stored definition of the same id on this node.
// - dynamic: made through the API, stored in the backend (DefinitionStore::PutJob) so every node
// runs
//   them. Create/Replace/Delete write the backend first and then install the change in the
//   local Scheduler, rolling a create back when the scheduler refuses it (nothing half-created);
//   other nodes install it from Sync, which a watcher thread (StartSync) calls whenever the
//   backend announces a change (Redis pub/sub, etcd watch, SQLite polling) and at least every
//   second.
// It also owns the audit log of the calls that change jobs (AuditLog), and counts the jobs of a
// namespace for quotas.
//
// Write-only secrets: a Replace whose env or HTTP header value is kSecretPlaceholder keeps the
// stored value of that key, so a client that was shown redacted values can send a definition back
// without knowing them.
//
// Thread safety: every method is thread-safe. Lock order: mu_ is taken before the Scheduler's and
// the Coordinator's own locks (it is held across their calls) and never the other way round.
#ifndef GNOMON_SRC_SERVER_JOB_CATALOG_H_
#define GNOMON_SRC_SERVER_JOB_CATALOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/job.h"
#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/server/audit_log.h"
#include "src/server/executor_policy.h"
#include "src/server/reloadable.h"

namespace gnomon::server {

struct JobCatalogOptions {
  // Applied under the keys of a stored definition that omits them (the definitions the API stores
  // are complete; this matters for ones written by hand). Default: JobSpec's built-ins.
  JobSpec job_defaults;
  // The named calendars (`[[calendar]]`) that definitions' `calendars` keys reference. Default
  // none.
  std::shared_ptr<const Calendars> calendars = std::make_shared<const Calendars>();
  // Deepest JSON nesting accepted in a stored definition. Default 64.
  int max_json_depth = 64;
  // Audit records kept in the backend: successful calls and failed ones, each their own cap
  // (a flood of failing calls never evicts a successful one). Defaults 10,000 each.
  AuditLogOptions audit;
  // Waits of the sync loop. Not owned; null = SystemClock::Get().
  Clock* clock = nullptr;
};

// The built-in default policy, for catalogs made without one.
const Reloadable<Policies>& DefaultPolicies();

class JobCatalog {
 public:
  // `scheduler`, `coordinator` and `policies` must outlive this object; of the coordinator the
  // catalog uses its DefinitionStore and AuditStore roles. Without `policies`, definitions follow
  // the built-in default policy.
  JobCatalog(Scheduler& scheduler, Coordinator& coordinator, JobCatalogOptions options,
             const Reloadable<Policies>& policies = DefaultPolicies());
  ~JobCatalog();  // StopSync()
  JobCatalog(const JobCatalog&) = delete;
  JobCatalog& operator=(const JobCatalog&) = delete;

  // What the catalog knows of one job.
  struct Entry {
    JobSpec spec;
    std::shared_ptr<const CronExpr> schedule;  // spec.schedule compiled (CompiledJob::schedule)
    std::optional<int64_t> version;  // a dynamic job's backend version; nullopt when static
  };
  // The result of a change: the new version and the definitions before and after (JSON, secrets
  // redacted: for the audit log).
  struct Change {
    int64_t version = 0;
    std::string before_json;
    std::string after_json;
  };

  // Replaces the static definitions (ids unique: checked first, nothing changes on error) and
  // installs them with the dynamic ones in the scheduler.
  Status SetStaticJobs(std::vector<CompiledJob> jobs);
  // Checks a static set as SetStaticJobs would, without installing it.
  Status CheckStaticJobs(const std::vector<CompiledJob>& jobs) const;

  // Installs the stored definitions (made on any node), replaces changed ones and removes deleted
  // ones. Idempotent and cheap when nothing changed (one JobsVersion call). Returns the first
  // error met; the other definitions are still applied.
  Status Sync();
  // Starts the watcher thread that calls Sync on every announced change (at least every second);
  // `on_error` is called with each failure (then it waits a second). REQUIRES: not started.
  void StartSync(std::function<void(const Status&)> on_error);
  // Stops and joins the watcher. Idempotent.
  void StopSync();

  // Creates a dynamic job. AlreadyExists when the id is taken (static or stored); Unavailable
  // when the backend cannot be reached; the scheduler's error (the definition is then removed
  // from the backend again).
  Result<Change> Create(CompiledJob job);
  // Replaces a dynamic job at `expected_version`. NotFound; FailedPrecondition when the job is
  // static ("read-only") or at another version; InvalidArgument for a kSecretPlaceholder value
  // of a key that has no stored value.
  Result<Change> Replace(CompiledJob job, int64_t expected_version);
  // Deletes a dynamic job (expected_version nullopt = any). NotFound; FailedPrecondition as
  // Replace.
  Result<Change> Delete(const std::string& id, std::optional<int64_t> expected_version);

  // One job, static or dynamic (as installed on this node).
  std::optional<Entry> Find(const std::string& id) const;
  // The versions of the dynamic jobs installed here.
  std::map<std::string, int64_t> Versions() const;
  // The dynamic jobs installed here.
  std::vector<JobSpec> DynamicJobs() const;
  // Ids of the jobs that `in` accepts: static ones and every stored definition (read from the
  // backend, so creates on other nodes count before this node synced them).
  Result<std::vector<std::string>> JobIds(const std::function<bool(std::string_view)>& in) const;

  // Increases on every change of the installed set (made here or synced): a copy of the
  // scheduler's jobs taken before the latest change is stale.
  uint64_t changes() const { return changes_.load(); }

  AuditLog& audit() { return audit_; }

  // The executor policies of definitions made through the API (the Node's; SIGHUP replaces
  // them): checked when a definition is made here; a stored one that the policy refuses (made
  // under another policy) is installed all the same and fails each run, naming the rule
  // (PolicyGuard), so it stays visible.
  const Reloadable<Policies>& policies() const { return policies_; }
  // The jobs related to `id` (src/job/job_graph.h: ParentsOf, JoinsOf, DependentsOf) over every
  // definition.
  struct Related {
    std::vector<std::string> parents, joins, dependents;
  };
  Related RelatedTo(const std::string& id) const;
  const std::shared_ptr<const Calendars>& calendars() const { return options_.calendars; }

 private:
  struct Dynamic {
    int64_t version = 0;
    CompiledJob job;
  };
  Status InstallLocked();  // static + dynamic into the scheduler (SetJobs)
  void InstallDynamic(int64_t version, CompiledJob job);  // into dynamic_ under its id; mu_ held
  // Every definition (static and dynamic), with `instead` (first) in place of its id's: what
  // CheckJobGraph checks (docs/semantics.md "Dependencies"); mu_ held.
  std::vector<const JobSpec*> AllLocked(const JobSpec* instead) const;
  Result<JobSpec> ParseStored(const StoredJob& stored) const;
  Result<std::optional<StoredJob>> FindStored(const std::string& id) const;

  Scheduler& scheduler_;
  DefinitionStore& definitions_;
  const JobCatalogOptions options_;
  AuditLog audit_;
  const Reloadable<Policies>& policies_;

  // Guards the definitions; serialises changes (and their backend writes) with Sync.
  mutable std::mutex mu_;
  std::map<std::string, CompiledJob> static_;  // by id
  std::map<std::string, Dynamic> dynamic_;     // by id; never an id of static_
  std::optional<int64_t> synced_version_;      // JobsVersion at the last complete Sync
  std::atomic<uint64_t> changes_{0};

  // The watcher.
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;  // guarded by watch_mu_
  std::jthread watcher_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_JOB_CATALOG_H_
