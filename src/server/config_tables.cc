#include "src/server/config_tables.h"

#include <filesystem>
#include <sstream>
#include <utility>

#include "src/server/api_util.h"

namespace gnomon::server {

// `[[token]]` tables: name, token, role, namespaces.
Status ParseTokens(const std::string& file, const toml::node& n, std::vector<TokenConfig>* out) {
  const Reporter r(file, "token");
  const toml::array* tokens = n.as_array();
  if (tokens == nullptr) return r.Fail(n, "must be an array of tables ([[token]])");
  for (const toml::node& elem : *tokens) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[token]])");
    TokenConfig token;
    token.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "name") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.name));
      } else if (key == "token") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.secret));
      } else if (key == "subject") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.subject));
      } else if (key == "role") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &token.role));
      } else if (key == "namespaces") {
        GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &token.namespaces));
      } else if (key == "mutations_per_minute") {
        GNOMON_RETURN_IF_ERROR(GetInt(r, *v, key, &token.mutations_per_minute));
        if (token.mutations_per_minute < 0 || token.mutations_per_minute > 1000000) {
          return r.Fail(*v, "mutations_per_minute: must be 0-1000000 (0 = the [api] default)");
        }
      } else {
        return UnknownKey(
            r, *k, {"name", "token", "subject", "role", "namespaces", "mutations_per_minute"});
      }
    }
    if (token.name.empty() || token.role.empty() || token.secret.empty() == token.subject.empty()) {
      return r.Fail(elem, "name, role and one of token and subject are required");
    }
    out->push_back(std::move(token));
  }
  return Status::Ok();
}

// `[[alert]]` tables: name, url, secret, events, jobs.
Status ParseAlerts(const std::string& file, const toml::node& n, std::vector<AlertConfig>* out) {
  const Reporter r(file, "alert");
  const toml::array* alerts = n.as_array();
  if (alerts == nullptr) return r.Fail(n, "must be an array of tables ([[alert]])");
  for (const toml::node& elem : *alerts) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[alert]])");
    AlertConfig alert;
    alert.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "name") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &alert.name));
      } else if (key == "url") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &alert.url));
        if (alert.url.rfind("http://", 0) != 0 && alert.url.rfind("https://", 0) != 0) {
          return r.Fail(*v, "url: must start with http:// or https://");
        }
      } else if (key == "secret") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &alert.secret));
      } else if (key == "events") {
        GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &alert.events));
        for (const std::string& e : alert.events) {
          if (e != "run_failed" && e != "lost_run" && e != "auto_paused" && e != "missed_fire") {
            return r.Fail(*v, "events: \"" + e +
                                  "\" is not one of run_failed, lost_run, auto_paused, "
                                  "missed_fire");
          }
        }
      } else if (key == "jobs") {
        GNOMON_RETURN_IF_ERROR(GetStringList(r, *v, key, &alert.jobs));
      } else {
        return UnknownKey(r, *k, {"name", "url", "secret", "events", "jobs"});
      }
    }
    if (alert.name.empty() || alert.url.empty()) return r.Fail(elem, "name and url are required");
    for (const AlertConfig& a : *out) {
      if (a.name == alert.name) {
        return r.Fail(elem, "name \"" + alert.name + "\" is used twice (" + a.source + ")");
      }
    }
    out->push_back(std::move(alert));
  }
  return Status::Ok();
}

// `[tracing]`: otlp_endpoint, service_name.
Status ParseTracing(const std::string& file, const toml::node& n, TracingConfig* out) {
  const Reporter r(file, "tracing");
  const toml::table* t = n.as_table();
  if (t == nullptr) return r.Fail(n, "must be a table ([tracing])");
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view key = k->str();
    if (key == "otlp_endpoint") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &out->otlp_endpoint));
      if (!out->otlp_endpoint.empty() && out->otlp_endpoint.rfind("http://", 0) != 0 &&
          out->otlp_endpoint.rfind("https://", 0) != 0) {
        return r.Fail(*v, "otlp_endpoint: must start with http:// or https:// (OTLP/HTTP JSON)");
      }
    } else if (key == "service_name") {
      GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &out->service_name));
      if (out->service_name.empty()) return r.Fail(*v, "service_name: must not be empty");
    } else {
      return UnknownKey(r, *k, {"otlp_endpoint", "service_name"});
    }
  }
  return Status::Ok();
}

// `[http_client]`: tls_ca, tls_cert, tls_key (files, resolved against `base_dir`).
Status ParseHttpClient(const std::string& file, const std::string& base_dir, const toml::node& n,
                       HttpClientConfig* out) {
  const Reporter r(file, "http_client");
  const toml::table* t = n.as_table();
  if (t == nullptr) return r.Fail(n, "must be a table ([http_client])");
  for (const auto& [k, v] : Ordered(*t)) {
    const std::string_view key = k->str();
    std::string* path = key == "tls_ca"     ? &out->tls_ca
                        : key == "tls_cert" ? &out->tls_cert
                        : key == "tls_key"  ? &out->tls_key
                                            : nullptr;
    if (path == nullptr) return UnknownKey(r, *k, {"tls_ca", "tls_cert", "tls_key"});
    GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, path));
    if (path->empty()) return r.Fail(*v, std::string(key) + ": empty");
    *path = Resolve(base_dir, *path);
  }
  if (out->tls_cert.empty() != out->tls_key.empty()) {
    return r.Fail(n, "tls_cert and tls_key go together");
  }
  return Status::Ok();
}

// `[[quota]]` tables: namespace, max_jobs, max_concurrent_runs.
Status ParseQuotas(const std::string& file, const toml::node& n, std::vector<QuotaConfig>* out) {
  const Reporter r(file, "quota");
  const toml::array* quotas = n.as_array();
  if (quotas == nullptr) return r.Fail(n, "must be an array of tables ([[quota]])");
  for (const toml::node& elem : *quotas) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[quota]])");
    QuotaConfig quota;
    quota.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "namespace") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &quota.ns));
        if (quota.ns.empty() || !IsValidJobId(quota.ns)) {
          return r.Fail(*v, "namespace: must be a job-id prefix ([A-Za-z0-9_.-]{1,128})");
        }
      } else if (key == "max_jobs" || key == "max_concurrent_runs") {
        int* field = key == "max_jobs" ? &quota.max_jobs : &quota.max_concurrent_runs;
        GNOMON_RETURN_IF_ERROR(GetInt(r, *v, key, field));
        if (*field < 0) return r.Fail(*v, std::string(key) + ": must be >= 0 (0 = no limit)");
      } else {
        return UnknownKey(r, *k, {"namespace", "max_jobs", "max_concurrent_runs"});
      }
    }
    if (quota.ns.empty()) return r.Fail(elem, "namespace is required");
    for (const QuotaConfig& q : *out) {
      if (q.ns == quota.ns) {
        return r.Fail(elem,
                      "namespace \"" + quota.ns + "\" already has a quota (" + q.source + ")");
      }
    }
    out->push_back(std::move(quota));
  }
  return Status::Ok();
}

// `[[policy]]` tables: namespace, executors, commands, egress_allow, egress_deny, run_as,
// allow_root. Checked as a whole by Policies::Make (ValidateServeConfig).
Status ParsePolicies(const std::string& file, const toml::node& n, std::vector<PolicyConfig>* out) {
  const Reporter r(file, "policy");
  const toml::array* policies = n.as_array();
  if (policies == nullptr) return r.Fail(n, "must be an array of tables ([[policy]])");
  for (const toml::node& elem : *policies) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[policy]])");
    PolicyConfig pc;
    pc.source = Source(file, LineOf(elem));
    ExecutorPolicy& p = pc.policy;
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      Status s;
      if (key == "namespace") {
        s = GetString(r, *v, key, &p.ns);
      } else if (key == "executors") {
        s = GetStringList(r, *v, key, &p.executors);
      } else if (key == "commands") {
        s = GetStringList(r, *v, key, &p.commands);
      } else if (key == "egress_allow") {
        s = GetStringList(r, *v, key, &p.egress_allow);
      } else if (key == "egress_deny") {
        s = GetStringList(r, *v, key, &p.egress_deny);
      } else if (key == "run_as") {
        s = GetString(r, *v, key, &p.run_as);
      } else if (key == "allow_root") {
        s = GetBool(r, *v, key, &p.allow_root);
      } else {
        return UnknownKey(r, *k,
                          {"namespace", "executors", "commands", "egress_allow", "egress_deny",
                           "run_as", "allow_root"});
      }
      GNOMON_RETURN_IF_ERROR(s);
    }
    out->push_back(std::move(pc));
  }
  std::vector<ExecutorPolicy> all;
  for (const PolicyConfig& pc : *out) all.push_back(pc.policy);
  Result<Policies> checked = Policies::Make(std::move(all));
  if (!checked.ok()) return r.Fail(n, checked.status().message());
  return Status::Ok();
}

Status ParseCalendars(const std::string& file, const std::string& base_dir, const toml::node& n,
                      Calendars* out) {
  const Reporter r(file, "calendar");
  const toml::array* calendars = n.as_array();
  if (calendars == nullptr) return r.Fail(n, "must be an array of tables ([[calendar]])");
  for (const toml::node& elem : *calendars) {
    const toml::table* t = elem.as_table();
    if (t == nullptr) return r.Fail(elem, "must be a table ([[calendar]])");
    Calendars::Calendar cal;
    cal.source = Source(file, LineOf(elem));
    for (const auto& [k, v] : Ordered(*t)) {
      const std::string_view key = k->str();
      if (key == "id") {
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &cal.id));
      } else if (key == "dates") {
        const toml::array* dates = v->as_array();
        if (dates == nullptr) return r.Fail(*v, "dates: expected an array of dates or strings");
        for (const toml::node& d : *dates) {
          std::ostringstream text;
          if (const auto* s = d.as_string())
            text << s->get();
          else if (const auto* day = d.as_date())
            text << day->get();
          else
            return r.Fail(d, "dates: expected a date or a string");
          cal.entries.push_back(text.str());
        }
      } else if (key == "file") {
        std::string path;
        GNOMON_RETURN_IF_ERROR(GetString(r, *v, key, &path));
        path = Resolve(base_dir, path);
        Result<std::string> text = ReadConfigFile(path);
        if (!text.ok()) return r.Fail(*v, "file: " + std::string(text.status().message()));
        std::istringstream lines(*text);
        for (std::string line; std::getline(lines, line);) {
          // A comment starts at a '#' that begins the line or follows a blank ("SUN#1" is not one).
          for (size_t h = line.find('#'); h != std::string::npos; h = line.find('#', h + 1)) {
            if (h == 0 || line[h - 1] == ' ' || line[h - 1] == '\t') {
              line.resize(h);
              break;
            }
          }
          const size_t b = line.find_first_not_of(" \t\r");
          if (b == std::string::npos) continue;
          cal.entries.push_back(line.substr(b, line.find_last_not_of(" \t\r") - b + 1));
        }
      } else {
        return UnknownKey(r, *k, {"id", "dates", "file"});
      }
    }
    if (cal.id.empty()) return r.Fail(elem, "id is required");
    if (Status s = out->Add(std::move(cal)); !s.ok()) return r.Fail(elem, s.message());
  }
  return Status::Ok();
}

}  // namespace gnomon::server
