// The dashboard's files and the OpenAPI document (AssetsHandler, src/server/api_handlers.h).
#include "src/server/api_handlers.h"
#include "src/server/api_util.h"
#include "src/server/openapi_document.h"
#include "src/server/web_assets.h"

namespace gnomon::server {

const WebAsset* FindWebAsset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& asset : WebAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

AssetsHandler::AssetsHandler(std::string version, bool auth_required)
    : openapi_(OpenApiDocument(Shown(version))), auth_required_(auth_required) {}

bool AssetsHandler::IsAsset(std::string_view path) { return FindWebAsset(path) != nullptr; }

Response AssetsHandler::Handle(Call& call) {
  if (call.req.path == "/api/v1/openapi.json") {
    Response r;
    r.body = openapi_;
    return r;
  }
  const WebAsset& asset = *FindWebAsset(call.req.path);
  // File names carry no content hash, so browsers must revalidate every time ("no-cache"): the
  // ETag makes that a 304 without a body, and an upgraded binary is never shadowed by a stale
  // cached script. X-Gnomon-Auth tells the page whether to ask for a token ("bearer") or not
  // ("none") without a probe that would answer 401.
  Response r;
  r.headers = {{"ETag", std::string(asset.etag)},
               {"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Gnomon-Auth", auth_required_ ? "bearer" : "none"}};
  if (asset.content_type.substr(0, 9) == "text/html") {
    // Everything the page loads is embedded: no inline script or style, no other origin, and no
    // page of another origin may frame it.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                           "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
    r.headers.emplace_back("X-Frame-Options", "DENY");
  }
  if (!call.req.if_none_match.empty() && EtagMatches(call.req.if_none_match, asset.etag)) {
    r.status = 304;
    return r;
  }
  r.content_type = std::string(asset.content_type);
  r.body = std::string(asset.body);
  return r;
}

}  // namespace gnomon::server
