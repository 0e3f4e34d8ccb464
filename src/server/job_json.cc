#include "src/server/job_json.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <set>
#include <utility>
#include <vector>

#include "src/job/job_schema.h"
#include "src/job/key_hint.h"
#include "src/server/api_util.h"

namespace gnomon::server {
namespace {

using nlohmann::json;

Status WrongType(std::string_view field, std::string_view expected, const json& got) {
  return InvalidArgumentError(std::string(field) + ": expected " + std::string(expected) +
                              ", got " + got.type_name());
}

Status UnknownKey(std::string_view key, const std::vector<std::string_view>& known) {
  return InvalidArgumentError(UnknownKeyMessage(key, known));
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
    const JobKey* key = FindJobKey(k);
    if (key == nullptr) return UnknownKey(k, JobKeyNames());
    GNOMON_RETURN_IF_ERROR(key->read(JsonKeyValue(v), out));
  }
  return out;
}

json JobSpecToJson(const JobSpec& job) { return WriteJobKeys(job); }

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
