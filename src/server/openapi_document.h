// The OpenAPI 3 document of the HTTP API (docs/http-api.md), as served at
// GET /api/v1/openapi.json.
#ifndef GNOMON_SRC_SERVER_OPENAPI_DOCUMENT_H_
#define GNOMON_SRC_SERVER_OPENAPI_DOCUMENT_H_

#include <string>
#include <string_view>

namespace gnomon::server {

// The document, with `version` (printable ASCII, not escaped) as info.version.
std::string OpenApiDocument(std::string_view version);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_OPENAPI_DOCUMENT_H_
