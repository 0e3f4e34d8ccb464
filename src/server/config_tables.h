// The tables of a config file that configure the server's parts (docs/configuration.md):
// `[[token]]`, `[[quota]]`, `[[policy]]`, `[[calendar]]`, `[[alert]]`, `[tracing]` and
// `[http_client]`. Each
// Parse function reads one table (or array of tables) of a parsed TOML document and appends what
// it read; an error is InvalidArgument located at the file and line (`gnomon.toml:4: alert:
// unknown key "secrt"`), and nothing is appended for the table in error. Thread-compatible.
#ifndef GNOMON_SRC_SERVER_CONFIG_TABLES_H_
#define GNOMON_SRC_SERVER_CONFIG_TABLES_H_

#include <string>
#include <vector>

#include "gnomon/fire_rules.h"
#include "gnomon/status.h"
#include "src/server/executor_policy.h"
#include "src/server/toml_reader.h"

namespace gnomon::server {

// One `[[token]]` of the config: a bearer token of the HTTP API (docs/http-api.md). Checked
// (role names, lengths, uniqueness) when the API starts.
struct TokenConfig {
  std::string name;                     // who, in the audit log
  std::string secret;                   // the `token` key: secret, never logged
  std::string subject;                  // or a client certificate's subject (mutual TLS)
  std::string role;                     // "read", "operate" or "admin"
  std::vector<std::string> namespaces;  // job-id prefixes it may see; empty = every job
  int mutations_per_minute = 0;         // 0 = the [api] default
  std::string source;                   // "file:line", for messages
};

// One `[[policy]]` of the config: the executor policy of a namespace's jobs defined through the
// API (src/server/executor_policy.h has every field's meaning and default).
struct PolicyConfig {
  ExecutorPolicy policy;
  std::string source;  // "file:line"
};

// One `[[alert]]` of the config: a webhook (docs/operations.md, "Alerts").
struct AlertConfig {
  std::string name;                 // required, unique: names it in logs
  std::string url;                  // required: http://host:port/path
  std::string secret;               // HMAC-SHA256 key of X-Gnomon-Signature; empty = unsigned
  std::vector<std::string> events;  // run_failed, lost_run, auto_paused, missed_fire; empty = all
  std::vector<std::string> jobs;    // job-id prefixes; empty = every job
  std::string source;               // "file:line"
};

// `[tracing]`: OTLP/HTTP export of a span per attempt (docs/operations.md, "Tracing").
struct TracingConfig {
  std::string otlp_endpoint;  // http://host:4318/v1/traces; empty = no export
  std::string service_name = "gnomon";
};

// `[http_client]`: TLS of the node's outgoing HTTP requests (HTTP jobs, webhooks, OTLP export),
// paths resolved against the config file's folder. Empty = the system CAs / no client
// certificate.
struct HttpClientConfig {
  std::string tls_ca;
  std::string tls_cert;  // with tls_key: the client certificate for servers that ask (mutual TLS)
  std::string tls_key;
};

// One `[[quota]]` of the config: limits of a namespace (a job-id prefix, as token namespaces).
// A job belongs to the quota with the longest matching namespace. 0 = no limit.
struct QuotaConfig {
  std::string ns;               // the `namespace` key: a job-id prefix, non-empty
  int max_jobs = 0;             // jobs (config + API) in the namespace; creates beyond get 403
  int max_concurrent_runs = 0;  // runs running at once cluster-wide; see docs/http-api.md
  std::string source;           // "file:line", for messages
};

// `[[token]]` tables: name, token or subject, role, namespaces, mutations_per_minute.
Status ParseTokens(const std::string& file, const toml::node& n, std::vector<TokenConfig>* out);
// `[[alert]]` tables: name, url, secret, events, jobs (names unique).
Status ParseAlerts(const std::string& file, const toml::node& n, std::vector<AlertConfig>* out);
// `[tracing]`: otlp_endpoint, service_name.
Status ParseTracing(const std::string& file, const toml::node& n, TracingConfig* out);
// `[http_client]`: tls_ca, tls_cert, tls_key, resolved against `base_dir`.
Status ParseHttpClient(const std::string& file, const std::string& base_dir, const toml::node& n,
                       HttpClientConfig* out);
// `[[quota]]` tables: namespace (unique), max_jobs, max_concurrent_runs.
Status ParseQuotas(const std::string& file, const toml::node& n, std::vector<QuotaConfig>* out);
// `[[policy]]` tables, checked as a whole by Policies::Make.
Status ParsePolicies(const std::string& file, const toml::node& n, std::vector<PolicyConfig>* out);
// `[[calendar]]` tables: id (unique), dates (dates, ranges, cron expressions; TOML dates too) and
// file (one entry a line, `#` comments; relative to `base_dir`); at most 4096 entries each.
Status ParseCalendars(const std::string& file, const std::string& base_dir, const toml::node& n,
                      Calendars* out);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_CONFIG_TABLES_H_
