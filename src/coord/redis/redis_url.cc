// Redis URLs (include/gnomon/redis_coordinator.h): ParseRedisUrl and the TLS query parameters.
#include <algorithm>
#include <array>
#include <charconv>
#include <set>

#include "gnomon/redis_coordinator.h"

namespace gnomon {
namespace {

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Percent-decodes `in` into `out`; false when an escape is malformed.
bool PercentDecode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    int64_t v = 0;
    if (i + 2 >= in.size()) return false;
    auto [p, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, v, 16);
    if (ec != std::errc() || p != in.data() + i + 3) return false;
    out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

// `s` for an error message: at most 64 characters, control and non-ASCII bytes as '?'.
std::string Printable(std::string_view s) {
  std::string out(s.substr(0, 64));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (s.size() > 64) out += "...";
  return out;
}

constexpr std::array<std::string_view, 5> kTlsParams = {"tls_ca", "tls_cert", "tls_key",
                                                        "tls_server_name", "tls_verify"};

}  // namespace

Result<RedisTlsOptions> ParseRedisTlsQuery(std::string_view query, bool tls_scheme) {
  RedisTlsOptions tls;
  tls.enabled = tls_scheme;
  std::set<std::string, std::less<>> seen;
  size_t start = 0;
  while (true) {
    const size_t amp = query.find('&', start);
    const std::string_view item = query.substr(start, amp - start);
    const size_t eq = item.find('=');
    const std::string name = Printable(item.substr(0, eq));
    if (item.empty()) return InvalidArgumentError("empty query parameter (expected name=value)");
    if (std::find(kTlsParams.begin(), kTlsParams.end(), item.substr(0, eq)) == kTlsParams.end()) {
      return InvalidArgumentError("unknown query parameter \"" + name +
                                  "\"; known: tls_ca, tls_cert, tls_key, tls_server_name, "
                                  "tls_verify");
    }
    if (!tls_scheme) {
      return InvalidArgumentError("query parameter " + name +
                                  " needs TLS: use rediss:// or rediss+sentinel://");
    }
    if (eq == std::string_view::npos) {
      return InvalidArgumentError("query parameter " + name + " has no value (" + name + "=...)");
    }
    if (!seen.insert(name).second) {
      return InvalidArgumentError("query parameter " + name + " is given twice");
    }
    std::string value;
    if (!PercentDecode(item.substr(eq + 1), value)) {
      return InvalidArgumentError("query parameter " + name + ": malformed percent-encoding");
    }
    if (value.empty()) return InvalidArgumentError("query parameter " + name + " is empty");
    if (std::any_of(value.begin(), value.end(), [](char c) { return c >= 0 && c < 0x20; })) {
      return InvalidArgumentError("query parameter " + name + " contains a control character");
    }
    if (name == "tls_ca") {
      tls.ca_file = value;
    } else if (name == "tls_cert") {
      tls.cert_file = value;
    } else if (name == "tls_key") {
      tls.key_file = value;
    } else if (name == "tls_server_name") {
      const bool ok = value.size() <= 253 && std::all_of(value.begin(), value.end(), [](char c) {
                        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                               (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
                               c == ':';
                      });
      if (!ok) {
        return InvalidArgumentError("query parameter tls_server_name: \"" + Printable(value) +
                                    "\" is not a host name or IP address");
      }
      tls.server_name = value;
    } else if (value == "true" || value == "false") {
      tls.verify = value == "true";
    } else {
      return InvalidArgumentError("query parameter tls_verify must be true or false, not \"" +
                                  Printable(value) + "\"");
    }
    if (amp == std::string_view::npos) break;
    start = amp + 1;
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgumentError("query parameters tls_cert and tls_key go together");
  }
  return tls;
}

Result<RedisOptions> ParseRedisUrl(std::string_view url, RedisOptions base) {
  auto bad = [&](const std::string& why) {
    // Never echo the credentials: show the URL without its user-info part.
    std::string shown(url.substr(0, 200));
    size_t at = shown.rfind('@');
    size_t scheme = shown.find("://");
    if (at != std::string::npos && scheme != std::string::npos && at > scheme) {
      shown = shown.substr(0, scheme + 3) + "***@" + shown.substr(at + 1);
    }
    return InvalidArgumentError("redis URL \"" + shown + "\": " + why);
  };
  std::string_view rest;
  bool tls = false;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else if (url.starts_with("rediss://")) {
    rest = url.substr(9);
    tls = true;
  } else {
    return bad("does not start with redis:// or rediss://");
  }
  // The user-info ends at the last '@' (a password may hold '?'); the query starts at the first
  // '?' after it.
  const size_t last_at = rest.rfind('@');
  const size_t question = rest.find('?', last_at == std::string_view::npos ? 0 : last_at + 1);
  base.tls = RedisTlsOptions{};
  base.tls.enabled = tls;
  if (question != std::string_view::npos) {
    Result<RedisTlsOptions> query = ParseRedisTlsQuery(rest.substr(question + 1), tls);
    if (!query.ok()) return bad(query.status().message());
    base.tls = *query;
    rest = rest.substr(0, question);
  } else if (last_at != std::string_view::npos &&
             rest.substr(0, last_at).find("?tls_") != std::string_view::npos) {
    return bad("write '@' in a query value as %40");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (!PercentDecode(userinfo.substr(0, colon), base.user)) return bad("bad user encoding");
    base.password.clear();
    if (colon != std::string_view::npos &&
        !PercentDecode(userinfo.substr(colon + 1), base.password)) {
      return bad("bad password encoding");
    }
  }
  size_t colon = authority.rfind(':');
  std::string_view host = authority.substr(0, colon);
  if (host.empty()) return bad("no host");
  base.host = std::string(host);
  if (colon != std::string_view::npos) {
    int64_t port = 0;
    if (!ParseInt(authority.substr(colon + 1), port) || port < 1 || port > 65535) {
      return bad("port is not 1-65535");
    }
    base.port = static_cast<int>(port);
  }
  if (!path.empty()) {
    int64_t db = 0;
    if (!ParseInt(path, db) || db < 0 || db > 1'000'000) return bad("database is not a number");
    base.db = static_cast<int>(db);
  }
  return base;
}

}  // namespace gnomon
