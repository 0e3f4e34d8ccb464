#include "src/server/job_catalog.h"

#include <set>
#include <utility>

#include "src/job/job_graph.h"
#include "src/server/api_util.h"
#include "src/server/job_json.h"

namespace gnomon::server {

using nlohmann::json;

const Reloadable<Policies>& DefaultPolicies() {
  static const Reloadable<Policies>* policies = new Reloadable<Policies>(Policies());
  return *policies;
}

JobCatalog::JobCatalog(Scheduler& scheduler, Coordinator& coordinator, JobCatalogOptions options,
                       const Reloadable<Policies>& policies)
    : scheduler_(scheduler),
      definitions_(coordinator),
      options_(std::move(options)),
      audit_(coordinator, options_.audit),
      policies_(policies) {}

JobCatalog::~JobCatalog() { StopSync(); }

namespace {

// The definition as the audit log keeps it: complete, secrets redacted.
std::string AuditedDefinition(const JobSpec& spec) {
  return DumpJson(RedactSecrets(JobSpecToJson(spec)));
}

Status ReadOnly(const JobSpec& spec) {
  return FailedPreconditionError(
      "job \"" + spec.id + "\" is defined in " +
      (spec.source.empty() ? std::string("a config file") : spec.source) +
      " and is read-only in the API: change the file and reload");
}

}  // namespace

// Each job was checked when it was compiled (CompileJob); what is left is the set's uniqueness
// and its graph of children.
Status JobCatalog::CheckStaticJobs(const std::vector<CompiledJob>& jobs) const {
  std::set<std::string_view> ids;
  for (const CompiledJob& c : jobs) {
    const JobSpec& j = c.spec;
    if (!ids.insert(j.id).second) {
      return AlreadyExistsError("job \"" + Shown(j.id) + "\" is defined twice" +
                                (j.source.empty() ? "" : " (" + j.source + ")"));
    }
  }
  // A file's jobs name jobs of the file (it is checked whole, before any API job is known).
  std::vector<const JobSpec*> specs;
  for (const CompiledJob& c : jobs) specs.push_back(&c.spec);
  return CheckJobGraph(specs);
}

Status JobCatalog::SetStaticJobs(std::vector<CompiledJob> jobs) {
  GNOMON_RETURN_IF_ERROR(CheckStaticJobs(jobs));
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, CompiledJob> fresh;
  for (CompiledJob& j : jobs) {
    j.spec.read_only = true;
    std::string id = j.spec.id;
    fresh.emplace(std::move(id), std::move(j));
  }
  std::map<std::string, CompiledJob> previous = std::exchange(static_, std::move(fresh));
  Status s = InstallLocked();
  if (!s.ok()) {
    static_ = std::move(previous);
    return s;
  }
  // A stored definition whose id is now static is shadowed here; Sync installs it again if the
  // static job goes away.
  for (auto it = dynamic_.begin(); it != dynamic_.end();) {
    it = static_.count(it->first) ? dynamic_.erase(it) : std::next(it);
  }
  synced_version_.reset();
  ++changes_;
  return Status::Ok();
}

Status JobCatalog::InstallLocked() {
  std::vector<CompiledJob> all;
  all.reserve(static_.size() + dynamic_.size());
  for (const auto& [id, job] : static_) all.push_back(job);
  for (const auto& [id, d] : dynamic_) {
    if (!static_.count(id)) all.push_back(d.job);
  }
  return scheduler_.SetJobs(all);
}

Result<JobSpec> JobCatalog::ParseStored(const StoredJob& stored) const {
  Result<json> parsed = ParseJsonBody(stored.definition, options_.max_json_depth);
  if (!parsed.ok()) return parsed.status();
  Result<JobSpec> spec = JobSpecFromJson(*parsed, options_.job_defaults);
  if (!spec.ok()) return spec.status();
  spec->source = "api";
  spec->read_only = false;
  spec->in_process = false;
  if (spec->id != stored.job_id) return InvalidArgumentError("id does not match the stored key");
  return spec;
}

Status JobCatalog::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  Result<int64_t> jobs_version = definitions_.JobsVersion();
  if (!jobs_version.ok()) return jobs_version.status();
  if (synced_version_ && *synced_version_ == *jobs_version) return Status::Ok();
  Result<std::vector<StoredJob>> stored = definitions_.ListJobs();
  if (!stored.ok()) return stored.status();
  Status first;
  std::set<std::string> present;
  for (const StoredJob& sj : *stored) {
    present.insert(sj.job_id);
    if (static_.count(sj.job_id)) continue;  // a static job here wins
    auto it = dynamic_.find(sj.job_id);
    if (it != dynamic_.end() && it->second.version == sj.version) continue;
    Result<JobSpec> spec = ParseStored(sj);
    Result<CompiledJob> job =
        spec.ok() ? CompileJob(std::move(*spec), options_.calendars.get()) : spec.status();
    Status s = job.ok() ? scheduler_.AddJob(*job) : job.status();
    if (!s.ok()) {
      if (first.ok()) first = s.WithPrefix("dynamic job \"" + Shown(sj.job_id) + "\"");
      continue;
    }
    dynamic_[sj.job_id] = Dynamic{sj.version, std::move(*job)};
  }
  for (auto it = dynamic_.begin(); it != dynamic_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    (void)scheduler_.RemoveJob(it->first);
    it = dynamic_.erase(it);
  }
  if (first.ok()) synced_version_ = *jobs_version;
  ++changes_;  // after the scheduler has the changes: copies of its jobs are stale
  return first;
}

void JobCatalog::StartSync(std::function<void(const Status&)> on_error) {
  GNOMON_CHECK(!watcher_.joinable());
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = false;
  }
  watcher_ = std::jthread([this, on_error = std::move(on_error)] {
    Clock& clock = options_.clock != nullptr ? *options_.clock : SystemClock::Get();
    int64_t seen = -1;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(watch_mu_);
        if (stopping_) return;
      }
      // The wait ends at least every second, and every pass compares JobsVersion, so a missed
      // notification is healed within a second.
      Result<int64_t> v = definitions_.WaitJobsChange(seen, std::chrono::seconds(1));
      Status s = v.ok() ? Sync() : v.status();
      if (s.ok()) {
        seen = *v;
        continue;
      }
      if (on_error) on_error(s);
      std::unique_lock<std::mutex> lock(watch_mu_);
      clock.WaitFor(lock, watch_cv_, std::chrono::seconds(1), [&] { return stopping_; });
    }
  });
}

void JobCatalog::StopSync() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

Result<std::optional<StoredJob>> JobCatalog::FindStored(const std::string& id) const {
  Result<StoredJob> stored = definitions_.GetJob(id);
  if (stored.ok()) return std::optional<StoredJob>(std::move(*stored));
  if (stored.status().code() == StatusCode::kNotFound) return std::optional<StoredJob>();
  return stored.status();
}

std::vector<const JobSpec*> JobCatalog::AllLocked(const JobSpec* instead) const {
  std::vector<const JobSpec*> all;
  all.reserve(static_.size() + dynamic_.size() + 1);
  // First: CheckJobGraph reports a cycle from the first job of the set on it, this one.
  if (instead != nullptr) all.push_back(instead);
  for (const auto& [id, job] : static_) all.push_back(&job.spec);
  for (const auto& [id, d] : dynamic_) {
    if (instead == nullptr || id != instead->id) all.push_back(&d.job.spec);
  }
  return all;
}

JobCatalog::Related JobCatalog::RelatedTo(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<const JobSpec*> all = AllLocked(nullptr);
  return Related{ParentsOf(all, id), JoinsOf(all, id), DependentsOf(all, id)};
}

// The id is copied before `job` moves: in `dynamic_[job.spec.id] = Dynamic{.., std::move(job)}`
// the right side is evaluated first, and the entry would land under the moved-from (empty) id.
void JobCatalog::InstallDynamic(int64_t version, CompiledJob job) {
  std::string id = job.spec.id;
  dynamic_.insert_or_assign(std::move(id), Dynamic{version, std::move(job)});
}

Result<JobCatalog::Change> JobCatalog::Create(CompiledJob job) {
  const JobSpec& spec = job.spec;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = static_.find(spec.id); it != static_.end()) {
    return AlreadyExistsError("job \"" + spec.id + "\" already exists (defined in " +
                              it->second.spec.source + ")");
  }
  GNOMON_RETURN_IF_ERROR(CheckJobGraph(AllLocked(&spec)));
  const std::string definition = DumpJson(JobSpecToJson(spec));
  Result<int64_t> version = definitions_.PutJob(spec.id, definition, 0);
  if (!version.ok()) {
    const StatusCode c = version.status().code();
    if (c == StatusCode::kAlreadyExists || c == StatusCode::kFailedPrecondition) {
      return AlreadyExistsError("job \"" + spec.id + "\" already exists");
    }
    return version.status();
  }
  if (Status s = scheduler_.AddJob(job); !s.ok()) {
    (void)definitions_.DeleteJob(spec.id, *version);  // roll back: nothing half-created
    return s;
  }
  Change change{*version, "", AuditedDefinition(spec)};
  InstallDynamic(*version, std::move(job));
  ++changes_;
  return change;
}

Result<JobCatalog::Change> JobCatalog::Replace(CompiledJob job, int64_t expected_version) {
  JobSpec& spec = job.spec;  // the secrets restored below do not change the schedule
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = static_.find(spec.id); it != static_.end()) return ReadOnly(it->second.spec);
  Result<std::optional<StoredJob>> stored = FindStored(spec.id);
  if (!stored.ok()) return stored.status();
  if (!*stored) return NotFoundError("job \"" + spec.id + "\" is not defined");
  GNOMON_RETURN_IF_ERROR(CheckJobGraph(AllLocked(&spec)));
  Result<JobSpec> old = ParseStored(**stored);
  if (old.ok()) {
    GNOMON_RETURN_IF_ERROR(RestoreSecrets(&spec, *old));
  } else {
    GNOMON_RETURN_IF_ERROR(RestoreSecrets(&spec, JobSpec{}));
  }
  const std::string definition = DumpJson(JobSpecToJson(spec));
  Result<int64_t> version = definitions_.PutJob(spec.id, definition, expected_version);
  if (!version.ok()) {
    const StatusCode c = version.status().code();
    if (c == StatusCode::kFailedPrecondition || c == StatusCode::kAlreadyExists) {
      return FailedPreconditionError("job \"" + spec.id + "\" is at version " +
                                     std::to_string((*stored)->version) + ", not " +
                                     std::to_string(expected_version) + " (GET it and retry)");
    }
    return version.status();
  }
  GNOMON_RETURN_IF_ERROR(scheduler_.AddJob(job));
  Change change{*version, old.ok() ? AuditedDefinition(*old) : "", AuditedDefinition(spec)};
  InstallDynamic(*version, std::move(job));
  ++changes_;
  return change;
}

Result<JobCatalog::Change> JobCatalog::Delete(const std::string& id,
                                              std::optional<int64_t> expected_version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = static_.find(id); it != static_.end()) return ReadOnly(it->second.spec);
  Result<std::optional<StoredJob>> stored = FindStored(id);
  if (!stored.ok()) return stored.status();
  if (!*stored) return NotFoundError("job \"" + id + "\" is not defined");
  Status s = definitions_.DeleteJob(id, expected_version.value_or(-1));
  if (!s.ok()) {
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kAlreadyExists) {
      return FailedPreconditionError("job \"" + id + "\" is at version " +
                                     std::to_string((*stored)->version) + ", not " +
                                     std::to_string(expected_version.value_or(-1)));
    }
    return s;
  }
  (void)scheduler_.RemoveJob(id);
  dynamic_.erase(id);
  ++changes_;
  Result<JobSpec> old = ParseStored(**stored);
  return Change{(*stored)->version, old.ok() ? AuditedDefinition(*old) : "", ""};
}

std::optional<JobCatalog::Entry> JobCatalog::Find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = static_.find(id); it != static_.end()) {
    return Entry{it->second.spec, it->second.schedule, std::nullopt};
  }
  if (auto it = dynamic_.find(id); it != dynamic_.end()) {
    return Entry{it->second.job.spec, it->second.job.schedule, it->second.version};
  }
  return std::nullopt;
}

std::map<std::string, int64_t> JobCatalog::Versions() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [id, d] : dynamic_) out.emplace_hint(out.end(), id, d.version);
  return out;
}

std::vector<JobSpec> JobCatalog::DynamicJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobSpec> out;
  for (const auto& [id, d] : dynamic_) out.push_back(d.job.spec);
  return out;
}

Result<std::vector<std::string>> JobCatalog::JobIds(
    const std::function<bool(std::string_view)>& in) const {
  Result<std::vector<StoredJob>> stored = definitions_.ListJobs();
  if (!stored.ok()) return stored.status();
  std::set<std::string> ids;
  for (const StoredJob& j : *stored) {
    if (in(j.job_id)) ids.insert(j.job_id);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, spec] : static_) {
      if (in(id)) ids.insert(id);
    }
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

}  // namespace gnomon::server
