// Configuration of `gnomon serve`: the config file (TOML), jobs files (TOML) and backend URLs.
//
// The keys are documented in docs/configuration.md; the job keys are the public contract of
// docs/configuration.md "Jobs files". Every error is a Status (never an exception) whose message
// says where and what: `jobs.toml:12: job "report": unknown key "schedulle"`. Every load is
// all-or-nothing: on error nothing of the file is returned. Functions here are thread-compatible
// (no shared state).
#ifndef GNOMON_APPS_GNOMON_CONFIG_H_
#define GNOMON_APPS_GNOMON_CONFIG_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/server/backend.h"
#include "src/server/config_tables.h"
#include "src/server/executor_policy.h"
#include "src/server/jobs_file.h"
#include "src/server/logger.h"
#include "src/server/toml_reader.h"

namespace gnomon::app {

using server::AlertConfig;
using server::HttpClientConfig;
using server::kDefaultBackendUrl;
using server::kDefaultDataDir;
using server::PolicyConfig;
using server::QuotaConfig;
using server::TokenConfig;
using server::TracingConfig;
// The default address of the HTTP API and dashboard.
inline constexpr std::string_view kDefaultListen = "127.0.0.1:8080";

using server::LogFormat;
using server::LogLevel;

// The `[scheduler]` table. Ranges are checked by LoadServeConfig (see docs/configuration.md).
struct SchedulerSettings {
  // A node claims a fire within this of its scheduled instant (docs/guarantees.md 2). 1ms-10m.
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
  Duration live_output_interval = std::chrono::seconds(1);  // 0 = not published
};

// The `[api]` table: who may call the API and the bounds of its transport (docs/configuration.md
// "[api]"; the defaults are those of server::HttpApiOptions and server::HttpServerOptions).
struct ApiSettings {
  bool auth_none = false;                  // auth = "none" (loopback only); default "token"
  std::vector<std::string> allowed_hosts;  // further names accepted in Host
  std::string probe_listen;                // a listener for /healthz and /readyz only
  int max_header_bytes = 16 * 1024;        // 1 KiB - 1 MiB
  Duration header_timeout = std::chrono::seconds(10);       // 100ms - 10m
  Duration idle_timeout = std::chrono::seconds(5);          // 100ms - 1h
  int max_connections = 1024;                               // 1 - 1,000,000
  int max_connections_per_client = 256;                     // 1 - max_connections
  int max_streams = 64;                                     // 0 - 100,000 (0 = no ?follow=1)
  Duration max_stream_duration = std::chrono::minutes(10);  // 1s - 24h
  int max_body_bytes = 1024 * 1024;                         // 1 KiB - 64 MiB
  int mutations_per_minute = 600;                           // 0 = unlimited
  int mutation_burst = 60;                                  // 1 - 100,000
  int handler_threads = 0;                                  // 0 (2 x cores, >= 4) - 1024
  int max_backfill_fires = 1000;                            // 1 - 1,000,000
  // TLS of the API listener: PEM files, resolved against the config file's folder.
  std::string tls_cert;
  std::string tls_key;
  std::string client_ca;  // mutual TLS: clients present a certificate these CAs signed
};

// Everything `gnomon serve` reads from its config file, with the defaults it runs with when a key
// (or the whole file) is absent.
struct ServeConfig {
  // Coordination backend URL (see ParseBackendUrl). Default kDefaultBackendUrl.
  std::string backend = std::string(kDefaultBackendUrl);
  // Start even when the backend fails its safety checks (e.g. Redis without persistence).
  // Default false.
  bool allow_unsafe_backend = false;
  // A file holding the backend's password (one line), resolved against the config file's
  // folder; empty = none (GNOMON_BACKEND_PASSWORD, or the URL). Default empty.
  std::string backend_password_file;
  // The config file this was read from ("" when none): its mode is checked at start.
  std::string config_file;
  // This node's name in claims and history, [A-Za-z0-9_.-]{1,128}. Default empty: the caller
  // computes "<hostname>-<pid>".
  std::string node_id;
  // host:port of the HTTP API and dashboard. Default kDefaultListen.
  std::string listen = std::string(kDefaultListen);
  // Where the node keeps its own files (the generated admin token). Empty (the default) = the
  // folder of the SQLite database, or kDefaultDataDir for the other backends (DataDirFor).
  std::string data_dir;
  ApiSettings api;
  LogFormat log_format = LogFormat::kText;  // default text
  LogLevel log_level = LogLevel::kInfo;     // default info
  // Jobs files and crontab files, resolved against the config file's directory, in load order.
  std::vector<std::string> jobs_files;
  std::vector<std::string> crontab_files;
  SchedulerSettings scheduler;
  // Bearer tokens of the HTTP API; none = the generated admin token (src/server/admin_token.h).
  std::vector<TokenConfig> tokens;
  // Namespace quotas (`[[quota]]`); namespaces are unique.
  std::vector<QuotaConfig> quotas;
  // Executor policies (`[[policy]]`): at most one without a namespace (the default).
  std::vector<PolicyConfig> policies;
  // Webhook alerts (`[[alert]]`) and span export (`[tracing]`).
  std::vector<AlertConfig> alerts;
  TracingConfig tracing;
  HttpClientConfig http_client;
  // Built-in job defaults overlaid with the config's `[defaults]` table (id and schedule empty);
  // applied under every job's own keys: built-ins < [defaults] < job.
  JobSpec defaults;
  // Every job: the config's inline [[job]] tables, then each jobs file, then each crontab, in
  // order, each checked and compiled once. Ids are unique; each has source = "file:line" and
  // read_only = true.
  std::vector<CompiledJob> jobs;
  // Named calendars (`[[calendar]]`) that jobs' `calendars` keys reference.
  std::shared_ptr<Calendars> calendars = std::make_shared<Calendars>();
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

// The backend's password when it is not in the URL: the contents of backend_password_file
// (its first line), else the environment variable GNOMON_BACKEND_PASSWORD, else "". Appends to
// `warnings` when the file can be read by group or others. NotFound when the file cannot be read.
Result<std::string> BackendPassword(const ServeConfig& config, std::vector<std::string>* warnings);
// Warnings about files holding secrets that group or others can read: the config file (it may
// hold tokens) and the private keys of [api] and [http_client].
std::vector<std::string> ConfigFileWarnings(const ServeConfig& config);

// The data directory `config` runs with: data_dir when set, else the folder of a sqlite://
// backend's file, else kDefaultDataDir.
std::string DataDirFor(const ServeConfig& config);

// Loads further jobs files and crontabs (paths as given, e.g. from --jobs / --crontab) with
// config->defaults, and appends them to config->jobs and the file lists. Ids must be unique,
// also against the jobs already in *config. All-or-nothing: on error *config is unchanged.
Status AddJobFiles(ServeConfig* config, const std::vector<std::string>& jobs_files,
                   const std::vector<std::string>& crontab_files);

using server::BackendUrl;
using server::CheckJobSet;
using server::HostPort;
using server::kMaxConfigFileBytes;
using server::LoadJobsFile;
using server::ParseBackendUrl;
using server::ParseHostPort;
using server::ParseJobsFile;
using server::ReadConfigFile;
using server::RedactUrl;

}  // namespace gnomon::app

#endif  // GNOMON_APPS_GNOMON_CONFIG_H_
