// EngineContext: the options, interfaces and helpers the scheduler's parts share.
#include "src/schedule/engine_context.h"

#include <algorithm>

namespace gnomon::internal {
namespace {

// A clock-skew sample whose round trip took longer than this is ignored.
constexpr Duration kMaxSkewSampleRtt = std::chrono::milliseconds(250);

}  // namespace

std::string_view ReasonText(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kTimeout:
      return "timed out";
    case StopReason::kLeaseLost:
      return "lease lost: fenced off by the backend";
    case StopReason::kSelfFenced:
      return "self-fenced: could not renew the lease before ttl - margin";
    case StopReason::kReplaced:
      return "replaced by a newer fire (overlap = replace)";
    case StopReason::kShutdown:
      return "cancelled by graceful shutdown";
  }
  return "";
}

EngineContext::EngineContext(SchedulerOptions options, Coordinator& coordinator, Executor& executor,
                             Clock& clock)
    : options_(std::move(options)),
      coord_(coordinator),
      exec_(executor),
      clock_(clock),
      margin_(options_.lease_margin.value_or(options_.lease_ttl / 3)),
      ahead_(std::clamp(options_.claim_ahead, Duration(0), options_.skew_tolerance / 2)),
      rng_(options_.random_seed ? options_.random_seed : std::random_device{}()) {}

Duration EngineContext::MeasureSkew() {
  const Instant before = clock_.Now();
  Result<Instant> backend_now = coord_.Now();
  const Instant after = clock_.Now();
  // A slow answer (a hung backend) says little about the clocks: its midpoint may be off by
  // seconds, which would move every fire. Keep the last good value then.
  if (!backend_now.ok() || after - before > kMaxSkewSampleRtt) return skew();
  const Duration skew = (before + (after - before) / 2) - *backend_now;
  skew_ms_ = skew.count();
  return skew;
}

void EngineContext::StartPool() {
  pool_ = std::make_unique<WorkerPool>(std::max(1, options_.worker_threads));
}

Duration EngineContext::AheadOf(const JobSpec& spec) const {
  return spec.overlap == OverlapPolicy::kAllow ? ahead_ : Duration(0);
}

ClaimRequest EngineContext::RequestFor(const JobSpec& spec, const FireKey& fire) const {
  return ClaimRequest{fire, options_.node_id, options_.lease_ttl, options_.skew_tolerance,
                      spec.overlap};
}

RunRecord EngineContext::BaseRecord(const FireKey& fire, const Claim& claim) const {
  RunRecord rec;
  rec.run_id = fire.RunId();
  rec.job_id = fire.job_id;
  rec.scheduled_at = fire.scheduled_at;
  rec.shard = fire.shard;
  rec.shard_count = fire.shard_count;
  rec.attempt = claim.attempt;
  rec.fencing_token = claim.fencing_token;
  rec.node_id = options_.node_id;
  rec.started_at = Now();
  rec.cause = claim.cause;
  return rec;
}

RunRecord EngineContext::NotRunRecord(const Claim& claim, RunOutcome outcome,
                                      std::string error) const {
  RunRecord rec = BaseRecord(claim.fire, claim);
  rec.outcome = outcome;
  rec.error = std::move(error);
  rec.finished_at = Now();
  return rec;
}

int64_t EngineContext::RandomBelow(int64_t n) {
  MutexLock lock(rng_mu_);
  return std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(0, n - 1))(rng_);
}

std::string EngineContext::TraceParent() {
  uint64_t trace_hi, trace_lo, span;
  {
    MutexLock lock(rng_mu_);
    trace_hi = rng_() | 1;
    trace_lo = rng_();
    span = rng_() | 1;
  }
  // Formatted by hand: one per attempt.
  std::string out = "00-00000000000000000000000000000000-0000000000000000-01";
  auto hex = [&out](size_t at, uint64_t v) {
    for (int i = 15; i >= 0; --i, v >>= 4) out[at + i] = "0123456789abcdef"[v & 0xf];
  };
  hex(3, trace_hi);
  hex(19, trace_lo);
  hex(36, span);
  return out;
}

SchedulerEvent EngineContext::MakeEvent(SchedulerEvent::Kind kind, const FireKey& fire) const {
  SchedulerEvent ev{};
  ev.kind = kind;
  ev.job_id = fire.job_id;
  ev.run_id = fire.job_id.empty() ? "" : fire.RunId();
  ev.scheduled_at = fire.scheduled_at;
  ev.at = Now();
  return ev;
}

SchedulerEvent EngineContext::MakeEvent(SchedulerEvent::Kind kind, const FireKey& fire,
                                        const Claim& claim) const {
  SchedulerEvent ev = MakeEvent(kind, fire);
  ev.attempt = claim.attempt;
  ev.fencing_token = claim.fencing_token;
  return ev;
}

void EngineContext::Emit(SchedulerEvent::Kind kind, const FireKey& fire, std::string detail) const {
  if (!options_.observer) return;
  SchedulerEvent ev = MakeEvent(kind, fire);
  ev.detail = std::move(detail);
  Notify(ev);
}

void EngineContext::Notify(const SchedulerEvent& ev) const {
  if (options_.observer) options_.observer->OnEvent(ev);
}

}  // namespace gnomon::internal
