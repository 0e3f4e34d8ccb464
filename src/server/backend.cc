#include "src/server/backend.h"

#include <sys/stat.h>

#include <filesystem>

#include "gnomon/etcd_coordinator.h"
#include "gnomon/sqlite_coordinator.h"
#include "src/server/api_util.h"

namespace gnomon::server {
namespace {

Result<int> ParsePort(std::string_view s) {
  if (s.empty() || s.size() > 5) return InvalidArgumentError("");
  int port = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return InvalidArgumentError("");
    port = port * 10 + (c - '0');
  }
  return port;
}

bool IsHostChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

// "host:port" or "[v6]:port" (port may be absent when default_port > 0). `min_port` is 0 for a
// listen address (0 = any free port) and 1 for a server to connect to.
}  // namespace

Result<HostPort> ParseHostPort(std::string_view s, int default_port, int min_port) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("\"" + Shown(s, 128) + "\": " + std::string(why));
  };
  HostPort hp;
  std::string_view rest;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) return bad("missing ']' after the IPv6 address");
    hp.host = std::string(s.substr(1, close - 1));
    for (char c : hp.host) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
            c == ':' || c == '.')) {
        return bad("invalid IPv6 address");
      }
    }
    rest = s.substr(close + 1);
  } else {
    const size_t colon = s.find(':');
    hp.host = std::string(s.substr(0, colon));
    for (char c : hp.host) {
      if (!IsHostChar(c)) return bad("invalid character in the host name");
    }
    rest = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
  }
  if (hp.host.empty()) return bad("missing host");
  if (hp.host.size() > 253) return bad("host name too long");
  if (rest.empty()) {
    if (default_port <= 0) return bad("missing :port");
    hp.port = default_port;
    return hp;
  }
  if (rest.front() != ':') return bad("expected :port after the host");
  Result<int> port = ParsePort(rest.substr(1));
  if (!port.ok() || *port < min_port || *port > 65535) {
    return bad("port must be a number " + std::to_string(min_port) + "-65535");
  }
  hp.port = *port;
  return hp;
}

namespace {

constexpr std::string_view kSupportedSchemes =
    "sqlite:///abs/path, sqlite://./rel/path, redis://[user:pass@]host:port[/db], "
    "redis+sentinel://h1:p,h2:p/master, redis+cluster://h1:p[,h2:p], rediss://..., "
    "rediss+sentinel://... and rediss+cluster://... (TLS), "
    "etcd://h1:2379[,h2:2379] and etcd://https://h1:2379[,https://h2:2379] (TLS)";

bool IsSentinelScheme(std::string_view scheme) {
  return scheme == "redis+sentinel" || scheme == "rediss+sentinel";
}
bool IsClusterScheme(std::string_view scheme) {
  return scheme == "redis+cluster" || scheme == "rediss+cluster";
}
bool IsRedisScheme(std::string_view scheme) {
  return scheme == "redis" || scheme == "rediss" || IsSentinelScheme(scheme) ||
         IsClusterScheme(scheme);
}

}  // namespace

Result<BackendUrl> ParseBackendUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return InvalidArgumentError("\"" + Shown(RedactUrl(url), 128) +
                                "\" is not a URL; supported: " + std::string(kSupportedSchemes));
  }
  BackendUrl out;
  out.scheme = std::string(url.substr(0, sep));
  std::string_view rest = url.substr(sep + 3);
  if (url.find('\0') != std::string_view::npos) return InvalidArgumentError("contains a NUL byte");

  if (out.scheme == "sqlite") {
    if (rest.empty()) return InvalidArgumentError("sqlite: missing the database path");
    if (rest.front() != '/' && rest.rfind("./", 0) != 0 && rest.rfind("../", 0) != 0) {
      return InvalidArgumentError("sqlite: path \"" + Shown(rest, 128) +
                                  "\" must be absolute (sqlite:///var/lib/gnomon.db) or start "
                                  "with ./ or ../ (sqlite://./gnomon.db)");
    }
    if (rest.back() == '/') {
      return InvalidArgumentError("sqlite: path \"" + Shown(rest, 128) + "\" names a directory");
    }
    out.path = std::string(rest);
    return out;
  }

  if (out.scheme == "etcd") {
    Result<EtcdOptions> etcd = ParseEtcdUrl(url);
    if (!etcd.ok()) return etcd.status();
    for (const auto& [host, port] : etcd->endpoints) out.hosts.push_back(HostPort{host, port});
    out.user = etcd->user;
    out.password = etcd->password;
    out.tls = etcd->tls;
    return out;
  }
  int default_port = 0;
  if (out.scheme == "redis" || out.scheme == "rediss" || IsClusterScheme(out.scheme)) {
    default_port = 6379;
  } else if (IsSentinelScheme(out.scheme)) {
    default_port = 26379;
  } else {
    return InvalidArgumentError("unknown scheme \"" + Shown(out.scheme) +
                                "\"; supported: " + std::string(kSupportedSchemes));
  }
  const std::string scheme = out.scheme;

  // The user-info ends at the last '@', so a password may contain '@', '/' and '?' unencoded.
  // Redis URLs may end with a query (TLS parameters), from the first '?' after the user-info.
  if (IsRedisScheme(scheme)) {
    const size_t last_at = rest.rfind('@');
    const size_t question = rest.find('?', last_at == std::string_view::npos ? 0 : last_at + 1);
    out.tls.enabled = scheme.starts_with("rediss");
    if (question != std::string_view::npos) {
      Result<RedisQuery> query =
          ParseRedisQuery(rest.substr(question + 1), scheme.starts_with("rediss"));
      if (!query.ok()) return InvalidArgumentError(scheme + ": " + query.status().message());
      out.tls = query->tls;
      out.wait_replicas = query->wait_replicas;
      out.fire_retention = query->fire_retention;
      rest = rest.substr(0, question);
    } else if (last_at != std::string_view::npos &&
               rest.substr(0, last_at).find("?tls_") != std::string_view::npos) {
      return InvalidArgumentError(scheme + ": write '@' in a query value as %40");
    }
  }
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    const size_t colon = info.find(':');
    Result<std::string> user = PercentDecode(info.substr(0, colon));
    if (!user.ok()) return InvalidArgumentError(scheme + ": user-info: " + user.status().message());
    out.user = *user;
    if (colon != std::string_view::npos) {
      Result<std::string> pass = PercentDecode(info.substr(colon + 1));
      if (!pass.ok())
        return InvalidArgumentError(scheme + ": user-info: " + pass.status().message());
      out.password = *pass;
    }
    rest = rest.substr(at + 1);
  }
  const size_t slash = rest.find('/');
  const std::string_view hosts = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (hosts.empty()) return InvalidArgumentError(scheme + ": missing host");
  size_t start = 0;
  while (true) {
    const size_t comma = hosts.find(',', start);
    Result<HostPort> hp = ParseHostPort(hosts.substr(start, comma - start), default_port, 1);
    if (!hp.ok()) return InvalidArgumentError(scheme + ": " + hp.status().message());
    out.hosts.push_back(std::move(hp).value());
    if (out.hosts.size() > 64) return InvalidArgumentError(scheme + ": more than 64 hosts");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }

  if (out.scheme == "redis" || out.scheme == "rediss") {
    if (out.hosts.size() != 1) {
      return InvalidArgumentError(scheme + ": exactly one host:port (use " + scheme +
                                  "+sentinel:// for several)");
    }
    if (!path.empty()) {
      Result<int> db = ParsePort(path);  // digits only, at most 5 of them
      if (!db.ok()) {
        return InvalidArgumentError(scheme + ": database \"" + Shown(path) +
                                    "\" must be a number 0-99999");
      }
      out.db = *db;
    }
  } else if (IsClusterScheme(out.scheme)) {
    if (!path.empty()) {
      return InvalidArgumentError(scheme + ": a Cluster has no database or name after the hosts");
    }
  } else if (IsSentinelScheme(out.scheme)) {
    if (path.empty()) {
      return InvalidArgumentError(scheme + ": missing the master name (…/mymaster)");
    }
    for (char c : path) {
      if (!IsHostChar(c)) {
        return InvalidArgumentError(scheme + ": master name \"" + Shown(path) +
                                    "\" must match [A-Za-z0-9_.-]+");
      }
    }
    out.master = std::string(path);
  }
  return out;
}

std::string RedactUrl(std::string_view url) {
  const size_t sep = url.find("://");
  const size_t begin = sep == std::string_view::npos ? 0 : sep + 3;
  if (sep != std::string_view::npos && url.substr(0, sep) == "sqlite") return std::string(url);
  const size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < begin) return std::string(url);
  const std::string_view info = url.substr(begin, at - begin);
  const size_t colon = info.find(':');
  std::string out(url.substr(0, begin));
  if (colon == std::string_view::npos) {
    out += "***";
  } else {
    out += info.substr(0, colon);
    out += ":***";
  }
  out += url.substr(at);
  return out;
}

Result<RedisOptions> RedisOptionsFor(const std::string& url, bool allow_unsafe) {
  Result<BackendUrl> parsed = ParseBackendUrl(url);
  if (!parsed.ok()) return parsed.status();
  RedisOptions base;
  base.allow_unsafe = allow_unsafe;
  if (parsed->scheme == "redis" || parsed->scheme == "rediss") return ParseRedisUrl(url, base);
  if (IsClusterScheme(parsed->scheme)) {
    // redis(s)+cluster://[user:pass@]h1:p,h2:p: the slot map comes from these nodes.
    for (const HostPort& h : parsed->hosts) base.cluster_seeds.emplace_back(h.host, h.port);
    base.user = parsed->user;
    base.password = parsed->password;
    base.tls = parsed->tls;
    base.wait_replicas = parsed->wait_replicas;
    if (parsed->fire_retention) base.fire_retention = *parsed->fire_retention;
    return base;
  }
  if (!IsSentinelScheme(parsed->scheme)) {
    return InvalidArgumentError(RedactUrl(url) +
                                ": needs a Redis backend (redis://, rediss://, "
                                "redis+sentinel://, rediss+sentinel://, redis+cluster:// or "
                                "rediss+cluster://)");
  }
  // redis(s)+sentinel://[user:pass@]h1:p,h2:p/master: the primary comes from the sentinels.
  for (const HostPort& h : parsed->hosts) base.sentinels.emplace_back(h.host, h.port);
  base.sentinel_master = parsed->master;
  base.user = parsed->user;
  base.password = parsed->password;
  base.db = parsed->db;
  base.tls = parsed->tls;
  base.wait_replicas = parsed->wait_replicas;
  if (parsed->fire_retention) base.fire_retention = *parsed->fire_retention;
  return base;
}

Result<OpenedBackend> OpenBackend(const std::string& url, bool allow_unsafe) {
  Result<BackendUrl> parsed = ParseBackendUrl(url);
  if (!parsed.ok()) return parsed.status();
  OpenedBackend out;
  if (IsRedisScheme(parsed->scheme)) {
    Result<RedisOptions> options = RedisOptionsFor(url, allow_unsafe);
    if (!options.ok()) return options.status();
    Result<std::unique_ptr<RedisCoordinator>> redis = RedisCoordinator::Open(*options);
    if (!redis.ok()) return redis.status();
    if ((*redis)->unsafe_persistence()) {
      out.unsafe =
          "the Redis server lacks appendonly yes or maxmemory-policy noeviction: a restart or "
          "an eviction can lose claims (allow_unsafe_backend = true)";
    }
    if (options->tls.enabled && !options->tls.verify) {
      out.unverified_tls =
          "TLS to Redis does not verify the server's certificate (tls_verify=false): anyone "
          "on the path can impersonate the server and read the password and every claim";
    }
    out.coordinator = std::move(*redis);
    return out;
  }
  if (parsed->scheme == "etcd") {
    Result<EtcdOptions> options = ParseEtcdUrl(url);
    if (!options.ok()) return options.status();
    Result<std::unique_ptr<EtcdCoordinator>> etcd = EtcdCoordinator::Open(*options);
    if (!etcd.ok()) return etcd.status();
    if (options->tls.enabled && !options->tls.verify) {
      out.unverified_tls =
          "TLS to etcd does not verify the members' certificates (tls_verify=false): anyone on "
          "the path can impersonate them and read the password and every claim";
    }
    out.coordinator = std::move(*etcd);
    return out;
  }
  const std::filesystem::path path(parsed->path);
  if (path.has_parent_path() && !std::filesystem::exists(path.parent_path())) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return UnavailableError("cannot create " + path.parent_path().string() + ": " + ec.message());
    }
    ::chmod(path.parent_path().c_str(), 0700);
  }
  Result<std::unique_ptr<SqliteCoordinator>> db =
      SqliteCoordinator::Open(parsed->path, SystemClock::Get());
  if (!db.ok()) return db.status();
  out.coordinator = std::move(*db);
  return out;
}

Result<std::string> WithPassword(std::string_view url, std::string_view password) {
  Result<BackendUrl> parsed = ParseBackendUrl(url);
  if (!parsed.ok()) return parsed.status();
  if (parsed->scheme == "sqlite") {
    return InvalidArgumentError("a backend password was given, but sqlite:// takes none");
  }
  if (!parsed->password.empty()) {
    return InvalidArgumentError(
        "the backend URL has a password, and backend_password_file or GNOMON_BACKEND_PASSWORD "
        "gives another: keep one (the file or the variable; a password in a URL shows in "
        "/proc/<pid>/cmdline when given with --backend)");
  }
  std::string encoded;
  for (char c : password) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      encoded += c;
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      encoded += '%';
      encoded += kHex[static_cast<unsigned char>(c) >> 4];
      encoded += kHex[static_cast<unsigned char>(c) & 15];
    }
  }
  const size_t sep = url.find("://") + 3;
  std::string_view rest = url.substr(sep);
  const size_t at = rest.substr(0, rest.find('/')).rfind('@');
  std::string user;
  if (at != std::string_view::npos) {
    user = std::string(rest.substr(0, at));
    rest.remove_prefix(at + 1);
  }
  return std::string(url.substr(0, sep)) + user + ":" + encoded + "@" + std::string(rest);
}

}  // namespace gnomon::server
