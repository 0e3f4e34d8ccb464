#include "gnomon/job.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "gnomon/cron.h"
#include "src/job/job_schema.h"
#include "src/job/key_hint.h"

namespace gnomon {
namespace {

template <typename E, size_t N>
Result<E> ParseEnum(std::string_view s, const char* field,
                    const std::pair<std::string_view, E> (&table)[N]) {
  std::string names;
  for (const auto& [name, value] : table) {
    if (s == name) return value;
    names += names.empty() ? "" : ", ";
    names += name;
  }
  return InvalidArgumentError(std::string(field) + ": \"" + std::string(s.substr(0, 64)) +
                              "\" is not one of " + names);
}

constexpr std::pair<std::string_view, OverlapPolicy> kOverlap[] = {
    {"forbid", OverlapPolicy::kForbid},
    {"allow", OverlapPolicy::kAllow},
    {"replace", OverlapPolicy::kReplace},
    {"buffer_one", OverlapPolicy::kBufferOne},
    {"buffer_all", OverlapPolicy::kBufferAll}};
constexpr std::pair<std::string_view, MisfirePolicy> kMisfire[] = {
    {"skip", MisfirePolicy::kSkip}, {"once", MisfirePolicy::kOnce}, {"all", MisfirePolicy::kAll}};
constexpr std::pair<std::string_view, LostPolicy> kLost[] = {{"fail", LostPolicy::kFail},
                                                             {"rerun", LostPolicy::kRerun}};
constexpr std::pair<std::string_view, RunOutcome> kOutcomes[] = {
    {"running", RunOutcome::kRunning},
    {"succeeded", RunOutcome::kSucceeded},
    {"failed", RunOutcome::kFailed},
    {"timed_out", RunOutcome::kTimedOut},
    {"cancelled", RunOutcome::kCancelled},
    {"skipped", RunOutcome::kSkipped},
    {"lost", RunOutcome::kLost}};

template <typename E, size_t N>
std::string_view NameOf(E value, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "unknown";
}

Status FieldError(const JobSpec& job, std::string_view field, const std::string& what) {
  return InvalidArgumentError("job \"" + job.id.substr(0, 128) + "\": " + std::string(field) +
                              ": " + what);
}

// What the HTTP executor needs of a URL, checked when the job is defined: http or https, a host
// (and port) without user info, and no byte that cannot go into a request line.
Status CheckHttpUrl(const JobSpec& job, std::string_view url) {
  auto bad = [&](const std::string& why) {
    return FieldError(job, "http.url", "\"" + Shown(url, 128) + "\" " + why);
  };
  if (url.size() > 2048) return bad("is longer than 2048 bytes");
  for (char c : url) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return bad("contains a space, control or non-ASCII byte");
  }
  const size_t sep = url.find("://");
  const std::string_view scheme = sep == std::string_view::npos ? "" : url.substr(0, sep);
  if (scheme != "http" && scheme != "https") return bad("must start with http:// or https://");
  const std::string_view rest = url.substr(sep + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string_view::npos) {
    return bad("has user info: put credentials in http.headers (write-only secrets), not the URL");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return bad("has no closing ']' after an IPv6 address");
    port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!port.empty() && port.front() != ':') return bad("has text after its IPv6 address");
    if (!port.empty()) port.remove_prefix(1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty()) return bad("has no host");
  if (authority.find(':') != std::string_view::npos && authority.front() != '[' && port.empty()) {
    return bad("has an empty port");
  }
  if (!port.empty()) {
    if (port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      return bad("has an invalid port (1-65535)");
    }
  }
  return Status::Ok();
}

// "user[:group]": names of [A-Za-z0-9_.-] (not starting with '-') or numbers.
bool IsUserSpec(std::string_view spec) {
  auto name = [](std::string_view n) {
    if (n.empty() || n.size() > 64 || n.front() == '-') return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    });
  };
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return name(spec);
  return name(spec.substr(0, colon)) && name(spec.substr(colon + 1));
}

}  // namespace

std::string_view ToString(OverlapPolicy p) { return NameOf(p, kOverlap); }
std::string_view ToString(MisfirePolicy p) { return NameOf(p, kMisfire); }
std::string_view ToString(LostPolicy p) { return NameOf(p, kLost); }
std::string_view ToString(RunOutcome o) { return NameOf(o, kOutcomes); }
Result<OverlapPolicy> ParseOverlapPolicy(std::string_view s) {
  return ParseEnum(s, "overlap", kOverlap);
}
Result<MisfirePolicy> ParseMisfirePolicy(std::string_view s) {
  return ParseEnum(s, "misfire", kMisfire);
}
Result<LostPolicy> ParseLostPolicy(std::string_view s) { return ParseEnum(s, "on_lost", kLost); }
Result<RunOutcome> ParseRunOutcome(std::string_view s) {
  return ParseEnum(s, "outcome", kOutcomes);
}

bool IsValidJobId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  bool only_dots = true;
  for (char c : id) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
    only_dots = only_dots && c == '.';
  }
  return !only_dots;
}

Result<int64_t> ParseByteSize(std::string_view s) {
  const std::string shown = "\"" + Shown(s, 32) + "\"";
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits > 16) {
    return InvalidArgumentError(shown + " is not a size (e.g. 512M, 2G, 1048576)");
  }
  int64_t value = std::stoll(std::string(s.substr(0, digits)));
  std::string_view unit = s.substr(digits);
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  int shift = 0;
  if (unit == "K") {
    shift = 10;
  } else if (unit == "M") {
    shift = 20;
  } else if (unit == "G") {
    shift = 30;
  } else if (unit == "T") {
    shift = 40;
  } else if (!unit.empty() && unit != "B") {
    return InvalidArgumentError(shown + ": unknown unit (K, M, G, T)");
  }
  if (value > (INT64_MAX >> shift)) return InvalidArgumentError(shown + " is too large");
  return value << shift;
}

bool IsHttpHeaderName(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool IsHttpHeaderValue(std::string_view value) {
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

std::string FireKey::RunId() const {
  std::string id = job_id + "@" + std::to_string(scheduled_at.unix_millis());
  if (shard_count > 1) id += "#" + std::to_string(shard);
  return id;
}

namespace {

// `text` as a JSON object; InvalidArgument naming what is wrong.
Result<nlohmann::json> ParseParamsObject(std::string_view text) {
  if (text.size() > kMaxParamsBytes) {
    return InvalidArgumentError("params: " + std::to_string(text.size()) +
                                " bytes is larger than 16 KiB");
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("params: not valid JSON");
  if (!j.is_object()) return InvalidArgumentError("params: must be a JSON object");
  return j;
}

}  // namespace

Result<std::string> MergeParams(std::string_view defaults, std::string_view overrides) {
  if (overrides.empty()) return std::string(defaults);
  Result<nlohmann::json> merged =
      defaults.empty() ? nlohmann::json::object() : ParseParamsObject(defaults);
  if (!merged.ok()) return merged.status();
  Result<nlohmann::json> over = ParseParamsObject(overrides);
  if (!over.ok()) return over.status();
  for (auto& [key, value] : over->items()) (*merged)[key] = std::move(value);
  std::string text = merged->dump();
  if (text.size() > kMaxParamsBytes) {
    return InvalidArgumentError("params: " + std::to_string(text.size()) +
                                " bytes once merged with the job's defaults is larger than 16 KiB");
  }
  return text;
}

namespace {

// The jobs a definition names (on_success, on_failure, on_complete, after): job ids, not itself,
// at most kMaxChildren per key; a sharded job names no children (its shards end apart). Whether
// they exist, and cycles, are checks of the whole set (CheckJobGraph).
Status CheckChildren(const JobSpec& job) {
  if (!job.dependencies) return Status::Ok();
  constexpr size_t kMaxChildren = 64;
  const DependencySpec& d = *job.dependencies;
  for (const auto& [key, names] :
       {std::pair<const char*, const std::vector<std::string>*>{"on_success", &d.on_success},
        {"on_failure", &d.on_failure},
        {"on_complete", &d.on_complete},
        {"after", &d.after}}) {
    if (names->empty()) continue;
    if (job.shards > 1 && std::string_view(key) != "after") {
      return FieldError(job, key, "a job with shards > 1 names no children (its shards end apart)");
    }
    if (names->size() > kMaxChildren) return FieldError(job, key, "names more than 64 jobs");
    for (const std::string& n : *names) {
      if (!IsValidJobId(n)) return FieldError(job, key, "\"" + Shown(n) + "\" is not a job id");
      if (n == job.id) return FieldError(job, key, "names the job itself");
    }
  }
  if (d.join_timeout > Duration(0) && d.after.empty()) {
    return FieldError(job, "join_timeout", "needs after (the jobs it joins)");
  }
  return Status::Ok();
}

// The checks of the fields after id, timezone and schedule (CompileJob checks those first).
Status CheckFields(const JobSpec& job) {
  const int executors = (job.command.empty() ? 0 : 1) + (job.argv.empty() ? 0 : 1) +
                        (job.http ? 1 : 0) + (job.in_process ? 1 : 0);
  if (executors != 1) {
    return FieldError(job, "command",
                      executors == 0 ? "a job needs one of command, argv or http"
                                     : "use only one of command, argv and http");
  }
  if (job.http) {
    GNOMON_RETURN_IF_ERROR(CheckHttpUrl(job, job.http->url));
    if (job.http->method != "POST" && job.http->method != "GET") {
      return FieldError(job, "http.method",
                        "\"" + Shown(job.http->method, 16) + "\" must be POST or GET");
    }
    if (job.http->headers.size() > 64) return FieldError(job, "http.headers", "more than 64");
    for (const auto& [name, value] : job.http->headers) {
      if (!IsHttpHeaderName(name)) {
        return FieldError(job, "http.headers",
                          "\"" + Shown(name) +
                              "\" is not a header name (letters, digits and "
                              "!#$%&'*+-.^_`|~; no ':', space or line break)");
      }
      if (!IsHttpHeaderValue(value) || value.size() > 8192) {
        return FieldError(job, "http.headers." + name,
                          "the value has a line break or control byte, or is longer than 8 KiB");
      }
      std::string lower;
      for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      if (lower == "content-length" || lower == "transfer-encoding" || lower == "connection" ||
          lower.rfind("x-gnomon-", 0) == 0) {
        return FieldError(job, "http.headers." + name,
                          "is set by gnomon (Content-Length, Transfer-Encoding, Connection, "
                          "X-Gnomon-*)");
      }
    }
  }
  if (!job.argv.empty() && job.argv[0].empty()) return FieldError(job, "argv[0]", "is empty");
  size_t argv_bytes = 0;
  for (size_t i = 0; i < job.argv.size(); ++i) {
    if (job.argv[i].find('\0') != std::string::npos) {
      return FieldError(job, "argv[" + std::to_string(i) + "]", "contains a NUL byte");
    }
    argv_bytes += job.argv[i].size() + 1;
  }
  if (argv_bytes > 128 * 1024 || job.argv.size() > 4096) {
    return FieldError(job, "argv", "larger than 128 KiB or 4096 arguments");
  }
  if (job.command.find('\0') != std::string::npos) {
    return FieldError(job, "command", "contains a NUL byte");
  }
  if (job.command.size() > 128 * 1024) return FieldError(job, "command", "larger than 128 KiB");
  if (!job.run_as.empty() && !IsUserSpec(job.run_as)) {
    return FieldError(job, "run_as",
                      "\"" + Shown(job.run_as) + "\" is not user[:group] (names or numbers)");
  }
  if ((!job.run_as.empty() || !job.inherit_env.empty() || job.memory_max != 0 ||
       job.cpu_max != Duration(0) || job.pids_max != 0 || job.open_files != 0) &&
      (job.http || job.in_process)) {
    return FieldError(job, job.run_as.empty() ? "memory_max" : "run_as",
                      "applies to process jobs (command or argv) only");
  }
  for (const std::string& name : job.inherit_env) {
    if (name.empty() || name.size() > 256 || name.find_first_of("=\0") != std::string::npos) {
      return FieldError(job, "inherit_env", "\"" + Shown(name) + "\" is not a variable name");
    }
  }
  if (job.memory_max < 0 || job.memory_max > (int64_t{1} << 50)) {
    return FieldError(job, "memory_max", "is out of range 0 to 1 PiB");
  }
  // Every integer and duration key's range, from the job schema.
  GNOMON_RETURN_IF_ERROR(CheckJobKeyRanges(job));
  if (job.queue.empty() || job.queue.size() > 64 ||
      !std::all_of(job.queue.begin(), job.queue.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
      })) {
    return FieldError(job, "queue",
                      "\"" + job.queue.substr(0, 64) + "\" must match [A-Za-z0-9_.-]{1,64}");
  }
  size_t env_bytes = 0;
  for (const auto& [k, v] : job.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return FieldError(job, "env", "\"" + Shown(k) + "\" is not a valid variable");
    }
    env_bytes += k.size() + v.size() + 2;
  }
  if (env_bytes > 64 * 1024) return FieldError(job, "env", "larger than 64 KiB");
  if (job.description.size() > 4096) return FieldError(job, "description", "longer than 4096");
  GNOMON_RETURN_IF_ERROR(CheckChildren(job));
  if (!job.params.empty()) {
    if (Result<nlohmann::json> p = ParseParamsObject(job.params); !p.ok()) {
      return FieldError(job, "params", std::string(p.status().message().substr(8)));
    }
  }
  return Status::Ok();
}

// Compiled schedules shared by the jobs of one schedule and zone, held weakly.
class ScheduleCache {
 public:
  static ScheduleCache& Get() {
    static ScheduleCache* cache = new ScheduleCache;  // never destroyed: used until exit
    return *cache;
  }
  std::shared_ptr<const CronExpr> Find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second.lock();
  }
  // Keeps `expr` under `key` unless a live one is there already; returns the one kept.
  std::shared_ptr<const CronExpr> Insert(const std::string& key,
                                         std::shared_ptr<const CronExpr> expr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kSweepAt) {
      std::erase_if(entries_, [](const auto& e) { return e.second.expired(); });
    }
    std::weak_ptr<const CronExpr>& slot = entries_[key];
    if (std::shared_ptr<const CronExpr> existing = slot.lock()) return existing;
    slot = expr;
    return expr;
  }

 private:
  static constexpr size_t kSweepAt = 4096;  // expired entries are dropped at this size
  mutable std::mutex mu_;
  std::map<std::string, std::weak_ptr<const CronExpr>> entries_;  // guarded by mu_
};

}  // namespace

namespace {

// The value a JobSpec holds on the heap only when it is not all defaults (FireRulesSpec,
// DependencySpec): the value, or the defaults; and the setter that keeps the defaults off the heap.
template <typename T>
const T& HeldOrDefault(const HeapOptional<T>& held) {
  static const T kDefaults;
  return held ? *held : kDefaults;
}

template <typename T>
void HoldUnlessDefault(HeapOptional<T>& held, T value) {
  if (value == T{}) {
    held.reset();
  } else {
    held = std::move(value);
  }
}

}  // namespace

const FireRulesSpec& FireRulesOf(const JobSpec& job) { return HeldOrDefault(job.fire_rules); }

void SetFireRules(JobSpec& job, FireRulesSpec rules) {
  HoldUnlessDefault(job.fire_rules, std::move(rules));
}

const DependencySpec& DependenciesOf(const JobSpec& job) { return HeldOrDefault(job.dependencies); }

void SetDependencies(JobSpec& job, DependencySpec deps) {
  HoldUnlessDefault(job.dependencies, std::move(deps));
}

std::vector<std::string> ChildrenFor(const JobSpec& job, RunOutcome outcome) {
  std::vector<std::string> out;
  if (!job.dependencies) return out;
  const DependencySpec& d = *job.dependencies;
  auto add = [&out](const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
  };
  switch (outcome) {
    case RunOutcome::kSucceeded:
      add(d.on_success);
      break;
    case RunOutcome::kFailed:
    case RunOutcome::kTimedOut:
    case RunOutcome::kLost:
      add(d.on_failure);
      break;
    case RunOutcome::kCancelled:
      break;
    case RunOutcome::kRunning:
    case RunOutcome::kSkipped:
      return out;
  }
  add(d.on_complete);
  return out;
}

Result<CompiledJob> CompileJob(JobSpec job, const Calendars* calendars) {
  if (!IsValidJobId(job.id)) {
    return InvalidArgumentError("id: \"" + Shown(job.id) +
                                "\" must match [A-Za-z0-9_.-]{1,128} and not be only dots");
  }
  // A job with no schedule compiles an expression that never matches (February 30th): it has
  // no timer, and fires only as a child, by a trigger or by a backfill.
  static const std::string kNoSchedule = "0 0 30 2 *";
  const std::string& text = job.schedule.empty() ? kNoSchedule : job.schedule;
  // Jobs with the same schedule and zone share one compiled expression (many jobs, few
  // schedules), unless it may use H, which hashes the job id.
  ScheduleCache& cache = ScheduleCache::Get();
  const bool shareable = text.find_first_of("Hh") == std::string::npos;
  const std::string key = shareable ? job.timezone + '\n' + text : std::string();
  std::shared_ptr<const CronExpr> schedule = shareable ? cache.Find(key) : nullptr;
  if (schedule == nullptr) {
    Result<TimeZone> zone = TimeZone::Load(job.timezone);
    if (!zone.ok()) return FieldError(job, "timezone", zone.status().message());
    Result<CronExpr> expr = CronExpr::Parse(text, CronOptions{*zone, job.id});
    if (!expr.ok()) return FieldError(job, "schedule", expr.status().message());
    schedule = std::make_shared<const CronExpr>(std::move(*expr));
    if (shareable) schedule = cache.Insert(key, std::move(schedule));
  }
  GNOMON_RETURN_IF_ERROR(CheckFields(job));
  Result<std::shared_ptr<const FireRules>> rules = FireRules::Compile(job, *schedule, calendars);
  if (!rules.ok()) return rules.status();
  return CompiledJob{std::move(job), std::move(schedule), std::move(*rules)};
}

Status ValidateJobSpec(const JobSpec& job, const Calendars* calendars) {
  return CompileJob(job, calendars).status();
}

}  // namespace gnomon
