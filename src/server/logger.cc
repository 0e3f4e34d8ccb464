#include "src/server/logger.h"

#include <nlohmann/json.hpp>

namespace gnomon::server {

std::string_view ToString(LogFormat f) { return f == LogFormat::kJson ? "json" : "text"; }
std::string_view ToString(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

namespace {

// Quotes a text value when it has spaces, quotes or '=' (and escapes newlines).
std::string TextValue(std::string_view v) {
  bool plain = !v.empty();
  for (char c : v) plain = plain && c != ' ' && c != '"' && c != '=' && c != '\n' && c != '\t';
  if (plain) return std::string(v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

Logger::Logger(LogFormat format, LogLevel level, std::string node_id, FILE* out)
    : format_(format), level_(level), node_id_(std::move(node_id)), out_(out) {}

void Logger::Log(LogLevel level, std::string_view event, std::string_view job,
                 std::string_view run_id, const Fields& fields) {
  if (level < level_) return;
  const std::string ts = SystemClock::Get().Now().ToRfc3339();
  std::string line;
  if (format_ == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["ts"] = ts;
    j["level"] = ToString(level);
    j["event"] = event;
    j["node"] = node_id_;
    j["job"] = job;
    j["run_id"] = run_id;
    for (const auto& [k, v] : fields) j[k] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = ts + " " + std::string(ToString(level)) + " " + std::string(event) +
           " node=" + TextValue(node_id_) + " job=" + TextValue(job) + " run=" + TextValue(run_id);
    for (const auto& [k, v] : fields) line += " " + k + "=" + TextValue(v);
  }
  line += "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void LogObserver::OnEvent(const SchedulerEvent& e) {
  using K = SchedulerEvent::Kind;
  LogLevel level = LogLevel::kInfo;
  Logger::Fields f;
  if (e.attempt > 0) f.emplace_back("attempt", std::to_string(e.attempt));
  if (e.fencing_token > 0) f.emplace_back("token", std::to_string(e.fencing_token));
  if (!e.job_id.empty() && e.scheduled_at != Instant()) {
    f.emplace_back("scheduled_at", e.scheduled_at.ToRfc3339());
  }
  switch (e.kind) {
    case K::kClaimed:
      f.emplace_back("lateness", FormatDuration(e.duration));
      break;
    case K::kRunFinished:
      f.emplace_back("outcome", std::string(ToString(e.outcome)));
      f.emplace_back("duration", FormatDuration(e.duration));
      if (e.outcome != RunOutcome::kSucceeded) level = LogLevel::kWarn;
      break;
    case K::kRetryScheduled:
      f.emplace_back("delay", FormatDuration(e.duration));
      break;
    case K::kLeaseRenewed:
    case K::kClaimLost:
      level = LogLevel::kDebug;
      break;
    case K::kLeaseRenewFailed:
    case K::kSelfFenced:
    case K::kLostRun:
      level = LogLevel::kWarn;
      break;
    case K::kSkipped:
      // Older than the backend keeps fire markers: neither run nor recorded (docs/semantics.md
      // "How far back a fire can be claimed").
      if (e.detail == "too-old") level = LogLevel::kWarn;
      break;
    case K::kAutoPaused:
    case K::kError:
      level = LogLevel::kError;
      break;
    default:
      break;
  }
  if (!e.detail.empty()) f.emplace_back("detail", e.detail);
  if (e.catch_up) f.emplace_back("catch_up", "true");
  logger_.Log(level, ToString(e.kind), e.job_id, e.run_id, f);
}

}  // namespace gnomon::server
