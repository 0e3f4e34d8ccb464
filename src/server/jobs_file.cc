#include "src/server/jobs_file.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/job/job_graph.h"
#include "src/job/job_schema.h"
#include "src/server/api_util.h"
#include "src/server/toml_reader.h"

namespace gnomon::server {
namespace {

// A TOML value as JSON (every job key is read as JSON): tables are objects, arrays arrays; dates
// and times are their RFC 3339 text; a float that JSON cannot hold (nan, inf) is an error.
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

// A TOML value for the job schema's readers (src/job/job_schema.h KeyValue).
class TomlKeyValue final : public KeyValue {
 public:
  TomlKeyValue(const Reporter& r, const toml::node& n) : r_(r), n_(n) {}
  Kind kind() const override {
    // (A date-time reads as its RFC 3339 text: `start_at = 2027-03-01T00:00:00Z`.)
    if (n_.is_string() || n_.is_date_time()) return Kind::kString;
    if (n_.is_integer()) return Kind::kInteger;
    if (n_.is_floating_point()) return Kind::kFloat;
    if (n_.is_boolean()) return Kind::kBool;
    if (n_.is_array()) return Kind::kArray;
    if (n_.is_table()) return Kind::kMap;
    return Kind::kOther;
  }
  std::string type_name() const override { return std::string(TypeName(n_)); }
  std::string_view map_word() const override { return "a table"; }
  std::string text() const override {
    if (const auto* v = n_.as_date_time()) {
      std::ostringstream text;
      text << v->get();
      return text.str();
    }
    return n_.as_string()->get();
  }
  std::optional<int64_t> integer() const override { return n_.as_integer()->get(); }
  bool boolean() const override { return n_.as_boolean()->get(); }
  std::vector<std::unique_ptr<KeyValue>> items() const override {
    std::vector<std::unique_ptr<KeyValue>> out;
    const auto& a = *n_.as_array();
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(std::make_unique<TomlKeyValue>(r_, *a.get(i)));
    return out;
  }
  std::vector<std::pair<std::string, std::unique_ptr<KeyValue>>> entries() const override {
    std::vector<std::pair<std::string, std::unique_ptr<KeyValue>>> out;
    for (const auto& [k, v] : Ordered(*n_.as_table())) {
      out.emplace_back(std::string(k->str()), std::make_unique<TomlKeyValue>(r_, *v));
    }
    return out;
  }
  Result<nlohmann::json> ToJson(std::string_view field) const override {
    return TomlToJson(r_, n_, std::string(field));
  }
  Status Fail(std::string_view field, std::string_view what) const override {
    return r_.Fail(n_, std::string(field) + ": " + std::string(what));
  }

 private:
  const Reporter& r_;
  const toml::node& n_;
};

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
    const JobKey* key = FindJobKey(k->str());
    if (key == nullptr) return UnknownKey(r, *k, JobKeyNames());
    if (is_defaults && key->name == "id") {
      return r.Fail(LineOf(*k), "id: a job id cannot have a default");
    }
    // Read by the job schema, as the API reads JSON; errors placed at the value's line.
    const TomlKeyValue value(r, *v);
    if (key->name == "env") {  // merged over the inherited entries
      JobSpec read;
      GNOMON_RETURN_IF_ERROR(key->read(value, read));
      for (auto& [name, text] : read.env) out.env[name] = std::move(text);
    } else {
      GNOMON_RETURN_IF_ERROR(key->read(value, out));
    }
  }
  *job = std::move(out);
  return Status::Ok();
}

// Checks `defaults` as far as it can be checked without a job: ValidateJobSpec on a probe job.
Status ValidateDefaults(const Reporter& r, int line, const JobSpec& defaults,
                        const Calendars* calendars) {
  JobSpec probe = defaults;
  probe.id = "defaults";
  if (probe.schedule.empty()) probe.schedule = "@daily";
  if (probe.command.empty() && probe.argv.empty() && !probe.http) probe.command = "true";
  Status s = ValidateJobSpec(probe, calendars);
  if (s.ok()) return s;
  std::string what = s.message();
  const std::string job_prefix = "job \"defaults\": ";
  if (what.rfind(job_prefix, 0) == 0) what = what.substr(job_prefix.size());
  return r.Fail(line, what);
}

// One [[job]] table: defaults, then its keys, then CompileJob prefixed with its location.
Result<CompiledJob> ParseJobTable(const std::string& file, const toml::table& t, size_t index,
                                  const JobSpec& defaults, const Calendars* calendars) {
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
  std::string source = job.source;
  Result<CompiledJob> compiled = CompileJob(std::move(job), calendars);
  if (!compiled.ok()) return compiled.status().WithPrefix(source);
  return compiled;
}

}  // namespace

// The jobs of a `job` key: an array of tables.
Status ParseJobArray(const std::string& file, const toml::node& n, const JobSpec& defaults,
                     std::vector<CompiledJob>* jobs, const Calendars* calendars) {
  const Reporter r(file, "");
  const auto* arr = n.as_array();
  if (arr == nullptr) return r.WrongType(n, "job", "an array of tables ([[job]])");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    const auto* t = e.as_table();
    if (t == nullptr) {
      return r.WrongType(e, "job[" + std::to_string(i) + "]", "a table ([[job]])");
    }
    Result<CompiledJob> job = ParseJobTable(file, *t, i, defaults, calendars);
    if (!job.ok()) return job.status();
    jobs->push_back(std::move(job).value());
  }
  return Status::Ok();
}

// Applies a `[defaults]` table over `*defaults` and checks the result.
Status ParseDefaults(const std::string& file, const toml::node& n, JobSpec* defaults,
                     const Calendars* calendars) {
  const Reporter r(file, "defaults");
  const auto* t = n.as_table();
  if (t == nullptr) return Reporter(file, "").WrongType(n, "defaults", "a table");
  JobSpec d = *defaults;
  GNOMON_RETURN_IF_ERROR(ApplyJobTable(r, *t, /*is_defaults=*/true, &d));
  GNOMON_RETURN_IF_ERROR(ValidateDefaults(r, LineOf(n), d, calendars));
  *defaults = std::move(d);
  return Status::Ok();
}

Status CheckUniqueJobIds(const std::vector<CompiledJob>& jobs) {
  std::map<std::string_view, const JobSpec*> seen;
  for (const CompiledJob& compiled : jobs) {
    const JobSpec& j = compiled.spec;
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

Status CheckJobSet(const std::vector<CompiledJob>& jobs) {
  GNOMON_RETURN_IF_ERROR(CheckUniqueJobIds(jobs));
  std::vector<const JobSpec*> specs;
  specs.reserve(jobs.size());
  for (const CompiledJob& c : jobs) specs.push_back(&c.spec);
  return CheckJobGraph(specs);
}

Result<std::vector<CompiledJob>> ParseJobsFile(std::string_view text, const std::string& name,
                                               const JobSpec& defaults,
                                               const Calendars* calendars) {
  Result<toml::table> root = ParseToml(text, name);
  if (!root.ok()) return root.status();
  const Reporter r(name, "");
  JobSpec file_defaults = defaults;
  if (const toml::node* d = root->get("defaults")) {
    GNOMON_RETURN_IF_ERROR(ParseDefaults(name, *d, &file_defaults, calendars));
  }
  std::vector<CompiledJob> jobs;
  for (const auto& [k, v] : Ordered(*root)) {
    if (k->str() == "job") {
      GNOMON_RETURN_IF_ERROR(ParseJobArray(name, *v, file_defaults, &jobs, calendars));
    } else if (k->str() != "defaults") {
      return UnknownKey(r, *k, {"job", "defaults"});
    }
  }
  GNOMON_RETURN_IF_ERROR(CheckUniqueJobIds(jobs));
  return jobs;
}

Result<std::vector<JobSpec>> SpecsOf(Result<std::vector<CompiledJob>> jobs) {
  if (!jobs.ok()) return jobs.status();
  std::vector<JobSpec> specs;
  specs.reserve(jobs->size());
  for (CompiledJob& j : *jobs) specs.push_back(std::move(j.spec));
  return specs;
}

Result<std::vector<CompiledJob>> LoadJobsFile(const std::string& path, const JobSpec& defaults,
                                              const Calendars* calendars) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseJobsFile(*text, path, defaults, calendars);
}

}  // namespace gnomon::server
