// GET /api/v1/cron/preview and /api/v1/calendars (CronHandler, src/server/api_handlers.h).
#include "gnomon/cron.h"
#include "gnomon/fire_rules.h"
#include "gnomon/job.h"
#include "src/server/api_handlers.h"
#include "src/server/api_util.h"

namespace gnomon::server {

namespace {

// Most fires of one preview.
constexpr int kMaxPreviewFires = 100;

// "a;b;c" split at `sep` (exclusion entries hold commas, never a ';'); empty parts dropped.
std::vector<std::string> SplitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t b = 0; b <= s.size();) {
    const size_t e = std::min(s.find(sep, b), s.size());
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

}  // namespace

Response CronHandler::ListCalendars() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [id, cal] : calendars_->all()) {
    list.push_back({{"id", id}, {"entries", cal.entries}, {"source", cal.source}});
  }
  return Json(200, {{"calendars", std::move(list)}});
}

Response CronHandler::Handle(Call& call) {
  if (call.segments.size() == 3 && call.segments[2] == "calendars") return ListCalendars();
  Result<std::map<std::string, std::string>> p =
      Params(call.req, {"expr", "tz", "n", "from", "job", "exclude", "calendars"});
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
  Instant from = clock_.Now();
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
  // Exclusions as a job's `exclude` and `calendars` keys would apply them.
  JobSpec spec;
  spec.id = job.empty() ? "preview" : job;
  spec.timezone = tz;
  FireRulesSpec keys;
  if (auto t = p->find("exclude"); t != p->end()) keys.exclude = SplitList(t->second, ';');
  if (auto t = p->find("calendars"); t != p->end()) keys.calendars = SplitList(t->second, ',');
  SetFireRules(spec, std::move(keys));
  Result<std::shared_ptr<const FireRules>> rules =
      FireRules::Compile(spec, *expr, calendars_.get());
  if (!rules.ok()) {
    const std::string_view what = rules.status().message();
    const std::string prefix = "job \"" + spec.id + "\": ";
    const std::string_view rest = what.substr(what.starts_with(prefix) ? prefix.size() : 0);
    return InvalidParam(rest.starts_with("calendars") ? "calendars" : "exclude", rest);
  }
  // `next`: the fires that run; `excluded`: the schedule's instants among them that do not.
  nlohmann::json next = nlohmann::json::array();
  nlohmann::json excluded = nlohmann::json::array();
  Instant cursor = from;
  for (int i = 0; i < n && excluded.size() < static_cast<size_t>(kMaxPreviewFires);) {
    std::optional<Instant> f = expr->Next(cursor);
    if (!f) break;
    cursor = *f;
    if (*rules && !(*rules)->Allows(*f)) {
      excluded.push_back(f->ToRfc3339Seconds());
      continue;
    }
    next.push_back(f->ToRfc3339Seconds());
    ++i;
  }
  return Json(200, {{"expr", expr->text()},
                    {"timezone", expr->time_zone().name()},
                    {"description", expr->Describe()},
                    {"next", std::move(next)},
                    {"excluded", std::move(excluded)}});
}

}  // namespace gnomon::server
