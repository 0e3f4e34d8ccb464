// GET /healthz and GET /readyz (ProbesHandler, src/server/api_handlers.h).
#include "src/server/api_handlers.h"
#include "src/server/api_util.h"

namespace gnomon::server {

Response ProbesHandler::Handle(Call& call) {
  if (call.segments[0] == "healthz") return Json(200, {{"status", "ok"}});
  if (!ready_.load()) {
    return Error(503, "unavailable",
                 "starting: the jobs defined through the API are not loaded yet");
  }
  Result<Instant> now = claims_.Now();
  if (!now.ok()) {
    return Error(503, "unavailable", "backend not reachable: " + now.status().message());
  }
  return Json(200, {{"status", "ready"}, {"backend_time", now->ToRfc3339()}});
}

}  // namespace gnomon::server
