#include "src/job/job_schema.h"

#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "gnomon/time.h"
#include "src/job/key_hint.h"

namespace gnomon {
namespace {

using nlohmann::json;

Status WrongType(const KeyValue& v, std::string_view field, std::string_view expected) {
  return v.Fail(field, "expected " + std::string(expected) + ", got " + v.type_name());
}

Status Read(const KeyValue& v, std::string_view field, std::string* out) {
  if (v.kind() != KeyValue::Kind::kString) return WrongType(v, field, "a string");
  *out = v.text();
  return Status::Ok();
}

Status Read(const KeyValue& v, std::string_view field, bool* out) {
  if (v.kind() != KeyValue::Kind::kBool) return WrongType(v, field, "true or false");
  *out = v.boolean();
  return Status::Ok();
}

Status Read(const KeyValue& v, std::string_view field, int* out) {
  if (v.kind() != KeyValue::Kind::kInteger) return WrongType(v, field, "an integer");
  const std::optional<int64_t> x = v.integer();
  if (!x || *x < INT_MIN || *x > INT_MAX) {
    return v.Fail(field, (x ? std::to_string(*x) : std::string("the number")) + " is out of range");
  }
  *out = static_cast<int>(*x);
  return Status::Ok();
}

Status Read(const KeyValue& v, std::string_view field, Duration* out) {
  if (v.kind() != KeyValue::Kind::kString) {
    return WrongType(v, field, "a duration string such as \"30s\"");
  }
  Result<Duration> d = ParseDuration(v.text());
  if (!d.ok()) return v.Fail(field, d.status().message());
  *out = *d;
  return Status::Ok();
}

Status Read(const KeyValue& v, std::string_view field, std::optional<Instant>* out) {
  if (v.kind() != KeyValue::Kind::kString) {
    return WrongType(v, field, "an RFC 3339 time such as \"2027-03-01T00:00:00Z\"");
  }
  Result<Instant> t = Instant::ParseRfc3339(v.text());
  if (!t.ok()) return v.Fail(field, t.status().message());
  *out = *t;
  return Status::Ok();
}

Status ReadSize(const KeyValue& v, std::string_view field, int64_t* out) {
  if (v.kind() == KeyValue::Kind::kInteger) {
    const std::optional<int64_t> x = v.integer();
    if (!x || *x < 0) return v.Fail(field, "must be >= 0");
    *out = *x;
    return Status::Ok();
  }
  if (v.kind() != KeyValue::Kind::kString) {
    return WrongType(v, field, "a size such as \"512M\" or an integer");
  }
  Result<int64_t> bytes = ParseByteSize(v.text());
  if (!bytes.ok()) return v.Fail(field, bytes.status().message());
  *out = *bytes;
  return Status::Ok();
}

Status Read(const KeyValue& v, std::string_view field, std::vector<std::string>* out) {
  if (v.kind() != KeyValue::Kind::kArray) return WrongType(v, field, "an array of strings");
  std::vector<std::string> list;
  const std::vector<std::unique_ptr<KeyValue>> items = v.items();
  for (size_t i = 0; i < items.size(); ++i) {
    std::string e;
    GNOMON_RETURN_IF_ERROR(Read(*items[i], std::string(field) + "[" + std::to_string(i) + "]", &e));
    list.push_back(std::move(e));
  }
  *out = std::move(list);
  return Status::Ok();
}

Status Read(const KeyValue& v, std::string_view field, std::map<std::string, std::string>* out) {
  if (v.kind() != KeyValue::Kind::kMap) {
    return WrongType(v, field, std::string(v.map_word()) + " of strings");
  }
  std::map<std::string, std::string> m;
  for (const auto& [k, e] : v.entries()) {
    GNOMON_RETURN_IF_ERROR(Read(*e, std::string(field) + "." + Shown(k), &m[k]));
  }
  *out = std::move(m);
  return Status::Ok();
}

template <typename E>
Status ReadEnum(const KeyValue& v, std::string_view field, Result<E> (*parse)(std::string_view),
                E* out) {
  std::string s;
  GNOMON_RETURN_IF_ERROR(Read(v, field, &s));
  Result<E> e = parse(s);
  if (!e.ok()) {
    // The parser's message names the field already ("overlap: ...").
    std::string_view what = e.status().message();
    const std::string prefix = std::string(field) + ": ";
    if (what.starts_with(prefix)) what.remove_prefix(prefix.size());
    return v.Fail(field, what);
  }
  *out = *e;
  return Status::Ok();
}

// `params`: an object, kept as compact text ("" for an empty one).
Status ReadParams(const KeyValue& v, JobSpec& job) {
  if (v.kind() != KeyValue::Kind::kMap) return WrongType(v, "params", v.map_word());
  Result<json> j = v.ToJson("params");
  if (!j.ok()) return j.status();
  std::string text =
      j->empty() ? std::string() : j->dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxParamsBytes) {
    return v.Fail("params", std::to_string(text.size()) + " bytes is larger than 16 KiB");
  }
  job.params = std::move(text);
  return Status::Ok();
}

Status ReadHttp(const KeyValue& v, JobSpec& job) {
  if (v.kind() != KeyValue::Kind::kMap) {
    return WrongType(v, "http", std::string(v.map_word()) + " {url, method, headers}");
  }
  HttpTarget http;
  bool has_url = false;
  for (const auto& [k, e] : v.entries()) {
    if (k == "url") {
      GNOMON_RETURN_IF_ERROR(Read(*e, "http.url", &http.url));
      has_url = true;
    } else if (k == "method") {
      GNOMON_RETURN_IF_ERROR(Read(*e, "http.method", &http.method));
    } else if (k == "headers") {
      GNOMON_RETURN_IF_ERROR(Read(*e, "http.headers", &http.headers));
    } else {
      return e->Fail("http", UnknownKeyMessage(k, {"url", "method", "headers"}));
    }
  }
  if (!has_url) return v.Fail("http.url", "is required");
  job.http = std::move(http);
  return Status::Ok();
}

// A key of the job's FireRulesSpec: read into a copy, kept on the heap only when not all defaults.
template <typename T>
Status ReadRule(const KeyValue& v, std::string_view field, JobSpec& j, T FireRulesSpec::*member) {
  FireRulesSpec rules = FireRulesOf(j);
  GNOMON_RETURN_IF_ERROR(Read(v, field, &(rules.*member)));
  SetFireRules(j, std::move(rules));
  return Status::Ok();
}

// A key of the job's DependencySpec, kept on the heap as ReadRule keeps FireRulesSpec.
Status ReadChildren(const KeyValue& v, std::string_view field, JobSpec& j,
                    std::vector<std::string> DependencySpec::*member) {
  DependencySpec deps = DependenciesOf(j);
  GNOMON_RETURN_IF_ERROR(Read(v, field, &(deps.*member)));
  SetDependencies(j, std::move(deps));
  return Status::Ok();
}

json Str() { return {{"type", "string"}}; }
json Int() { return {{"type", "integer"}}; }
json Strings() { return {{"type", "array"}, {"items", Str()}}; }
json StringMap() { return {{"type", "object"}, {"additionalProperties", Str()}}; }
json Timestamp() { return {{"type", "string"}, {"format", "date-time"}}; }
json Duration_() { return {{"type", "string"}, {"description", "a duration such as \"30s\""}}; }

constexpr int64_t kDay = 24LL * 3600 * 1000;

// One entry per key: read, write and schema through the member it names. The macros keep each
// key to one line; they expand to lambdas over that member only.
// clang-format off
#define GNOMON_KEY(NAME, TYPE, MIN, MAX, MEMBER, SCHEMA)                                         \
  JobKey{#NAME, TYPE, MIN, MAX,                                                                  \
         [](const KeyValue& v, JobSpec& j) { return Read(v, #NAME, &j.MEMBER); },                    \
         [](const JobSpec& j) { return json(j.MEMBER); }, [] { return SCHEMA; }}
#define GNOMON_INT_KEY(NAME, MIN, MAX, MEMBER)                                                   \
  JobKey{#NAME, "integer", MIN, MAX,                                                             \
         [](const KeyValue& v, JobSpec& j) { return Read(v, #NAME, &j.MEMBER); },                    \
         [](const JobSpec& j) { return json(j.MEMBER); }, Int,                                   \
         [](const JobSpec& j) { return int64_t{j.MEMBER}; }}
#define GNOMON_DURATION_KEY(NAME, MIN, MAX, MEMBER)                                              \
  JobKey{#NAME, "duration", MIN, MAX,                                                            \
         [](const KeyValue& v, JobSpec& j) { return Read(v, #NAME, &j.MEMBER); },                    \
         [](const JobSpec& j) { return json(FormatDuration(j.MEMBER)); }, Duration_,             \
         [](const JobSpec& j) { return int64_t{j.MEMBER.count()}; }}
#define GNOMON_ENUM_KEY(NAME, MEMBER, PARSE, ...)                                                \
  JobKey{#NAME, "string", 1, 0,                                                                  \
         [](const KeyValue& v, JobSpec& j) { return ReadEnum(v, #NAME, PARSE, &j.MEMBER); },         \
         [](const JobSpec& j) { return json(std::string(ToString(j.MEMBER))); },                 \
         [] { return json{{"type", "string"}, {"enum", json::array({__VA_ARGS__})}}; }}

#define GNOMON_CHILDREN_KEY(NAME)                                                                \
  JobKey{#NAME, "array of strings", 1, 0,                                                        \
         [](const KeyValue& v, JobSpec& j) { return ReadChildren(v, #NAME, j, &DependencySpec::NAME); }, \
         [](const JobSpec& j) { return json(DependenciesOf(j).NAME); }, Strings}

const JobKey kKeys[] = {
    JobKey{"id", "string", 1, 0, [](const KeyValue& v, JobSpec& j) { return Read(v, "id", &j.id); },
           [](const JobSpec& j) { return json(j.id); },
           [] { return json{{"type", "string"}, {"pattern", "^[A-Za-z0-9_.-]{1,128}$"}}; }},
    GNOMON_KEY(schedule, "string", 1, 0, schedule, Str()),
    GNOMON_KEY(timezone, "string", 1, 0, timezone, Str()),
    JobKey{"start_at", "time", 1, 0, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "start_at", j, &FireRulesSpec::start_at); },
           [](const JobSpec& j) { return FireRulesOf(j).start_at ? json(FireRulesOf(j).start_at->ToRfc3339()) : json(); }, Timestamp},
    JobKey{"end_at", "time", 1, 0, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "end_at", j, &FireRulesSpec::end_at); },
           [](const JobSpec& j) { return FireRulesOf(j).end_at ? json(FireRulesOf(j).end_at->ToRfc3339()) : json(); }, Timestamp},
    JobKey{"max_runs", "integer", 0, kMaxRuns, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "max_runs", j, &FireRulesSpec::max_runs); },
           [](const JobSpec& j) { return json(FireRulesOf(j).max_runs); }, Int,
           [](const JobSpec& j) { return int64_t{FireRulesOf(j).max_runs}; }},
    JobKey{"exclude", "array of strings", 1, 0, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "exclude", j, &FireRulesSpec::exclude); },
           [](const JobSpec& j) { return json(FireRulesOf(j).exclude); }, Strings},
    JobKey{"calendars", "array of strings", 1, 0, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "calendars", j, &FireRulesSpec::calendars); },
           [](const JobSpec& j) { return json(FireRulesOf(j).calendars); }, Strings},
    JobKey{"record_excluded", "boolean", 1, 0, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "record_excluded", j, &FireRulesSpec::record_excluded); },
           [](const JobSpec& j) { return json(FireRulesOf(j).record_excluded); }, [] { return json({{"type", "boolean"}}); }},
    JobKey{"jitter", "duration", 0, 3600'000, [](const KeyValue& v, JobSpec& j) { return ReadRule(v, "jitter", j, &FireRulesSpec::jitter); },
           [](const JobSpec& j) { return json(FormatDuration(FireRulesOf(j).jitter)); }, Duration_,
           [](const JobSpec& j) { return int64_t{FireRulesOf(j).jitter.count()}; }},
    GNOMON_CHILDREN_KEY(on_success),
    GNOMON_CHILDREN_KEY(on_failure),
    GNOMON_CHILDREN_KEY(on_complete),
    GNOMON_CHILDREN_KEY(after),
    JobKey{"join_timeout", "duration", 0, 3600'000, [](const KeyValue& v, JobSpec& j) {
             DependencySpec deps = DependenciesOf(j);
             GNOMON_RETURN_IF_ERROR(Read(v, "join_timeout", &deps.join_timeout));
             SetDependencies(j, std::move(deps));
             return Status::Ok();
           },
           [](const JobSpec& j) { return json(FormatDuration(DependenciesOf(j).join_timeout)); }, Duration_,
           [](const JobSpec& j) { return int64_t{DependenciesOf(j).join_timeout.count()}; }},
    JobKey{"command", "string", 1, 0, [](const KeyValue& v, JobSpec& j) { return Read(v, "command", &j.command); },
           [](const JobSpec& j) { return j.command.empty() ? json() : json(j.command); }, Str},
    JobKey{"argv", "array of strings", 1, 0, [](const KeyValue& v, JobSpec& j) { return Read(v, "argv", &j.argv); },
           [](const JobSpec& j) { return j.argv.empty() ? json() : json(j.argv); }, Strings},
    JobKey{"http", "table", 1, 0, ReadHttp,
           [](const JobSpec& j) {
             return j.http ? json{{"url", j.http->url}, {"method", j.http->method}, {"headers", j.http->headers}} : json();
           },
           [] {
             return json{{"type", "object"}, {"required", {"url"}}, {"additionalProperties", false},
                         {"properties", {{"url", Str()}, {"method", {{"type", "string"}, {"enum", {"GET", "POST"}}}}, {"headers", StringMap()}}}};
           }},
    GNOMON_DURATION_KEY(timeout, 0, 30 * kDay, timeout),
    GNOMON_INT_KEY(retries, 0, 100, retries),
    GNOMON_DURATION_KEY(retry_backoff, 1, 600'000, retry_backoff),
    GNOMON_ENUM_KEY(overlap, overlap, ParseOverlapPolicy, "forbid", "allow", "replace", "buffer_one", "buffer_all"),
    GNOMON_ENUM_KEY(misfire, misfire, ParseMisfirePolicy, "skip", "once", "all"),
    GNOMON_DURATION_KEY(catchup_window, 0, 366 * kDay, catchup_window),
    GNOMON_ENUM_KEY(on_lost, on_lost, ParseLostPolicy, "fail", "rerun"),
    GNOMON_INT_KEY(shards, 1, 1024, shards),
    GNOMON_INT_KEY(max_consecutive_failures, 0, 1'000'000, max_consecutive_failures),
    GNOMON_KEY(enabled, "boolean", 1, 0, enabled, json({{"type", "boolean"}})),
    GNOMON_KEY(description, "string", 1, 0, description, Str()),
    JobKey{"params", "table", 1, 0, ReadParams,
           [](const JobSpec& j) {
             // Validated definitions hold a JSON object; anything else (never stored) shows as none.
             json p = j.params.empty() ? json::object() : json::parse(j.params, nullptr, false);
             return p.is_object() ? p : json::object();
           },
           [] {
             return json{{"type", "object"}, {"additionalProperties", true},
                         {"description", "Default parameters of its runs: a JSON object of at most 16 KiB (compact)"}};
           }},
    GNOMON_KEY(env, "table of strings", 1, 0, env, StringMap()),
    GNOMON_DURATION_KEY(kill_grace, 0, 3600'000, kill_grace),
    GNOMON_INT_KEY(history_keep, 1, 100'000, history_keep),
    GNOMON_DURATION_KEY(history_max_age, 60'000, 3660 * kDay, history_max_age),
    GNOMON_KEY(queue, "string", 1, 0, queue, Str()),
    GNOMON_KEY(run_as, "string", 1, 0, run_as, json({{"type", "string"}, {"description", "user[:group] the process runs as"}})),
    GNOMON_KEY(inherit_env, "array of strings", 1, 0, inherit_env, Strings()),
    JobKey{"memory_max", "size", 1, 0, [](const KeyValue& v, JobSpec& j) { return ReadSize(v, "memory_max", &j.memory_max); },
           [](const JobSpec& j) { return json(j.memory_max); },
           [] { return json{{"type", "integer"}, {"description", "bytes; 0 = none"}}; }},
    GNOMON_DURATION_KEY(cpu_max, 0, 30 * kDay, cpu_max),
    GNOMON_INT_KEY(pids_max, 0, 1'000'000, pids_max),
    GNOMON_INT_KEY(open_files, 0, 1'048'576, open_files),
};
// clang-format on
#undef GNOMON_KEY
#undef GNOMON_INT_KEY
#undef GNOMON_DURATION_KEY
#undef GNOMON_ENUM_KEY
#undef GNOMON_CHILDREN_KEY

}  // namespace

KeyValue::Kind JsonKeyValue::kind() const {
  if (v_.is_string()) return Kind::kString;
  if (v_.is_number_integer()) return Kind::kInteger;
  if (v_.is_number_float()) return Kind::kFloat;
  if (v_.is_boolean()) return Kind::kBool;
  if (v_.is_array()) return Kind::kArray;
  if (v_.is_object()) return Kind::kMap;
  return Kind::kOther;
}

std::optional<int64_t> JsonKeyValue::integer() const {
  if (v_.is_number_unsigned() && v_.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return std::nullopt;
  }
  return v_.get<int64_t>();
}

std::vector<std::unique_ptr<KeyValue>> JsonKeyValue::items() const {
  std::vector<std::unique_ptr<KeyValue>> out;
  for (const json& e : v_) out.push_back(std::make_unique<JsonKeyValue>(e));
  return out;
}

std::vector<std::pair<std::string, std::unique_ptr<KeyValue>>> JsonKeyValue::entries() const {
  std::vector<std::pair<std::string, std::unique_ptr<KeyValue>>> out;
  for (const auto& [k, e] : v_.items()) out.emplace_back(k, std::make_unique<JsonKeyValue>(e));
  return out;
}

Status JsonKeyValue::Fail(std::string_view field, std::string_view what) const {
  return InvalidArgumentError(std::string(field) + ": " + std::string(what));
}

std::span<const JobKey> JobKeys() { return kKeys; }

const JobKey* FindJobKey(std::string_view name) {
  for (const JobKey& k : kKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string_view> JobKeyNames() {
  std::vector<std::string_view> names;
  for (const JobKey& k : kKeys) names.push_back(k.name);
  return names;
}

json WriteJobKeys(const JobSpec& job) {
  json out = json::object();
  for (const JobKey& k : kKeys) {
    if (json v = k.write(job); !v.is_null()) out[std::string(k.name)] = std::move(v);
  }
  return out;
}

json JobSpecSchema() {
  json properties = json::object();
  for (const JobKey& k : kKeys) properties[std::string(k.name)] = k.schema();
  properties["version"] = {{"type", "integer"},
                           {"description", "PUT only: the version being replaced (or If-Match)"}};
  return {{"type", "object"},
          {"additionalProperties", false},
          {"required", {"id"}},
          {"properties", std::move(properties)}};
}

Status CheckJobKeyRanges(const JobSpec& job) {
  for (const JobKey& k : kKeys) {
    if (k.min > k.max) continue;
    const int64_t n = k.number(job);
    if (n >= k.min && n <= k.max) continue;
    const std::string at = "job \"" + job.id.substr(0, 128) + "\": " + std::string(k.name) + ": ";
    if (k.type == "duration") {
      return InvalidArgumentError(at + FormatDuration(Duration(n)) + " is out of range " +
                                  FormatDuration(Duration(k.min)) + " to " +
                                  FormatDuration(Duration(k.max)));
    }
    return InvalidArgumentError(at + std::to_string(n) + " is out of range " +
                                std::to_string(k.min) + "-" + std::to_string(k.max));
  }
  return Status::Ok();
}

}  // namespace gnomon
