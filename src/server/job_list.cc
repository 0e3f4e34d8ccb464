#include "src/server/job_list.h"

#include <algorithm>

#include "gnomon/cron.h"
#include "src/server/api_util.h"
#include "src/server/job_json.h"

namespace gnomon::server {

using nlohmann::json;

namespace {

std::string Executor(const JobSpec& s) {
  if (s.in_process) return "in_process";
  if (s.http) return "http";
  if (!s.argv.empty()) return "argv";
  return "command";
}

// Where the job is in its active window (start_at, end_at, max_runs): "not_started" until the
// window's first fire, "ended" once it has no fire left, else "open" (also without a window).
std::string_view WindowOf(const JobView& v) {
  const FireRules* rules = v.rules.get();
  if (rules == nullptr || !v.schedule) return "open";
  if (rules->last() && !v.next_fire) return "ended";
  if (rules->first() && v.next_fire &&
      rules->Next(*v.schedule, *rules->first() - Duration(1)) == v.next_fire) {
    return "not_started";
  }
  return "open";
}

}  // namespace

json JobViewJson(const JobView& v, std::optional<int64_t> version, bool with_secrets) {
  json spec = JobSpecToJson(v.spec);
  if (!with_secrets) spec = RedactSecrets(std::move(spec));
  return json{
      {"id", v.spec.id},
      {"spec", std::move(spec)},
      {"executor", Executor(v.spec)},
      {"schedule_description", v.spec.schedule.empty() ? "no schedule"
                               : v.schedule            ? v.schedule->Describe()
                                                       : ""},
      {"timezone", v.spec.timezone},
      {"next_fire", InstantOrNull(v.next_fire)},
      // When the next fire starts: its instant plus the job's jitter offset for it.
      {"next_start", InstantOrNull(v.next_fire ? std::optional<Instant>(DueAt(v.spec, *v.next_fire))
                                               : std::nullopt)},
      {"window", WindowOf(v)},
      // The window's last instant that may fire (end_at, or the max_runs-th fire).
      {"last_fire", InstantOrNull(v.rules ? v.rules->last() : std::nullopt)},
      {"paused", v.paused},
      {"pause_reason", v.pause_reason},
      {"running", v.running},
      {"read_only", v.spec.read_only},
      {"source", v.spec.source},
      {"version", version ? json(*version) : json(nullptr)}};
}

const std::string& JobList::Entry::Rendered(bool with_secrets) const {
  const int i = with_secrets ? 1 : 0;
  std::call_once(once_[i],
                 [&] { rendered_[i] = DumpJson(JobViewJson(view, version, with_secrets)); });
  return rendered_[i];
}

JobList::JobList(const Scheduler& scheduler, const JobCatalog& catalog, Duration max_age,
                 const Clock& clock)
    : scheduler_(scheduler), catalog_(catalog), max_age_(max_age), clock_(clock) {}

std::shared_ptr<const JobList::Snapshot> JobList::Now() {
  std::lock_guard<std::mutex> lock(mu_);
  // Read before the copy: a change made while copying makes the next request copy again.
  const uint64_t changes = catalog_.changes() + local_changes_.load();
  const Duration now = clock_.SteadyNow();
  if (snapshot_ != nullptr && snapshot_->changes == changes &&
      now - snapshot_->taken_at < max_age_) {
    return snapshot_;
  }
  std::vector<JobView> views = scheduler_.Jobs();
  auto by_id = [](const JobView& a, const JobView& b) { return a.spec.id < b.spec.id; };
  if (!std::is_sorted(views.begin(), views.end(), by_id)) {
    std::sort(views.begin(), views.end(), by_id);
  }
  const std::map<std::string, int64_t> versions = catalog_.Versions();
  auto fresh = std::make_shared<Snapshot>();
  fresh->changes = changes;
  fresh->taken_at = now;
  fresh->jobs = std::vector<Entry>(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    if (auto v = versions.find(views[i].spec.id); v != versions.end()) {
      fresh->jobs[i].version = v->second;
    }
    fresh->jobs[i].view = std::move(views[i]);
  }
  snapshot_ = std::move(fresh);
  return snapshot_;
}

}  // namespace gnomon::server
