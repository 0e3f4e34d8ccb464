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

Status WrongType(std::string_view field, std::string_view expected, const json& got) {
  return InvalidArgumentError(std::string(field) + ": expected " + std::string(expected) +
                              ", got " + got.type_name());
}

Status Read(const json& v, std::string_view field, std::string* out) {
  if (!v.is_string()) return WrongType(field, "a string", v);
  *out = v.get_ref<const std::string&>();
  return Status::Ok();
}

Status Read(const json& v, std::string_view field, bool* out) {
  if (!v.is_boolean()) return WrongType(field, "true or false", v);
  *out = v.get<bool>();
  return Status::Ok();
}

Status Read(const json& v, std::string_view field, int* out) {
  if (!v.is_number_integer()) return WrongType(field, "an integer", v);
  const bool big = v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(INT_MAX)
                                          : v.get<int64_t>() < INT_MIN || v.get<int64_t>() > INT_MAX;
  if (big) return InvalidArgumentError(std::string(field) + ": " + v.dump() + " is out of range");
  *out = v.get<int>();
  return Status::Ok();
}

Status Read(const json& v, std::string_view field, Duration* out) {
  if (!v.is_string()) return WrongType(field, "a duration string such as \"30s\"", v);
  Result<Duration> d = ParseDuration(v.get_ref<const std::string&>());
  if (!d.ok()) return InvalidArgumentError(std::string(field) + ": " + d.status().message());
  *out = *d;
  return Status::Ok();
}

Status ReadSize(const json& v, std::string_view field, int64_t* out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                               : v.get<int64_t>() < 0) {
      return InvalidArgumentError(std::string(field) + ": is out of range");
    }
    *out = v.get<int64_t>();
    return Status::Ok();
  }
  if (!v.is_string()) return WrongType(field, "a size such as \"512M\" or an integer", v);
  Result<int64_t> bytes = ParseByteSize(v.get_ref<const std::string&>());
  if (!bytes.ok()) {
    return InvalidArgumentError(std::string(field) + ": " + bytes.status().message());
  }
  *out = *bytes;
  return Status::Ok();
}

Status Read(const json& v, std::string_view field, std::vector<std::string>* out) {
  if (!v.is_array()) return WrongType(field, "an array of strings", v);
  std::vector<std::string> list;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return WrongType(std::string(field) + "[" + std::to_string(i) + "]", "a string", v[i]);
    }
    list.push_back(v[i].get<std::string>());
  }
  *out = std::move(list);
  return Status::Ok();
}

Status Read(const json& v, std::string_view field, std::map<std::string, std::string>* out) {
  if (!v.is_object()) return WrongType(field, "an object of strings", v);
  std::map<std::string, std::string> m;
  for (const auto& [k, e] : v.items()) {
    if (!e.is_string()) return WrongType(std::string(field) + "." + Shown(k), "a string", e);
    m[k] = e.get<std::string>();
  }
  *out = std::move(m);
  return Status::Ok();
}

template <typename E>
Status ReadEnum(const json& v, std::string_view field, Result<E> (*parse)(std::string_view),
                E* out) {
  std::string s;
  GNOMON_RETURN_IF_ERROR(Read(v, field, &s));
  Result<E> e = parse(s);
  if (!e.ok()) return InvalidArgumentError(std::string(field) + ": " + e.status().message());
  *out = *e;
  return Status::Ok();
}

// `params`: an object, kept as compact text ("" for an empty one).
Status ReadParams(const json& v, JobSpec& job) {
  if (!v.is_object()) return WrongType("params", "an object", v);
  std::string text = v.empty() ? std::string() : v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxParamsBytes) {
    return InvalidArgumentError("params: " + std::to_string(text.size()) +
                                " bytes is larger than 16 KiB");
  }
  job.params = std::move(text);
  return Status::Ok();
}

Status ReadHttp(const json& v, JobSpec& job) {
  if (!v.is_object()) return WrongType("http", "an object {url, method, headers}", v);
  HttpTarget http;
  bool has_url = false;
  for (const auto& [k, e] : v.items()) {
    if (k == "url") {
      GNOMON_RETURN_IF_ERROR(Read(e, "http.url", &http.url));
      has_url = true;
    } else if (k == "method") {
      GNOMON_RETURN_IF_ERROR(Read(e, "http.method", &http.method));
    } else if (k == "headers") {
      GNOMON_RETURN_IF_ERROR(Read(e, "http.headers", &http.headers));
    } else {
      return InvalidArgumentError(UnknownKeyMessage(k, {"url", "method", "headers"}, "http"));
    }
  }
  if (!has_url) return InvalidArgumentError("http.url: is required");
  job.http = std::move(http);
  return Status::Ok();
}

json Str() { return {{"type", "string"}}; }
json Int() { return {{"type", "integer"}}; }
json Strings() { return {{"type", "array"}, {"items", Str()}}; }
json StringMap() { return {{"type", "object"}, {"additionalProperties", Str()}}; }
json Duration_() { return {{"type", "string"}, {"description", "a duration such as \"30s\""}}; }

constexpr int64_t kDay = 24LL * 3600 * 1000;

// One entry per key: read, write and schema through the member it names. The macros keep each
// key to one line; they expand to lambdas over that member only.
// clang-format off
#define GNOMON_KEY(NAME, TYPE, MIN, MAX, MEMBER, SCHEMA)                                         \
  JobKey{#NAME, TYPE, MIN, MAX,                                                                  \
         [](const json& v, JobSpec& j) { return Read(v, #NAME, &j.MEMBER); },                    \
         [](const JobSpec& j) { return json(j.MEMBER); }, [] { return SCHEMA; }}
#define GNOMON_INT_KEY(NAME, MIN, MAX, MEMBER)                                                   \
  JobKey{#NAME, "integer", MIN, MAX,                                                             \
         [](const json& v, JobSpec& j) { return Read(v, #NAME, &j.MEMBER); },                    \
         [](const JobSpec& j) { return json(j.MEMBER); }, Int,                                   \
         [](const JobSpec& j) { return int64_t{j.MEMBER}; }}
#define GNOMON_DURATION_KEY(NAME, MIN, MAX, MEMBER)                                              \
  JobKey{#NAME, "duration", MIN, MAX,                                                            \
         [](const json& v, JobSpec& j) { return Read(v, #NAME, &j.MEMBER); },                    \
         [](const JobSpec& j) { return json(FormatDuration(j.MEMBER)); }, Duration_,             \
         [](const JobSpec& j) { return int64_t{j.MEMBER.count()}; }}
#define GNOMON_ENUM_KEY(NAME, MEMBER, PARSE, ...)                                                \
  JobKey{#NAME, "string", 1, 0,                                                                  \
         [](const json& v, JobSpec& j) { return ReadEnum(v, #NAME, PARSE, &j.MEMBER); },         \
         [](const JobSpec& j) { return json(std::string(ToString(j.MEMBER))); },                 \
         [] { return json{{"type", "string"}, {"enum", json::array({__VA_ARGS__})}}; }}

const JobKey kKeys[] = {
    JobKey{"id", "string", 1, 0, [](const json& v, JobSpec& j) { return Read(v, "id", &j.id); },
           [](const JobSpec& j) { return json(j.id); },
           [] { return json{{"type", "string"}, {"pattern", "^[A-Za-z0-9_.-]{1,128}$"}}; }},
    GNOMON_KEY(schedule, "string", 1, 0, schedule, Str()),
    GNOMON_KEY(timezone, "string", 1, 0, timezone, Str()),
    JobKey{"command", "string", 1, 0, [](const json& v, JobSpec& j) { return Read(v, "command", &j.command); },
           [](const JobSpec& j) { return j.command.empty() ? json() : json(j.command); }, Str},
    JobKey{"argv", "array of strings", 1, 0, [](const json& v, JobSpec& j) { return Read(v, "argv", &j.argv); },
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
    GNOMON_ENUM_KEY(overlap, overlap, ParseOverlapPolicy, "forbid", "allow", "replace"),
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
    JobKey{"memory_max", "size", 1, 0, [](const json& v, JobSpec& j) { return ReadSize(v, "memory_max", &j.memory_max); },
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

}  // namespace

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
          {"required", {"id", "schedule"}},
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
