#include "src/server/api_util.h"

#include <algorithm>
#include <charconv>

#include "src/server/job_json.h"

namespace gnomon::server {

using nlohmann::json;

Response Error(int status, std::string_view code, std::string message, std::string_view field) {
  json e = {{"code", code}, {"message", std::move(message)}};
  if (!field.empty()) e["field"] = field;
  Response r;
  r.status = status;
  r.body = DumpJson(json{{"error", std::move(e)}});
  return r;
}

Response FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return Error(400, "invalid_argument", s.message());
    case StatusCode::kNotFound:
      return Error(404, "not_found", s.message());
    case StatusCode::kAlreadyExists:
      return Error(409, "already_exists", s.message());
    case StatusCode::kFailedPrecondition:
      return Error(409, "failed_precondition", s.message());
    case StatusCode::kUnavailable:
      return Error(503, "unavailable", s.message());
    case StatusCode::kDeadlineExceeded:
      return Error(504, "deadline_exceeded", s.message());
    default:
      return Error(500, "internal", s.message());
  }
}

Response InvalidParam(std::string_view name, std::string_view what) {
  return Error(400, "invalid_argument", std::string(name) + ": " + std::string(what), name);
}

Response InvalidJobId(std::string_view id, std::string_view field) {
  return Error(
      400, "invalid_argument",
      std::string(field) + ": \"" + Shown(id) + "\" is not a valid job id ([A-Za-z0-9_.-]{1,128})",
      field);
}

Response OutsideNamespaces(Call& call, std::string message) {
  call.denied = "namespace";
  return Error(403, "permission_denied", std::move(message));
}

Response Json(int status, const json& body) {
  Response r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

std::optional<int64_t> ParsePositive(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseIfMatch(std::string_view s) {
  if (s.substr(0, 2) == "W/") s.remove_prefix(2);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return ParsePositive(s);
}

std::string ETag(int64_t version) { return "\"" + std::to_string(version) + "\""; }

bool EtagMatches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    while (!tag.empty() && tag.front() == ' ') tag.remove_prefix(1);
    while (!tag.empty() && tag.back() == ' ') tag.remove_suffix(1);
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

Result<std::map<std::string, std::string>> Params(const Request& req,
                                                  std::initializer_list<std::string_view> known) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : req.params) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      return InvalidArgumentError(Shown(k) + ": unknown query parameter");
    }
    if (!out.emplace(k, v).second) {
      return InvalidArgumentError(Shown(k) + ": given more than once");
    }
  }
  return out;
}

std::optional<Response> ParseLimit(const std::map<std::string, std::string>& params, int max,
                                   int* limit) {
  auto it = params.find("limit");
  if (it == params.end()) return std::nullopt;
  const std::string& s = it->second;
  const bool digits = !s.empty() && s.size() <= 64 &&
                      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return InvalidParam("limit", "\"" + Shown(s) + "\" is not a positive integer");
  std::optional<int64_t> n = ParsePositive(s);
  if (n && *n == 0) return InvalidParam("limit", "must be at least 1");
  *limit = !n || *n > max ? max : static_cast<int>(*n);
  return std::nullopt;
}

bool ContainsIgnoringCase(std::string_view hay, std::string_view needle) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != hay.end();
}

json InstantOrNull(const std::optional<Instant>& t) {
  return t ? json(t->ToRfc3339()) : json(nullptr);
}

std::optional<Response> ParamsBody(const Request& req, int max_json_depth, std::string* params) {
  params->clear();
  if (req.body.empty()) return std::nullopt;
  Result<nlohmann::json> parsed = ParseJsonBody(req.body, max_json_depth);
  if (!parsed.ok()) return Error(400, "invalid_argument", parsed.status().message());
  if (!parsed->is_object()) {
    return Error(400, "invalid_argument",
                 std::string("body: expected a JSON object, got ") + parsed->type_name());
  }
  for (const auto& [key, value] : parsed->items()) {
    if (key != "params") {
      return Error(400, "invalid_argument",
                   "body: unknown key \"" + key.substr(0, 64) + "\" (expected params)", key);
    }
    if (!value.is_object()) {
      return Error(400, "invalid_argument",
                   std::string("params: expected an object, got ") + value.type_name(), "params");
    }
    if (!value.empty()) *params = DumpJson(value);
  }
  return std::nullopt;
}

}  // namespace gnomon::server
