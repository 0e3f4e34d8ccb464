#include "src/server/http_api.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <functional>
#include <list>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "gnomon/cron.h"
#include "src/server/job_json.h"
#include "src/server/web_assets.h"

namespace gnomon::server {

const WebAsset* FindWebAsset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& asset : WebAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

using nlohmann::json;
using Response = HttpApi::Response;
using Request = HttpApi::Request;

namespace {

// The first and last instants formatted with a four-digit year: 0000-01-01T00:00:00.000Z and
// 9999-12-31T23:59:59.999Z. Others take Instant::ToRfc3339's path.
constexpr int64_t kFirstFourDigitYearMs = -62167219200000;
constexpr int64_t kLastFourDigitYearMs = 253402300799999;

// Writes `v` (0 <= v < 10^n) as exactly `n` decimal digits.
void PutDigits(char* p, int64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

}  // namespace

void AppendRfc3339Json(std::string& out, Instant t) {
  const int64_t ms = t.unix_millis();
  if (ms < kFirstFourDigitYearMs || ms > kLastFourDigitYearMs) {
    out += '"';
    out += t.ToRfc3339();
    out += '"';
    return;
  }
  // Floor divisions (instants before 1970 are negative), then the proleptic Gregorian date of a
  // day number (H. Hinnant's civil_from_days, which cctz agrees with in this range).
  const int64_t seconds = t.unix_seconds();
  const int64_t milli = ms - seconds * 1000;
  int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  const int64_t second_of_day = seconds - days * 86400;
  days += 719468;  // from 1970-01-01 to 0000-03-01
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t day_of_era = days - era * 146097;
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t month_from_march = (5 * day_of_year + 2) / 153;
  const int64_t day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
  const int64_t month = month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
  const int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  char buf[] = "\"YYYY-MM-DDThh:mm:ss.mmmZ\"";
  PutDigits(buf + 1, year, 4);
  PutDigits(buf + 6, month, 2);
  PutDigits(buf + 9, day, 2);
  PutDigits(buf + 12, second_of_day / 3600, 2);
  PutDigits(buf + 15, second_of_day / 60 % 60, 2);
  PutDigits(buf + 18, second_of_day % 60, 2);
  PutDigits(buf + 21, milli, 3);
  out.append(buf, sizeof buf - 1);
}

void AppendJsonString(std::string& out, std::string_view s) {
  // Non-ASCII text (rare in run records) goes through nlohmann::json, which validates the UTF-8
  // and replaces invalid bytes: one implementation of that, so the output cannot drift.
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      out += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    out += '\\';
    switch (c) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '\b':
        out += 'b';
        break;
      case '\t':
        out += 't';
        break;
      case '\n':
        out += 'n';
        break;
      case '\f':
        out += 'f';
        break;
      case '\r':
        out += 'r';
        break;
      default:
        out += "u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
        break;
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

void AppendRunJson(std::string& out, const RunRecord& r, bool with_output) {
  // Keys in sorted order, as nlohmann::json (a std::map) writes them.
  out += "{\"attempt\":";
  AppendInt(out, r.attempt);
  out += ",\"error\":";
  AppendJsonString(out, r.error);
  out += ",\"exit_code\":";
  if (r.exit_code) {
    AppendInt(out, *r.exit_code);
  } else {
    out += "null";
  }
  out += ",\"fencing_token\":";
  AppendInt(out, r.fencing_token);
  out += ",\"finished_at\":";
  if (r.outcome == RunOutcome::kRunning) {
    out += "null";
  } else {
    AppendRfc3339Json(out, r.finished_at);
  }
  out += ",\"job_id\":";
  AppendJsonString(out, r.job_id);
  out += ",\"node_id\":";
  AppendJsonString(out, r.node_id);
  out += ",\"outcome\":";
  AppendJsonString(out, ToString(r.outcome));
  if (with_output) {
    out += ",\"output\":";
    AppendJsonString(out, r.output);
  }
  out += ",\"run_id\":";
  AppendJsonString(out, r.run_id);
  out += ",\"scheduled_at\":";
  AppendRfc3339Json(out, r.scheduled_at);
  out += ",\"shard\":";
  AppendInt(out, r.shard);
  out += ",\"shard_count\":";
  AppendInt(out, r.shard_count);
  out += ",\"skip_reason\":";
  AppendJsonString(out, r.skip_reason);
  out += ",\"started_at\":";
  AppendRfc3339Json(out, r.started_at);
  out += '}';
}

// Who is calling: a configured token, or "anonymous" when no tokens are configured.
struct HttpApi::Principal {
  std::string name = "anonymous";
  TokenRole role = TokenRole::kAdmin;
  std::vector<std::string> namespaces;  // empty = all jobs

  bool Allows(std::string_view job_id) const {
    if (namespaces.empty()) return true;
    for (const std::string& prefix : namespaces) {
      if (job_id.substr(0, prefix.size()) == prefix) return true;
    }
    return false;
  }
};

namespace {

// Longest request path routed; longer ones get 414 before any pattern sees them.
constexpr size_t kMaxPathLength = 1024;
// Longest run id accepted in a path (a job id, '@', 20 digits, '#', 5 digits).
constexpr size_t kMaxRunIdLength = 160;
// Largest page of runs and default.
constexpr int kMaxRunsLimit = 1000;
constexpr int kDefaultRunsLimit = 50;
// Largest page of jobs and default; longest `q` filter of the job list.
constexpr int kMaxJobsLimit = 1000;
constexpr int kDefaultJobsLimit = 100;
constexpr size_t kMaxJobsQuery = 128;
// Cron preview: most fires.
constexpr int kMaxPreviewFires = 100;

enum class Route {
  kHealthz,
  kReadyz,
  kMetrics,
  kOpenApi,
  kJobs,         // GET list, POST create
  kJob,          // GET, PUT, DELETE
  kJobAction,    // POST pause|resume|trigger
  kRuns,         // GET
  kRun,          // GET
  kNodes,        // GET
  kCronPreview,  // GET
  kAudit,        // GET
  kStatic,       // GET an embedded dashboard file (web/)
};

// The role a (route, method) needs; nullopt = public.
std::optional<TokenRole> RequiredRole(Route route, std::string_view method) {
  switch (route) {
    case Route::kHealthz:
    case Route::kReadyz:
    case Route::kOpenApi:
    case Route::kStatic:
      return std::nullopt;
    case Route::kJobs:
    case Route::kJob:
      return method == "GET" || method == "HEAD" ? TokenRole::kRead : TokenRole::kAdmin;
    case Route::kJobAction:
      return TokenRole::kOperate;
    case Route::kAudit:
      return TokenRole::kAdmin;
    default:
      return TokenRole::kRead;
  }
}

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

struct Resolved {
  std::optional<Route> route;
  std::vector<std::string_view> methods;  // allowed on the path (for 405)
};

Resolved Resolve(std::string_view path, const std::vector<std::string>& s) {
  // The dashboard's files: only the embedded paths, so a typo under /api stays a JSON 404.
  if (FindWebAsset(path) != nullptr) return {Route::kStatic, {"GET"}};
  auto is = [&](std::initializer_list<std::string_view> want) {
    if (s.size() != want.size()) return false;
    size_t i = 0;
    for (std::string_view w : want) {
      if (w != "*" && s[i] != w) return false;
      ++i;
    }
    return true;
  };
  if (is({"healthz"})) return {Route::kHealthz, {"GET"}};
  if (is({"readyz"})) return {Route::kReadyz, {"GET"}};
  if (is({"metrics"})) return {Route::kMetrics, {"GET"}};
  if (is({"api", "v1", "openapi.json"})) return {Route::kOpenApi, {"GET"}};
  if (is({"api", "v1", "jobs"})) return {Route::kJobs, {"GET", "POST"}};
  if (is({"api", "v1", "jobs", "*"})) return {Route::kJob, {"GET", "PUT", "DELETE"}};
  if (is({"api", "v1", "jobs", "*", "pause"}) || is({"api", "v1", "jobs", "*", "resume"}) ||
      is({"api", "v1", "jobs", "*", "trigger"})) {
    return {Route::kJobAction, {"POST"}};
  }
  if (is({"api", "v1", "runs"})) return {Route::kRuns, {"GET"}};
  if (is({"api", "v1", "runs", "*"})) return {Route::kRun, {"GET"}};
  if (is({"api", "v1", "nodes"})) return {Route::kNodes, {"GET"}};
  if (is({"api", "v1", "cron", "preview"})) return {Route::kCronPreview, {"GET"}};
  if (is({"api", "v1", "audit"})) return {Route::kAudit, {"GET"}};
  return {};
}

// A printable, bounded rendering of user text inside a message.
std::string Shown(std::string_view s, size_t max = 64) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

Response Error(int status, std::string_view code, std::string message,
               std::string_view field = "") {
  json e = {{"code", code}, {"message", std::move(message)}};
  if (!field.empty()) e["field"] = field;
  Response r;
  r.status = status;
  r.body = DumpJson(json{{"error", std::move(e)}});
  return r;
}

// The HTTP answer for a library Status (handlers map the context-specific ones first).
Response FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return Error(400, "invalid_argument", s.message());
    case StatusCode::kNotFound:
      return Error(404, "not_found", s.message());
    case StatusCode::kAlreadyExists:
      return Error(409, "already_exists", s.message());
    case StatusCode::kFailedPrecondition:
      return Error(409, "failed_precondition", s.message());
    case StatusCode::kUnavailable:
      return Error(503, "unavailable", s.message());
    case StatusCode::kDeadlineExceeded:
      return Error(504, "deadline_exceeded", s.message());
    default:
      return Error(500, "internal", s.message());
  }
}

Response Json(int status, const json& body) {
  Response r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

// Whether an If-None-Match header ("*", or a comma-separated list of entity tags, weak or not)
// names `etag`.
bool EtagMatches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    while (!tag.empty() && tag.front() == ' ') tag.remove_prefix(1);
    while (!tag.empty() && tag.back() == ' ') tag.remove_suffix(1);
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

// A dashboard file. File names carry no content hash, so browsers must revalidate every time
// ("no-cache"): the ETag makes that a 304 without a body, and an upgraded binary is never
// shadowed by a stale cached script.
// `X-Gnomon-Auth` tells the page whether to ask for a token ("bearer") or not ("none") without
// a probe that would answer 401.
Response StaticFile(const WebAsset& asset, std::string_view if_none_match, bool auth_required) {
  Response r;
  r.headers = {{"ETag", std::string(asset.etag)},
               {"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Gnomon-Auth", auth_required ? "bearer" : "none"}};
  if (asset.content_type.substr(0, 9) == "text/html") {
    // Everything the page loads is embedded: no inline script or style, no other origin.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                           "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
  }
  if (!if_none_match.empty() && EtagMatches(if_none_match, asset.etag)) {
    r.status = 304;
    return r;
  }
  r.content_type = std::string(asset.content_type);
  r.body = std::string(asset.body);
  return r;
}

json InstantOrNull(const std::optional<Instant>& t) {
  return t ? json(t->ToRfc3339()) : json(nullptr);
}

Response InvalidParam(std::string_view name, std::string_view what) {
  return Error(400, "invalid_argument", std::string(name) + ": " + std::string(what), name);
}

Response InvalidJobId(std::string_view id, std::string_view field = "id") {
  return Error(
      400, "invalid_argument",
      std::string(field) + ": \"" + Shown(id) + "\" is not a valid job id ([A-Za-z0-9_.-]{1,128})",
      field);
}

// Positive decimal integer of at most 18 digits.
std::optional<int64_t> ParsePositive(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// If-Match: `3`, `"3"` or `W/"3"`.
std::optional<int64_t> ParseIfMatch(std::string_view s) {
  if (s.substr(0, 2) == "W/") s.remove_prefix(2);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return ParsePositive(s);
}

std::string ETag(int64_t version) { return "\"" + std::to_string(version) + "\""; }

// Query parameters: rejects unknown and repeated ones, naming them.
Result<std::map<std::string, std::string>> Params(const Request& req,
                                                  std::initializer_list<std::string_view> known) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : req.params) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      return InvalidArgumentError(Shown(k) + ": unknown query parameter");
    }
    if (!out.emplace(k, v).second) {
      return InvalidArgumentError(Shown(k) + ": given more than once");
    }
  }
  return out;
}

// The `limit` parameter of a paged list (when present in `params`): decimal digits, at least 1;
// values above `max` are taken as `max`. Leaves `*limit` unchanged when absent.
std::optional<Response> ParseLimit(const std::map<std::string, std::string>& params, int max,
                                   int* limit) {
  auto it = params.find("limit");
  if (it == params.end()) return std::nullopt;
  const std::string& s = it->second;
  const bool digits = !s.empty() && s.size() <= 64 &&
                      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return InvalidParam("limit", "\"" + Shown(s) + "\" is not a positive integer");
  std::optional<int64_t> n = ParsePositive(s);
  if (n && *n == 0) return InvalidParam("limit", "must be at least 1");
  *limit = !n || *n > max ? max : static_cast<int>(*n);
  return std::nullopt;
}

// Whether `needle` occurs in `hay`, ignoring ASCII case.
bool ContainsIgnoringCase(std::string_view hay, std::string_view needle) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != hay.end();
}

std::string Executor(const JobSpec& s) {
  if (s.in_process) return "in_process";
  if (s.http) return "http";
  if (!s.argv.empty()) return "argv";
  return "command";
}

std::string Describe(const JobSpec& spec) {
  Result<TimeZone> zone = TimeZone::Load(spec.timezone);
  if (!zone.ok()) return "";
  Result<CronExpr> expr = CronExpr::Parse(spec.schedule, CronOptions{*zone, spec.id});
  return expr.ok() ? expr->Describe() : "";
}

json JobViewJson(const JobView& v, std::optional<int64_t> version) {
  return json{{"id", v.spec.id},
              {"spec", JobSpecToJson(v.spec)},
              {"executor", Executor(v.spec)},
              {"schedule_description", Describe(v.spec)},
              {"timezone", v.spec.timezone},
              {"next_fire", InstantOrNull(v.next_fire)},
              {"paused", v.paused},
              {"pause_reason", v.pause_reason},
              {"running", v.running},
              {"read_only", v.spec.read_only},
              {"source", v.spec.source},
              {"version", version ? json(*version) : json(nullptr)}};
}

// Constant-time (in the secret's content) equality; time depends only on `presented`'s length.
bool SecretEquals(std::string_view presented, std::string_view secret) {
  unsigned char diff = presented.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i) {
    const unsigned char s = i < secret.size() ? static_cast<unsigned char>(secret[i]) : 0;
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(presented[i]) ^ s);
  }
  return diff == 0;
}

// A TaskQueue with a fixed number of threads and a bounded queue: when `max_queued`
// connections wait, enqueue (the accept loop) blocks until a worker frees up, so the kernel
// backlog absorbs and then refuses the excess instead of this process holding unbounded sockets.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(int threads, int max_queued) : max_queued_(std::max(1, max_queued)) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.emplace_back([this] { Work(); });
    }
  }
  ~BoundedTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [&] { return jobs_.size() < max_queued_ || shutdown_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shutdown_ && threads_.empty()) return;
      shutdown_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
    threads_.clear();  // joins; queued connections are still served first
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      space_.notify_one();
      fn();
    }
  }

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable space_;
  std::list<std::function<void()>> jobs_;
  bool shutdown_ = false;
  std::vector<std::jthread> threads_;  // last: joined before the rest is destroyed
};

// httplib::Server listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
// libcpp-httplib). When more clients connect at once (keep-alive connections are closed after
// keep_alive_max_count requests, and their clients reconnect together), the kernel drops the
// excess handshakes and those requests wait for a TCP retransmission: 1 s and more. Calling
// listen() again on the bound socket sets a larger backlog.
class Server final : public httplib::Server {
 public:
  bool SetListenBacklog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
};

}  // namespace

// A copy of the scheduler's jobs, shared by the requests that list them (HttpApi::JobsNow).
// Each job's JSON is rendered once per copy, by the first request that shows it: the list's cost
// is then in copying text, not in building and serialising JSON trees.
struct HttpApi::JobsSnapshot {
  struct Entry {
    JobView view;
    std::optional<int64_t> version;  // a dynamic job's backend version; nullopt for config jobs

    // JobViewJson(view, version) as text. Thread-safe.
    const std::string& Rendered() const {
      std::call_once(rendered_once_, [this] { rendered_ = DumpJson(JobViewJson(view, version)); });
      return rendered_;
    }

   private:
    mutable std::once_flag rendered_once_;
    mutable std::string rendered_;
  };
  std::vector<Entry> jobs;  // sorted by id
  uint64_t changes = 0;     // HttpApi::job_changes_ when the copy began
  Duration taken_at{0};     // the clock's SteadyNow() then
};

// One request in flight: what Dispatch and the audit log need.
struct HttpApi::Call {
  const Request& req;
  std::vector<std::string> segments;
  Route route = Route::kHealthz;
  Principal who;
  // Audit (mutating calls only).
  std::string action;
  std::string target;
  std::string before;
  std::string after;
};

std::string_view ToString(TokenRole role) {
  switch (role) {
    case TokenRole::kRead:
      return "read";
    case TokenRole::kOperate:
      return "operate";
    case TokenRole::kAdmin:
      return "admin";
  }
  return "read";
}

Result<TokenRole> ParseTokenRole(std::string_view s) {
  if (s == "read") return TokenRole::kRead;
  if (s == "operate") return TokenRole::kOperate;
  if (s == "admin") return TokenRole::kAdmin;
  return InvalidArgumentError("role: \"" + Shown(s) + "\" is not one of read, operate, admin");
}

Status ValidateTokens(const std::vector<ApiToken>& tokens) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const ApiToken& t = tokens[i];
    const std::string where =
        "token " + std::to_string(i + 1) + (t.name.empty() ? "" : " \"" + Shown(t.name) + "\"");
    if (t.name.empty() || t.name.size() > 128) {
      return InvalidArgumentError(where + ": name: must be 1-128 characters");
    }
    if (!names.insert(t.name).second) return InvalidArgumentError(where + ": name: duplicate");
    if (t.token.size() < kMinTokenLength || t.token.size() > 4096) {
      return InvalidArgumentError(where + ": token: must be " + std::to_string(kMinTokenLength) +
                                  "-4096 characters");
    }
    for (char c : t.token) {
      if (c <= 0x20 || c >= 0x7f) {
        return InvalidArgumentError(where + ": token: only printable ASCII without spaces");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (tokens[j].token == t.token) {
        return InvalidArgumentError(where + ": token: the same secret as token \"" +
                                    Shown(tokens[j].name) + "\"");
      }
    }
    for (const std::string& ns : t.namespaces) {
      if (!IsValidJobId(ns)) {
        return InvalidArgumentError(where + ": namespaces: \"" + Shown(ns) +
                                    "\" is not a job id prefix ([A-Za-z0-9_.-]{1,128})");
      }
    }
  }
  return Status::Ok();
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  const std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

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

HttpApi::HttpApi(Scheduler& scheduler, Coordinator& coordinator, MetricsObserver& metrics,
                 HttpApiOptions options)
    : scheduler_(scheduler),
      coordinator_(coordinator),
      metrics_(metrics),
      options_(std::move(options)) {}

HttpApi::~HttpApi() { Stop(); }

Instant HttpApi::Now() const {
  return options_.clock != nullptr ? options_.clock->Now() : SystemClock::Get().Now();
}

std::shared_ptr<const HttpApi::JobsSnapshot> HttpApi::JobsNow() {
  const Clock& clock = options_.clock != nullptr ? *options_.clock : SystemClock::Get();
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  // Read before the copy: a change made while copying makes the next request copy again.
  const uint64_t changes = job_changes_.load();
  const Duration now = clock.SteadyNow();
  if (snapshot_ != nullptr && snapshot_->changes == changes &&
      now - snapshot_->taken_at < options_.job_list_max_age) {
    return snapshot_;
  }
  std::vector<JobView> views = scheduler_.Jobs();
  auto by_id = [](const JobView& a, const JobView& b) { return a.spec.id < b.spec.id; };
  if (!std::is_sorted(views.begin(), views.end(), by_id)) {
    std::sort(views.begin(), views.end(), by_id);
  }
  auto fresh = std::make_shared<JobsSnapshot>();
  fresh->changes = changes;
  fresh->taken_at = now;
  fresh->jobs = std::vector<JobsSnapshot::Entry>(views.size());
  {
    std::lock_guard<std::mutex> sync_lock(sync_mu_);
    for (size_t i = 0; i < views.size(); ++i) {
      if (auto d = dynamic_.find(views[i].spec.id); d != dynamic_.end()) {
        fresh->jobs[i].version = d->second.version;
      }
      fresh->jobs[i].view = std::move(views[i]);
    }
  }
  snapshot_ = std::move(fresh);
  return snapshot_;
}

// ---------------------------------------------------------------------------------- server --

Status HttpApi::Start() {
  GNOMON_CHECK(!started_);
  Result<std::pair<std::string, int>> addr = ParseListenAddress(options_.listen);
  if (!addr.ok()) return addr.status();
  GNOMON_RETURN_IF_ERROR(ValidateTokens(options_.tokens));
  if (options_.tokens.empty() && !IsLoopbackHost(addr->first)) {
    return InvalidArgumentError(
        "listen: refusing to serve the API on non-loopback address \"" + Shown(addr->first) +
        "\" without authentication: configure at least one [[token]] or listen on 127.0.0.1");
  }
  if (options_.max_body_bytes == 0 || options_.threads < 1 || options_.max_json_depth < 1) {
    return InvalidArgumentError(
        "http api: max_body_bytes, threads and max_json_depth must be >= 1");
  }
  try {
    auto server = std::make_unique<Server>();
    Server& s = *server;
    server_ = std::move(server);
    const int threads = options_.threads;
    const int queued = options_.max_queued_connections;
    s.new_task_queue = [threads, queued] { return new BoundedTaskQueue(threads, queued); };
    auto secs = [](Duration d) { return static_cast<time_t>(d.count() / 1000); };
    auto usecs = [](Duration d) { return static_cast<time_t>((d.count() % 1000) * 1000); };
    s.set_read_timeout(secs(options_.read_timeout), usecs(options_.read_timeout));
    s.set_write_timeout(secs(options_.write_timeout), usecs(options_.write_timeout));
    s.set_keep_alive_timeout(std::max<time_t>(1, secs(options_.keep_alive_timeout)));
    s.set_keep_alive_max_count(static_cast<size_t>(std::max(1, options_.keep_alive_max_count)));
    s.set_payload_max_length(options_.max_body_bytes);
    // httplib writes a response's headers and body with separate send()s; with Nagle's
    // algorithm the body then waits for the client's delayed ACK of the headers, about 40 ms on
    // Linux for every request after the first on a keep-alive connection.
    s.set_tcp_nodelay(true);

    auto convert = [](const httplib::Request& in) {
      Request r;
      r.method = in.method;
      r.path = in.path;
      for (const auto& [k, v] : in.params) r.params.emplace(k, v);
      r.authorization = in.get_header_value("Authorization");
      r.if_match = in.get_header_value("If-Match");
      r.if_none_match = in.get_header_value("If-None-Match");
      return r;
    };
    auto write = [](const Response& from, httplib::Response& to) {
      to.status = from.status;
      for (const auto& [k, v] : from.headers) to.set_header(k, v);
      if (from.status != 204 && from.status != 304) {
        to.set_content(from.body, from.content_type.c_str());
      }
    };
    const size_t max_body = options_.max_body_bytes;

    // Everything without a body is answered here, before httplib reads any content; requests
    // with a body are admitted (route, auth, Content-Length) here, before their body is read.
    s.set_pre_routing_handler(
        [this, convert, write, max_body](const httplib::Request& in, httplib::Response& out) {
          Request req = convert(in);
          const bool has_body = req.method == "POST" || req.method == "PUT" ||
                                req.method == "DELETE" || req.method == "PATCH";
          if (!has_body) {
            write(Handle(req), out);
            return httplib::Server::HandlerResponse::Handled;
          }
          std::optional<Response> early;
          if (in.has_header("Content-Length") &&
              in.get_header_value<uint64_t>("Content-Length") > max_body) {
            early = Error(413, "payload_too_large",
                          "request body larger than " + std::to_string(max_body) + " bytes");
          } else {
            early = Admit(req);
          }
          if (!early) return httplib::Server::HandlerResponse::Unhandled;
          early->headers.emplace_back("Connection", "close");
          write(*early, out);
          return httplib::Server::HandlerResponse::Handled;
        });
    auto with_body = [this, convert, write, max_body](const httplib::Request& in,
                                                      httplib::Response& out,
                                                      const httplib::ContentReader& reader) {
      Request req = convert(in);
      bool too_large = false;
      bool read_ok = true;
      // No Content-Length and not chunked: no body (reading would wait for EOF).
      if (in.has_header("Content-Length") ||
          in.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
        read_ok = reader([&](const char* data, size_t len) {
          if (req.body.size() + len > max_body) {
            too_large = true;
            return false;
          }
          req.body.append(data, len);
          return true;
        });
      }
      Response res;
      if (too_large) {
        res = Error(413, "payload_too_large",
                    "request body larger than " + std::to_string(max_body) + " bytes");
        res.headers.emplace_back("Connection", "close");
      } else if (!read_ok) {
        res = Error(400, "invalid_argument", "the request body could not be read");
        res.headers.emplace_back("Connection", "close");
      } else {
        res = Handle(req);
      }
      write(res, out);
    };
    s.Post("/.*", with_body);
    s.Put("/.*", with_body);
    s.Delete("/.*", with_body);
    s.Patch("/.*", with_body);
    s.set_exception_handler(
        [write](const httplib::Request&, httplib::Response& out, std::exception_ptr) {
          write(Error(500, "internal", "internal error"), out);
        });
    s.set_error_handler([write](const httplib::Request&, httplib::Response& out) {
      if (!out.body.empty()) return;
      if (out.status == 413) {
        write(Error(413, "payload_too_large", "request body too large"), out);
      } else if (out.status == 404) {
        write(Error(404, "not_found", "no such endpoint"), out);
      } else if (out.status >= 400) {
        write(Error(out.status, "bad_request", "the request could not be processed"), out);
      }
    });

    // httplib's default also sets SO_REUSEPORT, which lets a second gnomon bind the same port
    // and silently share its requests; a taken port must be an error.
    s.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    const int port = addr->second == 0
                         ? s.bind_to_any_port(addr->first)
                         : (s.bind_to_port(addr->first, addr->second) ? addr->second : -1);
    if (port <= 0) {
      server_.reset();
      return UnavailableError("listen: cannot bind " + Shown(options_.listen));
    }
    if (!s.SetListenBacklog(std::max(1, options_.listen_backlog))) {
      server_.reset();
      return UnavailableError("listen: cannot listen on " + Shown(options_.listen));
    }
    port_ = port;
  } catch (const std::exception& e) {
    server_.reset();
    return InternalError(std::string("http api: ") + e.what());
  }
  started_ = true;
  listening_done_ = false;
  thread_ = std::jthread([this] {
    try {
      server_->listen_after_bind();
    } catch (...) {
      // listen_after_bind does not throw in practice; a failure ends serving.
    }
    listening_done_ = true;
  });
  // httplib's stop() is a no-op until the accept loop runs; wait for it so Stop() always works.
  while (!server_->is_running() && !listening_done_) std::this_thread::yield();
  return Status::Ok();
}

void HttpApi::Stop() {
  if (!started_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  started_ = false;
}

// ---------------------------------------------------------------------------------- routing --

std::optional<Response> HttpApi::Admit(const Request& request) {
  try {
    Call call{request, SplitPath(request.path)};
    return Admit(call);
  } catch (const std::exception& e) {
    return Error(500, "internal", std::string("internal error: ") + e.what());
  }
}

std::optional<Response> HttpApi::Admit(Call& call) {
  const Request& request = call.req;
  {
    if (request.path.size() > kMaxPathLength) {
      return Error(414, "uri_too_long",
                   "path longer than " + std::to_string(kMaxPathLength) + " bytes");
    }
    for (char c : request.path) {
      if (c <= 0x20 || c >= 0x7f) {
        return Error(400, "invalid_argument", "path: contains a control, space or non-ASCII byte");
      }
    }
    const Resolved resolved = Resolve(request.path, call.segments);
    if (!resolved.route) return Error(404, "not_found", "no such endpoint: " + Shown(request.path));
    // (Not a conditional expression: its std::string temporary would leave a dangling view.)
    std::string_view method = request.method;
    if (method == "HEAD") method = "GET";
    if (std::find(resolved.methods.begin(), resolved.methods.end(), method) ==
        resolved.methods.end()) {
      std::string allow;
      for (std::string_view m : resolved.methods)
        allow += (allow.empty() ? "" : ", ") + std::string(m);
      Response r = Error(405, "method_not_allowed",
                         Shown(request.method) + " is not allowed here (allowed: " + allow + ")");
      r.headers.emplace_back("Allow", allow);
      return r;
    }
    call.route = *resolved.route;
    if (std::optional<TokenRole> need = RequiredRole(call.route, method);
        need && !options_.tokens.empty()) {
      std::string_view auth = request.authorization;
      const ApiToken* found = nullptr;
      if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer ")) {
        const std::string_view presented = auth.substr(7);
        // Compare against every token (no early exit): timing does not reveal which matched.
        for (const ApiToken& t : options_.tokens) {
          if (SecretEquals(presented, t.token)) found = &t;
        }
      }
      if (found == nullptr) {
        Response r = Error(401, "unauthenticated",
                           auth.empty() ? "missing bearer token (Authorization: Bearer <token>)"
                                        : "invalid bearer token");
        r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gnomon\"");
        return r;
      }
      call.who = Principal{found->name, found->role, found->namespaces};
      if (call.who.role < *need) {
        return Error(403, "permission_denied",
                     "token \"" + found->name + "\" has role " +
                         std::string(ToString(found->role)) + "; this needs " +
                         std::string(ToString(*need)));
      }
    }
  }
  return std::nullopt;
}

Response HttpApi::Handle(const Request& request) {
  try {
    Call call{request, SplitPath(request.path)};
    if (std::optional<Response> rejected = Admit(call)) return std::move(*rejected);
    Response response = Dispatch(call);
    if (!call.action.empty()) {
      ++job_changes_;  // whatever the outcome: the job list is copied again
      Record(call, response);
    }
    return response;
  } catch (const std::exception& e) {
    return Error(500, "internal", std::string("internal error: ") + e.what());
  } catch (...) {
    return Error(500, "internal", "internal error");
  }
}

void HttpApi::Record(const Call& call, const Response& response) {
  AuditRecord r;
  r.who = call.who.name;
  r.action = call.action;
  r.target = call.target;
  r.status = response.status;
  if (response.status < 300) {
    r.before_json = call.before;
    r.after_json = call.after;
  }
  // In order: earlier records the backend refused first. A record is kept until it is written.
  std::lock_guard<std::mutex> lock(audit_mu_);
  audit_pending_.push_back(std::move(r));
  const size_t cap = static_cast<size_t>(std::max(1, options_.audit_keep));
  while (audit_pending_.size() > cap) {
    audit_pending_.pop_front();
    ++audit_dropped_;
  }
  while (!audit_pending_.empty()) {
    if (!coordinator_.AppendAudit(audit_pending_.front(), options_.audit_keep).ok()) break;
    audit_pending_.pop_front();
  }
}

Result<std::vector<AuditRecord>> HttpApi::Audit(int limit, int64_t before) const {
  return coordinator_.ListAudit(limit, before);
}

std::vector<JobSpec> HttpApi::DynamicJobs() const {
  std::lock_guard<std::mutex> lock(sync_mu_);
  std::vector<JobSpec> out;
  for (const auto& [id, d] : dynamic_) out.push_back(d.spec);
  return out;
}

Status HttpApi::SyncDynamicJobs() {
  std::lock_guard<std::mutex> lock(sync_mu_);
  Result<int64_t> jobs_version = coordinator_.JobsVersion();
  if (!jobs_version.ok()) return jobs_version.status();
  if (synced_jobs_version_ && *synced_jobs_version_ == *jobs_version) return Status::Ok();
  Result<std::vector<StoredJob>> stored = coordinator_.ListJobs();
  if (!stored.ok()) return stored.status();
  Status first;
  std::set<std::string> present;
  for (const StoredJob& sj : *stored) {
    present.insert(sj.job_id);
    auto it = dynamic_.find(sj.job_id);
    if (it != dynamic_.end() && it->second.version == sj.version) continue;
    if (it == dynamic_.end()) {
      std::optional<JobView> local = scheduler_.GetJob(sj.job_id);
      if (local && local->spec.read_only) continue;  // a config job here wins
    }
    Result<json> parsed = ParseJsonBody(sj.definition_json, options_.max_json_depth);
    Result<JobSpec> spec = parsed.ok() ? JobSpecFromJson(*parsed, options_.job_defaults)
                                       : Result<JobSpec>(parsed.status());
    Status s = spec.ok() ? Status::Ok() : spec.status();
    if (s.ok()) {
      spec->source = "api";
      spec->read_only = false;
      spec->in_process = false;
      if (spec->id != sj.job_id) s = InvalidArgumentError("id does not match the stored key");
    }
    if (s.ok()) s = scheduler_.AddJob(*spec);
    if (!s.ok()) {
      if (first.ok()) first = s.WithPrefix("dynamic job \"" + Shown(sj.job_id) + "\"");
      continue;
    }
    dynamic_[sj.job_id] = Dynamic{sj.version, std::move(*spec)};
  }
  for (auto it = dynamic_.begin(); it != dynamic_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    (void)scheduler_.RemoveJob(it->first);
    it = dynamic_.erase(it);
  }
  if (first.ok()) synced_jobs_version_ = *jobs_version;
  ++job_changes_;  // after the scheduler has the changes: the job list is copied again
  return first;
}

// ---------------------------------------------------------------------------------- handlers --

namespace {

// The stored definition of `id`, if any.
Result<std::optional<StoredJob>> FindStored(Coordinator& c, const std::string& id) {
  Result<std::vector<StoredJob>> all = c.ListJobs();
  if (!all.ok()) return all.status();
  for (StoredJob& j : *all) {
    if (j.job_id == id) return std::optional<StoredJob>(std::move(j));
  }
  return std::optional<StoredJob>();
}

Response ReadOnly(const JobView& v) {
  return Error(409, "read_only",
               "job \"" + v.spec.id + "\" is defined in " +
                   (v.spec.source.empty() ? std::string("a config file") : v.spec.source) +
                   " and is read-only in the API: change the file and reload");
}

const char kOpenApi[] = R"json({
 "openapi": "3.0.3",
 "info": {"title": "gnomon HTTP API", "version": "@VERSION@",
          "description": "Distributed cron. See docs/http-api.md."},
 "components": {
  "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
  "schemas": {
   "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
     "required": ["code", "message"], "properties": {"code": {"type": "string"},
     "message": {"type": "string"}, "field": {"type": "string"}}}}},
   "JobSpec": {"type": "object", "additionalProperties": false, "required": ["id", "schedule"],
    "properties": {"id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"},
     "schedule": {"type": "string"}, "timezone": {"type": "string"},
     "command": {"type": "string"}, "argv": {"type": "array", "items": {"type": "string"}},
     "http": {"type": "object", "properties": {"url": {"type": "string"},
       "method": {"type": "string", "enum": ["GET", "POST"]},
       "headers": {"type": "object", "additionalProperties": {"type": "string"}}}},
     "timeout": {"type": "string"}, "retries": {"type": "integer"},
     "retry_backoff": {"type": "string"},
     "overlap": {"type": "string", "enum": ["forbid", "allow", "replace"]},
     "misfire": {"type": "string", "enum": ["skip", "once", "all"]},
     "catchup_window": {"type": "string"},
     "on_lost": {"type": "string", "enum": ["fail", "rerun"]},
     "shards": {"type": "integer"}, "max_consecutive_failures": {"type": "integer"},
     "enabled": {"type": "boolean"}, "description": {"type": "string"},
     "env": {"type": "object", "additionalProperties": {"type": "string"}},
     "kill_grace": {"type": "string"}, "history_keep": {"type": "integer"},
     "history_max_age": {"type": "string"}, "version": {"type": "integer",
       "description": "PUT only: the version being replaced (or If-Match)"}}},
   "Job": {"type": "object", "properties": {"id": {"type": "string"},
     "spec": {"$ref": "#/components/schemas/JobSpec"}, "executor": {"type": "string"},
     "schedule_description": {"type": "string"}, "timezone": {"type": "string"},
     "next_fire": {"type": "string", "format": "date-time", "nullable": true},
     "paused": {"type": "boolean"}, "pause_reason": {"type": "string"},
     "running": {"type": "integer"}, "read_only": {"type": "boolean"},
     "source": {"type": "string"}, "version": {"type": "integer", "nullable": true},
     "last_run": {"$ref": "#/components/schemas/Run"}}},
   "Run": {"type": "object", "nullable": true, "properties": {"run_id": {"type": "string"},
     "job_id": {"type": "string"}, "scheduled_at": {"type": "string", "format": "date-time"},
     "shard": {"type": "integer"}, "shard_count": {"type": "integer"},
     "attempt": {"type": "integer"}, "fencing_token": {"type": "integer"},
     "node_id": {"type": "string"}, "started_at": {"type": "string", "format": "date-time"},
     "finished_at": {"type": "string", "format": "date-time", "nullable": true},
     "outcome": {"type": "string", "enum": ["running", "succeeded", "failed", "timed_out",
       "cancelled", "skipped", "lost"]},
     "exit_code": {"type": "integer", "nullable": true}, "error": {"type": "string"},
     "skip_reason": {"type": "string"}, "output": {"type": "string"}}}
  },
  "responses": {"Error": {"description": "error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
  "parameters": {"id": {"name": "id", "in": "path", "required": true,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"}}}
 },
 "security": [{"bearer": []}],
 "paths": {
  "/healthz": {"get": {"summary": "Liveness", "security": [],
    "responses": {"200": {"description": "alive"}}}},
  "/readyz": {"get": {"summary": "Readiness: the backend answers", "security": [],
    "responses": {"200": {"description": "ready"}, "503": {"$ref": "#/components/responses/Error"}}}},
  "/metrics": {"get": {"summary": "Prometheus metrics (text format 0.0.4); role read",
    "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}}}},
  "/api/v1/openapi.json": {"get": {"summary": "This document", "security": [],
    "responses": {"200": {"description": "OpenAPI 3 document"}}}},
  "/api/v1/jobs": {
   "get": {"summary": "List jobs, sorted by id, a page at a time; role read",
    "parameters": [
     {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
     {"name": "cursor", "in": "query", "description": "the previous page's next_cursor (opaque)", "schema": {"type": "string"}},
     {"name": "q", "in": "query", "description": "only jobs whose id contains this (ASCII case ignored)", "schema": {"type": "string", "maxLength": 128}}],
    "responses": {"200": {"description": "{jobs: [Job], next_cursor} (next_cursor empty on the last page)"},
     "400": {"$ref": "#/components/responses/Error"}}},
   "post": {"summary": "Create a dynamic job; role admin",
    "requestBody": {"required": true, "content": {"application/json": {"schema":
      {"$ref": "#/components/schemas/JobSpec"}}}},
    "responses": {"201": {"description": "created (Job, ETag = version)"},
     "400": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"},
     "413": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}": {
   "parameters": [{"$ref": "#/components/parameters/id"}],
   "get": {"summary": "One job with its last run; role read",
    "responses": {"200": {"description": "Job"}, "404": {"$ref": "#/components/responses/Error"}}},
   "put": {"summary": "Replace a dynamic job (If-Match: <version> or body version); role admin",
    "parameters": [{"name": "If-Match", "in": "header", "schema": {"type": "string"}}],
    "requestBody": {"required": true, "content": {"application/json": {"schema":
      {"$ref": "#/components/schemas/JobSpec"}}}},
    "responses": {"200": {"description": "Job"}, "400": {"$ref": "#/components/responses/Error"},
     "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"},
     "412": {"$ref": "#/components/responses/Error"}, "428": {"$ref": "#/components/responses/Error"}}},
   "delete": {"summary": "Delete a dynamic job (optional If-Match); role admin",
    "responses": {"204": {"description": "deleted"}, "404": {"$ref": "#/components/responses/Error"},
     "409": {"$ref": "#/components/responses/Error"}, "412": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}/pause": {"parameters": [{"$ref": "#/components/parameters/id"}],
   "post": {"summary": "Pause cluster-wide; role operate",
    "responses": {"200": {"description": "{id, paused}"}, "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}/resume": {"parameters": [{"$ref": "#/components/parameters/id"}],
   "post": {"summary": "Resume; role operate",
    "responses": {"200": {"description": "{id, paused}"}, "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/jobs/{id}/trigger": {"parameters": [{"$ref": "#/components/parameters/id"}],
   "post": {"summary": "Fire now through a normal claim; role operate",
    "responses": {"202": {"description": "{run_id}"}, "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/runs": {"get": {"summary": "Run history, newest first; role read",
    "parameters": [
     {"name": "job", "in": "query", "schema": {"type": "string"}},
     {"name": "outcome", "in": "query", "schema": {"type": "string"}},
     {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
     {"name": "until", "in": "query", "schema": {"type": "string", "format": "date-time"}},
     {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}},
     {"name": "cursor", "in": "query", "schema": {"type": "string"}}],
    "responses": {"200": {"description": "{runs: [Run], next_cursor}"},
     "400": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/runs/{run_id}": {"get": {"summary": "All attempts of one fire, with output; role read",
    "parameters": [{"name": "run_id", "in": "path", "required": true, "schema": {"type": "string"}}],
    "responses": {"200": {"description": "{run_id, job_id, attempts: [Run]}"},
     "404": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/nodes": {"get": {"summary": "Live nodes; role read",
    "responses": {"200": {"description": "{nodes: [...]}"}}}},
  "/api/v1/cron/preview": {"get": {"summary": "Next fires of an expression; role read",
    "parameters": [
     {"name": "expr", "in": "query", "required": true, "schema": {"type": "string"}},
     {"name": "tz", "in": "query", "schema": {"type": "string", "default": "UTC"}},
     {"name": "n", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 5}},
     {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
     {"name": "job", "in": "query", "schema": {"type": "string"}}],
    "responses": {"200": {"description": "{expr, timezone, description, next: [date-time]}"},
     "400": {"$ref": "#/components/responses/Error"}}}},
  "/api/v1/audit": {"get": {"summary": "The cluster's audit log of mutating calls (kept in the backend), newest first; role admin",
    "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "default": 100, "maximum": 1000}},
                   {"name": "before", "in": "query", "description": "only records with a smaller seq (the previous page's next_before)", "schema": {"type": "integer"}}],
    "responses": {"200": {"description": "{entries: [{seq, at, who, action, target, status, before, after}], next_before?}"}}}}
 }
})json";

}  // namespace

Response HttpApi::Dispatch(Call& call) {
  const Request& req = call.req;
  const std::vector<std::string>& seg = call.segments;
  const std::string method = req.method == "HEAD" ? "GET" : req.method;

  switch (call.route) {
    case Route::kHealthz:
      return Json(200, {{"status", "ok"}});
    case Route::kReadyz: {
      Result<Instant> now = coordinator_.Now();
      if (!now.ok()) {
        return Error(503, "unavailable", "backend not reachable: " + now.status().message());
      }
      return Json(200, {{"status", "ready"}, {"backend_time", now->ToRfc3339()}});
    }
    case Route::kMetrics: {
      metrics_.SetJobs(static_cast<int64_t>(JobsNow()->jobs.size()));
      if (Result<std::vector<NodeInfo>> nodes = coordinator_.ListNodes(); nodes.ok()) {
        metrics_.SetNodesAlive(static_cast<int64_t>(nodes->size()));
        std::vector<std::pair<std::string, Duration>> skews;
        for (const NodeInfo& n : *nodes) skews.emplace_back(n.node_id, n.clock_skew);
        metrics_.SetClockSkews(std::move(skews));
      }
      Response r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = metrics_.Render();
      return r;
    }
    case Route::kOpenApi: {
      std::string doc = kOpenApi;
      const size_t at = doc.find("@VERSION@");
      doc.replace(at, 9, Shown(options_.version));
      Response r;
      r.body = std::move(doc);
      return r;
    }
    case Route::kStatic:
      return StaticFile(*FindWebAsset(req.path), req.if_none_match, !options_.tokens.empty());
    case Route::kJobs:
    case Route::kJob:
    case Route::kJobAction:
      break;
    case Route::kRuns: {
      Result<std::map<std::string, std::string>> p =
          Params(req, {"job", "outcome", "from", "until", "limit", "cursor"});
      if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
      RunQuery q;
      q.limit = kDefaultRunsLimit;
      if (auto it = p->find("job"); it != p->end()) {
        if (!IsValidJobId(it->second)) return InvalidJobId(it->second, "job");
        if (!call.who.Allows(it->second)) {
          return Error(403, "permission_denied",
                       "job \"" + it->second + "\" is outside the token's namespaces");
        }
        q.job_id = it->second;
      }
      if (auto it = p->find("outcome"); it != p->end()) {
        Result<RunOutcome> o = ParseRunOutcome(it->second);
        if (!o.ok()) return InvalidParam("outcome", o.status().message());
        q.outcome = *o;
      }
      if (auto it = p->find("from"); it != p->end()) {
        Result<Instant> t = Instant::ParseRfc3339(it->second);
        if (!t.ok()) return InvalidParam("from", t.status().message());
        q.scheduled_from = *t;
      }
      if (auto it = p->find("until"); it != p->end()) {
        Result<Instant> t = Instant::ParseRfc3339(it->second);
        if (!t.ok()) return InvalidParam("until", t.status().message());
        q.scheduled_until = *t;
      }
      if (q.scheduled_from && q.scheduled_until && *q.scheduled_from > *q.scheduled_until) {
        return InvalidParam("from", "is after until");
      }
      if (std::optional<Response> bad = ParseLimit(*p, kMaxRunsLimit, &q.limit)) return *bad;
      if (auto it = p->find("cursor"); it != p->end()) {
        if (it->second.size() > 512) return InvalidParam("cursor", "is too long");
        q.cursor = it->second;
      }
      Result<RunPage> page = coordinator_.ListRuns(q);
      if (!page.ok()) {
        if (page.status().code() == StatusCode::kInvalidArgument) {
          return InvalidParam("cursor", page.status().message());
        }
        return FromStatus(page.status());
      }
      // {"next_cursor", "runs"}: keys sorted, as in every other json object answered.
      Response r;
      r.body.reserve(64 + 400 * page->runs.size());
      r.body += "{\"next_cursor\":";
      AppendJsonString(r.body, page->next_cursor);
      r.body += ",\"runs\":[";
      bool first = true;
      for (const RunRecord& run : page->runs) {
        if (!call.who.Allows(run.job_id)) continue;
        if (!first) r.body += ',';
        first = false;
        AppendRunJson(r.body, run, false);
      }
      r.body += "]}";
      return r;
    }
    case Route::kRun: {
      const std::string& run_id = seg[3];
      const size_t at = run_id.find('@');
      if (run_id.size() > kMaxRunIdLength || at == std::string::npos ||
          !IsValidJobId(run_id.substr(0, at))) {
        return Error(400, "invalid_argument",
                     "run_id: \"" + Shown(run_id) + "\" is not <job>@<unix ms>[#shard]", "run_id");
      }
      if (!call.who.Allows(run_id.substr(0, at))) {
        return Error(403, "permission_denied", "the run's job is outside the token's namespaces");
      }
      Result<std::vector<RunRecord>> attempts = coordinator_.GetRun(run_id);
      if (!attempts.ok()) return FromStatus(attempts.status());
      // {"attempts", "job_id", "run_id"}: keys sorted.
      Response r;
      r.body = "{\"attempts\":[";
      for (size_t i = 0; i < attempts->size(); ++i) {
        if (i > 0) r.body += ',';
        AppendRunJson(r.body, (*attempts)[i], true);
      }
      r.body += "],\"job_id\":";
      AppendJsonString(r.body, std::string_view(run_id).substr(0, at));
      r.body += ",\"run_id\":";
      AppendJsonString(r.body, run_id);
      r.body += '}';
      return r;
    }
    case Route::kNodes: {
      Result<std::vector<NodeInfo>> nodes = coordinator_.ListNodes();
      if (!nodes.ok()) return FromStatus(nodes.status());
      json list = json::array();
      for (const NodeInfo& n : *nodes) {
        list.push_back({{"id", n.node_id},
                        {"host", n.host},
                        {"version", n.version},
                        {"started_at", n.started_at.ToRfc3339()},
                        {"last_heartbeat", n.last_heartbeat.ToRfc3339()},
                        {"running", n.running},
                        {"clock_skew_ms", n.clock_skew.count()}});
      }
      return Json(200, {{"nodes", std::move(list)}});
    }
    case Route::kCronPreview: {
      Result<std::map<std::string, std::string>> p =
          Params(req, {"expr", "tz", "n", "from", "job"});
      if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
      auto it = p->find("expr");
      if (it == p->end() || it->second.empty()) return InvalidParam("expr", "is required");
      const std::string expr_text = it->second;
      std::string tz = "UTC";
      if (auto t = p->find("tz"); t != p->end()) tz = t->second;
      Result<TimeZone> zone = TimeZone::Load(tz);
      if (!zone.ok()) return InvalidParam("tz", zone.status().message());
      int n = 5;
      if (auto t = p->find("n"); t != p->end()) {
        std::optional<int64_t> v = ParsePositive(t->second);
        if (!v || *v < 1 || *v > kMaxPreviewFires) {
          return InvalidParam(
              "n", "\"" + Shown(t->second) + "\" is not in 1-" + std::to_string(kMaxPreviewFires));
        }
        n = static_cast<int>(*v);
      }
      Instant from = Now();
      if (auto t = p->find("from"); t != p->end()) {
        Result<Instant> f = Instant::ParseRfc3339(t->second);
        if (!f.ok()) return InvalidParam("from", f.status().message());
        from = *f;
      }
      std::string job;
      if (auto t = p->find("job"); t != p->end()) {
        if (!IsValidJobId(t->second)) return InvalidJobId(t->second, "job");
        job = t->second;
      }
      Result<CronExpr> expr = CronExpr::Parse(expr_text, CronOptions{*zone, job});
      if (!expr.ok()) return InvalidParam("expr", expr.status().message());
      json next = json::array();
      Instant cursor = from;
      for (int i = 0; i < n; ++i) {
        std::optional<Instant> f = expr->Next(cursor);
        if (!f) break;
        next.push_back(f->ToRfc3339Seconds());
        cursor = *f;
      }
      return Json(200, {{"expr", expr->text()},
                        {"timezone", expr->time_zone().name()},
                        {"description", expr->Describe()},
                        {"next", std::move(next)}});
    }
    case Route::kAudit: {
      Result<std::map<std::string, std::string>> p = Params(req, {"limit", "before"});
      if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
      int limit = 100;
      if (auto it = p->find("limit"); it != p->end()) {
        std::optional<int64_t> v = ParsePositive(it->second);
        if (!v || *v < 1) return InvalidParam("limit", "is not a positive integer");
        limit = static_cast<int>(std::min<int64_t>(*v, 1000));
      }
      int64_t before = 0;
      if (auto it = p->find("before"); it != p->end()) {
        std::optional<int64_t> v = ParsePositive(it->second);
        if (!v || *v < 1) return InvalidParam("before", "is not a positive integer (a seq)");
        before = *v;
      }
      Result<std::vector<AuditRecord>> records = Audit(limit, before);
      if (!records.ok()) return FromStatus(records.status());
      json list = json::array();
      for (const AuditRecord& e : *records) {
        auto parse = [](const std::string& s) {
          if (s.empty()) return json(nullptr);
          json j = json::parse(s, nullptr, false);
          return j.is_discarded() ? json(s) : j;
        };
        list.push_back({{"seq", e.seq},
                        {"at", e.at.ToRfc3339()},
                        {"who", e.who},
                        {"action", e.action},
                        {"target", e.target},
                        {"status", e.status},
                        {"before", parse(e.before_json)},
                        {"after", parse(e.after_json)}});
      }
      json out = {{"entries", std::move(list)}};
      if (records->size() == static_cast<size_t>(limit) && !records->empty()) {
        out["next_before"] = records->back().seq;
      }
      return Json(200, std::move(out));
    }
  }

  // ------------------------------------------------------------------------------ jobs --
  if (call.route == Route::kJobs && method == "GET") {
    // Keyset pagination by id: a page holds the first `limit` jobs (of those the token may see
    // and `q` matches) whose id sorts after the cursor, the previous page's last id. Jobs added
    // or removed meanwhile cause neither duplicates nor gaps among the others.
    Result<std::map<std::string, std::string>> p = Params(req, {"limit", "cursor", "q"});
    if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
    int limit = kDefaultJobsLimit;
    if (std::optional<Response> bad = ParseLimit(*p, kMaxJobsLimit, &limit)) return *bad;
    std::string cursor;
    if (auto it = p->find("cursor"); it != p->end() && !it->second.empty()) {
      if (!IsValidJobId(it->second)) {
        return InvalidParam("cursor", "\"" + Shown(it->second) +
                                          "\" is not a cursor of this list (use next_cursor)");
      }
      cursor = it->second;
    }
    std::string needle;
    if (auto it = p->find("q"); it != p->end()) {
      if (it->second.size() > kMaxJobsQuery) {
        return InvalidParam("q", "is longer than " + std::to_string(kMaxJobsQuery) + " bytes");
      }
      needle = it->second;
    }
    const std::shared_ptr<const JobsSnapshot> snapshot = JobsNow();
    const std::vector<JobsSnapshot::Entry>& all = snapshot->jobs;
    auto it = all.begin();
    if (!cursor.empty()) {
      it = std::upper_bound(
          all.begin(), all.end(), cursor,
          [](const std::string& c, const JobsSnapshot::Entry& e) { return c < e.view.spec.id; });
    }
    Response r;
    r.body = "{\"jobs\":[";
    int shown = 0;
    std::string next_cursor;
    std::string_view last;
    for (; it != all.end(); ++it) {
      const std::string& id = it->view.spec.id;
      if (!call.who.Allows(id)) continue;
      if (!needle.empty() && !ContainsIgnoringCase(id, needle)) continue;
      if (shown == limit) {
        next_cursor = last;  // one more exists
        break;
      }
      if (shown++ > 0) r.body += ',';
      r.body += it->Rendered();
      last = id;
    }
    r.body += "],\"next_cursor\":" + DumpJson(json(next_cursor)) + "}";
    return r;
  }

  // Everything else names one job: in the path, or (create) in the body. Mutations are audited
  // whatever their outcome.
  if (method != "GET") {
    call.action = call.route == Route::kJobAction ? seg[4]
                  : call.route == Route::kJobs    ? "create"
                  : method == "PUT"               ? "replace"
                                                  : "delete";
    if (seg.size() > 3) call.target = seg[3].substr(0, 128);
  }
  std::string id;
  json body;
  if (call.route == Route::kJobs || method == "PUT") {
    Result<json> parsed = ParseJsonBody(req.body, options_.max_json_depth);
    if (!parsed.ok()) return Error(400, "invalid_argument", parsed.status().message());
    if (!parsed->is_object()) {
      return Error(400, "invalid_argument",
                   std::string("body: expected a JSON object, got ") + parsed->type_name());
    }
    body = std::move(*parsed);
  }
  if (call.route == Route::kJobs) {
    auto it = body.find("id");
    if (it == body.end()) return Error(400, "invalid_argument", "id: is required", "id");
    if (!it->is_string()) {
      return Error(400, "invalid_argument",
                   std::string("id: expected a string, got ") + it->type_name(), "id");
    }
    id = it->get<std::string>();
  } else {
    id = seg[3];
  }
  if (!IsValidJobId(id)) return InvalidJobId(id);
  if (!call.who.Allows(id)) {
    return Error(403, "permission_denied",
                 "job \"" + id + "\" is outside the namespaces of token \"" + call.who.name + "\"");
  }
  call.target = id;
  const std::optional<JobView> local = scheduler_.GetJob(id);

  if (call.route == Route::kJob && method == "GET") {
    if (!local) return Error(404, "not_found", "job \"" + id + "\" is not defined");
    std::optional<int64_t> version;
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      if (auto it = dynamic_.find(id); it != dynamic_.end()) version = it->second.version;
    }
    json view = JobViewJson(*local, version);
    RunQuery q;
    q.job_id = id;
    q.limit = 1;
    Result<RunPage> last = coordinator_.ListRuns(q);
    json last_run(nullptr);
    if (last.ok() && !last->runs.empty()) {
      std::string text;
      AppendRunJson(text, last->runs.front(), false);
      last_run = json::parse(text);  // valid by construction; a throw is caught in Handle
    }
    view["last_run"] = std::move(last_run);
    Response r = Json(200, view);
    if (version) r.headers.emplace_back("ETag", ETag(*version));
    return r;
  }

  if (call.route == Route::kJobAction) {
    const std::string& action = seg[4];
    if (!local) return Error(404, "not_found", "job \"" + id + "\" is not defined");
    call.before = DumpJson(json{{"paused", local->paused}});
    if (action == "trigger") {
      if (options_.quotas != nullptr) {
        if (Status q = options_.quotas->CheckTrigger(id); !q.ok()) {
          if (q.code() != StatusCode::kFailedPrecondition) return FromStatus(q);
          Response r = Error(429, "quota_exceeded", q.message());
          r.headers.emplace_back("Retry-After", "5");
          return r;
        }
      }
      Result<std::string> run = scheduler_.TriggerNow(id);
      if (!run.ok()) return FromStatus(run.status());
      call.after = DumpJson(json{{"run_id", *run}});
      Response r = Json(202, {{"run_id", *run}, {"job_id", id}});
      std::string loc = "/api/v1/runs/";
      for (char c : *run) loc += c == '#' ? std::string("%23") : std::string(1, c);
      r.headers.emplace_back("Location", loc);
      return r;
    }
    const bool pause = action == "pause";
    Status s = pause ? scheduler_.Pause(id, "api") : scheduler_.Resume(id);
    if (!s.ok()) return FromStatus(s);
    call.after = DumpJson(json{{"paused", pause}});
    return Json(200, {{"id", id}, {"paused", pause}});
  }

  // Mutations of definitions: create, replace, delete.
  if (local && local->spec.read_only) return ReadOnly(*local);

  std::optional<int64_t> expected;
  if (!req.if_match.empty()) {
    expected = ParseIfMatch(req.if_match);
    if (!expected) {
      return Error(400, "invalid_argument",
                   "If-Match: \"" + Shown(req.if_match) + "\" is not a version number", "If-Match");
    }
  }

  JobSpec spec;
  std::string definition;
  if (method != "DELETE") {
    if (method == "PUT") {
      if (auto it = body.find("version"); it != body.end()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 1) {
          return Error(400, "invalid_argument", "version: expected a positive integer", "version");
        }
        const int64_t v = it->get<int64_t>();
        if (expected && *expected != v) {
          return Error(400, "invalid_argument",
                       "version: " + std::to_string(v) + " disagrees with If-Match " +
                           std::to_string(*expected),
                       "version");
        }
        expected = v;
        body.erase(it);
      }
      if (!expected) {
        return Error(428, "precondition_required",
                     "PUT needs the version being replaced: an If-Match header or a \"version\" "
                     "field (GET the job for its version)");
      }
      if (auto it = body.find("id"); it != body.end()) {
        if (!it->is_string() || it->get<std::string>() != id) {
          return Error(400, "invalid_argument", "id: does not match the job id in the path", "id");
        }
      }
      body["id"] = id;
    }
    Result<JobSpec> parsed = JobSpecFromJson(body, options_.job_defaults);
    if (!parsed.ok()) {
      return Error(400, "invalid_argument", "job \"" + id + "\": " + parsed.status().message());
    }
    spec = std::move(*parsed);
    spec.source = "api";
    spec.read_only = false;
    spec.in_process = false;
    if (Status s = ValidateJobSpec(spec); !s.ok()) {
      return Error(400, "invalid_argument", s.message());
    }
    definition = DumpJson(JobSpecToJson(spec));
    call.after = definition;
  }

  std::lock_guard<std::mutex> lock(sync_mu_);
  if (call.action == "create") {
    if (options_.quotas != nullptr) {
      if (Status q = options_.quotas->CheckCreate(id); !q.ok()) {
        if (q.code() != StatusCode::kFailedPrecondition) return FromStatus(q);
        return Error(403, "quota_exceeded", q.message());
      }
    }
    Result<int64_t> version = coordinator_.PutJob(id, definition, 0);
    if (!version.ok()) {
      if (version.status().code() == StatusCode::kAlreadyExists ||
          version.status().code() == StatusCode::kFailedPrecondition) {
        return Error(409, "already_exists", "job \"" + id + "\" already exists");
      }
      return FromStatus(version.status());
    }
    if (Status s = scheduler_.AddJob(spec); !s.ok()) {
      (void)coordinator_.DeleteJob(id, *version);  // roll back: nothing half-created
      return FromStatus(s);
    }
    dynamic_[id] = Dynamic{*version, spec};
    std::optional<JobView> view = scheduler_.GetJob(id);
    Response r = Json(201, view ? JobViewJson(*view, *version) : json{{"id", id}});
    r.headers.emplace_back("Location", "/api/v1/jobs/" + id);
    r.headers.emplace_back("ETag", ETag(*version));
    return r;
  }

  Result<std::optional<StoredJob>> stored = FindStored(coordinator_, id);
  if (!stored.ok()) return FromStatus(stored.status());
  if (!*stored) return Error(404, "not_found", "job \"" + id + "\" is not defined");
  call.before = (*stored)->definition_json;

  if (call.action == "replace") {
    Result<int64_t> version = coordinator_.PutJob(id, definition, *expected);
    if (!version.ok()) {
      const StatusCode c = version.status().code();
      if (c == StatusCode::kFailedPrecondition || c == StatusCode::kAlreadyExists) {
        return Error(412, "version_mismatch",
                     "job \"" + id + "\" is at version " + std::to_string((*stored)->version) +
                         ", not " + std::to_string(*expected) + " (GET it and retry)");
      }
      return FromStatus(version.status());
    }
    if (Status s = scheduler_.AddJob(spec); !s.ok()) return FromStatus(s);
    dynamic_[id] = Dynamic{*version, spec};
    std::optional<JobView> view = scheduler_.GetJob(id);
    Response r = Json(200, view ? JobViewJson(*view, *version) : json{{"id", id}});
    r.headers.emplace_back("ETag", ETag(*version));
    return r;
  }

  // delete
  Status s = coordinator_.DeleteJob(id, expected ? *expected : -1);
  if (!s.ok()) {
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kAlreadyExists) {
      return Error(412, "version_mismatch",
                   "job \"" + id + "\" is at version " + std::to_string((*stored)->version) +
                       ", not " + std::to_string(expected.value_or(-1)));
    }
    return FromStatus(s);
  }
  (void)scheduler_.RemoveJob(id);
  dynamic_.erase(id);
  Response r;
  r.status = 204;
  return r;
}

}  // namespace gnomon::server
