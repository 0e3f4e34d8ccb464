#include "apps/gnomon/node_options.h"

#include <unistd.h>

namespace gnomon::app {
namespace {

SchedulerOptions SchedulerOptionsFor(const ServeConfig& config) {
  SchedulerOptions o;
  o.node_id = config.node_id;
  o.claim_grace = config.scheduler.claim_grace;
  o.skew_tolerance = config.scheduler.skew_tolerance;
  o.claim_ahead = config.scheduler.claim_ahead;
  o.lease_ttl = config.scheduler.lease_ttl;
  o.worker_threads = config.scheduler.worker_threads;
  o.shutdown_grace = config.scheduler.shutdown_grace;
  o.housekeeping_interval = config.scheduler.heartbeat_interval;
  o.live_output_interval = config.scheduler.live_output_interval;
  return o;
}

Result<std::vector<server::ApiToken>> Tokens(const ServeConfig& config) {
  std::vector<server::ApiToken> tokens;
  for (const TokenConfig& t : config.tokens) {
    Result<server::TokenRole> role = server::ParseTokenRole(t.role);
    if (!role.ok()) return role.status().WithPrefix(t.source + ": token \"" + t.name + "\"");
    tokens.push_back(
        server::ApiToken{t.name, t.secret, *role, t.namespaces, t.mutations_per_minute, t.subject});
  }
  GNOMON_RETURN_IF_ERROR(server::ValidateTokens(tokens));
  return tokens;
}

std::vector<server::NamespaceQuota> Quotas(const ServeConfig& config) {
  std::vector<server::NamespaceQuota> out;
  for (const QuotaConfig& q : config.quotas) {
    out.push_back(server::NamespaceQuota{q.ns, q.max_jobs, q.max_concurrent_runs});
  }
  return out;
}

std::vector<server::ExecutorPolicy> Policies(const ServeConfig& config) {
  std::vector<server::ExecutorPolicy> out;
  for (const PolicyConfig& p : config.policies) out.push_back(p.policy);
  return out;
}

std::vector<server::AlertTarget> Alerts(const ServeConfig& config) {
  std::vector<server::AlertTarget> out;
  for (const AlertConfig& a : config.alerts) {
    out.push_back(server::AlertTarget{a.name, a.url, a.secret, a.events, a.jobs});
  }
  return out;
}

TlsOptions HttpTls(const ServeConfig& config) {
  TlsOptions tls;
  tls.ca_file = config.http_client.tls_ca;
  tls.cert_file = config.http_client.tls_cert;
  tls.key_file = config.http_client.tls_key;
  return tls;
}

}  // namespace

Result<server::NodeOptions> NodeOptionsFor(const ServeConfig& config) {
  server::NodeOptions o;
  o.backend = config.backend;
  o.allow_unsafe_backend = config.allow_unsafe_backend;
  o.warnings = ConfigFileWarnings(config);
  Result<std::string> password = BackendPassword(config, &o.warnings);
  if (!password.ok()) return password.status();
  o.backend_password = std::move(*password);
  o.data_dir = DataDirFor(config);
  o.scheduler = SchedulerOptionsFor(config);
  const ApiSettings& a = config.api;
  o.api.listen = config.listen;
  o.api.auth = a.auth_none ? server::AuthMode::kNone : server::AuthMode::kTokens;
  o.api.allowed_hosts = a.allowed_hosts;
  o.api.max_body_bytes = static_cast<size_t>(a.max_body_bytes);
  o.api.mutations_per_minute = a.mutations_per_minute;
  o.api.mutation_burst = a.mutation_burst;
  o.api.max_backfill_fires = a.max_backfill_fires;
  o.api.job_defaults = config.defaults;
  o.http.probe_listen = a.probe_listen;
  o.http.tls_cert = a.tls_cert;
  o.http.tls_key = a.tls_key;
  o.http.client_ca = a.client_ca;
  o.http.max_header_bytes = static_cast<size_t>(a.max_header_bytes);
  o.http.header_timeout = a.header_timeout;
  o.http.idle_timeout = a.idle_timeout;
  o.http.max_connections = a.max_connections;
  o.http.max_connections_per_client = a.max_connections_per_client;
  o.http.max_streams = a.max_streams;
  o.http.max_stream_duration = a.max_stream_duration;
  o.http.handler_threads = a.handler_threads;
  Result<std::vector<server::ApiToken>> tokens = Tokens(config);
  if (!tokens.ok()) return tokens.status();
  o.tokens = std::move(*tokens);
  o.quotas = Quotas(config);
  o.policies = Policies(config);
  o.alerts = Alerts(config);
  o.http_tls = HttpTls(config);
  if (!config.tracing.otlp_endpoint.empty()) {
    server::TracingOptions tracing;
    tracing.endpoint = config.tracing.otlp_endpoint;
    tracing.service_name = config.tracing.service_name;
    o.tracing = tracing;
  }
  o.jobs = config.jobs;
  o.calendars = config.calendars;
  o.log_format = config.log_format;
  o.log_level = config.log_level;
  return o;
}

Result<server::NodeReload> NodeReloadFor(const ServeConfig& config) {
  server::NodeReload r;
  Result<std::vector<server::ApiToken>> tokens = Tokens(config);
  if (!tokens.ok()) return tokens.status();
  r.tokens = std::move(*tokens);
  r.jobs = config.jobs;
  r.quotas = Quotas(config);
  r.policies = Policies(config);
  r.alerts = Alerts(config);
  return r;
}

Result<server::QueueWorkerOptions> QueueWorkerOptionsFor(const ServeConfig& config) {
  server::QueueWorkerOptions o;
  o.backend = config.backend;
  std::vector<std::string> warnings;
  Result<std::string> password = BackendPassword(config, &warnings);
  if (!password.ok()) return password.status();
  o.backend_password = std::move(*password);
  o.allow_unsafe_backend = config.allow_unsafe_backend;
  o.scheduler = SchedulerOptionsFor(config);
  o.policies = Policies(config);
  o.http_tls = HttpTls(config);
  o.log_format = config.log_format;
  o.log_level = config.log_level;
  return o;
}

}  // namespace gnomon::app
