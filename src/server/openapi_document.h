// The OpenAPI 3 document of the HTTP API (docs/http-api.md), as served at
// GET /api/v1/openapi.json.
#ifndef GNOMON_SRC_SERVER_OPENAPI_DOCUMENT_H_
#define GNOMON_SRC_SERVER_OPENAPI_DOCUMENT_H_

#include <string>
#include <string_view>

namespace gnomon::server {

// The document, with `version` as info.version and the definition's schema (JobSpec) from the
// job schema (src/job/job_schema.h).
std::string OpenApiDocument(std::string_view version);
// src/server/openapi.json as built in (its JobSpec is held equal to the job schema's by
// job_schema_test).
std::string_view OpenApiSource();

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_OPENAPI_DOCUMENT_H_
