// The OpenAPI 3 document of the HTTP API, served at GET /api/v1/openapi.json.
#include "src/server/openapi_document.h"

#include <nlohmann/json.hpp>

#include "src/job/job_schema.h"

namespace gnomon::server {
namespace {

// src/server/openapi.json, embedded at configure time (src/server/CMakeLists.txt); linted by
// `redocly lint` in make test (tests/openapi/run.sh).
const char kOpenApi[] =
#include "openapi_json.inc"
    ;

}  // namespace

std::string_view OpenApiSource() { return kOpenApi; }

std::string OpenApiDocument(std::string_view version) {
  // The definition's schema comes from the job schema (src/job/job_schema.h); job_schema_test
  // holds the file's copy, which the lint reads, equal to it.
  nlohmann::json doc = nlohmann::json::parse(kOpenApi);
  doc["info"]["version"] = std::string(version);
  doc["components"]["schemas"]["JobSpec"] = JobSpecSchema();
  return doc.dump(1);
}

}  // namespace gnomon::server
