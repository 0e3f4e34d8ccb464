// The OpenAPI 3 document of the HTTP API, served at GET /api/v1/openapi.json.
#include "src/server/openapi_document.h"

namespace gnomon::server {
namespace {

// src/server/openapi.json, embedded at configure time (src/server/CMakeLists.txt); linted by
// `redocly lint` in make test (tests/openapi/run.sh).
const char kOpenApi[] =
#include "openapi_json.inc"
    ;

}  // namespace

std::string OpenApiDocument(std::string_view version) {
  std::string doc = kOpenApi;
  const size_t at = doc.find("@VERSION@");
  doc.replace(at, 9, version);
  return doc;
}

}  // namespace gnomon::server
