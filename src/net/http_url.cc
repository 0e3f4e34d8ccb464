#include "src/net/http_url.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace gnomon::net {
namespace {

bool IsControl(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

bool IsHostNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool IsIpv6LiteralChar(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return std::string(url);
  const size_t start = sep + 3;
  const size_t end = std::min(url.find_first_of("/?#", start), url.size());
  const size_t at = url.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  return std::string(url.substr(0, start)) + std::string(url.substr(at + 1));
}

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  const std::string quoted = "url \"" + RedactUrl(url) + "\"";
  const auto fail = [&](std::string_view what) {
    return InvalidArgumentError(quoted + ": " + std::string(what));
  };
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return fail("missing scheme (http:// or https://)");
  HttpUrl parsed;
  parsed.scheme = std::string(url.substr(0, sep));
  std::transform(parsed.scheme.begin(), parsed.scheme.end(), parsed.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (parsed.scheme != "http" && parsed.scheme != "https") {
    return fail("unsupported scheme \"" + parsed.scheme + "\" (http or https)");
  }
  const std::string_view rest = url.substr(sep + 3);
  const size_t path_start = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, path_start);
  if (authority.find('@') != std::string_view::npos) {
    return fail("user info (user:password@) is not allowed in the URL");
  }
  // host, or [IPv6], then an optional :port.
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("invalid host");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("invalid host");
      port = after.substr(1);
      has_port = true;
    }
    if (host.empty() || !std::all_of(host.begin(), host.end(), IsIpv6LiteralChar)) {
      return fail("invalid host");
    }
  } else {
    const size_t colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      has_port = true;
    }
    if (host.empty() || !std::all_of(host.begin(), host.end(), IsHostNameChar)) {
      return fail("invalid host");
    }
  }
  parsed.host = std::string(host);
  parsed.authority = std::string(authority);
  parsed.port = parsed.scheme == "https" ? 443 : 80;
  if (has_port) {
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), parsed.port);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || parsed.port < 1 ||
        parsed.port > 65535) {
      return fail("invalid port \"" + std::string(port) + "\"");
    }
  }
  std::string_view path =
      path_start == std::string_view::npos ? std::string_view("/") : rest.substr(path_start);
  path = path.substr(0, path.find('#'));  // fragments are not sent
  parsed.path = path.empty() || path[0] != '/' ? "/" + std::string(path) : std::string(path);
  if (std::any_of(parsed.path.begin(), parsed.path.end(),
                  [](char c) { return c == ' ' || IsControl(c); })) {
    return fail("the path contains a space or a control character");
  }
  return parsed;
}

}  // namespace gnomon::net
