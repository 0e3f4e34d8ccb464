// GET /api/v1/runs, GET /api/v1/runs/{run_id}, POST /api/v1/runs/{run_id}/cancel and /rerun
// (RunsHandler, src/server/api_handlers.h).
//
// A caller limited to namespaces and listing all its runs (no `job`) gets its page filled from as
// many backend pages as it takes, up to HttpApiOptions::runs_scan_budget records; its next_cursor
// never names a job outside its namespaces:
// - when the page is full, the cursor is the position of its last record (one the caller sees);
// - when the scan budget runs out first, the cursor is built from the caller's own namespaces and
//   the instant of the last record read: "after every job id below the next namespace that sorts
//   after that record" (NextCursorAfter). It skips only records the caller may not see (their ids
//   lie between two of its namespaces), so the next page continues where this one stopped,
//   without gaps, repeats or other namespaces' ids.
#include <climits>
#include <nlohmann/json.hpp>

#include "src/coord/coordinator_util.h"
#include "src/server/api_handlers.h"
#include "src/server/api_util.h"
#include "src/server/job_json.h"
#include "src/server/run_json.h"

namespace gnomon::server {

using nlohmann::json;

namespace {

// Largest page of runs and default.
constexpr int kMaxRunsLimit = 1000;
constexpr int kDefaultRunsLimit = 50;
// Longest run id accepted in a path (a job id, '@', 20 digits, '#', 5 digits).
constexpr size_t kMaxRunIdLength = 160;
// Longest job id, and its characters in ascending byte order.
constexpr size_t kMaxJobIdLength = 128;
constexpr std::string_view kJobIdChars =
    "-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

// The largest valid job id that sorts before `prefix` (a valid, non-empty job id prefix), so no job
// id lies strictly between the two; "" when `prefix` is the smallest id ("-").
std::string Predecessor(const std::string& prefix) {
  const char last = prefix.back();
  const size_t at = kJobIdChars.find(last);
  std::string out = prefix.substr(0, prefix.size() - 1);
  if (at == 0) return out;  // "ab-" -> "ab": nothing sorts between them
  out += kJobIdChars[at - 1];
  out.append(kMaxJobIdLength - out.size(), kJobIdChars.back());
  return out;
}

// The cursor after which a scan that stopped at `last` (a record `who` may not see) continues
// without skipping any record `who` may see (see the file comment).
std::string NextCursorAfter(const RunRecord& last, const Principal& who) {
  const std::string* next = nullptr;
  for (const std::string& ns : who.namespaces) {
    if (ns > last.job_id && (next == nullptr || ns < *next)) next = &ns;
  }
  coord::RunPosition pos;
  pos.scheduled_ms = last.scheduled_at.unix_millis();
  pos.shard = INT_MAX;  // after every shard and attempt of pos.job_id
  pos.attempt = 1;
  if (next != nullptr && !Predecessor(*next).empty()) {
    pos.job_id = Predecessor(*next);
  } else if (next != nullptr) {
    // Nothing sorts before *next: continue at the start of the instant.
    pos.scheduled_ms += 1;
    pos.job_id = std::string(kMaxJobIdLength, kJobIdChars.back());
  } else {
    pos.job_id = std::string(kMaxJobIdLength, kJobIdChars.back());  // after the whole instant
  }
  return coord::EncodeCursor(pos);
}

// GET /api/v1/runs/{run_id}: {"attempts", "jitter_offset_ms" (when known), "job_id", "run_id"}
// (keys sorted).
std::string RunDocument(const std::string& run_id, const std::vector<RunRecord>& attempts,
                        std::optional<Duration> jitter_offset = std::nullopt) {
  std::string body = "{\"attempts\":[";
  for (size_t i = 0; i < attempts.size(); ++i) {
    if (i > 0) body += ',';
    AppendRunJson(body, attempts[i], true);
  }
  body += ']';
  if (jitter_offset) body += ",\"jitter_offset_ms\":" + std::to_string(jitter_offset->count());
  body += ",\"job_id\":";
  AppendJsonString(body, std::string_view(run_id).substr(0, run_id.find('@')));
  body += ",\"run_id\":";
  AppendJsonString(body, run_id);
  body += '}';
  return body;
}

// How often a follower re-reads the run. With the holder's 1 s live output interval, output is
// shown at most 1.5 s (and the two reads) after it was printed.
constexpr std::chrono::milliseconds kFollowInterval{500};

// GET /api/v1/runs/{run_id}?follow=1: the run's document as an SSE `run` event whenever it
// changed, read every kFollowInterval, until its newest attempt is no longer running (then an
// `end` event).
class RunFollower final : public EventStream {
 public:
  RunFollower(Coordinator& coordinator, std::string run_id)
      : coordinator_(coordinator), run_id_(std::move(run_id)) {}
  std::chrono::milliseconds interval() const override { return kFollowInterval; }
  bool Next(std::string* out) override {
    Result<std::vector<RunRecord>> attempts = coordinator_.GetRun(run_id_);
    if (!attempts.ok()) return true;  // the backend may answer next time
    std::string doc = RunDocument(run_id_, *attempts);
    if (doc != last_) {
      *out += "event: run\ndata: " + doc + "\n\n";
      last_ = std::move(doc);
    }
    if (!attempts->empty() && attempts->back().outcome == RunOutcome::kRunning) return true;
    *out += "event: end\ndata: {}\n\n";
    return false;
  }

 private:
  Coordinator& coordinator_;
  const std::string run_id_;
  std::string last_;  // the document last sent
};

}  // namespace

Response RunsHandler::Handle(Call& call) {
  if (call.segments.size() == 3) return List(call);
  if (call.segments.size() == 4) return Get(call);
  return call.segments[4] == "cancel" ? Cancel(call) : Rerun(call);
}

Result<RunRecord> RunsHandler::LastAttempt(const std::string& run_id) {
  Result<std::vector<RunRecord>> attempts = coordinator_.GetRun(run_id);
  if (!attempts.ok()) return attempts.status();
  if (attempts->empty()) return NotFoundError("run " + run_id + " has no record");
  return attempts->back();
}

std::optional<Response> RunsHandler::CheckRunId(Call& call) {
  const std::string& run_id = call.segments[3];
  const size_t at = run_id.find('@');
  if (run_id.size() > kMaxRunIdLength || at == std::string::npos ||
      !IsValidJobId(run_id.substr(0, at))) {
    return Error(400, "invalid_argument",
                 "run_id: \"" + Shown(run_id) + "\" is not <job>@<unix ms>[#shard]", "run_id");
  }
  if (!call.who.Allows(run_id.substr(0, at))) {
    return OutsideNamespaces(call, "the run's job is outside the token's namespaces");
  }
  return std::nullopt;
}

Response RunsHandler::Cancel(Call& call) {
  if (std::optional<Response> bad = CheckRunId(call)) return *bad;
  const std::string& run_id = call.segments[3];
  call.action = "cancel";
  call.target = run_id.substr(0, run_id.find('@'));
  Result<RunRecord> found = LastAttempt(run_id);
  if (!found.ok()) return FromStatus(found.status());
  const RunRecord& last = *found;
  call.before = DumpJson(json{{"run_id", run_id}, {"outcome", ToString(last.outcome)}});
  const FireKey fire{last.job_id, last.scheduled_at, last.shard, last.shard_count};
  // The backend revokes the lease, closes the fire and records who cancelled it in one step; the
  // holder stops the run at its next state poll (Coordinator::CancelFire).
  if (Status s = coordinator_.CancelFire(fire, "cancelled by " + call.who.name); !s.ok()) {
    if (s.code() == StatusCode::kFailedPrecondition) {
      return Error(409, "conflict",
                   "run " + run_id + " already ended (" + std::string(ToString(last.outcome)) +
                       "): there is nothing to cancel");
    }
    return FromStatus(s);
  }
  call.after = DumpJson(json{{"run_id", run_id}, {"outcome", "cancelled"}});
  return Get(call);
}

Response RunsHandler::List(Call& call) {
  Result<std::map<std::string, std::string>> p =
      Params(call.req, {"job", "outcome", "from", "until", "limit", "cursor"});
  if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
  RunQuery q;
  q.limit = kDefaultRunsLimit;
  if (auto it = p->find("job"); it != p->end()) {
    if (!IsValidJobId(it->second)) return InvalidJobId(it->second, "job");
    if (!call.who.Allows(it->second)) {
      return OutsideNamespaces(call,
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
  const int limit = q.limit;
  const bool filtered = !call.who.Global() && q.job_id.empty();
  std::vector<RunRecord> shown;
  std::string next_cursor;
  int scanned = 0;
  if (filtered) q.limit = std::min(kMaxRunsLimit, std::max(1, scan_budget_));
  while (true) {
    Result<RunPage> page = coordinator_.ListRuns(q);
    if (!page.ok()) {
      if (page.status().code() == StatusCode::kInvalidArgument) {
        return InvalidParam("cursor", page.status().message());
      }
      return FromStatus(page.status());
    }
    if (!filtered) {
      shown = std::move(page->runs);
      next_cursor = std::move(page->next_cursor);
      break;
    }
    bool full = false;
    for (RunRecord& r : page->runs) {
      ++scanned;
      if (!call.who.Allows(r.job_id)) {
        if (scanned >= scan_budget_) {
          next_cursor = NextCursorAfter(r, call.who);
          full = true;
          break;
        }
        continue;
      }
      shown.push_back(std::move(r));
      if (static_cast<int>(shown.size()) == limit) {
        next_cursor = coord::EncodeCursor(coord::PositionOf(shown.back()));
        full = true;
        break;
      }
      if (scanned >= scan_budget_) {
        next_cursor = coord::EncodeCursor(coord::PositionOf(shown.back()));
        full = true;
        break;
      }
    }
    if (full || page->next_cursor.empty()) break;
    q.cursor = page->next_cursor;
  }
  // {"next_cursor", "runs"}: keys sorted, as in every other json object answered.
  Response r;
  r.body.reserve(64 + 400 * shown.size());
  r.body += "{\"next_cursor\":";
  AppendJsonString(r.body, next_cursor);
  r.body += ",\"runs\":[";
  for (size_t i = 0; i < shown.size(); ++i) {
    if (i > 0) r.body += ',';
    AppendRunJson(r.body, shown[i], false);
  }
  r.body += "]}";
  return r;
}

Response RunsHandler::Rerun(Call& call) {
  if (std::optional<Response> bad = CheckRunId(call)) return *bad;
  const std::string& run_id = call.segments[3];
  call.action = "rerun";
  call.target = run_id.substr(0, run_id.find('@'));
  std::string params;
  if (std::optional<Response> bad = ParamsBody(call.req, max_json_depth_, &params)) return *bad;
  Result<RunRecord> last = LastAttempt(run_id);
  if (!last.ok()) return FromStatus(last.status());
  call.before = DumpJson(json{{"run_id", run_id}, {"outcome", ToString(last->outcome)}});
  // A rerun counts against the namespace's concurrent runs as a trigger does.
  if (Status q = quotas_.Get()->CheckTrigger(last->job_id); !q.ok()) {
    if (q.code() != StatusCode::kFailedPrecondition) return FromStatus(q);
    Response r = Error(429, "quota_exceeded", q.message());
    r.headers.emplace_back("Retry-After", "5");
    return r;
  }
  // The fire runs again with its own parameters (its last attempt's), the given ones over them.
  Result<std::string> rerun_params = MergeParams(last->params, params);
  if (!rerun_params.ok()) {
    return Error(400, "invalid_argument", rerun_params.status().message(), "params");
  }
  const FireKey fire{last->job_id, last->scheduled_at, last->shard, last->shard_count};
  Result<int> attempt = scheduler_.Rerun(fire, *rerun_params, "rerun by " + call.who.name);
  if (!attempt.ok()) {
    const Status& s = attempt.status();
    if (s.code() == StatusCode::kInvalidArgument) {
      return Error(400, "invalid_argument", s.message(), "params");
    }
    if (s.code() == StatusCode::kFailedPrecondition && last->outcome == RunOutcome::kRunning) {
      return Error(409, "conflict", "run " + run_id + " is running: cancel it first");
    }
    if (s.code() == StatusCode::kFailedPrecondition) return Error(409, "conflict", s.message());
    return FromStatus(s);
  }
  json after{{"run_id", run_id}, {"attempt", *attempt}};
  if (!params.empty()) after["params"] = json::parse(params);
  call.after = DumpJson(after);
  Response r = Json(202, {{"run_id", run_id}, {"job_id", last->job_id}, {"attempt", *attempt}});
  std::string loc = "/api/v1/runs/";
  for (char c : run_id) loc += c == '#' ? std::string("%23") : std::string(1, c);
  r.headers.emplace_back("Location", loc);
  return r;
}

Response RunsHandler::Get(Call& call) {
  if (std::optional<Response> bad = CheckRunId(call)) return *bad;
  const std::string& run_id = call.segments[3];
  bool follow = false;
  if (call.method == "GET" && call.segments.size() == 4) {
    Result<std::map<std::string, std::string>> p = Params(call.req, {"follow"});
    if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
    if (auto it = p->find("follow"); it != p->end()) {
      if (it->second != "1" && it->second != "0") {
        return Error(400, "invalid_argument", "follow: \"" + Shown(it->second) + "\" is not 1 or 0",
                     "follow");
      }
      follow = it->second == "1";
    }
  }
  Result<std::vector<RunRecord>> attempts = coordinator_.GetRun(run_id);
  if (!attempts.ok()) return FromStatus(attempts.status());
  Response r;
  if (follow) {
    r.stream = std::make_shared<RunFollower>(coordinator_, run_id);
    return r;
  }
  // A scheduled fire of a job with jitter waited its offset (the job's definition on this node).
  std::optional<Duration> offset;
  if (!attempts->empty()) {
    if (std::optional<JobView> job = scheduler_.GetJob(attempts->front().job_id);
        job && FireRulesOf(job->spec).jitter > Duration(0)) {
      offset = WaitedOffset(job->spec, attempts->front().scheduled_at);
    }
  }
  r.body = RunDocument(run_id, *attempts, offset);
  return r;
}

}  // namespace gnomon::server
