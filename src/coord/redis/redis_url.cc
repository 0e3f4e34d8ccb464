// Redis URLs (include/gnomon/redis_coordinator.h): ParseRedisUrl.
#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "gnomon/tls.h"

namespace gnomon {
namespace {

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Percent-decodes `in` into `out`; false when an escape is malformed.
bool PercentDecode(std::string_view in, std::string& out) {
  Result<std::string> decoded = gnomon::PercentDecode(in);
  if (!decoded.ok()) return false;
  out = std::move(*decoded);
  return true;
}

}  // namespace

Result<RedisQuery> ParseRedisQuery(std::string_view query, bool tls_scheme) {
  RedisQuery out;
  out.tls.enabled = tls_scheme;
  bool replicas_given = false;
  std::vector<std::string_view> others;  // for ParseTlsQuery (empty ones too: it names them)
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view item = query.substr(start, end - start);
    start = end + 1;
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (name == "wait_replicas") {
      int64_t v = 0;
      if (replicas_given) {
        return InvalidArgumentError("query parameter \"wait_replicas\" is given twice");
      }
      if (!ParseInt(value, v) || v < 0 || v > 16) {
        return InvalidArgumentError("query parameter \"wait_replicas\" must be a number 0-16");
      }
      out.wait_replicas = static_cast<int>(v);
      replicas_given = true;
    } else if (name == "fire_retention") {
      if (out.fire_retention) {
        return InvalidArgumentError("query parameter \"fire_retention\" is given twice");
      }
      Result<Duration> d = ParseDuration(value);
      if (!d.ok() || *d < kMinFireRetention || *d > kMaxFireRetention) {
        return InvalidArgumentError(
            "query parameter \"fire_retention\" must be a duration from 1h to 366d (\"2h\", "
            "\"7d\")");
      }
      out.fire_retention = *d;
    } else {
      others.push_back(item);
    }
  }
  std::string rest;
  for (size_t i = 0; i < others.size(); ++i) {
    if (i > 0) rest += '&';
    rest += others[i];
  }
  if (!rest.empty()) {
    Result<TlsOptions> tls = ParseTlsQuery(rest, tls_scheme, "use rediss:// or rediss+sentinel://");
    if (!tls.ok()) return tls.status();
    out.tls = *tls;
  }
  return out;
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
  base.tls = TlsOptions{};
  base.tls.enabled = tls;
  base.wait_replicas = 0;
  if (question != std::string_view::npos) {
    Result<RedisQuery> query = ParseRedisQuery(rest.substr(question + 1), tls);
    if (!query.ok()) return bad(query.status().message());
    base.tls = query->tls;
    base.wait_replicas = query->wait_replicas;
    if (query->fire_retention) base.fire_retention = *query->fire_retention;
    rest = rest.substr(0, question);
  } else if (last_at != std::string_view::npos &&
             rest.substr(0, last_at).find("?tls_") != std::string_view::npos) {
    return bad("write '@' in a query value as %40");
  }
  // The path (the database) starts at the first '/' after the user-info: a password may hold '/'.
  const size_t at = rest.rfind('@');
  const size_t slash = rest.find('/', at == std::string_view::npos ? 0 : at + 1);
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
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
  // "[v6]:port" or "[v6]": the brackets are not part of the address.
  size_t colon = authority.rfind(':');
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address without its ']'");
    colon = close + 1 < authority.size() && authority[close + 1] == ':' ? close + 1
                                                                        : std::string_view::npos;
    if (colon == std::string_view::npos && close + 1 != authority.size()) {
      return bad("expected ':port' after the IPv6 address");
    }
  }
  std::string_view host = authority.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
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
