#include "gnomon/etcd_coordinator.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include "src/coord/coordinator_util.h"
#include "src/coord/etcd/etcd_audit.h"
#include "src/coord/etcd/etcd_client.h"
#include "src/coord/etcd/etcd_definitions.h"
#include "src/coord/etcd/etcd_fires.h"
#include "src/coord/etcd/etcd_history.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"
#include "src/coord/etcd/etcd_nodes.h"

namespace gnomon {
namespace {

using coord::etcd::EtcdKeyspace;
using coord::etcd::json;
using coord::etcd::ParseI64;

// Time Open() may spend calibrating the server clock estimate (two sweeps take 1-2 s).
constexpr Duration kOpenCalibrationBudget = std::chrono::milliseconds(2200);
// Time one later recalibration may take, and the pause after one that failed or fell short.
constexpr Duration kCalibrationBudget = std::chrono::seconds(3);
constexpr Duration kCalibrationPause = std::chrono::seconds(1);

Status ValidateOptions(EtcdOptions& o) {
  if (o.endpoints.empty()) return InvalidArgumentError("etcd: no endpoints");
  for (const auto& [host, port] : o.endpoints) {
    if (host.empty()) return InvalidArgumentError("etcd: an endpoint has no host");
    if (port < 1 || port > 65535) {
      return InvalidArgumentError("etcd: endpoint " + host + ": port " + std::to_string(port) +
                                  " is not 1-65535");
    }
  }
  if (o.prefix.empty()) return InvalidArgumentError("etcd: prefix is empty");
  if (o.prefix.size() > 200) return InvalidArgumentError("etcd: prefix is longer than 200");
  for (char c : o.prefix) {
    if (c <= ' ' || c > '~') {
      return InvalidArgumentError("etcd: prefix \"" + o.prefix +
                                  "\" has a space or non-printable character");
    }
  }
  if (o.prefix.back() != '/') o.prefix += '/';
  if (o.connect_timeout <= Duration(0) || o.io_timeout <= Duration(0)) {
    return InvalidArgumentError("etcd: connect_timeout and io_timeout must be positive");
  }
  if (o.reconnect_backoff_min <= Duration(0) || o.reconnect_backoff_max < o.reconnect_backoff_min) {
    return InvalidArgumentError("etcd: need 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (o.max_records_per_job < 1 || o.max_records_total < 1) {
    return InvalidArgumentError("etcd: max_records_per_job and max_records_total must be >= 1");
  }
  if (o.max_idle_connections < 1) {
    return InvalidArgumentError("etcd: max_idle_connections must be >= 1");
  }
  if (!o.tls.enabled && o.tls != TlsOptions{}) {
    return InvalidArgumentError("etcd: TLS options need https:// endpoints");
  }
  if (!o.tls.server_name.empty()) {
    return InvalidArgumentError(
        "etcd: tls_server_name is not supported: write each endpoint as its certificate names it");
  }
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    return InvalidArgumentError("etcd: tls_cert and tls_key go together");
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

// The client, the backend clock and its keeper, and the role parts over them (key names from
// the EtcdKeyspace base): fires: EtcdFires (etcd_fires.h); history: EtcdHistory
// (etcd_history.h); definitions and job state: EtcdDefinitions (etcd_definitions.h); nodes:
// EtcdNodes (etcd_nodes.h); the audit log: EtcdAudit (etcd_audit.h).
class EtcdCoordinator::Impl : private EtcdKeyspace {
 public:
  Impl(const EtcdOptions& options, coord::EtcdClientOptions client_options)
      : EtcdKeyspace(options.prefix),
        options_(options),
        p_(options.prefix),
        client_(std::make_unique<coord::EtcdClient>(WithClockReset(std::move(client_options)))) {}

  // `o` telling the clock keeper when the server clock estimate restarts.
  coord::EtcdClientOptions WithClockReset(coord::EtcdClientOptions o) {
    o.on_clock_reset = [this] {
      std::lock_guard<std::mutex> lock(keeper_mu_);
      clock_reset_ = true;
      keeper_cv_.notify_all();
    };
    return o;
  }

  // --- Time ----------------------------------------------------------------------------------
  // The backend clock: EtcdOptions::clock when set, else the server clock estimate (this host's
  // clock only before the first response carrying a Date header).
  Instant Now() const {
    if (options_.clock) return options_.clock->Now();
    if (std::optional<coord::ServerClock::Reading> r = client_->ServerNow()) return r->now;
    return SystemClock::Get().Now();
  }
  std::optional<Duration> ClockUncertainty() const {
    if (options_.clock) return std::nullopt;
    std::optional<coord::ServerClock::Reading> r = client_->ServerNow();
    if (!r) return std::nullopt;
    return r->uncertainty;
  }
  // A cheap request whose answer carries the member's Date: a serializable count of a key that
  // never exists.
  json ClockProbe() const {
    return json{
        {"key", coord::Base64Encode(p_ + "clock")}, {"serializable", true}, {"count_only", true}};
  }
  Status CalibrateClock(Duration budget, std::stop_token stop = {}) {
    return client_->CalibrateClock("/v3/kv/range", ClockProbe(), budget, std::move(stop));
  }
  // Keeps the estimate calibrated: sweeps again when it was restarted (a clock step) or drift
  // has widened it to 4 x its target.
  void StartClockKeeper() {
    keeper_ = std::jthread([this](std::stop_token stop) { KeepClock(stop); });
  }
  void KeepClock(std::stop_token stop) {
    std::stop_callback wake(stop, [this] {
      std::lock_guard<std::mutex> lock(keeper_mu_);
      keeper_cv_.notify_all();
    });
    Duration not_before{0};
    while (!stop.stop_requested()) {
      {
        std::unique_lock<std::mutex> lock(keeper_mu_);
        // At most one calibration per kCalibrationPause, even if clocks keep stepping.
        SystemClock::Get().WaitUntilSteady(lock, keeper_cv_, not_before,
                                           [&] { return stop.stop_requested(); });
        const Duration due = client_->ClockStaleAt(client_->ClockTarget() * 4);
        SystemClock::Get().WaitUntilSteady(lock, keeper_cv_, due,
                                           [&] { return stop.stop_requested() || clock_reset_; });
        if (stop.stop_requested()) return;
        clock_reset_ = false;
      }
      (void)CalibrateClock(kCalibrationBudget, stop);  // a failure: the next round retries
      not_before = SystemClock::Get().SteadyNow() + kCalibrationPause;
    }
  }

  coord::etcd::EtcdFires& fires() { return fires_; }
  coord::etcd::EtcdHistory& history() { return history_; }
  coord::etcd::EtcdDefinitions& definitions() { return definitions_; }
  coord::etcd::EtcdNodes& nodes() { return nodes_; }
  coord::etcd::EtcdAudit& audit() { return audit_; }

 private:
  const EtcdOptions options_;
  const std::string p_;
  std::unique_ptr<coord::EtcdClient> client_;
  coord::etcd::EtcdKv kv_{*client_};
  coord::etcd::EtcdHistory history_{kv_, *this, options_.max_records_per_job,
                                    options_.max_records_total};
  coord::etcd::EtcdFires fires_{kv_, *this, history_, [this] { return Now(); }};
  coord::etcd::EtcdDefinitions definitions_{kv_, *this};
  coord::etcd::EtcdNodes nodes_{kv_, *this, [this] { return Now(); }};
  coord::etcd::EtcdAudit audit_{kv_, *this, [this] { return Now(); }};
  std::mutex keeper_mu_;
  std::condition_variable keeper_cv_;
  bool clock_reset_ = false;  // guarded by keeper_mu_
  std::jthread keeper_;       // last: stopped and joined before the members it uses go
};

// ---------------------------------------------------------------------------------------------

Result<EtcdOptions> ParseEtcdUrl(std::string_view url, EtcdOptions base) {
  auto bad = [&](const std::string& why) {
    // Never echo the credentials: show the URL without its user-info part.
    std::string shown(url.substr(0, 300));
    const size_t scheme = shown.find("://");
    const size_t at = shown.rfind('@');
    if (at != std::string::npos && scheme != std::string::npos && at > scheme) {
      shown = shown.substr(0, scheme + 3) + "***@" + shown.substr(at + 1);
    }
    return InvalidArgumentError("etcd URL \"" + shown + "\": " + why);
  };
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme)) return bad("does not start with etcd://");
  std::string_view rest = url.substr(kScheme.size());
  auto decode = [](std::string_view in, std::string& out) {
    Result<std::string> decoded = PercentDecode(in);
    if (decoded.ok()) out = std::move(*decoded);
    return decoded.ok();
  };
  // The user-info ends at the last '@'; the query (TLS parameters) starts at the first '?' after.
  const size_t at = rest.rfind('@');
  const size_t question = rest.find('?', at == std::string_view::npos ? 0 : at + 1);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view() : rest.substr(question + 1);
  rest = rest.substr(0, question);
  if (at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (!decode(userinfo.substr(0, colon), base.user)) return bad("bad user encoding");
    if (base.user.empty()) return bad("empty user name");
    base.password.clear();
    if (colon != std::string_view::npos && !decode(userinfo.substr(colon + 1), base.password)) {
      return bad("bad password encoding");
    }
  }
  // Endpoints written with their scheme, as etcd's own tools take them: https:// for TLS (all of
  // them), http:// or none for plain TCP.
  const bool https = rest.starts_with("https://");
  std::string endpoints;
  for (std::string_view item = rest;;) {
    const size_t comma = item.find(',');
    std::string_view one = item.substr(0, comma);
    if (one.empty()) return bad("missing host (an empty endpoint)");
    const bool one_https = one.starts_with("https://");
    if (one_https != https) return bad("either every endpoint is https:// or none");
    if (one_https) one.remove_prefix(8);
    if (one.starts_with("http://")) one.remove_prefix(7);
    if (!endpoints.empty()) endpoints += ',';
    endpoints += one;
    if (comma == std::string_view::npos) break;
    item.remove_prefix(comma + 1);
  }
  base.tls = TlsOptions{};
  base.tls.enabled = https;
  if (!query.empty() || question != std::string_view::npos) {
    Result<TlsOptions> tls =
        ParseTlsQuery(query, https, "write the endpoints as https://host:port");
    if (!tls.ok()) return bad(tls.status().message());
    base.tls = *tls;
  }
  rest = endpoints;
  const size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash + 1);
    if (path.empty()) return bad("empty prefix after '/'");
    base.prefix = std::string(path);
    if (base.prefix.back() != '/') base.prefix += '/';
  }
  base.endpoints.clear();
  while (true) {
    const size_t comma = hosts.find(',');
    std::string_view hp = hosts.substr(0, comma);
    const size_t colon = hp.rfind(':');
    std::string_view host = hp.substr(0, colon);
    if (host.empty()) return bad("missing host (an endpoint has none)");
    if (std::any_of(host.begin(), host.end(), [](char c) { return c <= ' ' || c > '~'; })) {
      return bad("an endpoint's host has a space or non-printable character");
    }
    int64_t port = 2379;
    if (colon != std::string_view::npos &&
        (!ParseI64(hp.substr(colon + 1), port) || port < 1 || port > 65535)) {
      return bad("port is not 1-65535");
    }
    base.endpoints.emplace_back(std::string(host), static_cast<int>(port));
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  Status valid = ValidateOptions(base);
  if (!valid.ok()) return bad(valid.message());
  return base;
}

Result<std::unique_ptr<EtcdCoordinator>> EtcdCoordinator::Open(const EtcdOptions& options) {
  EtcdOptions o = options;
  GNOMON_RETURN_IF_ERROR(ValidateOptions(o));
  coord::EtcdClientOptions co;
  co.endpoints = o.endpoints;
  co.user = o.user;
  co.password = o.password;
  co.tls = o.tls;
  co.connect_timeout = o.connect_timeout;
  co.io_timeout = o.io_timeout;
  co.backoff_min = o.reconnect_backoff_min;
  co.backoff_max = o.reconnect_backoff_max;
  co.max_idle_connections = o.max_idle_connections;
  auto impl = std::make_unique<Impl>(o, std::move(co));
  try {
    Result<int64_t> probe = [&]() -> Result<int64_t> {
      Result<std::pair<int64_t, int64_t>> v = impl->definitions().VersionAt();
      if (!v.ok()) return v.status();
      return v->first;
    }();
    if (!probe.ok()) return probe.status();
    if (!o.clock) {
      // Narrow the server clock estimate before the first claim depends on it; a failure here
      // leaves a wider estimate that the keeper narrows later.
      (void)impl->CalibrateClock(kOpenCalibrationBudget);
      impl->StartClockKeeper();
    }
  } catch (const std::exception& e) {
    return InternalError(std::string("etcd: ") + e.what());
  }
  return std::unique_ptr<EtcdCoordinator>(new EtcdCoordinator(std::move(impl)));
}

EtcdCoordinator::EtcdCoordinator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdCoordinator::~EtcdCoordinator() = default;

// Every call runs inside Guarded: a JSON exception (an unexpected response shape) becomes an
// Internal status here and never leaves the module.
namespace {
template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return InternalError(std::string("etcd: ") + e.what());
  }
}
}  // namespace

Result<Instant> EtcdCoordinator::Now() { return impl_->Now(); }
std::optional<Duration> EtcdCoordinator::ClockUncertainty() const {
  return impl_->ClockUncertainty();
}
Result<ClaimOutcome> EtcdCoordinator::Claim(const ClaimRequest& req) {
  return Guarded([&] { return impl_->fires().Claim(req); });
}
Status EtcdCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return Guarded([&] { return impl_->fires().Renew(claim, ttl); });
}
Result<gnomon::Claim> EtcdCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return Guarded([&] { return impl_->fires().NextAttempt(claim, ttl); });
}
Status EtcdCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return Guarded([&] { return impl_->fires().Report(claim, record, final); });
}
Result<std::vector<ExpiredFire>> EtcdCoordinator::ListExpired(int limit) {
  return Guarded([&] { return impl_->fires().ListExpired(limit); });
}
Result<std::optional<gnomon::Claim>> EtcdCoordinator::ResolveLost(const ExpiredFire& fire,
                                                                  const std::string& node_id,
                                                                  LostPolicy policy, Duration ttl) {
  return Guarded([&] { return impl_->fires().ResolveLost(fire, node_id, policy, ttl); });
}
Status EtcdCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                      const std::string& reason) {
  return Guarded([&] { return impl_->fires().RecordSkipped(fire, node_id, reason); });
}
Result<std::vector<bool>> EtcdCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  return Guarded([&] { return impl_->fires().FiresRecorded(fires); });
}
Status EtcdCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return Guarded([&] { return impl_->fires().SaveCheckpoint(claim, value); });
}
Status EtcdCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return Guarded([&] { return impl_->fires().SaveLiveOutput(claim, output); });
}
Result<std::optional<std::string>> EtcdCoordinator::LoadCheckpoint(const FireKey& fire) {
  return Guarded([&] { return impl_->fires().LoadCheckpoint(fire); });
}
Result<JobState> EtcdCoordinator::GetJobState(const std::string& job_id) {
  return Guarded([&] { return impl_->definitions().GetJobState(job_id); });
}
Status EtcdCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  return Guarded([&] { return impl_->fires().CancelFire(fire, reason); });
}
Result<gnomon::Claim> EtcdCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                 Duration ttl, const std::string& cause) {
  return Guarded([&] { return impl_->fires().RerunFire(fire, node_id, ttl, cause); });
}
Status EtcdCoordinator::SetPaused(const std::string& job_id, bool paused,
                                  const std::string& reason) {
  return Guarded([&] { return impl_->definitions().SetPaused(job_id, paused, reason); });
}
Result<RunPage> EtcdCoordinator::ListRuns(const RunQuery& query) {
  return Guarded([&] { return impl_->history().ListRuns(query); });
}
Result<std::vector<RunRecord>> EtcdCoordinator::GetRun(const std::string& run_id) {
  return Guarded([&] { return impl_->history().GetRun(run_id); });
}
Status EtcdCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return Guarded(
      [&] { return impl_->history().PruneHistory(job_id, keep_last, max_age, impl_->Now()); });
}
Status EtcdCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  return Guarded([&] { return impl_->nodes().Heartbeat(node, ttl); });
}
Result<std::vector<NodeInfo>> EtcdCoordinator::ListNodes() {
  return Guarded([&] { return impl_->nodes().ListNodes(); });
}
Result<int64_t> EtcdCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                        int64_t expected_version) {
  return Guarded([&] { return impl_->definitions().PutJob(job_id, definition, expected_version); });
}
Result<StoredJob> EtcdCoordinator::GetJob(const std::string& job_id) {
  return Guarded([&] { return impl_->definitions().GetJob(job_id); });
}
Status EtcdCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  return Guarded([&] { return impl_->definitions().DeleteJob(job_id, expected_version); });
}
Result<std::vector<StoredJob>> EtcdCoordinator::ListJobs() {
  return Guarded([&] { return impl_->definitions().ListJobs(); });
}
Result<int64_t> EtcdCoordinator::JobsVersion() {
  return Guarded([&] {
    return [&]() -> Result<int64_t> {
      Result<std::pair<int64_t, int64_t>> v = impl_->definitions().VersionAt();
      if (!v.ok()) return v.status();
      return v->first;
    }();
  });
}
Result<int64_t> EtcdCoordinator::WaitJobsChange(int64_t since, Duration timeout) {
  return Guarded([&] { return impl_->definitions().WaitJobsChange(since, timeout, *this); });
}
Result<int64_t> EtcdCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  return Guarded([&] { return impl_->audit().AppendAudit(record, keep); });
}
Result<std::vector<AuditRecord>> EtcdCoordinator::ListAudit(int limit, int64_t before_seq) {
  return Guarded([&] { return impl_->audit().ListAudit(limit, before_seq); });
}

}  // namespace gnomon
