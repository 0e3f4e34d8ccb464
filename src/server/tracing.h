// Tracing of `gnomon serve`: OtlpExporter turns the scheduler's events (gnomon/observer.h) into one
// trace per attempt and exports the spans as OTLP/HTTP JSON to a collector.
//
// Spans of one attempt (all SPAN_KIND_INTERNAL; the job's own spans nest under "run"):
//   "fire <job>"  the attempt: from the start of "claim" (or of "run" when there is none) to the
//                 kRunFinished event. Root span of the trace.
//   ├ "claim"     attempt 1: [scheduled instant, kClaimed.at] (the lateness; a claim made early,
//   │             within skew tolerance, is an empty span at the claim instant).
//   │             attempt > 1: [kRetryScheduled.at, kRunStarted.at] (backoff + NextAttempt).
//   │             Absent when no claim event preceded the run (a lost fire re-run by this node).
//   ├ "run"       [kRunStarted.at, kRunStarted.at + kRunFinished.duration]: the executor.
//   │             Its span id is the parent-id of the fire's traceparent, so the spans that the job
//   │             starts from GNOMON_TRACEPARENT / the `traceparent` header are its children.
//   └ "complete"  [end of "run", kRunFinished.at]: recording the outcome in the backend (the
//                 scheduler announces kRunFinished once the report is written).
// A fire claimed and then refused by admission (kClaimed then kSkipped) is "fire <job>" + "claim"
// with gnomon.outcome = skipped. kLostRun (a vanished holder's fire resolved here) is one span
// "lost <job>" with the holder's attempt and token, status error.
//
// Ids: the trace id and the "run" span id come from the attempt's W3C traceparent
// ("00-<trace-id>-<parent-id>-<flags>"). Without one (see Record), they are derived from the run id
// (the trace id hashes the run id, so every attempt of a fire shares it), which is stable but does
// not match what the job saw. The other span ids hash (trace id, run id, attempt, span name).
//
// Attributes on every span: gnomon.job, gnomon.run_id, gnomon.node, gnomon.fencing_token,
// gnomon.attempt; on "fire <job>", "run" and "lost <job>" also gnomon.outcome. Status is ERROR
// (with the event's detail as message) for failed, timed_out and lost; UNSET otherwise.
// Resource: service.name, service.instance.id (= node id), host.name.
//
// Delivery: through net::HttpClient (libcurl; src/net/http_client.h) with TracingOptions::tls and
// ::egress, proxies from the environment. OnEvent never blocks on the network. Finished attempts
// are queued (at most queue_capacity spans; an attempt that does not fit is dropped whole and
// counted). A sender thread POSTs batches of up to max_batch spans every flush_interval, or as soon
// as max_batch are queued; a batch that fails (connection error, timeout, non-2xx) is dropped and
// counted, never retried. At most queue_capacity attempts may be open (claimed, not finished) at
// once: beyond that the oldest is forgotten and counted as one dropped span.
//
// Thread safety: all methods are thread-safe.
#ifndef GNOMON_SRC_SERVER_TRACING_H_
#define GNOMON_SRC_SERVER_TRACING_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gnomon/net.h"
#include "gnomon/observer.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/net/http_client.h"
#include "src/server/otlp_span.h"

namespace gnomon::server {

struct TracingOptions {
  // OTLP/HTTP traces endpoint, "http://host:port/v1/traces" or https://. Required.
  std::string endpoint;
  // Resource attribute service.name. Default "gnomon".
  std::string service_name = "gnomon";
  // This node's id: attribute gnomon.node and resource attribute service.instance.id. Default "".
  std::string node_id;
  // Most spans waiting to be sent; beyond it finished attempts are dropped. Default 2048.
  size_t queue_capacity = 2048;
  // Most spans per POST; a full batch is sent without waiting for flush_interval. Default 256.
  size_t max_batch = 256;
  // Longest a queued span waits before it is sent. Default 1 s.
  Duration flush_interval = std::chrono::seconds(1);
  // Time limit of one POST, from connecting to the end of the answer; also Stop()'s flush
  // budget. Default 2 s.
  Duration timeout = std::chrono::seconds(2);
  // TLS of an https:// endpoint. Default: the system CAs, verification on, no client
  // certificate.
  net::TlsOptions tls;
  // Addresses a POST may connect to. Default net::EgressRule::Default(): link-local denied.
  net::EgressRule egress = net::EgressRule::Default();
};

// OK, or InvalidArgument naming the field ("tracing.endpoint: ...") when the endpoint is not an
// http:// or https:// URL with a host (and no user info), service_name is empty, queue_capacity
// or max_batch is 0, flush_interval / timeout are not in (0, kMaxConfigDuration], or a TLS file
// cannot be read ("tracing.tls.ca_file: ...", net::ValidateTlsOptions).
Status ValidateTracingOptions(const TracingOptions& options);

// The ids of a W3C traceparent, lower-case hex.
struct TraceContext {
  std::string trace_id;  // 32 hex digits, not all zero
  std::string span_id;   // 16 hex digits, not all zero (the traceparent's parent-id)
};
// Parses "00-<32 hex>-<16 hex>-<2 hex>" (version 00 exactly, or a later version followed by more
// fields); nullopt when malformed or when an id is all zeros.
std::optional<TraceContext> ParseTraceparent(std::string_view traceparent);

class OtlpExporter final : public Observer {
 public:
  struct Stats {
    uint64_t spans_exported = 0;  // spans in batches the collector accepted (2xx)
    uint64_t spans_dropped = 0;   // spans lost: queue full, failed batch, Stop budget, evicted
    uint64_t batches_failed = 0;  // POSTs that failed (connection, timeout, non-2xx)
    // Why the last failed POST failed ("POST <url>: connect: ...", "...: HTTP status 503").
    std::string last_error;
  };

  // Starts the sender thread. `clock` (not owned, must outlive this) owns the sender's waiting
  // (flush_interval, Stop budget); span times come from the events. REQUIRES:
  // ValidateTracingOptions(options).ok().
  OtlpExporter(TracingOptions options, Clock& clock);
  // Stop().
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Record(event, <the event's traceparent>). SchedulerEvent has no traceparent field today, so
  // ids are derived from the run id; once it gains `std::string traceparent` (set on kRunStarted
  // and kRunFinished from RunContext::traceparent) it is picked up here without other changes.
  void OnEvent(const SchedulerEvent& event) override;
  // Feeds one event with the traceparent the attempt's job received (may be empty or given on
  // only one of the attempt's events). Never blocks on the network; takes one mutex briefly.
  void Record(const SchedulerEvent& event, std::string_view traceparent);

  // Sends what is queued (batches while less than options.timeout has passed since the call;
  // the rest is dropped and counted), then joins the sender. Later events are dropped. Returns
  // within about 2 * timeout (a POST in flight is not interrupted). Idempotent.
  void Stop();

  Stats stats() const;

 private:
  using Attribute = OtlpAttribute;
  using Span = OtlpSpan;
  // An attempt seen claimed or started and not finished yet (keyed by run id: a node runs the
  // attempts of one fire one after another).
  struct OpenAttempt {
    std::string job_id;
    int attempt = 0;
    int64_t fencing_token = 0;
    std::optional<Instant> claim_start;
    std::optional<Instant> claim_end;  // unset for a retry until its run starts
    std::optional<Instant> run_start;
    std::string traceparent;
    uint64_t seq = 0;  // age, for eviction
  };

  // REQUIRES: mu_ held. The open attempt of `run_id`, created (evicting the oldest) if absent.
  OpenAttempt& OpenLocked(const std::string& run_id, int attempt);
  void CloseLocked(const std::string& run_id);
  std::vector<Span> AttemptSpans(const std::string& run_id, const OpenAttempt& open,
                                 RunOutcome outcome, Instant finished_at, Duration run_duration,
                                 const std::string& detail) const;
  std::vector<Span> LostSpan(const SchedulerEvent& event) const;
  void Enqueue(std::vector<Span> spans);
  void SendLoop();
  // Sends one batch with `timeout`; updates the counters.
  void Send(const std::vector<Span>& batch, Duration timeout);

  const TracingOptions options_;
  Clock& clock_;
  std::string host_name_;
  const net::HttpClient client_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, OpenAttempt> open_;     // by run id
  std::map<uint64_t, std::string> open_order_;  // seq -> run id, oldest first
  uint64_t next_seq_ = 0;
  std::deque<Span> queue_;
  bool stopping_ = false;
  Stats stats_;

  std::mutex stop_mu_;  // serializes Stop()
  std::jthread sender_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_TRACING_H_
