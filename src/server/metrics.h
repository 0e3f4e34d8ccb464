// Prometheus metrics of `gnomon serve`: MetricsObserver counts scheduler events (gnomon/observer.h)
// and renders them in the Prometheus text exposition format (version 0.0.4); CompositeObserver
// fans one event stream out to several observers (logs AND metrics).
//
// Series (docs/http-api.md "Metrics"):
//   gnomon_fires_total{job,outcome}            counter   finished attempts by outcome, plus
//                                                        skipped fires (outcome="skipped")
//   gnomon_fire_lateness_seconds               histogram claim instant - scheduled instant
//   gnomon_run_duration_seconds{job}           histogram attempt duration
//   gnomon_claims_total{result}                counter   result = claimed | lost
//   gnomon_lease_renewals_total{result}        counter   result = ok | failed
//   gnomon_lost_runs_total                     counter   vanished holders' fires resolved here
//   gnomon_skipped_fires_total{reason}         counter   overlap, misfire, paused, early-guard ...
//   gnomon_self_fenced_total                   counter   runs this node cancelled itself
//   gnomon_jobs                                gauge     jobs known to this node
//   gnomon_nodes_alive                         gauge     nodes with a live heartbeat
//   gnomon_clock_skew_seconds{node}            gauge     node clock minus backend clock
//   gnomon_backend_unsafe_persistence          gauge     1 when the backend is not durable
//   gnomon_http_auth_failures_total{reason}    counter   API calls answered 401/403, by reason
//   gnomon_http_rate_limited_total             counter   mutating calls answered 429 (per token)
//   gnomon_build_info{version}                 gauge     always 1
// A caller limited to namespaces sees only the job-labelled series of its jobs (Render's filter).
// Label values are escaped (\\, \", \n) so a job id or reason can never break the format.
//
// Thread safety: all methods are thread-safe; OnEvent takes one mutex briefly and never blocks.
#ifndef GNOMON_SRC_SERVER_METRICS_H_
#define GNOMON_SRC_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnomon/observer.h"
#include "gnomon/time.h"

namespace gnomon::server {

// Escapes a Prometheus label value: backslash, double quote and line feed.
std::string EscapeLabelValue(std::string_view value);

class MetricsObserver final : public Observer {
 public:
  // `version` becomes gnomon_build_info{version="..."}.
  explicit MetricsObserver(std::string version);

  void OnEvent(const SchedulerEvent& event) override;

  // Gauges that are read from elsewhere (the HTTP API refreshes them before each scrape).
  void SetJobs(int64_t jobs);
  void SetNodesAlive(int64_t nodes);
  // Replaces the per-node skew gauges: (node id, node clock minus backend clock).
  void SetClockSkews(std::vector<std::pair<std::string, Duration>> skews);
  // 1 when the backend cannot keep gnomon's promises across its own restart (Redis without AOF,
  // started with allow_unsafe_backend): gnomon_backend_unsafe_persistence.
  void SetBackendUnsafe(bool unsafe);

  // An API call refused with 401/403 (`reason`: missing_token, invalid_token, role, namespace,
  // origin, host, fetch_site) and a mutating call refused by its token's rate limit.
  void CountAuthFailure(std::string_view reason);
  void CountRateLimited();

  // What one scrape may see: series labelled by a job only when `job_visible` accepts the job
  // (null = every job), and `jobs` as gnomon_jobs when set (else the value of SetJobs).
  struct View {
    std::function<bool(std::string_view job)> job_visible;
    std::optional<int64_t> jobs;
  };
  // The whole exposition (text format 0.0.4), series sorted by labels.
  std::string Render(const View& view = {}) const;

 private:
  struct Histogram {
    explicit Histogram(const std::vector<double>* bounds)
        : bounds(bounds), counts(bounds->size(), 0) {}
    void Observe(double v);
    const std::vector<double>* bounds;  // upper bounds, ascending (+Inf implied)
    std::vector<uint64_t> counts;       // per bucket (not cumulative)
    uint64_t count = 0;
    double sum = 0;
  };
  void RenderHistogram(std::string& out, std::string_view name, std::string_view label,
                       std::string_view label_value, const Histogram& h) const;

  const std::string version_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> fires_;  // (job, outcome)
  Histogram lateness_;
  std::map<std::string, Histogram> durations_;  // by job
  std::map<std::string, uint64_t> claims_;      // by result
  std::map<std::string, uint64_t> renewals_;    // by result
  uint64_t lost_runs_ = 0;
  uint64_t self_fenced_ = 0;
  std::map<std::string, uint64_t> skipped_;  // by reason
  int64_t jobs_ = 0;
  int64_t nodes_alive_ = 0;
  bool backend_unsafe_ = false;
  std::map<std::string, uint64_t, std::less<>> auth_failures_;  // by reason
  uint64_t rate_limited_ = 0;
  std::vector<std::pair<std::string, Duration>> skews_;
};

// Forwards every event to each observer in order. The observers are not owned and must outlive
// this object. Thread-safe when they are.
class CompositeObserver final : public Observer {
 public:
  explicit CompositeObserver(std::vector<Observer*> observers) : observers_(std::move(observers)) {}
  void OnEvent(const SchedulerEvent& event) override {
    for (Observer* o : observers_) {
      if (o != nullptr) o->OnEvent(event);
    }
  }

 private:
  const std::vector<Observer*> observers_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_METRICS_H_
