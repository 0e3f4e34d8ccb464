// Helpers the API handlers share: error answers (JSON, with the status code and the field they
// name), query parameters, positive integers, versions. Pure functions, thread-safe.
#ifndef GNOMON_SRC_SERVER_API_UTIL_H_
#define GNOMON_SRC_SERVER_API_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/job/key_hint.h"
#include "src/server/api_handler.h"
#include "src/server/http_message.h"

namespace gnomon::server {

// A printable, bounded rendering of untrusted text inside a message (src/job/key_hint.h).
using gnomon::Shown;

// {"error": {"code", "message"[, "field"]}} with `status`.
Response Error(int status, std::string_view code, std::string message, std::string_view field = "");
// The optional body {"params": {...}} of a trigger or a re-run: the parameters as compact JSON
// ("" for none or an empty object) in *params, or the 400 that names what is wrong. The merge
// over the job's defaults (and its size bound) is checked by the caller.
std::optional<Response> ParamsBody(const Request& req, int max_json_depth, std::string* params);
// The answer for a library Status (handlers map the context-specific codes first):
// InvalidArgument 400, NotFound 404, AlreadyExists/FailedPrecondition 409, Unavailable 503,
// DeadlineExceeded 504, anything else 500.
Response FromStatus(const Status& s);
// A 400 naming a parameter or field: "<name>: <what>".
Response InvalidParam(std::string_view name, std::string_view what);
// A 400 for a job id that is not [A-Za-z0-9_.-]{1,128}, naming `field`.
Response InvalidJobId(std::string_view id, std::string_view field = "id");
// A 403 for a job outside the caller's namespaces; marks the call as denied ("namespace").
Response OutsideNamespaces(Call& call, std::string message);
// `body` serialised with `status`.
Response Json(int status, const nlohmann::json& body);

// A decimal integer >= 0 of at most 18 digits, or nullopt.
std::optional<int64_t> ParsePositive(std::string_view s);
// If-Match: `3`, `"3"` or `W/"3"`.
std::optional<int64_t> ParseIfMatch(std::string_view s);
// The entity tag of a version: "\"3\"".
std::string ETag(int64_t version);
// Whether an If-None-Match header ("*", or a comma-separated list of entity tags, weak or not)
// names `etag`.
bool EtagMatches(std::string_view header, std::string_view etag);

// The query parameters of `req`, each at most once and each one of `known`; InvalidArgument
// naming the parameter otherwise.
Result<std::map<std::string, std::string>> Params(const Request& req,
                                                  std::initializer_list<std::string_view> known);
// The `limit` parameter of a paged list (when present in `params`): decimal digits, at least 1;
// values above `max` are taken as `max`. Leaves `*limit` unchanged when absent; the 400 to
// answer when malformed.
std::optional<Response> ParseLimit(const std::map<std::string, std::string>& params, int max,
                                   int* limit);

// Whether `needle` occurs in `hay`, ignoring ASCII case.
bool ContainsIgnoringCase(std::string_view hay, std::string_view needle);
// An RFC 3339 string, or JSON null.
nlohmann::json InstantOrNull(const std::optional<Instant>& t);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_API_UTIL_H_
