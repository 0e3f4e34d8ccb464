#include "apps/gnomon/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "apps/gnomon/crontab.h"

namespace gnomon::app {
namespace {

// ---------------------------------------------------------------------------------------------
// Locations and messages

int LineOf(const toml::node& n) { return static_cast<int>(n.source().begin.line); }
int LineOf(const toml::key& k) { return static_cast<int>(k.source().begin.line); }

// A printable, bounded rendering of user text inside a message.
std::string Shown(std::string_view s, size_t max = 64) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

std::string_view TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::array:
      return "array";
    case toml::node_type::table:
      return "table";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

// Builds errors located in one file, inside one scope ("job \"report\"", "defaults", "").
class Reporter {
 public:
  Reporter(const std::string& file, std::string scope) : file_(file), scope_(std::move(scope)) {}

  // "<file>:<line>: <scope>: <what>".
  Status Fail(int line, std::string_view what) const {
    std::string m = file_ + ":" + std::to_string(line) + ": ";
    if (!scope_.empty()) m += scope_ + ": ";
    m += what;
    return InvalidArgumentError(std::move(m));
  }
  Status Fail(const toml::node& at, std::string_view what) const { return Fail(LineOf(at), what); }
  Status WrongType(const toml::node& at, std::string_view field, std::string_view expected) const {
    return Fail(at, std::string(field) + ": expected " + std::string(expected) + ", got " +
                        std::string(TypeName(at)));
  }

 private:
  const std::string& file_;
  std::string scope_;
};

// Levenshtein distance, for "did you mean" hints on unknown keys (both strings are short).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// `table` names a nested table ("http: unknown key ...") or is empty.
Status UnknownKey(const Reporter& r, const toml::key& key,
                  const std::vector<std::string_view>& known, std::string_view table = "") {
  std::string what =
      std::string(table) + (table.empty() ? "" : ": ") + "unknown key \"" + Shown(key.str()) + "\"";
  if (key.str().size() <= 64) {
    const size_t max_distance = key.str().size() <= 4 ? 1 : 2;
    for (std::string_view k : known) {
      if (EditDistance(key.str(), k) <= max_distance) {
        what += " (did you mean \"" + std::string(k) + "\"?)";
        break;
      }
    }
  }
  return r.Fail(LineOf(key), what);
}

// The entries of `t` in document order (toml::table iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> Ordered(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  for (const auto& [k, v] : t) out.emplace_back(&k, &v);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto& sa = a.first->source().begin;
    const auto& sb = b.first->source().begin;
    return std::pair(sa.line, sa.column) < std::pair(sb.line, sb.column);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Typed values

Status GetString(const Reporter& r, const toml::node& n, std::string_view field, std::string* out) {
  const auto* v = n.as_string();
  if (v == nullptr) return r.WrongType(n, field, "a string");
  *out = v->get();
  return Status::Ok();
}

Status GetBool(const Reporter& r, const toml::node& n, std::string_view field, bool* out) {
  const auto* v = n.as_boolean();
  if (v == nullptr) return r.WrongType(n, field, "true or false");
  *out = v->get();
  return Status::Ok();
}

// An integer that fits an int; finer ranges are checked by the owner of the field.
Status GetInt(const Reporter& r, const toml::node& n, std::string_view field, int* out) {
  const auto* v = n.as_integer();
  if (v == nullptr) return r.WrongType(n, field, "an integer");
  const int64_t x = v->get();
  if (x < INT_MIN || x > INT_MAX) {
    return r.Fail(n, std::string(field) + ": " + std::to_string(x) + " is out of range");
  }
  *out = static_cast<int>(x);
  return Status::Ok();
}

// Durations are strings in the ParseDuration grammar ("500ms", "1h30m").
Status GetDuration(const Reporter& r, const toml::node& n, std::string_view field, Duration* out) {
  const auto* v = n.as_string();
  if (v == nullptr) return r.WrongType(n, field, "a duration string such as \"30s\"");
  Result<Duration> d = ParseDuration(v->get());
  if (!d.ok()) return r.Fail(n, std::string(field) + ": " + d.status().message());
  *out = *d;
  return Status::Ok();
}

Status GetStringList(const Reporter& r, const toml::node& n, std::string_view field,
                     std::vector<std::string>* out) {
  const auto* arr = n.as_array();
  if (arr == nullptr) return r.WrongType(n, field, "an array of strings");
  std::vector<std::string> list;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    const auto* s = e.as_string();
    if (s == nullptr) {
      return r.WrongType(e, std::string(field) + "[" + std::to_string(i) + "]", "a string");
    }
    list.push_back(s->get());
  }
  *out = std::move(list);
  return Status::Ok();
}

// Overlays the string entries of table `n` onto *out.
Status MergeStringMap(const Reporter& r, const toml::node& n, std::string_view field,
                      std::map<std::string, std::string>* out) {
  const auto* t = n.as_table();
  if (t == nullptr) return r.WrongType(n, field, "a table of strings");
  std::map<std::string, std::string> merged = *out;
  for (const auto& [k, v] : Ordered(*t)) {
    const auto* s = v->as_string();
    if (s == nullptr) {
      return r.WrongType(*v, std::string(field) + "." + Shown(k->str()), "a string");
    }
    merged[std::string(k->str())] = s->get();
  }
  *out = std::move(merged);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Job keys (PRODUCT.md "Jobs file" plus kill_grace, history_keep, history_max_age, queue)

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
    {"env", [](const Reporter& r, const toml::node& n, JobSpec& j) { return MergeStringMap(r, n, "env", &j.env); }},
    {"kill_grace", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "kill_grace", &j.kill_grace); }},
    {"history_keep", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetInt(r, n, "history_keep", &j.history_keep); }},
    {"history_max_age", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetDuration(r, n, "history_max_age", &j.history_max_age); }},
    {"queue", [](const Reporter& r, const toml::node& n, JobSpec& j) { return GetString(r, n, "queue", &j.queue); }},
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

std::string Source(const std::string& file, int line) { return file + ":" + std::to_string(line); }

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

// toml++ reports syntax errors by exception; they stop here.
Result<toml::table> ParseToml(std::string_view text, const std::string& name) {
  try {
    return toml::parse(text, std::string_view(name));
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(name + ":" + std::to_string(e.source().begin.line) + ": " +
                                std::string(e.description()));
  } catch (const std::exception& e) {
    return InvalidArgumentError(name + ": cannot parse: " + e.what());
  }
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (base_dir.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(base_dir) / p).string();
}

// ---------------------------------------------------------------------------------------------
// Serve settings

Status CheckRange(std::string_view field, Duration d, Duration min, Duration max) {
  if (d < min || d > max) {
    return InvalidArgumentError(std::string(field) + ": " + FormatDuration(d) +
                                " is out of range " + FormatDuration(min) + " to " +
                                FormatDuration(max));
  }
  return Status::Ok();
}

struct SchedulerKey {
  std::string_view name;
  Duration SchedulerSettings::*field;
  Duration min, max;
};
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
const SchedulerKey kSchedulerDurations[] = {
    {"claim_grace", &SchedulerSettings::claim_grace, milliseconds(1), minutes(10)},
    {"skew_tolerance", &SchedulerSettings::skew_tolerance, Duration(0), minutes(1)},
    {"claim_ahead", &SchedulerSettings::claim_ahead, Duration(0), minutes(1)},
    {"lease_ttl", &SchedulerSettings::lease_ttl, seconds(1), hours(1)},
    {"shutdown_grace", &SchedulerSettings::shutdown_grace, Duration(0), hours(1)},
    {"heartbeat_interval", &SchedulerSettings::heartbeat_interval, milliseconds(100), minutes(10)},
};

Status CheckWorkerThreads(int n) {
  if (n < 1 || n > 1024) {
    return InvalidArgumentError("worker_threads: " + std::to_string(n) + " is out of range 1-1024");
  }
  return Status::Ok();
}

Status CheckHeartbeat(const SchedulerSettings& s) {
  if (s.heartbeat_interval >= s.lease_ttl) {
    return InvalidArgumentError("heartbeat_interval: " + FormatDuration(s.heartbeat_interval) +
                                " must be less than lease_ttl (" + FormatDuration(s.lease_ttl) +
                                ")");
  }
  return Status::Ok();
}

Status CheckNodeId(std::string_view id) {
  if (!IsValidJobId(id)) {
    return InvalidArgumentError("node_id: \"" + Shown(id) + "\" must match [A-Za-z0-9_.-]{1,128}");
  }
  return Status::Ok();
}

Result<int> ParsePort(std::string_view s) {
  if (s.empty() || s.size() > 5) return InvalidArgumentError("");
  int port = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return InvalidArgumentError("");
    port = port * 10 + (c - '0');
  }
  return port;
}

bool IsHostChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

// "host:port" or "[v6]:port" (port may be absent when default_port > 0). `min_port` is 0 for a
// listen address (0 = any free port) and 1 for a server to connect to.
Result<HostPort> ParseHostPort(std::string_view s, int default_port, int min_port) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("\"" + Shown(s, 128) + "\": " + std::string(why));
  };
  HostPort hp;
  std::string_view rest;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) return bad("missing ']' after the IPv6 address");
    hp.host = std::string(s.substr(1, close - 1));
    for (char c : hp.host) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
            c == ':' || c == '.')) {
        return bad("invalid IPv6 address");
      }
    }
    rest = s.substr(close + 1);
  } else {
    const size_t colon = s.find(':');
    hp.host = std::string(s.substr(0, colon));
    for (char c : hp.host) {
      if (!IsHostChar(c)) return bad("invalid character in the host name");
    }
    rest = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
  }
  if (hp.host.empty()) return bad("missing host");
  if (hp.host.size() > 253) return bad("host name too long");
  if (rest.empty()) {
    if (default_port <= 0) return bad("missing :port");
    hp.port = default_port;
    return hp;
  }
  if (rest.front() != ':') return bad("expected :port after the host");
  Result<int> port = ParsePort(rest.substr(1));
  if (!port.ok() || *port < min_port || *port > 65535) {
    return bad("port must be a number " + std::to_string(min_port) + "-65535");
  }
  hp.port = *port;
  return hp;
}

Status CheckListen(std::string_view addr) {
  Result<HostPort> hp = ParseHostPort(addr, 0, 0);
  if (!hp.ok()) return InvalidArgumentError("listen: " + hp.status().message());
  return Status::Ok();
}

Status CheckBackend(std::string_view url) {
  Result<BackendUrl> u = ParseBackendUrl(url);
  if (!u.ok()) return InvalidArgumentError("backend: " + u.status().message());
  return Status::Ok();
}

Result<LogFormat> ParseLogFormat(std::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return InvalidArgumentError("log_format: \"" + Shown(s) + "\" is not one of text, json");
}

Result<LogLevel> ParseLogLevel(std::string_view s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return InvalidArgumentError("log_level: \"" + Shown(s) +
                              "\" is not one of debug, info, warn, error");
}

Status ParseScheduler(const std::string& file, const toml::node& n, SchedulerSettings* out) {
  const auto* t = n.as_table();
  if (t == nullptr) return Reporter(file, "").WrongType(n, "scheduler", "a table");
  const Reporter r(file, "scheduler");
  SchedulerSettings s = *out;
  std::vector<std::string_view> names = {"worker_threads"};
  for (const SchedulerKey& k : kSchedulerDurations) names.push_back(k.name);
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view name = k->str();
    if (name == "worker_threads") {
      GNOMON_RETURN_IF_ERROR(GetInt(r, *v, name, &s.worker_threads));
      Status c = CheckWorkerThreads(s.worker_threads);
      if (!c.ok()) return r.Fail(*v, c.message());
      continue;
    }
    const SchedulerKey* found = nullptr;
    for (const SchedulerKey& sk : kSchedulerDurations) {
      if (sk.name == name) found = &sk;
    }
    if (found == nullptr) return UnknownKey(r, *k, names);
    GNOMON_RETURN_IF_ERROR(GetDuration(r, *v, name, &(s.*found->field)));
    Status c = CheckRange(name, s.*found->field, found->min, found->max);
    if (!c.ok()) return r.Fail(*v, c.message());
  }
  Status c = CheckHeartbeat(s);
  if (!c.ok()) return r.Fail(n, c.message());
  *out = s;
  return Status::Ok();
}

// Loads jobs files and crontabs and appends their jobs to *jobs. `at` names the config line
// that listed the file (for a file that cannot be read), or is empty.
Status LoadFiles(const std::vector<std::string>& jobs_files,
                 const std::vector<std::string>& crontab_files, const JobSpec& defaults,
                 const std::string& jobs_at, const std::string& crontab_at,
                 std::vector<JobSpec>* jobs) {
  auto located = [](const std::string& at, const Status& s) {
    return at.empty() || s.code() != StatusCode::kNotFound ? s : s.WithPrefix(at);
  };
  for (const std::string& f : jobs_files) {
    Result<std::vector<JobSpec>> loaded = LoadJobsFile(f, defaults);
    if (!loaded.ok()) return located(jobs_at, loaded.status());
    for (JobSpec& j : *loaded) jobs->push_back(std::move(j));
  }
  for (const std::string& f : crontab_files) {
    Result<std::vector<JobSpec>> loaded = LoadCrontab(f, defaults);
    if (!loaded.ok()) return located(crontab_at, loaded.status());
    for (JobSpec& j : *loaded) jobs->push_back(std::move(j));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Backend URLs

Result<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= s.size()) {
      return InvalidArgumentError("malformed percent-encoding in the user-info");
    }
    const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0)
      return InvalidArgumentError("malformed percent-encoding in the user-info");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

constexpr std::string_view kSupportedSchemes =
    "sqlite:///abs/path, sqlite://./rel/path, redis://[user:pass@]host:port[/db], "
    "redis+sentinel://h1:p,h2:p/master, etcd://h1:2379[,h2:2379]";

}  // namespace

// -----------------------------------------------------------------------------------------------

Result<std::string> ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return NotFoundError(path + ": cannot read: is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigFileBytes) {
      return InvalidArgumentError(path + ": larger than " +
                                  std::to_string(kMaxConfigFileBytes / (1024 * 1024)) + " MiB");
    }
  }
  if (in.bad()) return NotFoundError(path + ": cannot read: I/O error");
  return text;
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

Status ValidateServeConfig(const ServeConfig& config) {
  GNOMON_RETURN_IF_ERROR(CheckBackend(config.backend));
  if (!config.node_id.empty()) GNOMON_RETURN_IF_ERROR(CheckNodeId(config.node_id));
  GNOMON_RETURN_IF_ERROR(CheckListen(config.listen));
  for (const SchedulerKey& k : kSchedulerDurations) {
    Status s = CheckRange(k.name, config.scheduler.*k.field, k.min, k.max);
    if (!s.ok()) return s.WithPrefix("scheduler");
  }
  Status s = CheckWorkerThreads(config.scheduler.worker_threads);
  if (s.ok()) s = CheckHeartbeat(config.scheduler);
  if (!s.ok()) return s.WithPrefix("scheduler");
  return Status::Ok();
}

// `[[token]]` tables: name, token, role, namespaces.
Status ParseTokens(const std::string& file, const toml::node& n, std::vector<TokenConfig>* out) {
  const Reporter r(file, "token");
  const toml::array* tokens = n.as_array();
  if (tokens == nullptr) return r.Fail(n, "must be an array of tables ([[token]])");
  for (const toml::node& elem : *tokens) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[token]])");
    TokenConfig token;
    token.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "name") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.name));
      } else if (key == "token") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.secret));
      } else if (key == "role") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.role));
      } else if (key == "namespaces") {
        GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &token.namespaces));
      } else {
        return UnknownKey(r, *k, {"name", "token", "role", "namespaces"});
      }
    }
    if (token.name.empty() || token.secret.empty() || token.role.empty()) {
      return r.Fail(elem, "name, token and role are required");
    }
    out->push_back(std::move(token));
  }
  return Status::Ok();
}

// `[[alert]]` tables: name, url, secret, events, jobs.
Status ParseAlerts(const std::string& file, const toml::node& n, std::vector<AlertConfig>* out) {
  const Reporter r(file, "alert");
  const toml::array* alerts = n.as_array();
  if (alerts == nullptr) return r.Fail(n, "must be an array of tables ([[alert]])");
  for (const toml::node& elem : *alerts) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[alert]])");
    AlertConfig alert;
    alert.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "name") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &alert.name));
      } else if (key == "url") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &alert.url));
        if (alert.url.rfind("http://", 0) != 0 && alert.url.rfind("https://", 0) != 0) {
          return r.Fail(*v, "url: must start with http:// or https://");
        }
      } else if (key == "secret") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &alert.secret));
      } else if (key == "events") {
        GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &alert.events));
        for (const std::string& e : alert.events) {
          if (e != "run_failed" && e != "lost_run" && e != "auto_paused" && e != "missed_fire") {
            return r.Fail(*v, "events: \"" + e +
                                  "\" is not one of run_failed, lost_run, auto_paused, "
                                  "missed_fire");
          }
        }
      } else if (key == "jobs") {
        GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &alert.jobs));
      } else {
        return UnknownKey(r, *k, {"name", "url", "secret", "events", "jobs"});
      }
    }
    if (alert.name.empty() || alert.url.empty()) return r.Fail(elem, "name and url are required");
    for (const AlertConfig& a : *out) {
      if (a.name == alert.name) {
        return r.Fail(elem, "name \"" + alert.name + "\" is used twice (" + a.source + ")");
      }
    }
    out->push_back(std::move(alert));
  }
  return Status::Ok();
}

// `[tracing]`: otlp_endpoint, service_name.
Status ParseTracing(const std::string& file, const toml::node& n, TracingConfig* out) {
  const Reporter r(file, "tracing");
  const toml::table* t = n.as_table();
  if (t == nullptr) return r.Fail(n, "must be a table ([tracing])");
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view key = k->str();
    if (key == "otlp_endpoint") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &out->otlp_endpoint));
      if (!out->otlp_endpoint.empty() && out->otlp_endpoint.rfind("http://", 0) != 0) {
        return r.Fail(*v, "otlp_endpoint: must start with http:// (OTLP/HTTP JSON)");
      }
    } else if (key == "service_name") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &out->service_name));
      if (out->service_name.empty()) return r.Fail(*v, "service_name: must not be empty");
    } else {
      return UnknownKey(r, *k, {"otlp_endpoint", "service_name"});
    }
  }
  return Status::Ok();
}

// `[[quota]]` tables: namespace, max_jobs, max_concurrent_runs.
Status ParseQuotas(const std::string& file, const toml::node& n, std::vector<QuotaConfig>* out) {
  const Reporter r(file, "quota");
  const toml::array* quotas = n.as_array();
  if (quotas == nullptr) return r.Fail(n, "must be an array of tables ([[quota]])");
  for (const toml::node& elem : *quotas) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[quota]])");
    QuotaConfig quota;
    quota.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "namespace") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &quota.ns));
        if (quota.ns.empty() || !IsValidJobId(quota.ns)) {
          return r.Fail(*v, "namespace: must be a job-id prefix ([A-Za-z0-9_.-]{1,128})");
        }
      } else if (key == "max_jobs" || key == "max_concurrent_runs") {
        int* field = key == "max_jobs" ? &quota.max_jobs : &quota.max_concurrent_runs;
        GNOMON_RETURN_IF_ERROR(GetInt(r, *v, key, field));
        if (*field < 0) return r.Fail(*v, std::string(key) + ": must be >= 0 (0 = no limit)");
      } else {
        return UnknownKey(r, *k, {"namespace", "max_jobs", "max_concurrent_runs"});
      }
    }
    if (quota.ns.empty()) return r.Fail(elem, "namespace is required");
    for (const QuotaConfig& q : *out) {
      if (q.ns == quota.ns) {
        return r.Fail(elem,
                      "namespace \"" + quota.ns + "\" already has a quota (" + q.source + ")");
      }
    }
    out->push_back(std::move(quota));
  }
  return Status::Ok();
}

Result<ServeConfig> ParseServeConfig(std::string_view text, const std::string& name,
                                     const std::string& base_dir) {
  Result<toml::table> root = ParseToml(text, name);
  if (!root.ok()) return root.status();
  const Reporter r(name, "");
  ServeConfig config;
  std::string jobs_at, crontab_at;
  // [defaults] first: it applies to the inline jobs wherever the table appears.
  if (const toml::node* d = root->get("defaults")) {
    GNOMON_RETURN_IF_ERROR(ParseDefaults(name, *d, &config.defaults));
  }
  const toml::node* inline_jobs = nullptr;
  for (const auto& [k, v] : Ordered(*root)) {
    const std::string_view key = k->str();
    // A check of the value of `key` (no location yet) becomes a located error.
    auto located = [&](const Status& s) { return s.ok() ? s : r.Fail(*v, s.message()); };
    if (key == "backend") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.backend));
      GNOMON_RETURN_IF_ERROR(located(CheckBackend(config.backend)));
    } else if (key == "allow_unsafe_backend") {
      GNOMON_RETURN_IF_ERROR(GetBool(r, *v, key, &config.allow_unsafe_backend));
    } else if (key == "node_id") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.node_id));
      GNOMON_RETURN_IF_ERROR(located(CheckNodeId(config.node_id)));
    } else if (key == "listen") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.listen));
      GNOMON_RETURN_IF_ERROR(located(CheckListen(config.listen)));
    } else if (key == "log_format") {
      std::string s;
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &s));
      Result<LogFormat> f = ParseLogFormat(s);
      if (!f.ok()) return located(f.status());
      config.log_format = *f;
    } else if (key == "log_level") {
      std::string s;
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &s));
      Result<LogLevel> l = ParseLogLevel(s);
      if (!l.ok()) return located(l.status());
      config.log_level = *l;
    } else if (key == "jobs" || key == "crontab") {
      std::vector<std::string> files;
      GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &files));
      for (std::string& f : files) {
        if (f.empty()) return r.Fail(*v, std::string(key) + ": empty file name");
        f = Resolve(base_dir, f);
      }
      (key == "jobs" ? config.jobs_files : config.crontab_files) = std::move(files);
      (key == "jobs" ? jobs_at : crontab_at) = Source(name, LineOf(*v)) + ": " + std::string(key);
    } else if (key == "scheduler") {
      GNOMON_RETURN_IF_ERROR(ParseScheduler(name, *v, &config.scheduler));
    } else if (key == "job") {
      inline_jobs = v;
    } else if (key == "token") {
      GNOMON_RETURN_IF_ERROR(ParseTokens(name, *v, &config.tokens));
    } else if (key == "quota") {
      GNOMON_RETURN_IF_ERROR(ParseQuotas(name, *v, &config.quotas));
    } else if (key == "alert") {
      GNOMON_RETURN_IF_ERROR(ParseAlerts(name, *v, &config.alerts));
    } else if (key == "tracing") {
      GNOMON_RETURN_IF_ERROR(ParseTracing(name, *v, &config.tracing));
    } else if (key != "defaults") {
      return UnknownKey(r, *k,
                        {"backend", "allow_unsafe_backend", "node_id", "listen", "log_format",
                         "log_level", "jobs", "crontab", "scheduler", "defaults", "job", "token",
                         "quota", "alert", "tracing"});
    }
  }
  if (inline_jobs != nullptr) {
    GNOMON_RETURN_IF_ERROR(ParseJobArray(name, *inline_jobs, config.defaults, &config.jobs));
  }
  GNOMON_RETURN_IF_ERROR(LoadFiles(config.jobs_files, config.crontab_files, config.defaults,
                                   jobs_at, crontab_at, &config.jobs));
  GNOMON_RETURN_IF_ERROR(CheckUniqueJobIds(config.jobs));
  GNOMON_RETURN_IF_ERROR(ValidateServeConfig(config).WithPrefix(name));
  return config;
}

Result<ServeConfig> LoadServeConfig(const std::string& path) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseServeConfig(*text, path, std::filesystem::path(path).parent_path().string());
}

Status AddJobFiles(ServeConfig* config, const std::vector<std::string>& jobs_files,
                   const std::vector<std::string>& crontab_files) {
  std::vector<JobSpec> jobs = config->jobs;
  GNOMON_RETURN_IF_ERROR(LoadFiles(jobs_files, crontab_files, config->defaults, "", "", &jobs));
  GNOMON_RETURN_IF_ERROR(CheckUniqueJobIds(jobs));
  config->jobs = std::move(jobs);
  config->jobs_files.insert(config->jobs_files.end(), jobs_files.begin(), jobs_files.end());
  config->crontab_files.insert(config->crontab_files.end(), crontab_files.begin(),
                               crontab_files.end());
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------

Result<BackendUrl> ParseBackendUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return InvalidArgumentError("\"" + Shown(RedactUrl(url), 128) +
                                "\" is not a URL; supported: " + std::string(kSupportedSchemes));
  }
  BackendUrl out;
  out.scheme = std::string(url.substr(0, sep));
  std::string_view rest = url.substr(sep + 3);
  if (url.find('\0') != std::string_view::npos) return InvalidArgumentError("contains a NUL byte");

  if (out.scheme == "sqlite") {
    if (rest.empty()) return InvalidArgumentError("sqlite: missing the database path");
    if (rest.front() != '/' && rest.rfind("./", 0) != 0 && rest.rfind("../", 0) != 0) {
      return InvalidArgumentError("sqlite: path \"" + Shown(rest, 128) +
                                  "\" must be absolute (sqlite:///var/lib/gnomon.db) or start "
                                  "with ./ or ../ (sqlite://./gnomon.db)");
    }
    if (rest.back() == '/') {
      return InvalidArgumentError("sqlite: path \"" + Shown(rest, 128) + "\" names a directory");
    }
    out.path = std::string(rest);
    return out;
  }

  int default_port = 0;
  if (out.scheme == "redis") {
    default_port = 6379;
  } else if (out.scheme == "redis+sentinel") {
    default_port = 26379;
  } else if (out.scheme == "etcd") {
    default_port = 2379;
  } else {
    return InvalidArgumentError("unknown scheme \"" + Shown(out.scheme) +
                                "\"; supported: " + std::string(kSupportedSchemes));
  }
  const std::string scheme = out.scheme;

  // The user-info ends at the last '@', so a password may contain '@' and '/' unencoded.
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    const size_t colon = info.find(':');
    Result<std::string> user = PercentDecode(info.substr(0, colon));
    if (!user.ok()) return InvalidArgumentError(scheme + ": " + user.status().message());
    out.user = *user;
    if (colon != std::string_view::npos) {
      Result<std::string> pass = PercentDecode(info.substr(colon + 1));
      if (!pass.ok()) return InvalidArgumentError(scheme + ": " + pass.status().message());
      out.password = *pass;
    }
    rest = rest.substr(at + 1);
  }
  const size_t slash = rest.find('/');
  const std::string_view hosts = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (hosts.empty()) return InvalidArgumentError(scheme + ": missing host");
  size_t start = 0;
  while (true) {
    const size_t comma = hosts.find(',', start);
    Result<HostPort> hp = ParseHostPort(hosts.substr(start, comma - start), default_port, 1);
    if (!hp.ok()) return InvalidArgumentError(scheme + ": " + hp.status().message());
    out.hosts.push_back(std::move(hp).value());
    if (out.hosts.size() > 64) return InvalidArgumentError(scheme + ": more than 64 hosts");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }

  if (out.scheme == "redis") {
    if (out.hosts.size() != 1) {
      return InvalidArgumentError(
          "redis: exactly one host:port (use redis+sentinel:// for several)");
    }
    if (!path.empty()) {
      Result<int> db = ParsePort(path);  // digits only, at most 5 of them
      if (!db.ok()) {
        return InvalidArgumentError("redis: database \"" + Shown(path) +
                                    "\" must be a number 0-99999");
      }
      out.db = *db;
    }
  } else if (out.scheme == "redis+sentinel") {
    if (path.empty()) {
      return InvalidArgumentError("redis+sentinel: missing the master name (…/mymaster)");
    }
    for (char c : path) {
      if (!IsHostChar(c)) {
        return InvalidArgumentError("redis+sentinel: master name \"" + Shown(path) +
                                    "\" must match [A-Za-z0-9_.-]+");
      }
    }
    out.master = std::string(path);
  } else if (!path.empty()) {
    return InvalidArgumentError("etcd: unexpected path \"/" + Shown(path) + "\"");
  }
  return out;
}

std::string RedactUrl(std::string_view url) {
  const size_t sep = url.find("://");
  const size_t begin = sep == std::string_view::npos ? 0 : sep + 3;
  if (sep != std::string_view::npos && url.substr(0, sep) == "sqlite") return std::string(url);
  const size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < begin) return std::string(url);
  const std::string_view info = url.substr(begin, at - begin);
  const size_t colon = info.find(':');
  std::string out(url.substr(0, begin));
  if (colon == std::string_view::npos) {
    out += "***";
  } else {
    out += info.substr(0, colon);
    out += ":***";
  }
  out += url.substr(at);
  return out;
}

}  // namespace gnomon::app
