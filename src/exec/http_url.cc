#include "src/exec/http_url.h"

#include <algorithm>
#include <cctype>

namespace gnomon::exec_internal {

std::optional<HttpUrl> ParseHttpUrl(std::string_view url, std::string* error) {
  const std::string quoted = "url \"" + std::string(url) + "\"";
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    *error = quoted + ": missing scheme (http:// or https://)";
    return std::nullopt;
  }
  HttpUrl parsed;
  parsed.scheme = std::string(url.substr(0, sep));
  std::transform(parsed.scheme.begin(), parsed.scheme.end(), parsed.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (parsed.scheme != "http" && parsed.scheme != "https") {
    *error = quoted + ": unsupported scheme \"" + parsed.scheme + "\" (http or https)";
    return std::nullopt;
  }
  const std::string_view rest = url.substr(sep + 3);
  const size_t path_start = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, path_start);
  if (authority.empty() || authority.find_first_of(" \t\r\n@") != std::string_view::npos) {
    *error = quoted + ": invalid host";
    return std::nullopt;
  }
  parsed.scheme_host_port = parsed.scheme + "://" + std::string(authority);
  std::string_view path =
      path_start == std::string_view::npos ? std::string_view("/") : rest.substr(path_start);
  path = path.substr(0, path.find('#'));  // fragments are not sent
  parsed.path = path.empty() || path[0] != '/' ? "/" + std::string(path) : std::string(path);
  if (parsed.path.find_first_of(" \t\r\n") != std::string::npos) {
    *error = quoted + ": the path contains a space or line break";
    return std::nullopt;
  }
  return parsed;
}

}  // namespace gnomon::exec_internal
