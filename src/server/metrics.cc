#include "src/server/metrics.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace gnomon::server {
namespace {

// Lateness of starts: a healthy node starts within milliseconds; claim_grace defaults to 1 s.
const std::vector<double> kLatenessBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                             0.5,   1,    2.5,   5,    10,  30};
// Run durations: from in-process handlers (ms) to batch jobs (an hour).
const std::vector<double> kDurationBounds = {0.01, 0.05, 0.1, 0.5, 1,    5,   10,
                                             30,   60,   300, 900, 1800, 3600};

double Seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

void Header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void Sample(std::string& out, std::string_view name, std::string_view labels,
            const std::string& value) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(value).append("\n");
}

std::string Label(std::string_view name, std::string_view value) {
  return std::string(name) + "=\"" + EscapeLabelValue(value) + "\"";
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void MetricsObserver::Histogram::Observe(double v) {
  for (size_t i = 0; i < bounds->size(); ++i) {
    if (v <= (*bounds)[i]) {
      ++counts[i];
      break;
    }
  }
  ++count;
  sum += v;
}

MetricsObserver::MetricsObserver(std::string version)
    : version_(std::move(version)), lateness_(&kLatenessBounds) {}

void MetricsObserver::OnEvent(const SchedulerEvent& event) {
  using Kind = SchedulerEvent::Kind;
  std::lock_guard<std::mutex> lock(mu_);
  switch (event.kind) {
    case Kind::kClaimed:
      ++claims_["claimed"];
      break;
    case Kind::kRunStarted:
      // A fire's lateness is when its first attempt started (a claim may precede the instant:
      // SchedulerOptions::claim_ahead); a start never precedes it by more than the skew.
      if (event.attempt == 1) lateness_.Observe(std::max(0.0, Seconds(event.duration)));
      break;
    case Kind::kClaimLost:
      ++claims_["lost"];
      break;
    case Kind::kSkipped:
      ++skipped_[event.detail.empty() ? "unknown" : event.detail];
      ++fires_[{event.job_id, "skipped"}];
      break;
    case Kind::kRunFinished: {
      ++fires_[{event.job_id, std::string(ToString(event.outcome))}];
      auto it = durations_.try_emplace(event.job_id, &kDurationBounds).first;
      it->second.Observe(std::max(0.0, Seconds(event.duration)));
      break;
    }
    case Kind::kLeaseRenewed:
      ++renewals_["ok"];
      break;
    case Kind::kLeaseRenewFailed:
      ++renewals_["failed"];
      break;
    case Kind::kLostRun:
      ++lost_runs_;
      break;
    case Kind::kSelfFenced:
      ++self_fenced_;
      break;
    default:
      break;
  }
}

void MetricsObserver::SetJobs(int64_t jobs) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_ = jobs;
}

void MetricsObserver::SetNodesAlive(int64_t nodes) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_alive_ = nodes;
}

void MetricsObserver::SetClockSkews(std::vector<std::pair<std::string, Duration>> skews) {
  std::sort(skews.begin(), skews.end());
  std::lock_guard<std::mutex> lock(mu_);
  skews_ = std::move(skews);
}

void MetricsObserver::RenderHistogram(std::string& out, std::string_view name,
                                      std::string_view label, std::string_view label_value,
                                      const Histogram& h) const {
  const std::string base = label.empty() ? "" : Label(label, label_value) + ",";
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds->size(); ++i) {
    cumulative += h.counts[i];
    Sample(out, bucket, base + Label("le", FormatDouble((*h.bounds)[i])),
           std::to_string(cumulative));
  }
  Sample(out, bucket, base + "le=\"+Inf\"", std::to_string(h.count));
  const std::string plain = label.empty() ? "" : Label(label, label_value);
  Sample(out, std::string(name) + "_sum", plain, FormatDouble(h.sum));
  Sample(out, std::string(name) + "_count", plain, std::to_string(h.count));
}

void MetricsObserver::SetBackendUnsafe(bool unsafe) {
  std::lock_guard<std::mutex> lock(mu_);
  backend_unsafe_ = unsafe;
}

void MetricsObserver::CountAuthFailure(std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = auth_failures_.find(reason);
  if (it == auth_failures_.end()) it = auth_failures_.emplace(std::string(reason), 0).first;
  ++it->second;
}

void MetricsObserver::CountRateLimited() {
  std::lock_guard<std::mutex> lock(mu_);
  ++rate_limited_;
}

std::string MetricsObserver::Render(const View& view) const {
  auto visible = [&](const std::string& job) { return !view.job_visible || view.job_visible(job); };
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Header(out, "gnomon_fires_total", "counter",
         "Attempts finished on this node by outcome, and fires skipped (outcome=\"skipped\").");
  for (const auto& [key, n] : fires_) {
    if (!visible(key.first)) continue;
    Sample(out, "gnomon_fires_total", Label("job", key.first) + "," + Label("outcome", key.second),
           std::to_string(n));
  }
  Header(
      out, "gnomon_fire_lateness_seconds", "histogram",
      "Delay between a fire's scheduled instant and the start of its first attempt on this node.");
  RenderHistogram(out, "gnomon_fire_lateness_seconds", "", "", lateness_);
  Header(out, "gnomon_run_duration_seconds", "histogram", "Duration of attempts run here.");
  for (const auto& [job, h] : durations_) {
    if (!visible(job)) continue;
    RenderHistogram(out, "gnomon_run_duration_seconds", "job", job, h);
  }
  Header(out, "gnomon_claims_total", "counter",
         "Claims by result: claimed (this node runs it) or lost (another node had it).");
  for (const auto& [result, n] : claims_) {
    Sample(out, "gnomon_claims_total", Label("result", result), std::to_string(n));
  }
  Header(out, "gnomon_lease_renewals_total", "counter", "Lease renewals by result (ok, failed).");
  for (const auto& [result, n] : renewals_) {
    Sample(out, "gnomon_lease_renewals_total", Label("result", result), std::to_string(n));
  }
  Header(out, "gnomon_lost_runs_total", "counter",
         "Fires of vanished holders resolved by this node.");
  Sample(out, "gnomon_lost_runs_total", "", std::to_string(lost_runs_));
  Header(out, "gnomon_self_fenced_total", "counter",
         "Runs this node cancelled because it could not renew their lease.");
  Sample(out, "gnomon_self_fenced_total", "", std::to_string(self_fenced_));
  Header(out, "gnomon_skipped_fires_total", "counter", "Fires not run, by reason.");
  for (const auto& [reason, n] : skipped_) {
    Sample(out, "gnomon_skipped_fires_total", Label("reason", reason), std::to_string(n));
  }
  Header(out, "gnomon_jobs", "gauge", "Jobs known to this node.");
  Sample(out, "gnomon_jobs", "", std::to_string(view.jobs.value_or(jobs_)));
  Header(out, "gnomon_nodes_alive", "gauge", "Nodes with a live heartbeat in the backend.");
  Sample(out, "gnomon_nodes_alive", "", std::to_string(nodes_alive_));
  Header(out, "gnomon_clock_skew_seconds", "gauge",
         "Node clock minus backend clock, as each node measured it.");
  for (const auto& [node, skew] : skews_) {
    Sample(out, "gnomon_clock_skew_seconds", Label("node", node), FormatDouble(Seconds(skew)));
  }
  Header(out, "gnomon_backend_unsafe_persistence", "gauge",
         "1 when the backend runs without durable persistence or with eviction on "
         "(allow_unsafe_backend).");
  Sample(out, "gnomon_backend_unsafe_persistence", "", backend_unsafe_ ? "1" : "0");
  Header(out, "gnomon_http_auth_failures_total", "counter",
         "API calls refused with 401 or 403 on this node, by reason.");
  for (const auto& [reason, n] : auth_failures_) {
    Sample(out, "gnomon_http_auth_failures_total", Label("reason", reason), std::to_string(n));
  }
  Header(out, "gnomon_http_rate_limited_total", "counter",
         "Mutating API calls refused with 429 by their token's rate limit on this node.");
  Sample(out, "gnomon_http_rate_limited_total", "", std::to_string(rate_limited_));
  Header(out, "gnomon_build_info", "gauge", "Build information; always 1.");
  Sample(out, "gnomon_build_info", Label("version", version_), "1");
  return out;
}

}  // namespace gnomon::server
