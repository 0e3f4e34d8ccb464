#include "src/server/jobs_file.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/server/api_util.h"
#include "src/server/toml_reader.h"

namespace gnomon::server {
namespace {

// Job keys (docs/configuration.md "Jobs files").
Status SetHttp(const Reporter& r, const toml::node& n, JobSpec& job) {
  const auto* t = n.as_table();
  if (t == nullptr) return r.WrongType(n, "http", "a table {url, method, headers}");
  HttpTarget http;
  bool has_url = false;
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view name = k->str();
    if (name == "url") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, "http.url", &http.url));
      has_url = true;
    } else if (name == "method") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, "http.method", &http.method));
    } else if (name == "headers") {
      GNOMON_RETURN_IF_ERROR(MergeStringMap(r, *v, "http.headers", &http.headers));
    } else {
      return UnknownKey(r, *k, {"url", "method", "headers"}, "http");
    }
  }
  if (!has_url) return r.Fail(n, "http.url: is required");
  job.http = std::move(http);
  return Status::Ok();
}

// A TOML value as JSON (`params`): tables are objects, arrays arrays; dates and times are their
// RFC 3339 text; a float that JSON cannot hold (nan, inf) is an error.
Result<nlohmann::json> TomlToJson(const Reporter& r, const toml::node& n, const std::string& at) {
  if (const auto* t = n.as_table()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : Ordered(*t)) {
      Result<nlohmann::json> e = TomlToJson(r, *v, at + "." + std::string(k->str()));
      if (!e.ok()) return e.status();
      out[std::string(k->str())] = std::move(*e);
    }
    return out;
  }
  if (const auto* a = n.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < a->size(); ++i) {
      Result<nlohmann::json> e = TomlToJson(r, *a->get(i), at + "[" + std::to_string(i) + "]");
      if (!e.ok()) return e.status();
      out.push_back(std::move(*e));
    }
    return out;
  }
  if (const auto* v = n.as_string()) return nlohmann::json(v->get());
  if (const auto* v = n.as_integer()) return nlohmann::json(v->get());
  if (const auto* v = n.as_boolean()) return nlohmann::json(v->get());
  if (const auto* v = n.as_floating_point()) {
    if (!std::isfinite(v->get())) return r.Fail(n, at + ": JSON has no nan or inf");
    return nlohmann::json(v->get());
  }
  std::ostringstream text;
  if (const auto* v = n.as_date()) text << v->get();
  if (const auto* v = n.as_time()) text << v->get();
  if (const auto* v = n.as_date_time()) text << v->get();
  return nlohmann::json(text.str());
}

Status SetParams(const Reporter& r, const toml::node& n, JobSpec& job) {
  if (n.as_table() == nullptr) return r.WrongType(n, "params", "a table");
  Result<nlohmann::json> j = TomlToJson(r, n, "params");
  if (!j.ok()) return j.status();
  std::string text = j->empty() ? std::string() : j->dump();
  if (text.size() > kMaxParamsBytes) {
    return r.Fail(n, "params: " + std::to_string(text.size()) + " bytes is larger than 16 KiB");
  }
  job.params = std::move(text);
  return Status::Ok();
}

template <typename E>
Status SetEnum(const Reporter& r, const toml::node& n, std::string_view field,
               Result<E> (*parse)(std::string_view), E* out) {
  std::string s;
  GNOMON_RETURN_IF_ERROR(GetString(r, n, field, &s));
  Result<E> e = parse(s);
  if (!e.ok()) return r.Fail(n, e.status().message());
  *out = *e;
  return Status::Ok();
}

using JobSetter = Status (*)(const Reporter&, const toml::node&, JobSpec&);
struct JobKey {
  std::string_view name;
  JobSetter set;
};

// clang-format off
const JobKey kJobKeys[] = {
    {"id", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "id", &j.id); }},
    {"schedule", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "schedule", &j.schedule); }},
    {"timezone", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "timezone", &j.timezone); }},
    {"command", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "command", &j.command); }},
    {"argv", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetStringList(r, n, "argv", &j.argv); }},
    {"http", SetHttp},
    {"timeout", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "timeout", &j.timeout); }},
    {"retries", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "retries", &j.retries); }},
    {"retry_backoff", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "retry_backoff", &j.retry_backoff); }},
    {"overlap", [](const Reporter& r, const toml::node& n, JobSpec& j) { return SetEnum(r, n, "overlap", ParseOverlapPolicy, &j.overlap); }},
    {"misfire", [](const Reporter& r, const toml::node& n, JobSpec& j) { return SetEnum(r, n, "misfire", ParseMisfirePolicy, &j.misfire); }},
    {"catchup_window", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "catchup_window", &j.catchup_window); }},
    {"on_lost", [](const Reporter& r, const toml::node& n, JobSpec& j) { return SetEnum(r, n, "on_lost", ParseLostPolicy, &j.on_lost); }},
    {"shards", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "shards", &j.shards); }},
    {"max_consecutive_failures", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "max_consecutive_failures", &j.max_consecutive_failures); }},
    {"enabled", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetBool(r, n, "enabled", &j.enabled); }},
    {"description", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "description", &j.description); }},
    {"params", SetParams},
    {"env", [](const Reporter& r, const toml::node& n, JobSpec& j) { return MergeStringMap(r, n, "env", &j.env); }},
    {"kill_grace", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "kill_grace", &j.kill_grace); }},
    {"history_keep", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "history_keep", &j.history_keep); }},
    {"history_max_age", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "history_max_age", &j.history_max_age); }},
    {"queue", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "queue", &j.queue); }},
    {"run_as", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "run_as", &j.run_as); }},
    {"inherit_env", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetStringList(r, n, "inherit_env", &j.inherit_env); }},
    {"memory_max", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetByteSize(r, n, "memory_max", &j.memory_max); }},
    {"cpu_max", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "cpu_max", &j.cpu_max); }},
    {"pids_max", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "pids_max", &j.pids_max); }},
    {"open_files", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "open_files", &j.open_files); }},
};
// clang-format on

std::vector<std::string_view> JobKeyNames() {
  std::vector<std::string_view> names;
  for (const JobKey& k : kJobKeys) names.push_back(k.name);
  return names;
}

// Applies the keys of `t` onto *job. A table that names an executor (command, argv or http)
// replaces the inherited one, so `[defaults] command = ...` does not clash with a job's argv.
// `env` entries are merged over the inherited ones; every other key replaces its value.
Status ApplyJobTable(const Reporter& r, const toml::table& t, bool is_defaults, JobSpec* job) {
  JobSpec out = *job;
  if (t.contains("command") || t.contains("argv") || t.contains("http")) {
    out.command.clear();
    out.argv.clear();
    out.http.reset();
  }
  for (const auto& [k, v] : Ordered(t)) {
    const JobKey* found = nullptr;
    for (const JobKey& jk : kJobKeys) {
      if (jk.name == k->str()) found = &jk;
    }
    if (found == nullptr) return UnknownKey(r, *k, JobKeyNames());
    if (is_defaults && found->name == "id") {
      return r.Fail(LineOf(*k), "id: a job id cannot have a default");
    }
    GNOMON_RETURN_IF_ERROR(found->set(r, *v, out));
  }
  *job = std::move(out);
  return Status::Ok();
}

// Checks `defaults` as far as it can be checked without a job: ValidateJobSpec on a probe job.
Status ValidateDefaults(const Reporter& r, int line, const JobSpec& defaults) {
  JobSpec probe = defaults;
  probe.id = "defaults";
  if (probe.schedule.empty()) probe.schedule = "@daily";
  if (probe.command.empty() && probe.argv.empty() && !probe.http) probe.command = "true";
  Status s = ValidateJobSpec(probe);
  if (s.ok()) return s;
  std::string what = s.message();
  const std::string job_prefix = "job \"defaults\": ";
  if (what.rfind(job_prefix, 0) == 0) what = what.substr(job_prefix.size());
  return r.Fail(line, what);
}

// One [[job]] table: defaults, then its keys, then ValidateJobSpec prefixed with its location.
Result<JobSpec> ParseJobTable(const std::string& file, const toml::table& t, size_t index,
                              const JobSpec& defaults) {
  const int line = LineOf(t);
  std::string scope = "job #" + std::to_string(index + 1);
  const toml::node* id = t.get("id");
  if (id == nullptr) return Reporter(file, scope).Fail(line, "id: is required");
  if (const auto* s = id->as_string()) scope = "job \"" + Shown(s->get(), 128) + "\"";
  const Reporter r(file, scope);
  JobSpec job = defaults;
  GNOMON_RETURN_IF_ERROR(ApplyJobTable(r, t, /*is_defaults=*/false, &job));
  job.in_process = false;
  job.source = Source(file, line);
  job.read_only = true;
  Status s = ValidateJobSpec(job);
  if (!s.ok()) return s.WithPrefix(job.source);
  return job;
}

}  // namespace

// The jobs of a `job` key: an array of tables.
Status ParseJobArray(const std::string& file, const toml::node& n, const JobSpec& defaults,
                     std::vector<JobSpec>* jobs) {
  const Reporter r(file, "");
  const auto* arr = n.as_array();
  if (arr == nullptr) return r.WrongType(n, "job", "an array of tables ([[job]])");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    const auto* t = e.as_table();
    if (t == nullptr) {
      return r.WrongType(e, "job[" + std::to_string(i) + "]", "a table ([[job]])");
    }
    Result<JobSpec> job = ParseJobTable(file, *t, i, defaults);
    if (!job.ok()) return job.status();
    jobs->push_back(std::move(job).value());
  }
  return Status::Ok();
}

// Applies a `[defaults]` table over `*defaults` and checks the result.
Status ParseDefaults(const std::string& file, const toml::node& n, JobSpec* defaults) {
  const Reporter r(file, "defaults");
  const auto* t = n.as_table();
  if (t == nullptr) return Reporter(file, "").WrongType(n, "defaults", "a table");
  JobSpec d = *defaults;
  GNOMON_RETURN_IF_ERROR(ApplyJobTable(r, *t, /*is_defaults=*/true, &d));
  GNOMON_RETURN_IF_ERROR(ValidateDefaults(r, LineOf(n), d));
  *defaults = std::move(d);
  return Status::Ok();
}

Status CheckUniqueJobIds(const std::vector<JobSpec>& jobs) {
  std::map<std::string_view, const JobSpec*> seen;
  for (const JobSpec& j : jobs) {
    auto [it, inserted] = seen.emplace(j.id, &j);
    if (!inserted) {
      const std::string& first = it->second->source.empty() ? "(unknown)" : it->second->source;
      const std::string& here = j.source.empty() ? "(unknown)" : j.source;
      return AlreadyExistsError(here + ": job \"" + j.id + "\": duplicate id, first defined at " +
                                first);
    }
  }
  return Status::Ok();
}

Result<std::vector<JobSpec>> ParseJobsFile(std::string_view text, const std::string& name,
                                           const JobSpec& defaults) {
  Result<toml::table> root = ParseToml(text, name);
  if (!root.ok()) return root.status();
  const Reporter r(name, "");
  JobSpec file_defaults = defaults;
  if (const toml::node* d = root->get("defaults")) {
    GNOMON_RETURN_IF_ERROR(ParseDefaults(name, *d, &file_defaults));
  }
  std::vector<JobSpec> jobs;
  for (const auto& [k, v] : Ordered(*root)) {
    if (k->str() == "job") {
      GNOMON_RETURN_IF_ERROR(ParseJobArray(name, *v, file_defaults, &jobs));
    } else if (k->str() != "defaults") {
      return UnknownKey(r, *k, {"job", "defaults"});
    }
  }
  GNOMON_RETURN_IF_ERROR(CheckUniqueJobIds(jobs));
  return jobs;
}

Result<std::vector<JobSpec>> LoadJobsFile(const std::string& path, const JobSpec& defaults) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseJobsFile(*text, path, defaults);
}

}  // namespace gnomon::server
