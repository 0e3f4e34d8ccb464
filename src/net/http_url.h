// Parsing of the http(s) URLs that gnomon's HTTP clients accept (the HTTP executor, webhook
// alerts and OTLP span export validate their URLs with it; `gnomon job` reads its --server).
#ifndef GNOMON_SRC_NET_HTTP_URL_H_
#define GNOMON_SRC_NET_HTTP_URL_H_

#include <string>
#include <string_view>

#include "gnomon/status.h"

namespace gnomon::net {

struct HttpUrl {
  std::string scheme;     // "http" or "https" (lower case)
  std::string host;       // a name or an IP address, without the brackets of an IPv6 address
  std::string authority;  // "host[:port]" as written ("[::1]:8080")
  int port = 0;           // the port written, else 80 (http) or 443 (https)
  std::string path;       // "/path?query" (the fragment dropped; "/" when empty)
};

// Parses an absolute http:// or https:// URL. InvalidArgument `url "<url>": <what is wrong>`:
// missing or unsupported scheme, user info ("user:password@", not allowed: secrets go in
// headers), an invalid host or port, or a space or control character in the path. The URL quoted
// in a message never includes its user info.
Result<HttpUrl> ParseHttpUrl(std::string_view url);

// `url` without the user info of its authority ("http://u:p@h/x" -> "http://h/x"), for messages.
std::string RedactUrl(std::string_view url);

}  // namespace gnomon::net

#endif  // GNOMON_SRC_NET_HTTP_URL_H_
