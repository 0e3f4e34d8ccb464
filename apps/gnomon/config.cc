#include "apps/gnomon/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "src/server/api_util.h"
#include "src/server/crontab.h"

namespace gnomon::app {
namespace {

using server::GetBool;
using server::GetDuration;
using server::GetInt;
using server::GetString;
using server::GetStringList;
using server::LineOf;
using server::LoadCrontab;
using server::Ordered;
using server::ParseAlerts;
using server::ParseCalendars;
using server::ParseDefaults;
using server::ParseHttpClient;
using server::ParseJobArray;
using server::ParsePolicies;
using server::ParseQuotas;
using server::ParseTokens;
using server::ParseToml;
using server::ParseTracing;
using server::Reporter;
using server::Resolve;
using server::Shown;
using server::Source;
using server::UnknownKey;

// ---------------------------------------------------------------------------------------------
// Serve settings

Status CheckRange(std::string_view field, Duration d, Duration min, Duration max) {
  if (d < min || d > max) {
    return InvalidArgumentError(std::string(field) + ": " + FormatDuration(d) +
                                " is out of range " + FormatDuration(min) + " to " +
                                FormatDuration(max));
  }
  return Status::Ok();
}

struct SchedulerKey {
  std::string_view name;
  Duration SchedulerSettings::*field;
  Duration min, max;
};
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
const SchedulerKey kSchedulerDurations[] = {
    {"claim_grace", &SchedulerSettings::claim_grace, milliseconds(1), minutes(10)},
    {"skew_tolerance", &SchedulerSettings::skew_tolerance, Duration(0), minutes(1)},
    {"claim_ahead", &SchedulerSettings::claim_ahead, Duration(0), minutes(1)},
    {"lease_ttl", &SchedulerSettings::lease_ttl, seconds(1), hours(1)},
    {"shutdown_grace", &SchedulerSettings::shutdown_grace, Duration(0), hours(1)},
    {"heartbeat_interval", &SchedulerSettings::heartbeat_interval, milliseconds(100), minutes(10)},
    {"live_output_interval", &SchedulerSettings::live_output_interval, Duration(0), hours(1)},
};

Status CheckWorkerThreads(int n) {
  if (n < 1 || n > 1024) {
    return InvalidArgumentError("worker_threads: " + std::to_string(n) + " is out of range 1-1024");
  }
  return Status::Ok();
}

Status CheckHeartbeat(const SchedulerSettings& s) {
  if (s.heartbeat_interval >= s.lease_ttl) {
    return InvalidArgumentError("heartbeat_interval: " + FormatDuration(s.heartbeat_interval) +
                                " must be less than lease_ttl (" + FormatDuration(s.lease_ttl) +
                                ")");
  }
  return Status::Ok();
}

Status CheckNodeId(std::string_view id) {
  if (!IsValidJobId(id)) {
    return InvalidArgumentError("node_id: \"" + Shown(id) + "\" must match [A-Za-z0-9_.-]{1,128}");
  }
  return Status::Ok();
}

Status CheckListen(std::string_view addr) {
  Result<HostPort> hp = ParseHostPort(addr, 0, 0);
  if (!hp.ok()) return InvalidArgumentError("listen: " + hp.status().message());
  return Status::Ok();
}

Status CheckBackend(std::string_view url) {
  Result<BackendUrl> u = ParseBackendUrl(url);
  if (!u.ok()) return InvalidArgumentError("backend: " + u.status().message());
  return Status::Ok();
}

Result<LogFormat> ParseLogFormat(std::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return InvalidArgumentError("log_format: \"" + Shown(s) + "\" is not one of text, json");
}

Result<LogLevel> ParseLogLevel(std::string_view s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return InvalidArgumentError("log_level: \"" + Shown(s) +
                              "\" is not one of debug, info, warn, error");
}

Status ParseScheduler(const std::string& file, const toml::node& n, SchedulerSettings* out) {
  const auto* t = n.as_table();
  if (t == nullptr) return Reporter(file, "").WrongType(n, "scheduler", "a table");
  const Reporter r(file, "scheduler");
  SchedulerSettings s = *out;
  std::vector<std::string_view> names = {"worker_threads"};
  for (const SchedulerKey& k : kSchedulerDurations) names.push_back(k.name);
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view name = k->str();
    if (name == "worker_threads") {
      GNOMON_RETURN_IF_ERROR(GetInt(r, *v, name, &s.worker_threads));
      Status c = CheckWorkerThreads(s.worker_threads);
      if (!c.ok()) return r.Fail(*v, c.message());
      continue;
    }
    const SchedulerKey* found = nullptr;
    for (const SchedulerKey& sk : kSchedulerDurations) {
      if (sk.name == name) found = &sk;
    }
    if (found == nullptr) return UnknownKey(r, *k, names);
    GNOMON_RETURN_IF_ERROR(GetDuration(r, *v, name, &(s.*found->field)));
    Status c = CheckRange(name, s.*found->field, found->min, found->max);
    if (!c.ok()) return r.Fail(*v, c.message());
  }
  Status c = CheckHeartbeat(s);
  if (!c.ok()) return r.Fail(n, c.message());
  *out = s;
  return Status::Ok();
}

// `[api]`: auth, allowed_hosts, probe_listen and the limits of the transport.
Status ParseApi(const std::string& file, const std::string& base_dir, const toml::node& n,
                ApiSettings* out) {
  const auto* t = n.as_table();
  if (t == nullptr) return Reporter(file, "").WrongType(n, "api", "a table");
  const Reporter r(file, "api");
  struct IntKey {
    std::string_view name;
    int ApiSettings::*field;
    int min, max;
  };
  static constexpr IntKey kInts[] = {
      {"max_header_bytes", &ApiSettings::max_header_bytes, 1024, 1024 * 1024},
      {"max_connections", &ApiSettings::max_connections, 1, 1000000},
      {"max_connections_per_client", &ApiSettings::max_connections_per_client, 1, 1000000},
      {"max_body_bytes", &ApiSettings::max_body_bytes, 1024, 64 * 1024 * 1024},
      {"mutations_per_minute", &ApiSettings::mutations_per_minute, 0, 1000000},
      {"mutation_burst", &ApiSettings::mutation_burst, 1, 100000},
      {"handler_threads", &ApiSettings::handler_threads, 0, 1024},
      {"max_backfill_fires", &ApiSettings::max_backfill_fires, 1, 1000000},
      {"max_streams", &ApiSettings::max_streams, 0, 100000},
  };
  struct DurationKey {
    std::string_view name;
    Duration ApiSettings::*field;
    Duration min, max;
  };
  static const DurationKey kDurations[] = {
      {"header_timeout", &ApiSettings::header_timeout, milliseconds(100), minutes(10)},
      {"idle_timeout", &ApiSettings::idle_timeout, milliseconds(100), hours(1)},
      {"max_stream_duration", &ApiSettings::max_stream_duration, seconds(1), hours(24)},
  };
  ApiSettings a = *out;
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view key = k->str();
    if (key == "auth") {
      std::string mode;
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &mode));
      if (mode != "token" && mode != "none") {
        return r.Fail(*v, "auth: \"" + Shown(mode) + "\" is not one of token, none");
      }
      a.auth_none = mode == "none";
      continue;
    }
    if (key == "allowed_hosts") {
      GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &a.allowed_hosts));
      for (const std::string& h : a.allowed_hosts) {
        if (h.empty() || h.size() > 253 || h.find_first_of(" /:@[]") != std::string::npos) {
          return r.Fail(*v, "allowed_hosts: \"" + Shown(h) + "\" is not a host name");
        }
      }
      continue;
    }
    if (key == "probe_listen") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &a.probe_listen));
      Status c = CheckListen(a.probe_listen);
      if (!c.ok()) return r.Fail(*v, "probe_" + c.message());
      continue;
    }
    if (key == "tls_cert" || key == "tls_key" || key == "client_ca") {
      std::string& path = key == "tls_cert"  ? a.tls_cert
                          : key == "tls_key" ? a.tls_key
                                             : a.client_ca;
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &path));
      if (path.empty()) return r.Fail(*v, std::string(key) + ": empty");
      path = Resolve(base_dir, path);
      continue;
    }
    const DurationKey* d = nullptr;
    for (const DurationKey& dk : kDurations) d = dk.name == key ? &dk : d;
    if (d != nullptr) {
      GNOMON_RETURN_IF_ERROR(GetDuration(r, *v, key, &(a.*d->field)));
      Status c = CheckRange(key, a.*d->field, d->min, d->max);
      if (!c.ok()) return r.Fail(*v, c.message());
      continue;
    }
    const IntKey* found = nullptr;
    for (const IntKey& ik : kInts) found = ik.name == key ? &ik : found;
    if (found == nullptr) {
      std::vector<std::string_view> known = {"auth",     "allowed_hosts", "probe_listen",
                                             "tls_cert", "tls_key",       "client_ca"};
      for (const DurationKey& dk : kDurations) known.push_back(dk.name);
      for (const IntKey& ik : kInts) known.push_back(ik.name);
      return UnknownKey(r, *k, known);
    }
    int& value = a.*found->field;
    GNOMON_RETURN_IF_ERROR(GetInt(r, *v, key, &value));
    if (value < found->min || value > found->max) {
      return r.Fail(*v, std::string(key) + ": " + std::to_string(value) + " is out of range " +
                            std::to_string(found->min) + "-" + std::to_string(found->max));
    }
  }
  if (a.max_connections_per_client > a.max_connections) {
    return r.Fail(n, "max_connections_per_client: " + std::to_string(a.max_connections_per_client) +
                         " is more than max_connections (" + std::to_string(a.max_connections) +
                         ")");
  }
  *out = a;
  return Status::Ok();
}

// Loads jobs files and crontabs and appends their jobs to *jobs. `at` names the config line
// that listed the file (for a file that cannot be read), or is empty.
Status LoadFiles(const ServeConfig& config, const std::string& jobs_at,
                 const std::string& crontab_at, std::vector<CompiledJob>* jobs) {
  auto located = [](const std::string& at, const Status& s) {
    return at.empty() || s.code() != StatusCode::kNotFound ? s : s.WithPrefix(at);
  };
  for (const std::string& f : config.jobs_files) {
    Result<std::vector<CompiledJob>> loaded =
        LoadJobsFile(f, config.defaults, config.calendars.get());
    if (!loaded.ok()) return located(jobs_at, loaded.status());
    for (CompiledJob& j : *loaded) jobs->push_back(std::move(j));
  }
  for (const std::string& f : config.crontab_files) {
    Result<std::vector<CompiledJob>> loaded = LoadCrontab(f, config.defaults);
    if (!loaded.ok()) return located(crontab_at, loaded.status());
    for (CompiledJob& j : *loaded) jobs->push_back(std::move(j));
  }
  return Status::Ok();
}

}  // namespace

// -----------------------------------------------------------------------------------------------

Status ValidateServeConfig(const ServeConfig& config) {
  GNOMON_RETURN_IF_ERROR(CheckBackend(config.backend));
  if (!config.node_id.empty()) GNOMON_RETURN_IF_ERROR(CheckNodeId(config.node_id));
  GNOMON_RETURN_IF_ERROR(CheckListen(config.listen));
  for (const SchedulerKey& k : kSchedulerDurations) {
    Status s = CheckRange(k.name, config.scheduler.*k.field, k.min, k.max);
    if (!s.ok()) return s.WithPrefix("scheduler");
  }
  Status s = CheckWorkerThreads(config.scheduler.worker_threads);
  if (s.ok()) s = CheckHeartbeat(config.scheduler);
  if (!s.ok()) return s.WithPrefix("scheduler");
  return Status::Ok();
}

Result<ServeConfig> ParseServeConfig(std::string_view text, const std::string& name,
                                     const std::string& base_dir) {
  Result<toml::table> root = ParseToml(text, name);
  if (!root.ok()) return root.status();
  const Reporter r(name, "");
  ServeConfig config;
  std::string jobs_at, crontab_at;
  // [[calendar]] and [defaults] first: they apply to the inline jobs wherever they appear.
  if (const toml::node* c = root->get("calendar")) {
    GNOMON_RETURN_IF_ERROR(ParseCalendars(name, base_dir, *c, config.calendars.get()));
  }
  if (const toml::node* d = root->get("defaults")) {
    GNOMON_RETURN_IF_ERROR(ParseDefaults(name, *d, &config.defaults, config.calendars.get()));
  }
  const toml::node* inline_jobs = nullptr;
  for (const auto& [k, v] : Ordered(*root)) {
    const std::string_view key = k->str();
    // A check of the value of `key` (no location yet) becomes a located error. (`value`: clang 14
    // cannot capture a structured binding.)
    auto located = [&, value = v](const Status& s) {
      return s.ok() ? s : r.Fail(*value, s.message());
    };
    if (key == "backend") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.backend));
      GNOMON_RETURN_IF_ERROR(located(CheckBackend(config.backend)));
    } else if (key == "allow_unsafe_backend") {
      GNOMON_RETURN_IF_ERROR(GetBool(r, *v, key, &config.allow_unsafe_backend));
    } else if (key == "backend_password_file") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.backend_password_file));
      if (config.backend_password_file.empty()) return r.Fail(*v, "backend_password_file: empty");
      config.backend_password_file = Resolve(base_dir, config.backend_password_file);
    } else if (key == "node_id") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.node_id));
      GNOMON_RETURN_IF_ERROR(located(CheckNodeId(config.node_id)));
    } else if (key == "listen") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.listen));
      GNOMON_RETURN_IF_ERROR(located(CheckListen(config.listen)));
    } else if (key == "log_format") {
      std::string s;
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &s));
      Result<LogFormat> f = ParseLogFormat(s);
      if (!f.ok()) return located(f.status());
      config.log_format = *f;
    } else if (key == "log_level") {
      std::string s;
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &s));
      Result<LogLevel> l = ParseLogLevel(s);
      if (!l.ok()) return located(l.status());
      config.log_level = *l;
    } else if (key == "jobs" || key == "crontab") {
      std::vector<std::string> files;
      GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &files));
      for (std::string& f : files) {
        if (f.empty()) return r.Fail(*v, std::string(key) + ": empty file name");
        f = Resolve(base_dir, f);
      }
      (key == "jobs" ? config.jobs_files : config.crontab_files) = std::move(files);
      (key == "jobs" ? jobs_at : crontab_at) = Source(name, LineOf(*v)) + ": " + std::string(key);
    } else if (key == "data_dir") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &config.data_dir));
      if (config.data_dir.empty()) return r.Fail(*v, "data_dir: must not be empty");
      config.data_dir = Resolve(base_dir, config.data_dir);
    } else if (key == "api") {
      GNOMON_RETURN_IF_ERROR(ParseApi(name, base_dir, *v, &config.api));
    } else if (key == "scheduler") {
      GNOMON_RETURN_IF_ERROR(ParseScheduler(name, *v, &config.scheduler));
    } else if (key == "job") {
      inline_jobs = v;
    } else if (key == "token") {
      GNOMON_RETURN_IF_ERROR(ParseTokens(name, *v, &config.tokens));
    } else if (key == "quota") {
      GNOMON_RETURN_IF_ERROR(ParseQuotas(name, *v, &config.quotas));
    } else if (key == "policy") {
      GNOMON_RETURN_IF_ERROR(ParsePolicies(name, *v, &config.policies));
    } else if (key == "alert") {
      GNOMON_RETURN_IF_ERROR(ParseAlerts(name, *v, &config.alerts));
    } else if (key == "tracing") {
      GNOMON_RETURN_IF_ERROR(ParseTracing(name, *v, &config.tracing));
    } else if (key == "http_client") {
      GNOMON_RETURN_IF_ERROR(ParseHttpClient(name, base_dir, *v, &config.http_client));
    } else if (key != "defaults" && key != "calendar") {
      // clang-format off
      return UnknownKey(r, *k, {"backend", "allow_unsafe_backend", "backend_password_file",
          "node_id", "listen", "data_dir", "policy", "log_format", "log_level", "jobs", "crontab",
          "api", "scheduler", "defaults", "calendar", "job", "token", "quota", "alert", "tracing",
          "http_client"});
      // clang-format on
    }
  }
  if (inline_jobs != nullptr) {
    GNOMON_RETURN_IF_ERROR(
        ParseJobArray(name, *inline_jobs, config.defaults, &config.jobs, config.calendars.get()));
  }
  GNOMON_RETURN_IF_ERROR(LoadFiles(config, jobs_at, crontab_at, &config.jobs));
  GNOMON_RETURN_IF_ERROR(CheckJobSet(config.jobs));
  GNOMON_RETURN_IF_ERROR(ValidateServeConfig(config).WithPrefix(name));
  return config;
}

Result<ServeConfig> LoadServeConfig(const std::string& path) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  Result<ServeConfig> config =
      ParseServeConfig(*text, path, std::filesystem::path(path).parent_path().string());
  if (config.ok()) config->config_file = path;
  return config;
}

namespace {

// "<what> <path> can be read by group or others (mode 0644): ..." when it can.
std::optional<std::string> ReadableByOthers(const std::string& what, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return std::nullopt;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return what + " " + path + " can be read by group or others (mode " + mode +
         "): it holds secrets; chmod 600 it";
}

}  // namespace

std::vector<std::string> ConfigFileWarnings(const ServeConfig& config) {
  std::vector<std::string> out;
  if (!config.config_file.empty()) {
    if (auto w = ReadableByOthers("the config file", config.config_file)) out.push_back(*w);
  }
  // Private keys: readable by the daemon's user only.
  if (!config.api.tls_key.empty()) {
    if (auto w = ReadableByOthers("[api] tls_key", config.api.tls_key)) out.push_back(*w);
  }
  if (!config.http_client.tls_key.empty()) {
    if (auto w = ReadableByOthers("[http_client] tls_key", config.http_client.tls_key)) {
      out.push_back(*w);
    }
  }
  return out;
}

Result<std::string> BackendPassword(const ServeConfig& config, std::vector<std::string>* warnings) {
  if (!config.backend_password_file.empty()) {
    Result<std::string> text = ReadConfigFile(config.backend_password_file);
    if (!text.ok()) return text.status().WithPrefix("backend_password_file");
    if (auto w = ReadableByOthers("backend_password_file", config.backend_password_file)) {
      warnings->push_back(*w);
    }
    std::string password = text->substr(0, text->find_first_of("\r\n"));
    if (password.empty()) {
      return InvalidArgumentError("backend_password_file " + config.backend_password_file +
                                  ": the first line is empty");
    }
    return password;
  }
  const char* env = std::getenv("GNOMON_BACKEND_PASSWORD");
  return std::string(env != nullptr ? env : "");
}

std::string DataDirFor(const ServeConfig& config) {
  if (!config.data_dir.empty()) return config.data_dir;
  Result<BackendUrl> url = ParseBackendUrl(config.backend);
  if (url.ok() && url->scheme == "sqlite") {
    const std::string dir = std::filesystem::path(url->path).parent_path().string();
    return dir.empty() ? "." : dir;
  }
  return std::string(kDefaultDataDir);
}

Status AddJobFiles(ServeConfig* config, const std::vector<std::string>& jobs_files,
                   const std::vector<std::string>& crontab_files) {
  ServeConfig more = *config;
  more.jobs_files = jobs_files;
  more.crontab_files = crontab_files;
  GNOMON_RETURN_IF_ERROR(LoadFiles(more, "", "", &more.jobs));
  GNOMON_RETURN_IF_ERROR(CheckJobSet(more.jobs));
  more.jobs_files.insert(more.jobs_files.begin(), config->jobs_files.begin(),
                         config->jobs_files.end());
  more.crontab_files.insert(more.crontab_files.begin(), config->crontab_files.begin(),
                            config->crontab_files.end());
  *config = std::move(more);
  return Status::Ok();
}

}  // namespace gnomon::app
