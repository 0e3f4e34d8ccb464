#include "src/server/http_api.h"

#include <algorithm>
#include <exception>
#include <functional>

#include "src/server/api_util.h"
#include "src/server/job_json.h"

namespace gnomon::server {

namespace {

// Longest request path routed; longer ones get 414 before any pattern sees them.
constexpr size_t kMaxPathLength = 1024;

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  if (path.empty() || path[0] != '/') return out;
  path.remove_prefix(1);
  while (true) {
    const size_t slash = path.find('/');
    out.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

// The host of a Host header or of an origin's authority ("[::1]:8080" -> "::1").
std::string_view HostOf(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    return close == std::string_view::npos ? authority : authority.substr(1, close - 1);
  }
  return authority.substr(0, authority.find(':'));
}

// "host[:port]" with the scheme's default port made explicit, lower-cased.
std::string NormalizedAuthority(std::string_view authority, std::string_view scheme) {
  std::string out;
  for (char c : authority) out += Lower(c);
  const size_t bracket = out.rfind(']');
  const size_t colon = out.rfind(':');
  const bool has_port =
      colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  if (!has_port) out += scheme == "https" ? ":443" : ":80";
  return out;
}

// Whether an Origin header names the server the request was sent to (its Host), whatever the
// scheme (TLS may end at a proxy).
bool SameOrigin(std::string_view origin, std::string_view host) {
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos) return false;
  const std::string_view scheme = origin.substr(0, sep);
  if (scheme != "http" && scheme != "https") return false;
  std::string_view authority = origin.substr(sep + 3);
  if (authority.empty() || authority.find('/') != std::string_view::npos) return false;
  return NormalizedAuthority(authority, scheme) == NormalizedAuthority(host, scheme);
}

bool IsJson(std::string_view content_type) {
  const std::string_view type = content_type.substr(0, content_type.find(';'));
  std::string_view t = type;
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  return EqualsIgnoringCase(t, "application/json");
}

}  // namespace

// One route: a path pattern ("*" = any one segment), its methods, the role each needs (nullopt =
// public) and its handler.
struct HttpApi::Route {
  std::vector<std::string_view> pattern;
  std::vector<std::string_view> methods;
  std::function<std::optional<TokenRole>(std::string_view method)> role;
  ApiHandler* handler;
  bool probe = false;  // also served on the probe listener
  bool asset = false;  // a dashboard file: no Origin/Sec-Fetch checks, its own caching

  bool Matches(const std::vector<std::string>& s) const {
    if (s.size() != pattern.size()) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (pattern[i] != "*" && s[i] != pattern[i]) return false;
    }
    return true;
  }
};

Result<std::pair<std::string, int>> ParseListenAddress(std::string_view listen) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("listen: \"" + Shown(listen) + "\" " + std::string(why));
  };
  std::string host;
  std::string_view rest;
  if (!listen.empty() && listen[0] == '[') {
    const size_t close = listen.find(']');
    if (close == std::string_view::npos) return bad("has no closing ']'");
    host = std::string(listen.substr(1, close - 1));
    rest = listen.substr(close + 1);
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) return bad("is not host:port");
    host = std::string(listen.substr(0, colon));
    rest = listen.substr(colon);
  }
  if (host.empty()) return bad("has no host");
  if (rest.size() < 2 || rest[0] != ':') return bad("has no port");
  std::optional<int64_t> port = ParsePositive(rest.substr(1));
  if (!port || *port > 65535) return bad("has an invalid port (0-65535)");
  return std::pair(host, static_cast<int>(*port));
}

HttpApi::HttpApi(Scheduler& scheduler, Coordinator& coordinator, JobCatalog& catalog,
                 MetricsObserver& metrics, HttpApiOptions options, std::vector<ApiToken> tokens)
    : catalog_(catalog),
      metrics_(metrics),
      options_(std::move(options)),
      tokens_(TokenSet(std::move(tokens))),
      quotas_(*Quotas::Make({}, coordinator)),
      jobs_(scheduler, catalog, options_.job_list_max_age,
            options_.clock != nullptr ? *options_.clock : SystemClock::Get()),
      probes_(coordinator),
      metrics_handler_(metrics, coordinator, jobs_),
      assets_(options_.version, options_.auth != AuthMode::kNone),
      cron_(options_.clock != nullptr ? *options_.clock : SystemClock::Get(), catalog.calendars()),
      nodes_(coordinator),
      audit_handler_(catalog.audit()),
      runs_(scheduler, coordinator, quotas_, options_.runs_scan_budget, options_.max_json_depth),
      jobs_handler_(scheduler, coordinator, catalog, jobs_, quotas_,
                    JobsHandler::Options{options_.job_defaults, options_.max_json_depth,
                                         options_.max_backfill_fires}) {
  GNOMON_CHECK(ValidateTokens(tokens_.Get()->tokens()).ok());
  if (Result<std::pair<std::string, int>> addr = ParseListenAddress(options_.listen); addr.ok()) {
    listen_host_ = addr->first;
  }
  auto is_get = [](std::string_view m) { return m == "GET"; };
  auto public_route = [](std::string_view) -> std::optional<TokenRole> { return std::nullopt; };
  auto needs = [](TokenRole r) {
    return [r](std::string_view) -> std::optional<TokenRole> { return r; };
  };
  auto read_or_admin = [is_get](std::string_view m) -> std::optional<TokenRole> {
    return is_get(m) ? TokenRole::kRead : TokenRole::kAdmin;
  };
  routes_ = {
      {{"healthz"}, {"GET"}, public_route, &probes_, true},
      {{"readyz"}, {"GET"}, public_route, &probes_, true},
      {{"metrics"}, {"GET"}, needs(TokenRole::kRead), &metrics_handler_},
      {{"api", "v1", "openapi.json"}, {"GET"}, public_route, &assets_},
      {{"api", "v1", "jobs"}, {"GET", "POST"}, read_or_admin, &jobs_handler_},
      {{"api", "v1", "jobs", "*"}, {"GET", "PUT", "DELETE"}, read_or_admin, &jobs_handler_},
      {{"api", "v1", "jobs", "*", "pause"}, {"POST"}, needs(TokenRole::kOperate), &jobs_handler_},
      {{"api", "v1", "jobs", "*", "resume"}, {"POST"}, needs(TokenRole::kOperate), &jobs_handler_},
      {{"api", "v1", "jobs", "*", "trigger"}, {"POST"}, needs(TokenRole::kOperate), &jobs_handler_},
      {{"api", "v1", "jobs", "*", "backfill"},
       {"POST"},
       needs(TokenRole::kOperate),
       &jobs_handler_},
      {{"api", "v1", "runs"}, {"GET"}, needs(TokenRole::kRead), &runs_},
      {{"api", "v1", "runs", "*"}, {"GET"}, needs(TokenRole::kRead), &runs_},
      {{"api", "v1", "runs", "*", "cancel"}, {"POST"}, needs(TokenRole::kOperate), &runs_},
      {{"api", "v1", "runs", "*", "rerun"}, {"POST"}, needs(TokenRole::kOperate), &runs_},
      {{"api", "v1", "nodes"}, {"GET"}, needs(TokenRole::kRead), &nodes_},
      {{"api", "v1", "cron", "preview"}, {"GET"}, needs(TokenRole::kRead), &cron_},
      {{"api", "v1", "calendars"}, {"GET"}, needs(TokenRole::kRead), &cron_},
      {{"api", "v1", "audit"}, {"GET"}, needs(TokenRole::kAdmin), &audit_handler_},
  };
}

HttpApi::~HttpApi() = default;

Status HttpApi::SetTokens(std::vector<ApiToken> tokens) {
  GNOMON_RETURN_IF_ERROR(ValidateTokens(tokens));
  tokens_.Set(TokenSet(std::move(tokens)));
  return Status::Ok();
}

void HttpApi::SetQuotas(Quotas quotas) { quotas_.Set(std::move(quotas)); }

Duration HttpApi::SteadyNow() const {
  return (options_.clock != nullptr ? *options_.clock : SystemClock::Get()).SteadyNow();
}

std::optional<Response> HttpApi::Admit(const Request& head) {
  try {
    Call call{head, SplitPath(head.path)};
    const Route* route = nullptr;
    return AdmitCall(call, route);
  } catch (const std::exception& e) {
    return Error(500, "internal", std::string("internal error: ") + e.what());
  }
}

std::optional<Response> HttpApi::AdmitCall(Call& call, const Route*& route) {
  const Request& req = call.req;
  if (req.path.size() > kMaxPathLength) {
    return Error(414, "uri_too_long",
                 "path longer than " + std::to_string(kMaxPathLength) + " bytes");
  }
  for (char c : req.path) {
    if (c <= 0x20 || c >= 0x7f) {
      return Error(400, "invalid_argument", "path: contains a control, space or non-ASCII byte");
    }
  }
  // The dashboard's files: only the embedded paths, so a typo under /api stays a JSON 404.
  static const Route kAsset{
      {},      {"GET"}, [](std::string_view) -> std::optional<TokenRole> {
                              return std::nullopt; },
      nullptr, false,   true};
  route = nullptr;
  if (!req.probe_lane && AssetsHandler::IsAsset(req.path)) {
    route = &kAsset;
  } else {
    for (const Route& r : routes_) {
      if (r.Matches(call.segments) && (r.probe || !req.probe_lane)) route = &r;
    }
  }
  if (route == nullptr) return Error(404, "not_found", "no such endpoint: " + Shown(req.path));
  call.method = req.method == "HEAD" ? "GET" : req.method;
  if (std::find(route->methods.begin(), route->methods.end(), call.method) ==
      route->methods.end()) {
    std::string allow;
    for (std::string_view m : route->methods) allow += (allow.empty() ? "" : ", ") + std::string(m);
    Response r = Error(405, "method_not_allowed",
                       Shown(req.method) + " is not allowed here (allowed: " + allow + ")");
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  // DNS rebinding: a page of another name that resolves to this server sends its own name.
  if (req.host.empty()) return Error(400, "invalid_argument", "Host: the header is required");
  const std::string_view host = HostOf(req.host);
  const bool host_ok =
      IsIpLiteral(host) || EqualsIgnoringCase(host, "localhost") ||
      EqualsIgnoringCase(host, listen_host_) ||
      std::any_of(options_.allowed_hosts.begin(), options_.allowed_hosts.end(),
                  [&](const std::string& h) { return h == "*" || EqualsIgnoringCase(h, host); });
  if (!host_ok) {
    Denied(call, 421, "host");
    return Error(421, "misdirected_request",
                 "Host \"" + Shown(req.host) +
                     "\" is not this server's address: add it to [api] allowed_hosts");
  }
  // Cross-site requests: a page of another origin may send simple requests (forms, no-cors
  // fetches) with the user's network position; browsers name their origin.
  if (!route->asset) {
    if (!req.origin.empty() && !SameOrigin(req.origin, req.host)) {
      Denied(call, 403, "origin");
      return Error(403, "cross_origin",
                   "Origin \"" + Shown(req.origin) +
                       "\" is not this server: cross-site requests "
                       "are refused");
    }
    if (req.sec_fetch_site == "cross-site" || req.sec_fetch_site == "same-site") {
      Denied(call, 403, "fetch_site");
      return Error(403, "cross_origin",
                   "Sec-Fetch-Site: " + Shown(req.sec_fetch_site) +
                       ": requests from other sites are refused");
    }
  }
  const bool has_body = (req.content_length && *req.content_length > 0) || req.chunked;
  if (has_body && !IsJson(req.content_type)) {
    return Error(415, "unsupported_media_type",
                 "Content-Type: \"" + Shown(req.content_type) +
                     "\": request bodies must be application/json");
  }
  const std::optional<TokenRole> need = route->role(call.method);
  if (!need) return std::nullopt;
  if (options_.auth == AuthMode::kNone) {
    call.who = Principal{};  // anonymous admin of every job
    return std::nullopt;
  }
  const std::shared_ptr<const TokenSet> tokens = tokens_.Get();
  std::string_view auth = req.authorization;
  const ApiToken* found = nullptr;
  if (auth.size() > 7 && EqualsIgnoringCase(auth.substr(0, 7), "bearer ")) {
    found = tokens->Find(auth.substr(7));
  } else if (auth.empty() && !req.client_subject.empty()) {
    // Mutual TLS: the verified client certificate stands for the [[token]] of its subject.
    found = tokens->FindSubject(req.client_subject);
    if (found == nullptr) {
      Denied(call, 401, "unknown_subject");
      Response r = Error(401, "unauthenticated",
                         "client certificate \"" + Shown(req.client_subject) +
                             "\" is no [[token]]'s subject; send a bearer token");
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gnomon\"");
      return r;
    }
  }
  if (found == nullptr) {
    Denied(call, 401, auth.empty() ? "missing_token" : "invalid_token");
    Response r = Error(401, "unauthenticated",
                       auth.empty() ? "missing bearer token (Authorization: Bearer <token>)"
                                    : "invalid bearer token");
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gnomon\"");
    return r;
  }
  call.who = Principal{found->name, found->role, found->namespaces, found->mutations_per_minute};
  if (call.who.role < *need) {
    Denied(call, 403, "role");
    return Error(403, "permission_denied",
                 "token \"" + found->name + "\" has role " + std::string(ToString(found->role)) +
                     "; this needs " + std::string(ToString(*need)));
  }
  return std::nullopt;
}

Response HttpApi::Handle(const Request& request) {
  try {
    Call call{request, SplitPath(request.path)};
    const Route* route = nullptr;
    std::optional<Response> rejected = AdmitCall(call, route);
    Response response;
    if (rejected) {
      response = std::move(*rejected);
    } else if (route->asset) {
      response = assets_.Handle(call);
    } else {
      if (call.method != "GET") {
        const int rate = call.who.mutations_per_minute > 0 ? call.who.mutations_per_minute
                                                           : options_.mutations_per_minute;
        const Duration wait =
            rates_.Take(call.who.name, rate, options_.mutation_burst, SteadyNow());
        if (wait > Duration(0)) {
          metrics_.CountRateLimited();
          Response r = Error(429, "rate_limited",
                             "token \"" + call.who.name + "\" made more than " +
                                 std::to_string(rate) + " mutating calls a minute");
          r.headers.emplace_back("Retry-After", std::to_string((wait.count() + 999) / 1000));
          r.headers.emplace_back("Cache-Control", "no-store");
          return r;
        }
      }
      response = route->handler->Handle(call);
      if (!call.denied.empty()) Denied(call, response.status, call.denied);
    }
    if (!call.action.empty()) Record(call, response);
    if (route == nullptr || !route->asset)
      response.headers.emplace_back("Cache-Control", "no-store");
    return response;
  } catch (const std::exception& e) {
    return Error(500, "internal", std::string("internal error: ") + e.what());
  } catch (...) {
    return Error(500, "internal", "internal error");
  }
}

void HttpApi::Denied(const Call& call, int status, std::string_view reason) {
  metrics_.CountAuthFailure(reason);
  if (options_.logger == nullptr) return;
  int64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    const int64_t second = SteadyNow().count() / 1000;
    if (second != log_second_) {
      log_second_ = second;
      log_lines_ = 0;
    }
    if (++log_lines_ > kAuthLogPerSecond) {
      ++log_suppressed_;
      return;
    }
    suppressed = std::exchange(log_suppressed_, 0);
  }
  Logger::Fields fields = {{"status", std::to_string(status)},
                           {"reason", std::string(reason)},
                           {"token", call.who.name == "anonymous" ? "unknown" : call.who.name},
                           {"remote", call.req.remote_address},
                           {"method", Shown(call.req.method, 16)},
                           {"path", Shown(call.req.path, 256)}};
  if (suppressed > 0) fields.emplace_back("suppressed_before", std::to_string(suppressed));
  options_.logger->Log(LogLevel::kWarn, "auth_failed", "", "", fields);
}

void HttpApi::Record(const Call& call, const Response& response) {
  AuditRecord r;
  r.who = call.who.name;
  r.action = call.action;
  r.target = call.target;
  r.result = AuditResultOfHttpStatus(response.status);
  if (response.status < 300) {
    r.before = call.before;
    r.after = call.after;
  }
  catalog_.audit().Record(std::move(r));
}

}  // namespace gnomon::server
