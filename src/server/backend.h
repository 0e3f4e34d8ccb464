// The coordination backend of a node, from its URL (docs/configuration.md "Backend URLs"):
// parsing and redacting URLs, and opening the backend they name (SQLite, Redis, Redis Sentinel,
// each of them over TLS too, etcd). Functions here are thread-compatible.
#ifndef GNOMON_SRC_SERVER_BACKEND_H_
#define GNOMON_SRC_SERVER_BACKEND_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/redis_coordinator.h"
#include "gnomon/status.h"

namespace gnomon::server {

// The default backend: the embedded SQLite database below the working directory.
inline constexpr std::string_view kDefaultBackendUrl = "sqlite://./gnomon-data/gnomon.db";
// The default data directory (the generated admin token).
inline constexpr std::string_view kDefaultDataDir = "./gnomon-data";

// One host of a backend URL.
struct HostPort {
  std::string host;  // name, IPv4 or IPv6 (without brackets)
  int port = 0;      // 1-65535
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// A parsed backend URL. Which fields are set depends on the scheme.
struct BackendUrl {
  // "sqlite", "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster",
  // "rediss+cluster" or "etcd"
  std::string scheme;
  // sqlite: the database file as written: "/abs/path" or "./rel/path" (relative to the working
  // directory of the process).
  std::string path;
  // redis, redis+sentinel, etcd: optional credentials (percent-decoded). Secret: log only
  // RedactUrl() of the URL.
  std::string user;
  std::string password;
  // redis(s): exactly one host (default port 6379); redis(s)+sentinel: the sentinels (default
  // 26379); redis(s)+cluster: the nodes asked for the slot map (default 6379); etcd: the
  // endpoints (default 2379).
  std::vector<HostPort> hosts;
  int db = 0;          // redis(s): database index (the URL's "/db"), default 0
  std::string master;  // redis(s)+sentinel: master name (the URL's path), required
  // rediss, rediss+sentinel: enabled, and the query's tls_* parameters (ParseTlsQuery).
  TlsOptions tls;
  // Redis schemes: the query's wait_replicas=N (RedisOptions::wait_replicas), default 0.
  int wait_replicas = 0;
  // Redis schemes: the query's fire_retention=<duration> (RedisOptions::fire_retention).
  std::optional<Duration> fire_retention;
};

// Parses `sqlite:///abs/path`, `sqlite://./rel/path`, `redis://[user:pass@]host:port[/db]`,
// `redis+sentinel://[user:pass@]h1:p,h2:p/master`, `redis+cluster://[user:pass@]h1:p[,h2:p]`
// (no path), the same over TLS as `rediss://`, `rediss+sentinel://` and
// `rediss+cluster://` (each with optional `?tls_...=...&...` parameters, `wait_replicas=N` and
// `fire_retention=D`, which start at the first '?' after the user-info) and
// `etcd://[user:pass@]h1:2379[,h2:2379]`. Errors (InvalidArgument) never contain the password; an
// unknown scheme lists the supported ones; an unknown query parameter is named.
Result<BackendUrl> ParseBackendUrl(std::string_view url);

// `url` with the credentials of its user-info part replaced for logs:
// "redis://user:secret@h:6379/0" -> "redis://user:***@h:6379/0"; a user-info without ':' is
// replaced whole ("redis://***@h:6379"). Other strings are returned unchanged.
std::string RedactUrl(std::string_view url);

// "host:port" or "[v6]:port" (port may be absent when default_port > 0). `min_port` is 0 for a
// listen address (0 = any free port) and 1 for a server to connect to.
Result<HostPort> ParseHostPort(std::string_view s, int default_port, int min_port);

// `url` with `password` as the password of its user info (percent-encoded), for a password that
// comes from a file or the environment instead of the URL (NodeOptions::backend_password).
// InvalidArgument when the URL has a password already, or its scheme takes none (sqlite).
Result<std::string> WithPassword(std::string_view url, std::string_view password);

// The Redis options of a redis://, rediss://, redis+sentinel://, rediss+sentinel://,
// redis+cluster:// or rediss+cluster:// URL (cluster_seeds set for the last two).
// InvalidArgument for another scheme.
Result<RedisOptions> RedisOptionsFor(const std::string& url, bool allow_unsafe);

// An opened backend, and what its safety checks found.
struct OpenedBackend {
  std::unique_ptr<Coordinator> coordinator;
  // Set when the backend cannot keep gnomon's promises across its own restart (Redis without
  // appendonly, opened with allow_unsafe): the warning to log.
  std::string unsafe;
  // Set when the link is encrypted but the server is not authenticated (rediss with
  // tls_verify=false): the warning to log at start.
  std::string unverified_tls;
};
// Opens the backend of `url` (creating the SQLite file's folder, mode 0700, when missing).
// InvalidArgument for a bad URL; Unavailable or FailedPrecondition when it cannot be opened.
Result<OpenedBackend> OpenBackend(const std::string& url, bool allow_unsafe);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_BACKEND_H_
