#include "gnomon/job.h"

#include <algorithm>

#include "gnomon/cron.h"

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
    {"replace", OverlapPolicy::kReplace}};
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

Status CheckDuration(const JobSpec& job, std::string_view field, Duration d, Duration min,
                     Duration max) {
  if (d < min || d > max) {
    return FieldError(job, field,
                      FormatDuration(d) + " is out of range " + FormatDuration(min) + " to " +
                          FormatDuration(max));
  }
  return Status::Ok();
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
  for (char c : id) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string FireKey::RunId() const {
  std::string id = job_id + "@" + std::to_string(scheduled_at.unix_millis());
  if (shard_count > 1) id += "#" + std::to_string(shard);
  return id;
}

Status ValidateJobSpec(const JobSpec& job) {
  if (!IsValidJobId(job.id)) {
    std::string shown;
    for (char c : job.id.substr(0, 64)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return InvalidArgumentError("id: \"" + shown + "\" must match [A-Za-z0-9_.-]{1,128}");
  }
  if (job.schedule.empty()) return FieldError(job, "schedule", "is required");
  Result<TimeZone> zone = TimeZone::Load(job.timezone);
  if (!zone.ok()) return FieldError(job, "timezone", zone.status().message());
  Result<CronExpr> expr = CronExpr::Parse(job.schedule, CronOptions{*zone, job.id});
  if (!expr.ok()) return FieldError(job, "schedule", expr.status().message());
  const int executors = (job.command.empty() ? 0 : 1) + (job.argv.empty() ? 0 : 1) +
                        (job.http ? 1 : 0) + (job.in_process ? 1 : 0);
  if (executors != 1) {
    return FieldError(job, "command",
                      executors == 0 ? "a job needs one of command, argv or http"
                                     : "use only one of command, argv and http");
  }
  if (job.http) {
    if (job.http->url.rfind("http://", 0) != 0 && job.http->url.rfind("https://", 0) != 0) {
      return FieldError(
          job, "http.url",
          "\"" + job.http->url.substr(0, 128) + "\" must start with http:// or https://");
    }
    if (job.http->method != "POST" && job.http->method != "GET") {
      return FieldError(job, "http.method",
                        "\"" + job.http->method.substr(0, 16) + "\" must be POST or GET");
    }
  }
  for (const std::string& arg : job.argv) {
    if (arg.find('\0') != std::string::npos) return FieldError(job, "argv", "contains a NUL byte");
  }
  if (job.command.find('\0') != std::string::npos) {
    return FieldError(job, "command", "contains a NUL byte");
  }
  GNOMON_RETURN_IF_ERROR(
      CheckDuration(job, "timeout", job.timeout, Duration(0), std::chrono::hours(24 * 30)));
  if (job.retries < 0 || job.retries > 100) {
    return FieldError(job, "retries", std::to_string(job.retries) + " is out of range 0-100");
  }
  GNOMON_RETURN_IF_ERROR(CheckDuration(job, "retry_backoff", job.retry_backoff,
                                       std::chrono::milliseconds(1), kMaxRetryBackoff));
  GNOMON_RETURN_IF_ERROR(CheckDuration(job, "catchup_window", job.catchup_window, Duration(0),
                                       std::chrono::hours(24 * 366)));
  GNOMON_RETURN_IF_ERROR(
      CheckDuration(job, "kill_grace", job.kill_grace, Duration(0), std::chrono::hours(1)));
  GNOMON_RETURN_IF_ERROR(CheckDuration(job, "history_max_age", job.history_max_age,
                                       std::chrono::minutes(1), std::chrono::hours(24 * 3660)));
  if (job.queue.empty() || job.queue.size() > 64 ||
      !std::all_of(job.queue.begin(), job.queue.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
      })) {
    return FieldError(job, "queue",
                      "\"" + job.queue.substr(0, 64) + "\" must match [A-Za-z0-9_.-]{1,64}");
  }
  if (job.shards < 1 || job.shards > 1024) {
    return FieldError(job, "shards", std::to_string(job.shards) + " is out of range 1-1024");
  }
  if (job.max_consecutive_failures < 0 || job.max_consecutive_failures > 1'000'000) {
    return FieldError(job, "max_consecutive_failures",
                      std::to_string(job.max_consecutive_failures) + " is out of range 0-1000000");
  }
  if (job.history_keep < 1 || job.history_keep > 100'000) {
    return FieldError(job, "history_keep",
                      std::to_string(job.history_keep) + " is out of range 1-100000");
  }
  size_t env_bytes = 0;
  for (const auto& [k, v] : job.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return FieldError(job, "env", "\"" + k.substr(0, 64) + "\" is not a valid variable");
    }
    env_bytes += k.size() + v.size() + 2;
  }
  if (env_bytes > 64 * 1024) return FieldError(job, "env", "larger than 64 KiB");
  if (job.description.size() > 4096) return FieldError(job, "description", "longer than 4096");
  return Status::Ok();
}

}  // namespace gnomon
