#include "src/server/job_json.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <set>
#include <utility>
#include <vector>

#include "src/server/api_util.h"
#include "src/server/key_hint.h"

namespace gnomon::server {
namespace {

using nlohmann::json;

Status WrongType(std::string_view field, std::string_view expected, const json& got) {
  return InvalidArgumentError(std::string(field) + ": expected " + std::string(expected) +
                              ", got " + got.type_name());
}

Status GetString(const json& v, std::string_view field, std::string* out) {
  if (!v.is_string()) return WrongType(field, "a string", v);
  *out = v.get_ref<const std::string&>();
  return Status::Ok();
}

Status GetBool(const json& v, std::string_view field, bool* out) {
  if (!v.is_boolean()) return WrongType(field, "true or false", v);
  *out = v.get<bool>();
  return Status::Ok();
}

Status GetInt(const json& v, std::string_view field, int* out) {
  if (!v.is_number_integer()) return WrongType(field, "an integer", v);
  if (v.is_number_unsigned()) {
    const uint64_t x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(INT_MAX)) {
      return InvalidArgumentError(std::string(field) + ": " + std::to_string(x) +
                                  " is out of range");
    }
    *out = static_cast<int>(x);
    return Status::Ok();
  }
  const int64_t x = v.get<int64_t>();
  if (x < INT_MIN || x > INT_MAX) {
    return InvalidArgumentError(std::string(field) + ": " + std::to_string(x) + " is out of range");
  }
  *out = static_cast<int>(x);
  return Status::Ok();
}

Status GetDuration(const json& v, std::string_view field, Duration* out) {
  if (!v.is_string()) return WrongType(field, "a duration string such as \"30s\"", v);
  Result<Duration> d = ParseDuration(v.get_ref<const std::string&>());
  if (!d.ok()) return InvalidArgumentError(std::string(field) + ": " + d.status().message());
  *out = *d;
  return Status::Ok();
}

Status GetByteSize(const json& v, std::string_view field, int64_t* out) {
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
  if (!bytes.ok())
    return InvalidArgumentError(std::string(field) + ": " + bytes.status().message());
  *out = *bytes;
  return Status::Ok();
}

Status GetStringList(const json& v, std::string_view field, std::vector<std::string>* out) {
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

Status GetStringMap(const json& v, std::string_view field,
                    std::map<std::string, std::string>* out) {
  if (!v.is_object()) return WrongType(field, "an object of strings", v);
  std::map<std::string, std::string> m;
  for (const auto& [k, e] : v.items()) {
    if (!e.is_string()) return WrongType(std::string(field) + "." + Shown(k), "a string", e);
    m[k] = e.get<std::string>();
  }
  *out = std::move(m);
  return Status::Ok();
}

// `params`: an object, kept as compact text ("" for an empty one).
Status SetParams(const json& v, JobSpec& job) {
  if (!v.is_object()) return WrongType("params", "an object", v);
  std::string text = v.empty() ? std::string() : DumpJson(v);
  if (text.size() > kMaxParamsBytes) {
    return InvalidArgumentError("params: " + std::to_string(text.size()) +
                                " bytes is larger than 16 KiB");
  }
  job.params = std::move(text);
  return Status::Ok();
}

template <typename E>
Status GetEnum(const json& v, std::string_view field, Result<E> (*parse)(std::string_view),
               E* out) {
  std::string s;
  GNOMON_RETURN_IF_ERROR(GetString(v, field, &s));
  Result<E> e = parse(s);
  if (!e.ok()) return InvalidArgumentError(std::string(field) + ": " + e.status().message());
  *out = *e;
  return Status::Ok();
}

Status UnknownKey(std::string_view key, const std::vector<std::string_view>& known,
                  std::string_view table = "") {
  return InvalidArgumentError(UnknownKeyMessage(key, known, table));
}

Status SetHttp(const json& v, JobSpec& job) {
  if (!v.is_object()) return WrongType("http", "an object {url, method, headers}", v);
  HttpTarget http;
  bool has_url = false;
  for (const auto& [k, e] : v.items()) {
    if (k == "url") {
      GNOMON_RETURN_IF_ERROR(GetString(e, "http.url", &http.url));
      has_url = true;
    } else if (k == "method") {
      GNOMON_RETURN_IF_ERROR(GetString(e, "http.method", &http.method));
    } else if (k == "headers") {
      GNOMON_RETURN_IF_ERROR(GetStringMap(e, "http.headers", &http.headers));
    } else {
      return UnknownKey(k, {"url", "method", "headers"}, "http");
    }
  }
  if (!has_url) return InvalidArgumentError("http.url: is required");
  job.http = std::move(http);
  return Status::Ok();
}

using JobSetter = Status (*)(const json&, JobSpec&);
struct JobKey {
  std::string_view name;
  JobSetter set;
};

// The keys of the jobs file (apps/gnomon/config.cc kJobKeys), in the same order.
// clang-format off
const JobKey kJobKeys[] = {
    {"id", [](const json& v, JobSpec& j) { return GetString(v, "id", &j.id); }},
    {"schedule", [](const json& v, JobSpec& j) { return GetString(v, "schedule", &j.schedule); }},
    {"timezone", [](const json& v, JobSpec& j) { return GetString(v, "timezone", &j.timezone); }},
    {"command", [](const json& v, JobSpec& j) { return GetString(v, "command", &j.command); }},
    {"argv", [](const json& v, JobSpec& j) { return GetStringList(v, "argv", &j.argv); }},
    {"http", SetHttp},
    {"timeout", [](const json& v, JobSpec& j) { return GetDuration(v, "timeout", &j.timeout); }},
    {"retries", [](const json& v, JobSpec& j) { return GetInt(v, "retries", &j.retries); }},
    {"retry_backoff", [](const json& v, JobSpec& j) { return GetDuration(v, "retry_backoff", &j.retry_backoff); }},
    {"overlap", [](const json& v, JobSpec& j) { return GetEnum(v, "overlap", ParseOverlapPolicy, &j.overlap); }},
    {"misfire", [](const json& v, JobSpec& j) { return GetEnum(v, "misfire", ParseMisfirePolicy, &j.misfire); }},
    {"catchup_window", [](const json& v, JobSpec& j) { return GetDuration(v, "catchup_window", &j.catchup_window); }},
    {"on_lost", [](const json& v, JobSpec& j) { return GetEnum(v, "on_lost", ParseLostPolicy, &j.on_lost); }},
    {"shards", [](const json& v, JobSpec& j) { return GetInt(v, "shards", &j.shards); }},
    {"max_consecutive_failures", [](const json& v, JobSpec& j) { return GetInt(v, "max_consecutive_failures", &j.max_consecutive_failures); }},
    {"enabled", [](const json& v, JobSpec& j) { return GetBool(v, "enabled", &j.enabled); }},
    {"description", [](const json& v, JobSpec& j) { return GetString(v, "description", &j.description); }},
    {"params", SetParams},
    {"env", [](const json& v, JobSpec& j) { return GetStringMap(v, "env", &j.env); }},
    {"kill_grace", [](const json& v, JobSpec& j) { return GetDuration(v, "kill_grace", &j.kill_grace); }},
    {"history_keep", [](const json& v, JobSpec& j) { return GetInt(v, "history_keep", &j.history_keep); }},
    {"history_max_age", [](const json& v, JobSpec& j) { return GetDuration(v, "history_max_age", &j.history_max_age); }},
    {"queue", [](const json& v, JobSpec& j) { return GetString(v, "queue", &j.queue); }},
    {"run_as", [](const json& v, JobSpec& j) { return GetString(v, "run_as", &j.run_as); }},
    {"inherit_env", [](const json& v, JobSpec& j) { return GetStringList(v, "inherit_env", &j.inherit_env); }},
    {"memory_max", [](const json& v, JobSpec& j) { return GetByteSize(v, "memory_max", &j.memory_max); }},
    {"cpu_max", [](const json& v, JobSpec& j) { return GetDuration(v, "cpu_max", &j.cpu_max); }},
    {"pids_max", [](const json& v, JobSpec& j) { return GetInt(v, "pids_max", &j.pids_max); }},
    {"open_files", [](const json& v, JobSpec& j) { return GetInt(v, "open_files", &j.open_files); }},
};
// clang-format on

std::vector<std::string_view> JobKeyNames() {
  std::vector<std::string_view> names;
  for (const JobKey& k : kJobKeys) names.push_back(k.name);
  return names;
}

}  // namespace

Status CheckJsonDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character (a \uXXXX tail is harmless)
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgumentError("JSON nested deeper than " + std::to_string(max_depth) +
                                    " levels (at byte " + std::to_string(i) + ")");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

Result<json> ParseJsonBody(std::string_view text, int max_depth) {
  GNOMON_RETURN_IF_ERROR(CheckJsonDepth(text, max_depth));
  // One key set per open object; the first duplicate is remembered and reported after parsing.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string() &&
            !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                    /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("invalid JSON: ") + e.what());
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("invalid JSON: ") + e.what());
  }
  if (!duplicate.empty()) return InvalidArgumentError("duplicate key \"" + Shown(duplicate) + "\"");
  return j;
}

Result<JobSpec> JobSpecFromJson(const json& object, const JobSpec& base) {
  if (!object.is_object()) return WrongType("job", "an object", object);
  JobSpec out = base;
  if (object.contains("command") || object.contains("argv") || object.contains("http")) {
    out.command.clear();
    out.argv.clear();
    out.http.reset();
  }
  for (const auto& [k, v] : object.items()) {
    const JobKey* found = nullptr;
    for (const JobKey& jk : kJobKeys) {
      if (jk.name == k) found = &jk;
    }
    if (found == nullptr) return UnknownKey(k, JobKeyNames());
    GNOMON_RETURN_IF_ERROR(found->set(v, out));
  }
  return out;
}

json JobSpecToJson(const JobSpec& job) {
  json j = json::object();
  j["id"] = job.id;
  j["schedule"] = job.schedule;
  j["timezone"] = job.timezone;
  if (!job.command.empty()) j["command"] = job.command;
  if (!job.argv.empty()) j["argv"] = job.argv;
  if (job.http) {
    j["http"] = {
        {"url", job.http->url}, {"method", job.http->method}, {"headers", json(job.http->headers)}};
  }
  j["timeout"] = FormatDuration(job.timeout);
  j["retries"] = job.retries;
  j["retry_backoff"] = FormatDuration(job.retry_backoff);
  j["overlap"] = std::string(ToString(job.overlap));
  j["misfire"] = std::string(ToString(job.misfire));
  j["catchup_window"] = FormatDuration(job.catchup_window);
  j["on_lost"] = std::string(ToString(job.on_lost));
  j["shards"] = job.shards;
  j["max_consecutive_failures"] = job.max_consecutive_failures;
  j["enabled"] = job.enabled;
  j["description"] = job.description;
  // Validated definitions hold a JSON object; anything else (never stored) shows as none.
  j["params"] = job.params.empty() ? json::object() : json::parse(job.params, nullptr, false);
  if (!j["params"].is_object()) j["params"] = json::object();
  j["env"] = json(job.env);
  j["kill_grace"] = FormatDuration(job.kill_grace);
  j["history_keep"] = job.history_keep;
  j["history_max_age"] = FormatDuration(job.history_max_age);
  j["queue"] = job.queue;
  j["run_as"] = job.run_as;
  j["inherit_env"] = job.inherit_env;
  j["memory_max"] = job.memory_max;
  j["cpu_max"] = FormatDuration(job.cpu_max);
  j["pids_max"] = job.pids_max;
  j["open_files"] = job.open_files;
  return j;
}

json RedactSecrets(json definition) {
  auto redact = [](json* object) {
    if (object == nullptr || !object->is_object()) return;
    for (auto& [k, v] : object->items()) v = kSecretPlaceholder;
  };
  if (auto env = definition.find("env"); env != definition.end()) redact(&*env);
  if (auto http = definition.find("http"); http != definition.end() && http->is_object()) {
    if (auto h = http->find("headers"); h != http->end()) redact(&*h);
  }
  return definition;
}

Status RestoreSecrets(JobSpec* spec, const JobSpec& stored) {
  auto restore = [](std::map<std::string, std::string>& values,
                    const std::map<std::string, std::string>* old,
                    std::string_view field) -> Status {
    for (auto& [k, v] : values) {
      if (v != kSecretPlaceholder) continue;
      auto it =
          old == nullptr ? std::map<std::string, std::string>::const_iterator() : old->find(k);
      if (old == nullptr || it == old->end()) {
        return InvalidArgumentError(std::string(field) + "." + Shown(k) + ": \"" +
                                    std::string(kSecretPlaceholder) +
                                    "\" stands for the stored value, and there is none: send "
                                    "the value");
      }
      v = it->second;
    }
    return Status::Ok();
  };
  GNOMON_RETURN_IF_ERROR(restore(spec->env, &stored.env, "env"));
  if (spec->http) {
    GNOMON_RETURN_IF_ERROR(restore(spec->http->headers,
                                   stored.http ? &stored.http->headers : nullptr, "http.headers"));
  }
  return Status::Ok();
}

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::string> ParamsFromArgs(const std::vector<std::string>& args) {
  json params = json::object();
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || (eq == 1 && arg[0] == ':')) {
      return InvalidArgumentError("--param \"" + Shown(arg) +
                                  "\": expected key=value or key:=json");
    }
    const bool raw = arg[eq - 1] == ':';
    const std::string key = arg.substr(0, raw ? eq - 1 : eq);
    const std::string text = arg.substr(eq + 1);
    if (!raw) {
      params[key] = text;
      continue;
    }
    Result<json> value = ParseJsonBody(text);
    if (!value.ok()) {
      return InvalidArgumentError("--param " + Shown(key) + ": " + value.status().message());
    }
    params[key] = std::move(*value);
  }
  if (params.empty()) return std::string();
  return MergeParams("", DumpJson(params));
}

}  // namespace gnomon::server
