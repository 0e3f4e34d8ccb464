// Configuration of `gnomon serve`: the config file (TOML), jobs files (TOML) and backend URLs.
//
// The keys are documented in docs/configuration.md; the job keys are the public contract of
// PRODUCT.md "Jobs file". Every error is a Status (never an exception) whose message says where
// and what: `jobs.toml:12: job "report": unknown key "schedulle"`. Every load is all-or-nothing:
// on error nothing of the file is returned. Functions here are thread-compatible (no shared state).
#ifndef GNOMON_APPS_GNOMON_CONFIG_H_
#define GNOMON_APPS_GNOMON_CONFIG_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/server/logger.h"

namespace gnomon::app {

// The default backend: the embedded SQLite database below the working directory.
inline constexpr std::string_view kDefaultBackendUrl = "sqlite://./gnomon-data/gnomon.db";
// The default address of the HTTP API and dashboard.
inline constexpr std::string_view kDefaultListen = "127.0.0.1:8080";
// Largest config, jobs or crontab file read (bytes); larger files are rejected.
inline constexpr size_t kMaxConfigFileBytes = 16 * 1024 * 1024;

using server::LogFormat;
using server::LogLevel;

// The `[scheduler]` table. Ranges are checked by LoadServeConfig (see docs/configuration.md).
struct SchedulerSettings {
  // A node claims a fire within this of its scheduled instant (PRODUCT.md guarantee 2). 1ms-10m.
  Duration claim_grace = std::chrono::seconds(1);
  // Early-fire guard: a claim is refused before scheduled instant - this (backend clock). 0-1m.
  Duration skew_tolerance = std::chrono::milliseconds(500);
  // Fires of overlap = "allow" jobs are claimed this long before their instant and started at it
  // (SchedulerOptions::claim_ahead; at most skew_tolerance / 2 takes effect). 0-1m.
  Duration claim_ahead = std::chrono::milliseconds(200);
  // Lease of a claim; the watchdog renews it every lease_ttl/3. 1s-1h.
  Duration lease_ttl = std::chrono::seconds(30);
  // On SIGTERM/SIGINT: how long running runs may finish before they are cancelled. 0-1h.
  Duration shutdown_grace = std::chrono::seconds(30);
  // Threads that execute runs (process, HTTP and in-process). 1-1024.
  int worker_threads = 8;
  // How often the node announces itself to the backend. 100ms-10m, and less than lease_ttl.
  Duration heartbeat_interval = std::chrono::seconds(5);
};

// One `[[token]]` of the config: a bearer token of the HTTP API (docs/http-api.md). Checked
// (role names, lengths, uniqueness) when the API starts.
struct TokenConfig {
  std::string name;                     // who, in the audit log
  std::string secret;                   // the `token` key: secret, never logged
  std::string role;                     // "read", "operate" or "admin"
  std::vector<std::string> namespaces;  // job-id prefixes it may see; empty = every job
  std::string source;                   // "file:line", for messages
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

// One `[[quota]]` of the config: limits of a namespace (a job-id prefix, as token namespaces).
// A job belongs to the quota with the longest matching namespace. 0 = no limit.
struct QuotaConfig {
  std::string ns;               // the `namespace` key: a job-id prefix, non-empty
  int max_jobs = 0;             // jobs (config + API) in the namespace; creates beyond get 403
  int max_concurrent_runs = 0;  // runs running at once cluster-wide; see docs/http-api.md
  std::string source;           // "file:line", for messages
};

// Everything `gnomon serve` reads from its config file, with the defaults it runs with when a key
// (or the whole file) is absent.
struct ServeConfig {
  // Coordination backend URL (see ParseBackendUrl). Default kDefaultBackendUrl.
  std::string backend = std::string(kDefaultBackendUrl);
  // Start even when the backend fails its safety checks (e.g. Redis without persistence).
  // Default false.
  bool allow_unsafe_backend = false;
  // This node's name in claims and history, [A-Za-z0-9_.-]{1,128}. Default empty: the caller
  // computes "<hostname>-<pid>".
  std::string node_id;
  // host:port of the HTTP API and dashboard. Default kDefaultListen.
  std::string listen = std::string(kDefaultListen);
  LogFormat log_format = LogFormat::kText;  // default text
  LogLevel log_level = LogLevel::kInfo;     // default info
  // Jobs files and crontab files, resolved against the config file's directory, in load order.
  std::vector<std::string> jobs_files;
  std::vector<std::string> crontab_files;
  SchedulerSettings scheduler;
  // Bearer tokens of the HTTP API; none = no auth, and the API listens on loopback only.
  std::vector<TokenConfig> tokens;
  // Namespace quotas (`[[quota]]`); namespaces are unique.
  std::vector<QuotaConfig> quotas;
  // Webhook alerts (`[[alert]]`) and span export (`[tracing]`).
  std::vector<AlertConfig> alerts;
  TracingConfig tracing;
  // Built-in job defaults overlaid with the config's `[defaults]` table (id and schedule empty);
  // applied under every job's own keys: built-ins < [defaults] < job.
  JobSpec defaults;
  // Every job: the config's inline [[job]] tables, then each jobs file, then each crontab, in
  // order. Ids are unique; each has source = "file:line" and read_only = true.
  std::vector<JobSpec> jobs;
};

// Reads and checks the config file at `path`, then loads the jobs files and crontabs it names
// (relative paths are relative to the config file's directory). Errors: NotFound when `path`
// cannot be read; InvalidArgument for anything wrong inside, "<file>:<line>: ..." (for an
// included file, that file's name and line).
Result<ServeConfig> LoadServeConfig(const std::string& path);
// As LoadServeConfig, from `text`; `name` is the file name used in messages and sources, and
// included files are resolved against `base_dir` ("" = the working directory).
Result<ServeConfig> ParseServeConfig(std::string_view text, const std::string& name,
                                     const std::string& base_dir);

// Checks the parts of a config that command-line flags may override after loading: backend URL,
// node_id (when set), listen address and scheduler ranges. LoadServeConfig already calls it.
Status ValidateServeConfig(const ServeConfig& config);

// Loads further jobs files and crontabs (paths as given, e.g. from --jobs / --crontab) with
// config->defaults, and appends them to config->jobs and the file lists. Ids must be unique,
// also against the jobs already in *config. All-or-nothing: on error *config is unchanged.
Status AddJobFiles(ServeConfig* config, const std::vector<std::string>& jobs_files,
                   const std::vector<std::string>& crontab_files);

// Reads a jobs file: `[[job]]` tables and an optional `[defaults]` table that applies to this
// file's jobs (layered over `defaults`). Every job is checked with ValidateJobSpec; ids must be
// unique within the file. Each job gets source = "<path>:<line of its table>", read_only = true.
Result<std::vector<JobSpec>> LoadJobsFile(const std::string& path, const JobSpec& defaults);
// As LoadJobsFile, from `text`; `name` is used in messages and sources.
Result<std::vector<JobSpec>> ParseJobsFile(std::string_view text, const std::string& name,
                                           const JobSpec& defaults);

// Fails when two jobs share an id, naming both sources:
// `b.toml:3: job "x": duplicate id, first defined at a.toml:7`.
Status CheckUniqueJobIds(const std::vector<JobSpec>& jobs);

// Reads a whole file of at most kMaxConfigFileBytes. NotFound when it cannot be opened
// ("<path>: cannot read: <reason>"), InvalidArgument when it is too large.
Result<std::string> ReadConfigFile(const std::string& path);

// One host of a backend URL.
struct HostPort {
  std::string host;  // name, IPv4 or IPv6 (without brackets)
  int port = 0;      // 1-65535
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// A parsed backend URL. Which fields are set depends on the scheme.
struct BackendUrl {
  std::string scheme;  // "sqlite", "redis", "redis+sentinel" or "etcd"
  // sqlite: the database file as written: "/abs/path" or "./rel/path" (relative to the working
  // directory of the process).
  std::string path;
  // redis, redis+sentinel, etcd: optional credentials (percent-decoded). Secret: log only
  // RedactUrl() of the URL.
  std::string user;
  std::string password;
  // redis: exactly one host (default port 6379); redis+sentinel: the sentinels (default 26379);
  // etcd: the endpoints (default 2379).
  std::vector<HostPort> hosts;
  int db = 0;          // redis: database index (the URL's "/db"), default 0
  std::string master;  // redis+sentinel: master name (the URL's path), required
};

// Parses `sqlite:///abs/path`, `sqlite://./rel/path`, `redis://[user:pass@]host:port[/db]`,
// `redis+sentinel://[user:pass@]h1:p,h2:p/master` and `etcd://[user:pass@]h1:2379[,h2:2379]`.
// Errors (InvalidArgument) never contain the password; an unknown scheme lists the supported ones.
Result<BackendUrl> ParseBackendUrl(std::string_view url);

// `url` with the credentials of its user-info part replaced for logs:
// "redis://user:secret@h:6379/0" -> "redis://user:***@h:6379/0"; a user-info without ':' is
// replaced whole ("redis://***@h:6379"). Other strings are returned unchanged.
std::string RedactUrl(std::string_view url);

}  // namespace gnomon::app

#endif  // GNOMON_APPS_GNOMON_CONFIG_H_
