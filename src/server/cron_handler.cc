// GET /api/v1/cron/preview (CronHandler, src/server/api_handlers.h).
#include "gnomon/cron.h"
#include "src/server/api_handlers.h"
#include "src/server/api_util.h"

namespace gnomon::server {

namespace {

// Most fires of one preview.
constexpr int kMaxPreviewFires = 100;

}  // namespace

Response CronHandler::Handle(Call& call) {
  Result<std::map<std::string, std::string>> p =
      Params(call.req, {"expr", "tz", "n", "from", "job"});
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
  nlohmann::json next = nlohmann::json::array();
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

}  // namespace gnomon::server
