// RedisConnection: one connection to a Redis server for RedisCoordinator and RedisQueue
// (internal), with a mutex, reconnects with capped exponential backoff and jitter, and Lua
// scripts run by EVALSHA that are reloaded on NOSCRIPT.
//
// I/O and TLS. The bytes go through RedisSocket (redis_socket.h): plain TCP, or TLS through
// OpenSSL (`rediss://`); hiredis is only the RESP reply parser (redisReader), and commands are
// formatted here. Why: Debian 12's hiredis is 0.14, which has no TLS (hiredis_ssl came with 1.0),
// and the project takes its libraries from Debian. The other Debian options were worse: POCO's
// Redis client (libpoco-dev) could run over POCO's SecureStreamSocket, but brings POCO's own
// socket and SSL layers and reports errors by exceptions; Boost 1.74 predates Boost.Redis; an
// Asio-based client would duplicate the pipelining this class and RedisBatcher already do. OpenSSL
// is already the TLS library of every other peer (the API listener, HTTP jobs), and RedisSocket is
// small: connect with a deadline, the handshake and name check, read and write with io_timeout. The
// plain path costs what hiredis' blocking context cost: one send and one recv per round trip on a
// blocking socket with kernel timeouts, the reply parsed by the same redisReader (and the command
// written from its one buffer, no copy).
//
// Replies are copied into Reply values and the hiredis reply is freed at once, so callers never
// own hiredis memory. Errors: a connection or I/O failure (including a timeout and a failed TLS
// handshake) is Unavailable and drops the connection; the next call reconnects (at once after a
// working connection broke, else after the backoff, returning Unavailable without blocking
// meanwhile). A server error reply is not a Status: it is a Reply of type kError, for the caller
// to judge. Status messages name the server (host:port) and never contain the password.
//
// Thread safety: every method is safe to call from many threads at once.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_CONNECTION_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/coord/redis/redis_routes.h"
#include "src/coord/redis/redis_socket.h"

struct redisReader;

namespace gnomon::coord {

struct RedisConnectionConfig {
  std::string host;
  int port = 6379;
  std::string user;      // empty: AUTH <password> (when a password is set)
  std::string password;  // empty: no AUTH
  int db = 0;
  Duration connect_timeout = std::chrono::seconds(2);
  Duration io_timeout = std::chrono::seconds(2);
  Duration backoff_min = std::chrono::seconds(1);
  Duration backoff_max = std::chrono::seconds(32);
  // Sentinels to ask for the primary of `sentinel_master` (then host/port are discovered).
  std::vector<std::pair<std::string, int>> sentinels;
  std::string sentinel_master;
  // TLS to the server and the sentinels; null = plain TCP. Shared by the connections of a pool.
  std::shared_ptr<const RedisTlsContext> tls;
  // Told of each primary the sentinels name (RedisRoutes::PrimaryIs); shared by the connections
  // of a store. Null: nobody is told.
  std::shared_ptr<RedisRoutes> routes;
};

// A reply, owned (a copy of hiredis' redisReply).
struct RedisReply {
  enum class Type { kNil, kString, kStatus, kError, kInteger, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  // A Cluster's answer to a script (allow-cross-slot-keys) that met a key of a slot its server
  // does not serve: the caller's slot map is out of date.
  static constexpr std::string_view kNonLocalKey = "attempted to access a non local key";
  bool is_non_local_key() const {
    return is_error() && str.find(kNonLocalKey) != std::string::npos;
  }
};

class RedisConnection {
 public:
  // Connects now (Unavailable when the server cannot be reached or refuses AUTH/SELECT).
  static Result<std::unique_ptr<RedisConnection>> Connect(RedisConnectionConfig config);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Runs one command (binary-safe arguments).
  Result<RedisReply> Command(const std::vector<std::string>& argv);
  // `ASKING`, then `argv` on the same connection with nothing in between (a Redis Cluster ASK
  // redirect); the reply is argv's. An error answer to ASKING is returned as the reply.
  Result<RedisReply> CommandAsking(const std::vector<std::string>& argv);

  // Registers a Lua script; returns its id for Eval. Loaded on first use (SCRIPT LOAD).
  int AddScript(std::string source);
  // EVALSHA of script `id` with `keys` and `args`; on NOSCRIPT, SCRIPT LOAD and retry once.
  // A script error (other than NOSCRIPT) is Internal with the server's message.
  Result<RedisReply> Eval(int id, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args);
  // Eval, then (when the script answered without an error) `then` on the same connection with
  // nothing in between (e.g. WAIT, which counts the replicas that have this connection's writes);
  // its reply goes to `then_reply`. A failure of `then` is the call's.
  Result<RedisReply> EvalThen(int id, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args,
                              const std::vector<std::string>& then, RedisReply& then_reply);
  // Eval for RedisClusterClient: with `asking`, `ASKING` goes first on the same connection (again
  // before a retry after NOSCRIPT). A cluster's redirects (MOVED, ASK, TRYAGAIN, CLUSTERDOWN)
  // come back as error replies for the caller to follow, not as a Status. With a non-empty
  // `then`, as EvalThen: `then` follows a script answer that is not an error, its reply in
  // `*then_reply`.
  Result<RedisReply> EvalRouted(int id, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args, bool asking,
                                const std::vector<std::string>& then = {},
                                RedisReply* then_reply = nullptr);
  // Loads every registered script now (SCRIPT LOAD), so that a broken one fails early.
  Status LoadScripts();

  // Subscriber mode (use a connection for nothing else once called): subscribes to `channel` if
  // not yet subscribed (again after a reconnect), then waits up to `timeout` for a message on it.
  // Returns true when at least one message arrived (all pending ones are consumed), false on
  // timeout. Messages published while no call is waiting stay buffered for the next call.
  // Unavailable on connection errors (the next call reconnects and resubscribes; the caller
  // must then re-read the state it watches, as messages may have been missed). `sharded`: a
  // Redis Cluster's sharded channel (SSUBSCRIBE, SPUBLISH), served by the primary of its slot
  // only; the server's SUNSUBSCRIBE (the slot moved) is Unavailable as well, and so is a refused
  // SSUBSCRIBE (MOVED: this server does not serve the slot).
  Result<bool> WaitMessage(const std::string& channel, Duration timeout, bool sharded = false);

  // "host:port", for messages.
  const std::string& address() const { return address_; }
  // Connected, or disconnected with its reconnect attempt due (a call would try the server).
  bool usable() const;

 private:
  struct Script {
    std::string source;
    std::string sha;  // empty until loaded; guarded by mu_
  };

  explicit RedisConnection(RedisConnectionConfig config);

  // Connects (REQUIRES: mu_ held, sock_ null). Sets sock_ and reader_ on success.
  Status ConnectLocked();
  // Ensures a connection, honouring the backoff. REQUIRES: mu_ held.
  Status EnsureConnectedLocked();
  // Asks the sentinels for the primary's address and stores it in config_ / address_.
  Status DiscoverPrimaryLocked();
  // Sends argv and reads the reply; drops the connection on I/O errors. REQUIRES: mu_ held.
  Result<RedisReply> CommandLocked(const std::vector<std::string>& argv);
  // Sends a command already in RESP and reads its reply.
  Result<RedisReply> FormattedCommandLocked(const std::string& command);
  Status LoadScriptLocked(Script& script);
  // `asking` and `redirects`: as EvalRouted.
  Result<RedisReply> EvalLocked(int id, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args, bool asking = false,
                                bool redirects = false);
  // EvalThen's second half: `then` after the script's answer `r` on this connection.
  Result<RedisReply> ThenLocked(Result<RedisReply> r, const std::vector<std::string>& then,
                                RedisReply& then_reply);
  // Unavailable "redis <address>: <why>" (password redacted), after dropping the connection.
  Status FailLocked(const std::string& why);
  void DropLocked();
  // `message` with the password replaced by "***".
  std::string Redact(std::string message) const;

  RedisConnectionConfig config_;  // host and port change when the sentinels name a new primary
  std::string address_;  // of the server in use (changes when a sentinel names a new primary)
  std::mutex mu_;
  std::unique_ptr<RedisSocket> sock_;  // guarded by mu_; null = disconnected
  redisReader* reader_ = nullptr;      // guarded by mu_; owned; the replies read from sock_
  bool subscribed_ = false;            // guarded by mu_; WaitMessage's SUBSCRIBE is in effect
  Duration next_attempt_{0};           // guarded by mu_; SteadyNow() of the next reconnect
  Duration backoff_{0};                // guarded by mu_; 0 = reconnect at once
  std::mt19937_64 rng_;                // guarded by mu_; jitter
  std::vector<std::unique_ptr<Script>> scripts_;  // guarded by mu_
  std::atomic<bool> connected_{false};            // sock_ != null, readable without mu_
  std::atomic<int64_t> retry_at_{0};              // SteadyNow() (ms) of the next reconnect attempt
};

// A few RedisConnections used as one: each call goes to an idle connection (else the next in
// turn), so that concurrent callers (a scheduler's workers) wait for their own round trip, not
// for each other's. Scripts are registered on every connection under the same id.
//
// Thread safety: every method is safe to call from many threads at once.
class RedisConnectionPool {
 public:
  // Connects `size` (>= 1) connections now; Unavailable when the server cannot be reached.
  static Result<std::unique_ptr<RedisConnectionPool>> Connect(const RedisConnectionConfig& config,
                                                              int size);

  Result<RedisReply> Command(const std::vector<std::string>& argv);
  Result<RedisReply> CommandAsking(const std::vector<std::string>& argv);
  int AddScript(const std::string& source);
  Result<RedisReply> Eval(int id, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args);
  Result<RedisReply> EvalThen(int id, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args,
                              const std::vector<std::string>& then, RedisReply& then_reply);
  Result<RedisReply> EvalRouted(int id, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args, bool asking,
                                const std::vector<std::string>& then = {},
                                RedisReply* then_reply = nullptr);
  Status LoadScripts();
  const std::string& address() const { return conns_.front()->address(); }
  size_t size() const { return conns_.size(); }

 private:
  explicit RedisConnectionPool(std::vector<std::unique_ptr<RedisConnection>> conns);
  // Index of the connection to use, marked busy; Release(i) after the call.
  size_t Acquire();
  void Release(size_t i);

  std::vector<std::unique_ptr<RedisConnection>> conns_;
  std::unique_ptr<std::atomic<int>[]> busy_;  // callers inside each connection
  std::atomic<uint64_t> next_{0};
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_CONNECTION_H_
