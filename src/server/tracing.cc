// OtlpExporter: spans from scheduler events, queued and sent in batches (encoded by
// EncodeOtlpBatch, otlp_span.h) through net::HttpClient.
#include "src/server/tracing.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <utility>

#include "src/net/http_url.h"
#include "src/server/otlp_span.h"

namespace gnomon::server {
namespace {

using Kind = SchedulerEvent::Kind;

net::HttpClientOptions ClientOptions(const TracingOptions& o) {
  net::HttpClientOptions c;
  c.total_timeout = o.timeout;
  c.connect_timeout = o.timeout;
  c.max_body_bytes = 1024;  // only the status matters; the rest of an answer is dropped
  c.tls = o.tls;
  c.egress = o.egress;
  return c;
}

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool AllZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

// FNV-1a, then the splitmix64 finalizer so that close inputs give unrelated ids.
uint64_t Hash64(std::string_view s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A derived id is never all zeros (an invalid id in W3C and OTLP).
std::string DerivedSpanId(std::string_view key) { return Hex64(Hash64(key, 0x5a) | 1); }
std::string DerivedTraceId(std::string_view run_id) {
  return Hex64(Hash64(run_id, 0x7a) | 1) + Hex64(Hash64(run_id, 0x7b));
}

bool IsError(RunOutcome o) {
  return o == RunOutcome::kFailed || o == RunOutcome::kTimedOut || o == RunOutcome::kLost;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// SchedulerEvent::traceparent once the engine has it (see the header); "" until then. A template,
// so that the requires-expression is a test rather than an error while the member is missing.
template <typename Event>
std::string_view EventTraceparent(const Event& event) {
  if constexpr (requires { event.traceparent; }) {
    return event.traceparent;
  } else {
    return {};
  }
}

}  // namespace

Status ValidateTracingOptions(const TracingOptions& options) {
  if (options.endpoint.empty()) {
    return InvalidArgumentError(
        "tracing.endpoint: is required (an OTLP/HTTP URL such as "
        "http://localhost:4318/v1/traces)");
  }
  Result<net::HttpUrl> endpoint = net::ParseHttpUrl(options.endpoint);
  if (!endpoint.ok()) return endpoint.status().WithPrefix("tracing.endpoint");
  if (Status tls = net::ValidateTlsOptions(options.tls); !tls.ok()) {
    return InvalidArgumentError("tracing." + tls.message());  // "tracing.tls.ca_file: ..."
  }
  if (options.service_name.empty()) {
    return InvalidArgumentError("tracing.service_name: must not be empty");
  }
  if (options.queue_capacity == 0) {
    return InvalidArgumentError("tracing.queue_capacity: must be at least 1");
  }
  if (options.max_batch == 0) return InvalidArgumentError("tracing.max_batch: must be at least 1");
  auto in_range = [](Duration d) { return d > Duration::zero() && d <= kMaxConfigDuration; };
  if (!in_range(options.flush_interval)) {
    return InvalidArgumentError(
        "tracing.flush_interval: " + FormatDuration(options.flush_interval) +
        " must be positive and at most 100 years");
  }
  if (!in_range(options.timeout)) {
    return InvalidArgumentError("tracing.timeout: " + FormatDuration(options.timeout) +
                                " must be positive and at most 100 years");
  }
  return Status::Ok();
}

std::optional<TraceContext> ParseTraceparent(std::string_view tp) {
  // version "-" trace-id "-" parent-id "-" flags; a later version may append "-" fields.
  if (tp.size() < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-') return std::nullopt;
  const std::string_view version = tp.substr(0, 2);
  if (!IsLowerHex(version) || version == "ff") return std::nullopt;
  if (version == "00" ? tp.size() != 55 : (tp.size() > 55 && tp[55] != '-')) return std::nullopt;
  const std::string_view trace_id = tp.substr(3, 32);
  const std::string_view span_id = tp.substr(36, 16);
  if (!IsLowerHex(trace_id) || !IsLowerHex(span_id) || !IsLowerHex(tp.substr(53, 2))) {
    return std::nullopt;
  }
  if (AllZero(trace_id) || AllZero(span_id)) return std::nullopt;
  return TraceContext{std::string(trace_id), std::string(span_id)};
}

OtlpExporter::OtlpExporter(TracingOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      host_name_(HostName()),
      client_(ClientOptions(options_)) {
  GNOMON_CHECK(ValidateTracingOptions(options_).ok());
  sender_ = std::jthread([this] { SendLoop(); });
}

OtlpExporter::~OtlpExporter() { Stop(); }

void OtlpExporter::OnEvent(const SchedulerEvent& event) { Record(event, EventTraceparent(event)); }

OtlpExporter::OpenAttempt& OtlpExporter::OpenLocked(const std::string& run_id, int attempt) {
  auto it = open_.find(run_id);
  if (it != open_.end() && it->second.attempt != attempt) {  // its end was never seen
    ++stats_.spans_dropped;
    CloseLocked(run_id);
    it = open_.end();
  }
  if (it == open_.end()) {
    while (open_.size() >= options_.queue_capacity && !open_order_.empty()) {
      ++stats_.spans_dropped;  // e.g. a fire dispatched to a queue worker: no end event here
      const std::string oldest = open_order_.begin()->second;
      CloseLocked(oldest);
    }
    it = open_.emplace(run_id, OpenAttempt{}).first;
    it->second.attempt = attempt;
    it->second.seq = next_seq_++;
    open_order_.emplace(it->second.seq, run_id);
  }
  return it->second;
}

void OtlpExporter::CloseLocked(const std::string& run_id) {
  auto it = open_.find(run_id);
  if (it == open_.end()) return;
  open_order_.erase(it->second.seq);
  open_.erase(it);
}

void OtlpExporter::Record(const SchedulerEvent& event, std::string_view traceparent) {
  std::vector<Span> spans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    switch (event.kind) {
      case Kind::kClaimed: {
        OpenAttempt& a = OpenLocked(event.run_id, event.attempt);
        a.job_id = event.job_id;
        a.fencing_token = event.fencing_token;
        a.claim_start = std::min(event.scheduled_at, event.at);
        a.claim_end = event.at;
        break;
      }
      case Kind::kRetryScheduled: {
        OpenAttempt& a = OpenLocked(event.run_id, event.attempt);
        a.job_id = event.job_id;
        a.claim_start = event.at;
        break;
      }
      case Kind::kRunStarted: {
        OpenAttempt& a = OpenLocked(event.run_id, event.attempt);
        a.job_id = event.job_id;
        a.fencing_token = event.fencing_token;
        a.run_start = event.at;
        if (a.claim_start && !a.claim_end) a.claim_end = std::max(*a.claim_start, event.at);
        if (!traceparent.empty()) a.traceparent = std::string(traceparent);
        break;
      }
      case Kind::kRunFinished: {
        OpenAttempt a = OpenLocked(event.run_id, event.attempt);
        CloseLocked(event.run_id);
        a.job_id = event.job_id;
        if (event.fencing_token != 0) a.fencing_token = event.fencing_token;
        if (!traceparent.empty()) a.traceparent = std::string(traceparent);
        if (!a.run_start) a.run_start = event.at - event.duration;  // its start was not seen
        spans =
            AttemptSpans(event.run_id, a, event.outcome, event.at, event.duration, event.detail);
        break;
      }
      case Kind::kSkipped: {
        // Only a claimed fire refused by admission is an attempt; other skips never were.
        auto it = open_.find(event.run_id);
        if (it == open_.end() || it->second.run_start) break;
        OpenAttempt a = it->second;
        CloseLocked(event.run_id);
        spans = AttemptSpans(event.run_id, a, RunOutcome::kSkipped, event.at, Duration::zero(),
                             event.detail);
        break;
      }
      case Kind::kLostRun:
        spans = LostSpan(event);
        break;
      default:
        break;
    }
  }
  if (!spans.empty()) Enqueue(std::move(spans));
}

std::vector<OtlpExporter::Span> OtlpExporter::AttemptSpans(const std::string& run_id,
                                                           const OpenAttempt& a, RunOutcome outcome,
                                                           Instant finished_at,
                                                           Duration run_duration,
                                                           const std::string& detail) const {
  const std::optional<TraceContext> ctx = ParseTraceparent(a.traceparent);
  const std::string trace_id = ctx ? ctx->trace_id : DerivedTraceId(run_id);
  const std::string key = trace_id + "/" + run_id + "/" + std::to_string(a.attempt) + "/";
  const std::string attempt_id = DerivedSpanId(key + "attempt");
  const std::vector<Attribute> common = {
      {"gnomon.job", a.job_id},
      {"gnomon.run_id", run_id},
      {"gnomon.node", options_.node_id},
      {"gnomon.fencing_token", "", a.fencing_token, true},
      {"gnomon.attempt", "", a.attempt, true},
  };
  const Attribute outcome_attr{"gnomon.outcome", std::string(ToString(outcome))};
  const bool error = IsError(outcome);

  std::vector<Span> spans;
  Span root;
  root.trace_id = trace_id;
  root.span_id = attempt_id;
  root.name = "fire " + a.job_id;
  root.start = a.claim_start ? std::min(*a.claim_start, finished_at)
                             : std::min(a.run_start.value_or(finished_at), finished_at);
  root.end = finished_at;
  root.attributes = common;
  root.attributes.push_back(outcome_attr);
  root.error = error;
  if (error) root.status_message = detail;
  spans.push_back(root);

  auto child = [&](std::string name, Instant start, Instant end) {
    Span s;
    s.trace_id = trace_id;
    s.span_id = DerivedSpanId(key + name);
    s.parent_span_id = attempt_id;
    s.name = std::move(name);
    s.start = std::clamp(start, root.start, root.end);
    s.end = std::clamp(end, s.start, root.end);
    s.attributes = common;
    return s;
  };
  if (a.claim_start) {
    spans.push_back(child("claim", *a.claim_start, a.claim_end.value_or(*a.claim_start)));
  }
  if (a.run_start) {
    // The run's end on the wall clock: its start plus the monotonic duration, bounded by the
    // finish event (ms rounding or a wall-clock step may otherwise push it past).
    const Instant run_end =
        std::min(*a.run_start + std::max(run_duration, Duration::zero()), finished_at);
    Span run = child("run", *a.run_start, run_end);
    if (ctx) run.span_id = ctx->span_id;  // the job's spans name it as their parent
    run.attributes.push_back(outcome_attr);
    run.error = error;
    if (error) run.status_message = detail;
    spans.push_back(run);
    spans.push_back(child("complete", run.end, finished_at));
  }
  return spans;
}

std::vector<OtlpExporter::Span> OtlpExporter::LostSpan(const SchedulerEvent& event) const {
  Span s;
  s.trace_id = DerivedTraceId(event.run_id);
  s.span_id = DerivedSpanId(s.trace_id + "/" + event.run_id + "/" + std::to_string(event.attempt) +
                            "/lost");
  s.name = "lost " + event.job_id;
  s.start = event.at;
  s.end = event.at;
  s.attributes = {
      {"gnomon.job", event.job_id},
      {"gnomon.run_id", event.run_id},
      {"gnomon.node", options_.node_id},
      {"gnomon.fencing_token", "", event.fencing_token, true},
      {"gnomon.attempt", "", event.attempt, true},
      {"gnomon.outcome", std::string(ToString(RunOutcome::kLost))},
  };
  s.error = true;
  s.status_message = event.detail;
  return {s};
}

void OtlpExporter::Enqueue(std::vector<Span> spans) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || queue_.size() + spans.size() > options_.queue_capacity) {
    stats_.spans_dropped += spans.size();  // an attempt is kept or dropped whole
    return;
  }
  for (Span& s : spans) queue_.push_back(std::move(s));
  if (queue_.size() >= options_.max_batch) cv_.notify_all();
}

void OtlpExporter::Send(const std::vector<Span>& batch, Duration timeout) {
  std::string error;
  net::HttpRequest req;
  req.method = "POST";
  req.url = options_.endpoint;
  req.headers = {{"Content-Type", "application/json"}};
  req.timeout = timeout;
  try {
    req.body =
        EncodeOtlpBatch(batch, OtlpResource{options_.service_name, options_.node_id, host_name_});
  } catch (const std::exception& e) {
    error = std::string("encoding the batch: ") + e.what();
  }
  if (error.empty()) {
    Result<net::HttpResponse> res = client_.Send(req);
    if (!res.ok()) {
      error = res.status().message();
    } else if (res->status < 200 || res->status > 299) {
      error = "POST " + net::RedactUrl(options_.endpoint) + ": HTTP status " +
              std::to_string(res->status);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error.empty()) {
    stats_.spans_exported += batch.size();
  } else {
    ++stats_.batches_failed;
    stats_.spans_dropped += batch.size();
    stats_.last_error = std::move(error);
  }
}

void OtlpExporter::SendLoop() {
  auto take = [this] {  // REQUIRES: mu_ held
    const size_t n = std::min(queue_.size(), options_.max_batch);
    std::vector<Span> batch(std::make_move_iterator(queue_.begin()),
                            std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
    return batch;
  };
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    // A full batch goes at once; otherwise whatever is queued goes after flush_interval.
    clock_.WaitFor(lock, cv_, options_.flush_interval,
                   [this] { return stopping_ || queue_.size() >= options_.max_batch; });
    if (stopping_ || queue_.empty()) continue;
    std::vector<Span> batch = take();
    lock.unlock();
    Send(batch, options_.timeout);
    lock.lock();
  }
  // Stop(): flush within the budget, drop the rest.
  const Duration deadline = clock_.SteadyNow() + options_.timeout;
  while (!queue_.empty()) {
    const Duration left = deadline - clock_.SteadyNow();
    if (left <= Duration::zero()) {
      stats_.spans_dropped += queue_.size();
      queue_.clear();
      break;
    }
    std::vector<Span> batch = take();
    lock.unlock();
    Send(batch, left);
    lock.lock();
  }
}

void OtlpExporter::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    stats_.spans_dropped += open_.size();  // attempts that will not finish before we stop
    open_.clear();
    open_order_.clear();
    cv_.notify_all();
  }
  if (sender_.joinable()) sender_.join();
}

OtlpExporter::Stats OtlpExporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace gnomon::server
