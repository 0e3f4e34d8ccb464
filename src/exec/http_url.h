// Parsing of http(s) URLs for the project's cpp-httplib clients (internal): the HTTP executor,
// webhook alerts and OTLP span export share it.
#ifndef GNOMON_SRC_EXEC_HTTP_URL_H_
#define GNOMON_SRC_EXEC_HTTP_URL_H_

#include <optional>
#include <string>
#include <string_view>

namespace gnomon::exec_internal {

struct HttpUrl {
  std::string scheme;            // "http" or "https" (lower case)
  std::string scheme_host_port;  // "http://host:port": what httplib::Client takes
  std::string path;              // "/path?query" (fragment dropped; "/" when empty)
};

// Parses an http:// or https:// URL; on failure returns nullopt and sets `error` to
// `url "<url>": <what is wrong>`. Whether https can be used is the caller's to check.
std::optional<HttpUrl> ParseHttpUrl(std::string_view url, std::string* error);

}  // namespace gnomon::exec_internal

#endif  // GNOMON_SRC_EXEC_HTTP_URL_H_
