// GET /api/v1/audit (AuditHandler, src/server/api_handlers.h).
#include "src/server/api_handlers.h"
#include "src/server/api_util.h"

namespace gnomon::server {

namespace {

// Records read (in pages of 1,000) to fill one page for a caller limited to namespaces: every
// record the backend keeps (two caps of 10,000 by default).
constexpr int kMaxScannedPages = 40;

nlohmann::json ParsedOrText(const std::string& s) {
  if (s.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
  return j.is_discarded() ? nlohmann::json(s) : j;
}

}  // namespace

Response AuditHandler::Handle(Call& call) {
  Result<std::map<std::string, std::string>> p = Params(call.req, {"limit", "before"});
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
  // A global caller's page is the backend's page; a namespaced caller's is filled from as many
  // backend pages as it takes, and its next_before is the seq of the last record it may see.
  std::vector<AuditRecord> shown;
  bool more = false;
  const int fetch = call.who.Global() ? limit : 1000;
  for (int page = 0; page < kMaxScannedPages; ++page) {
    Result<std::vector<AuditRecord>> records = audit_.List(fetch, before);
    if (!records.ok()) return FromStatus(records.status());
    for (AuditRecord& r : *records) {
      if (!call.who.Global() && (r.target.empty() || !call.who.Allows(r.target))) continue;
      if (static_cast<int>(shown.size()) == limit) {
        more = true;
        break;
      }
      shown.push_back(std::move(r));
    }
    if (call.who.Global()) {
      more = static_cast<int>(records->size()) == limit && !records->empty();
      break;
    }
    if (more || static_cast<int>(records->size()) < fetch) break;
    before = records->back().seq;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const AuditRecord& e : shown) {
    list.push_back({{"seq", e.seq},
                    {"at", e.at.ToRfc3339()},
                    {"who", e.who},
                    {"action", e.action},
                    {"target", e.target},
                    {"result", std::string(AuditResultName(e.result))},
                    {"status", HttpStatusOfAudit(e)},
                    {"before", ParsedOrText(e.before)},
                    {"after", ParsedOrText(e.after)}});
  }
  nlohmann::json out = {{"entries", std::move(list)}};
  if (more && !shown.empty()) out["next_before"] = shown.back().seq;
  return Json(200, std::move(out));
}

}  // namespace gnomon::server
