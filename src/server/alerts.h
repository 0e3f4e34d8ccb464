// Alerts of `gnomon serve`: webhooks on run failure, lost run, job auto-paused by the breaker and
// missed fires, configurable globally (a target with no job prefixes) and per job (prefixes).
//
// AlertObserver (an Observer, gnomon/observer.h) maps scheduler events to alerts, queues them
// without blocking the scheduler and delivers them from one background thread as JSON POSTs,
// retried with backoff and signed with HMAC-SHA256.
//
// Events (the "event" field and the X-Gnomon-Event header):
//   run_failed   kRunFinished with outcome failed or timed_out (a lost run is "lost_run", not
//                both; a cancelled run is not a failure)
//   lost_run     kLostRun: a vanished holder's fire was resolved (detail = fail/rerun (holder n))
//   auto_paused  kAutoPaused: the job paused itself after max_consecutive_failures
//   missed_fire  kSkipped with detail "misfire". Missed fires of one job are coalesced per
//                target: an alert is held for AlertOptions::missed_fire_window, and further missed
//                fires of that job arriving before it is sent are merged into it ("count" grows,
//                "scheduled_at" stays the first missed instant, "last_scheduled_at" and "at" move
//                to the latest). A restart after a long outage thus sends one alert per job.
//
// Request: POST <url> with body (one JSON object; "count" is 1 except for coalesced missed fires)
//   {"event": "run_failed", "job": "report", "run": "report@1764451800000", "attempt": 1,
//    "fencing_token": 42, "scheduled_at": "2026-11-29T21:30:00.000Z",
//    "last_scheduled_at": "2026-11-29T21:30:00.000Z", "at": "2026-11-29T21:30:05.123Z",
//    "node": "node-a", "outcome": "failed", "detail": "exit status 1", "count": 1}
// and headers
//   Content-Type: application/json
//   X-Gnomon-Event: run_failed
//   X-Gnomon-Delivery: <unique id>        the same on every retry of one alert (deduplicate on it)
//   X-Gnomon-Timestamp: <unix seconds>    when this attempt was sent (new on each retry)
//   X-Gnomon-Signature: sha256=<hex>      only when the target has a secret
// Signature scheme (for receivers): hex = lower-case hex of HMAC-SHA256(key = the secret, message =
// "<X-Gnomon-Timestamp>.<raw request body>"), the timestamp as sent (decimal, no padding), the
// body byte for byte. A receiver recomputes it, compares in constant time, and should reject a
// timestamp more than a few minutes from its own clock (replay protection).
//
// Delivery: through net::HttpClient (libcurl; src/net/http_client.h) with AlertOptions::tls and
// ::egress, proxies from the environment. 2xx = delivered. A transport error (DNS, connect, TLS,
// a timeout, an address refused by the egress rule), 5xx or 429 is retried after a backoff
// with full jitter: attempt n (n >= 1 failed attempts) waits uniform[0, min(backoff_max,
// backoff_initial * 2^(n-1))]; after max_attempts attempts the alert is given up (failed). Any
// other status (3xx, 4xx) is given up at once (failed). Redirects are not followed. Alerts waiting
// for a retry do not hold up others: the queue is ordered by due time.
//
// Thread safety: all public methods are thread-safe. OnEvent takes one mutex briefly, never does
// I/O and never waits: when the queue is full the oldest queued alert is dropped (counted).
#ifndef GNOMON_SRC_SERVER_ALERTS_H_
#define GNOMON_SRC_SERVER_ALERTS_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gnomon/net.h"
#include "gnomon/observer.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/net/http_client.h"

namespace gnomon::server {

// The alert event names, in documentation order.
inline constexpr std::string_view kAlertEvents[] = {"run_failed", "lost_run", "auto_paused",
                                                    "missed_fire"};

// One webhook receiver.
struct AlertTarget {
  std::string name;    // unique among targets; names the target in messages
  std::string url;     // http://host[:port]/path or https://... (AlertOptions::tls), no user info
  std::string secret;  // HMAC-SHA256 key of X-Gnomon-Signature; empty = requests are unsigned
  std::vector<std::string> events;  // subset of kAlertEvents; empty = every event
  std::vector<std::string> jobs;    // job-id prefixes this target applies to; empty = every job
};

// OK, or InvalidArgument naming the target and field, e.g.
// `alert "ops": url "ftp://x": unsupported scheme "ftp" (http or https)`. Checks: name non-empty
// and unique; url http(s) with a host, no space or line break; events known and not repeated;
// job prefixes non-empty.
Status ValidateAlertTargets(const std::vector<AlertTarget>& targets);

struct AlertOptions {
  // Alerts waiting for delivery (first attempts and retries); beyond it the oldest is dropped.
  // Default 1000. REQUIRES: >= 1.
  size_t queue_capacity = 1000;
  // Attempts per alert, the first included. Default 5. REQUIRES: >= 1.
  int max_attempts = 5;
  // Backoff cap before the first retry (doubles per retry, full jitter). Default 1 s.
  Duration backoff_initial = std::chrono::seconds(1);
  // Upper bound of a backoff. Default 60 s.
  Duration backoff_max = std::chrono::seconds(60);
  // Time limit of one attempt, from connecting to the end of the answer. Default 5 s.
  Duration request_timeout = std::chrono::seconds(5);
  // TLS of https:// targets. Default: the system CAs, verification on, no client certificate.
  net::TlsOptions tls;
  // Addresses an attempt may connect to. Default net::EgressRule::Default(): link-local denied.
  net::EgressRule egress = net::EgressRule::Default();
  // How long a missed_fire alert waits for more missed fires of its job to merge. Default 10 s;
  // 0 = merges only with an alert still queued.
  Duration missed_fire_window = std::chrono::seconds(10);
  // Stop() keeps delivering queued alerts for at most this long (monotonic). Default 10 s.
  Duration drain_timeout = std::chrono::seconds(10);
  // Owns "now" and waiting (backoffs, windows, drain). Not owned; nullptr = SystemClock::Get().
  Clock* clock = nullptr;
  // Jitter source: returns a value in [0, 1] that scales a backoff. Called on the delivery thread
  // only. Empty = uniform random. Tests pass a constant.
  std::function<double()> jitter;
  // Called on the delivery thread, without locks held, for each alert given up (counted in
  // AlertStats::failed): its target's name, event, job and the last attempt's error. Empty =
  // nothing is called. The daemon logs it (alert_failed).
  std::function<void(const std::string& target, const std::string& event, const std::string& job,
                     const std::string& error)>
      on_given_up;
};

// Counters for metrics (gnomon_alerts_*). Monotonic except `queued`.
struct AlertStats {
  uint64_t delivered = 0;  // alerts answered 2xx
  uint64_t failed = 0;     // alerts given up: attempts exhausted or a non-retryable status
  uint64_t dropped = 0;    // alerts dropped: queue full, or still queued when Stop() gave up
  uint64_t attempts = 0;   // HTTP attempts made (first tries and retries)
  uint64_t retries = 0;    // retries scheduled
  size_t queued = 0;       // alerts waiting now (not counting one in flight)
  // Why the last failed attempt failed: the client's error ("POST <url>: connect: ...") or
  // "POST <url>: HTTP status 503". Empty until an attempt fails.
  std::string last_error;
};

class AlertObserver final : public Observer {
 public:
  // Starts the delivery thread. `node_id` is the "node" field.
  // REQUIRES: ValidateAlertTargets(targets).ok(); options as documented above.
  AlertObserver(std::vector<AlertTarget> targets, std::string node_id, AlertOptions options = {});
  // Calls Stop().
  ~AlertObserver() override;
  AlertObserver(const AlertObserver&) = delete;
  AlertObserver& operator=(const AlertObserver&) = delete;

  // Maps `event` to at most one alert per matching target and queues it. Never blocks on I/O.
  // Events after Stop() are ignored.
  void OnEvent(const SchedulerEvent& event) override;

  // Delivers what is queued (held missed_fire alerts at once; retries after their backoff) for at
  // most drain_timeout, then drops the rest (counted) and joins the thread. An attempt in flight
  // at the bound finishes first (within request_timeout). Idempotent.
  void Stop();

  AlertStats Stats() const;

  // Replaces the targets (SIGHUP): InvalidArgument (nothing changes) unless ValidateAlertTargets
  // passes. Alerts already queued are delivered to the target they were made for.
  Status SetTargets(std::vector<AlertTarget> targets);

 private:
  struct Alert {
    std::shared_ptr<const AlertTarget> target;  // as it was when the alert was made
    std::string event;                          // one of kAlertEvents
    std::string job;
    std::string run;
    int attempt = 0;  // the run's attempt
    int64_t fencing_token = 0;
    Instant scheduled_at;
    Instant last_scheduled_at;
    Instant at;
    std::string outcome;
    std::string detail;
    int64_t count = 1;
    std::string delivery_id;
    int sent = 0;       // attempts made so far; merging stops at the first
    Duration due{0};    // steady time of the next attempt
    bool held = false;  // a missed_fire alert inside its window (sent at once by Stop)
  };
  void Run();
  void Enqueue(const AlertTarget& target, std::string_view event_name, const SchedulerEvent& e);
  // Sends one attempt: the HTTP status, or the transport error.
  Result<int> Send(const Alert& alert);
  Duration Backoff(int failed_attempts);

  static std::vector<std::shared_ptr<const AlertTarget>> Share(std::vector<AlertTarget> targets);
  std::vector<AlertTarget> Targets() const;  // REQUIRES: mu_ held, or during construction
  std::vector<std::shared_ptr<const AlertTarget>> targets_;  // guarded by mu_
  const std::string node_id_;
  const AlertOptions options_;
  Clock& clock_;
  const net::HttpClient client_;
  const std::string delivery_prefix_;  // random per process: delivery ids never repeat
  std::mt19937_64 rng_;                // delivery thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Alert> queue_;  // by sequence: begin() is the oldest
  uint64_t next_seq_ = 0;
  uint64_t wake_ = 0;  // bumped on every change the delivery thread must see
  bool stopping_ = false;
  Duration drain_deadline_{0};
  AlertStats stats_;
  std::mutex stop_mu_;  // serialises Stop()
  std::jthread thread_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_ALERTS_H_
