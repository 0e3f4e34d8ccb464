// /api/v1/jobs and its sub-resources (JobsHandler, src/server/api_handlers.h).
#include <algorithm>

#include "src/server/api_handlers.h"
#include "src/server/api_util.h"
#include "src/server/job_json.h"
#include "src/server/run_json.h"

namespace gnomon::server {

using nlohmann::json;

namespace {

// Largest page of jobs and default; longest `q` filter of the job list.
constexpr int kMaxJobsLimit = 1000;
constexpr int kDefaultJobsLimit = 100;
constexpr size_t kMaxJobsQuery = 128;

Response ReadOnly(const JobSpec& spec) {
  return Error(409, "read_only",
               "job \"" + spec.id + "\" is defined in " +
                   (spec.source.empty() ? std::string("a config file") : spec.source) +
                   " and is read-only in the API: change the file and reload");
}

Response NotDefined(const std::string& id) {
  return Error(404, "not_found", "job \"" + id + "\" is not defined");
}

// The key a definition error names, for the answer's `field`: messages read "<key>: what" (or
// "job \"<id>\": <key>: what"), with nested keys dotted ("http.url"); empty when none is named.
std::string FieldOfDefinitionError(std::string_view message) {
  if (message.starts_with("job \"")) {
    const size_t end = message.find("\": ");
    if (end == std::string_view::npos) return "";
    message.remove_prefix(end + 3);
  }
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0) return "";
  // ("exclude[1]: ..." names the key `exclude`.)
  std::string_view key = message.substr(0, colon);
  key = key.substr(0, key.find('['));
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return "";
  }
  return std::string(key);
}

}  // namespace

Response JobsHandler::Handle(Call& call) {
  const std::vector<std::string>& seg = call.segments;
  if (seg.size() == 3 && call.method == "GET") return List(call);
  // Everything else names one job: in the path, or (create) in the body.
  json body;
  if (seg.size() == 3 || call.method == "PUT") {
    Result<json> parsed = ParseJsonBody(call.req.body, options_.max_json_depth);
    if (!parsed.ok()) return Error(400, "invalid_argument", parsed.status().message());
    if (!parsed->is_object()) {
      return Error(400, "invalid_argument",
                   std::string("body: expected a JSON object, got ") + parsed->type_name());
    }
    body = std::move(*parsed);
  }
  std::string id;
  if (seg.size() == 3) {
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
    return OutsideNamespaces(
        call, "job \"" + id + "\" is outside the namespaces of token \"" + call.who.name + "\"");
  }
  call.target = id;
  if (seg.size() == 5) return Action(call, id);
  if (call.method == "GET") return Get(call, id);
  return Define(call, id, std::move(body));
}

Response JobsHandler::List(Call& call) {
  // Keyset pagination by id: a page holds the first `limit` jobs (of those the token may see and
  // `q` matches) whose id sorts after the cursor, the previous page's last id. Jobs added or
  // removed meanwhile cause neither duplicates nor gaps among the others.
  Result<std::map<std::string, std::string>> p = Params(call.req, {"limit", "cursor", "q"});
  if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
  int limit = kDefaultJobsLimit;
  if (std::optional<Response> bad = ParseLimit(*p, kMaxJobsLimit, &limit)) return *bad;
  std::string cursor;
  if (auto it = p->find("cursor"); it != p->end() && !it->second.empty()) {
    if (!IsValidJobId(it->second)) {
      return InvalidParam(
          "cursor", "\"" + Shown(it->second) + "\" is not a cursor of this list (use next_cursor)");
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
  const std::shared_ptr<const JobList::Snapshot> snapshot = jobs_.Now();
  const std::vector<JobList::Entry>& all = snapshot->jobs;
  auto it = all.begin();
  if (!cursor.empty()) {
    it = std::upper_bound(
        all.begin(), all.end(), cursor,
        [](const std::string& c, const JobList::Entry& e) { return c < e.view.spec.id; });
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
    r.body += it->Rendered(call.who.SeesSecretsOf(id));
    last = id;
  }
  r.body += "],\"next_cursor\":" + DumpJson(json(next_cursor)) + "}";
  return r;
}

Response JobsHandler::Get(Call& call, const std::string& id) {
  const std::optional<JobView> local = scheduler_.GetJob(id);
  if (!local) return NotDefined(id);
  const std::optional<JobCatalog::Entry> entry = catalog_.Find(id);
  const std::optional<int64_t> version = entry ? entry->version : std::nullopt;
  json view = JobViewJson(*local, version, call.who.SeesSecretsOf(id));
  RunQuery q;
  q.job_id = id;
  q.limit = 1;
  Result<RunPage> last = coordinator_.ListRuns(q);
  json last_run(nullptr);
  if (last.ok() && !last->runs.empty()) {
    std::string text;
    AppendRunJson(text, last->runs.front(), false);
    last_run = json::parse(text);  // valid by construction; a throw is caught by the router
  }
  view["last_run"] = std::move(last_run);
  JobCatalog::Related related = catalog_.RelatedTo(id);
  view["parents"] = std::move(related.parents);
  view["joins"] = std::move(related.joins);
  Response r = Json(200, view);
  if (version) r.headers.emplace_back("ETag", ETag(*version));
  return r;
}

Response JobsHandler::Action(Call& call, const std::string& id) {
  const std::string& action = call.segments[4];
  call.action = action;
  const std::optional<JobView> local = scheduler_.GetJob(id);
  if (!local) return NotDefined(id);
  call.before = DumpJson(json{{"paused", local->paused}});
  // Once the action is done, whatever its outcome, the list copies the job's state again.
  struct Invalidate {
    JobList& jobs;
    ~Invalidate() { jobs.Invalidate(); }
  } invalidate{jobs_};
  if (action == "backfill") return Backfill(call, id);
  if (action == "trigger") {
    // An optional body {"params": {...}}: merged over the job's default params for this fire.
    std::string params;
    if (std::optional<Response> bad = ParamsBody(call.req, options_.max_json_depth, &params)) {
      return *bad;
    }
    if (Result<std::string> merged = MergeParams(local->spec.params, params); !merged.ok()) {
      return Error(400, "invalid_argument", merged.status().message(), "params");
    }
    if (Status q = quotas_.Get()->CheckTrigger(id); !q.ok()) {
      if (q.code() != StatusCode::kFailedPrecondition) return FromStatus(q);
      Response r = Error(429, "quota_exceeded", q.message());
      r.headers.emplace_back("Retry-After", "5");
      return r;
    }
    Result<std::string> run = scheduler_.TriggerNow(id, params);
    if (!run.ok()) return FromStatus(run.status());
    json after{{"run_id", *run}};
    if (!params.empty()) after["params"] = json::parse(params);
    call.after = DumpJson(after);
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

Response JobsHandler::Backfill(Call& call, const std::string& id) {
  call.before.clear();  // a backfill changes no state of the job: its audit record says what ran
  Result<json> body = ParseJsonBody(call.req.body, options_.max_json_depth);
  if (!body.ok()) return Error(400, "invalid_argument", body.status().message());
  if (!body->is_object()) {
    return Error(400, "invalid_argument",
                 std::string("body: expected a JSON object, got ") + body->type_name());
  }
  std::optional<Instant> from, to;
  int max_concurrent = 1;
  for (const auto& [key, value] : body->items()) {
    if (key == "from" || key == "to") {
      Result<Instant> t = value.is_string() ? Instant::ParseRfc3339(value.get<std::string>())
                                            : Result<Instant>(InvalidArgumentError("not a string"));
      if (!t.ok()) {
        return Error(400, "invalid_argument",
                     key + ": expected an RFC 3339 instant (" + t.status().message() + ")", key);
      }
      (key == "from" ? from : to) = *t;
    } else if (key == "max_concurrent") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 1024) {
        return Error(400, "invalid_argument", "max_concurrent: expected an integer 1-1024", key);
      }
      max_concurrent = value.get<int>();
    } else {
      return Error(
          400, "invalid_argument",
          "body: unknown key \"" + key.substr(0, 64) + "\" (expected from, to, max_concurrent)",
          key);
    }
  }
  if (!from || !to) {
    return Error(400, "invalid_argument", std::string(from ? "to" : "from") + ": is required",
                 from ? "to" : "from");
  }
  Result<BackfillPlan> plan = scheduler_.Backfill(
      id, *from, *to, max_concurrent, options_.max_backfill_fires, "backfill by " + call.who.name);
  if (!plan.ok()) return FromStatus(plan.status());
  call.after = DumpJson(json{{"from", from->ToRfc3339()},
                             {"to", to->ToRfc3339()},
                             {"fires", plan->fires},
                             {"started", plan->run_ids.size()}});
  return Json(202, {{"job_id", id},
                    {"fires", plan->fires},
                    {"recorded", plan->recorded},
                    {"run_ids", plan->run_ids}});
}

Response JobsHandler::Define(Call& call, const std::string& id, json body) {
  const std::string& method = call.method;
  call.action = call.segments.size() == 3 ? "create" : method == "PUT" ? "replace" : "delete";
  // Read-only: a static job of the catalog, or one the embedder added to the scheduler itself.
  if (const std::optional<JobCatalog::Entry> e = catalog_.Find(id); e && e->spec.read_only) {
    return ReadOnly(e->spec);
  }
  if (const std::optional<JobView> v = scheduler_.GetJob(id); v && v->spec.read_only) {
    return ReadOnly(v->spec);
  }

  std::optional<int64_t> expected;
  if (!call.req.if_match.empty()) {
    expected = ParseIfMatch(call.req.if_match);
    if (!expected) {
      return Error(400, "invalid_argument",
                   "If-Match: \"" + Shown(call.req.if_match) + "\" is not a version number",
                   "If-Match");
    }
  }
  Result<JobCatalog::Change> change = InternalError("unreachable");
  if (method == "DELETE") {
    // A job other jobs fire (on_success, ...) is kept unless the caller insists: their runs
    // would fire a job that is gone (an error event each time).
    Result<std::map<std::string, std::string>> p = Params(call.req, {"force"});
    if (!p.ok()) return Error(400, "invalid_argument", p.status().message());
    const auto force = p->find("force");
    if (force != p->end() && force->second != "true" && force->second != "false") {
      return InvalidParam("force", "\"" + Shown(force->second) + "\" is not true or false");
    }
    if (force == p->end() || force->second != "true") {
      if (const std::vector<std::string> named = catalog_.RelatedTo(id).dependents;
          !named.empty()) {
        std::string names;
        for (const std::string& n : named) names += (names.empty() ? "\"" : ", \"") + n + "\"";
        return Error(409, "has_dependents",
                     "job \"" + id + "\" is named by " + names +
                         " (on_success, on_failure, on_complete or after): change them first, "
                         "or delete with ?force=true");
      }
    }
    change = catalog_.Delete(id, expected);
  } else {
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
    Result<JobSpec> spec = JobSpecFromJson(body, options_.job_defaults);
    if (!spec.ok()) {
      return Error(400, "invalid_argument", "job \"" + id + "\": " + spec.status().message(),
                   FieldOfDefinitionError(spec.status().message()));
    }
    spec->source = "api";
    spec->read_only = false;
    spec->in_process = false;
    // The jobs it fires are in the token's namespaces too (the checks of the set are the
    // catalog's: CheckJobGraph).
    for (const auto& [key, names] : {std::pair{"on_success", &DependenciesOf(*spec).on_success},
                                     std::pair{"on_failure", &DependenciesOf(*spec).on_failure},
                                     std::pair{"on_complete", &DependenciesOf(*spec).on_complete},
                                     std::pair{"after", &DependenciesOf(*spec).after}}) {
      for (const std::string& child : *names) {
        if (!call.who.Allows(child)) {
          return Error(400, "invalid_argument",
                       "job \"" + id + "\": " + key + ": \"" + Shown(child) +
                           "\" is outside the namespaces of token \"" + call.who.name + "\"",
                       key);
        }
      }
    }
    const std::shared_ptr<const Policies> policies = catalog_.policies().Get();
    *spec = policies->WithDefaults(std::move(*spec));
    Result<CompiledJob> job = CompileJob(std::move(*spec), catalog_.calendars().get());
    if (!job.ok()) {
      const std::string_view what = job.status().message();
      return Error(400, "invalid_argument", std::string(what), FieldOfDefinitionError(what));
    }
    if (Status s = policies->Check(job->spec, DaemonRunsAsRoot()); !s.ok()) {
      return Error(403, "policy_denied", s.message());
    }
    if (method == "POST") {
      if (Status q = quotas_.Get()->CheckCreate(id); !q.ok()) {
        if (q.code() != StatusCode::kFailedPrecondition) return FromStatus(q);
        return Error(403, "quota_exceeded", q.message());
      }
      change = catalog_.Create(std::move(*job));
    } else {
      change = catalog_.Replace(std::move(*job), *expected);
    }
  }
  if (!change.ok()) {
    const Status& s = change.status();
    if (s.code() == StatusCode::kAlreadyExists) return Error(409, "already_exists", s.message());
    if (s.code() == StatusCode::kInvalidArgument) {  // the set's checks (CheckJobGraph)
      return Error(400, "invalid_argument", s.message(), FieldOfDefinitionError(s.message()));
    }
    if (s.code() == StatusCode::kFailedPrecondition) {
      return Error(412, "version_mismatch", s.message());
    }
    return FromStatus(s);
  }
  call.before = change->before_json;
  call.after = change->after_json;
  if (method == "DELETE") {
    Response r;
    r.status = 204;
    return r;
  }
  std::optional<JobView> view = scheduler_.GetJob(id);
  Response r = Json(
      method == "POST" ? 201 : 200,
      view ? JobViewJson(*view, change->version, call.who.SeesSecretsOf(id)) : json{{"id", id}});
  if (method == "POST") r.headers.emplace_back("Location", "/api/v1/jobs/" + id);
  r.headers.emplace_back("ETag", ETag(change->version));
  return r;
}

}  // namespace gnomon::server
