// Redis Cluster routing (internal): hash slots, the slot map read from the cluster, and a client
// that sends each command to the primary owning its slot and follows the cluster's redirects.
// docs/redis-cluster.md is the design this serves; RedisStore sends every call of a
// `redis+cluster://` coordinator through it.
//
// Routing. The slot map comes from `CLUSTER SHARDS` (Redis 7): the online primary of each shard
// and its slot ranges. A command goes to its slot's primary, over a connection pool of that
// primary (RedisConnectionPool, created on first use and kept). Its answer may redirect it:
//   MOVED <slot> <host:port>  the slot has a new owner: the command is sent there, and the map
//                             is read again (at most once per kMinRefreshGap);
//   ASK <slot> <host:port>    the slot is being migrated and this key is at the target already,
//                             or is new: `ASKING` and the command go there together, and the
//                             map is left as it is;
//   TRYAGAIN                  a multi-key command whose keys are split by a migration: sent again
//                             every kTryAgainGap until io_timeout, then Unavailable;
//   CLUSTERDOWN               Unavailable;
//   "... non local key ..."   a batch script (allow-cross-slot-keys) met a key of a slot this
//                             primary does not serve: Unavailable, and the next call reads the
//                             map again first.
// At most kMaxRedirects redirects per command. A connection failure is Unavailable, and the
// next call reads the map again first (a failover moves the slots to a promoted replica).
//
// A primary held down. A call that fails to reach a primary (no connection, or no answer within
// io_timeout: a crashed, paused or cut-off server) marks it down: from then on a call routed to
// it answers Unavailable at once, without I/O, so that one unreachable primary costs the callers
// of the others nothing (RedisStore::EvalBatch sends each primary's part on its own thread). A
// prober thread of the client reads the map again (from the primaries that are up, then the
// seeds) and tries it (a fresh connection and PING, so a dropped connection is down for one
// round trip only), at once and then every kProbeGap: the primary is up again when it answers,
// and its slots go to its promoted replica when the cluster fails it over. The map is read
// before the probes, so that a probe of a paused or cut-off primary (a connection that waits
// io_timeout) does not delay seeing its replica promoted. A primary the map no longer names
// (its replica took its slots) is let go: nothing is routed to it, so the prober stops once
// the failover is seen. The map is never read from a primary held down. A read that gives slots
// to another primary, and a probe that finds a held-down primary answering again, call the
// routes listeners (routes()): the scheduler then makes the claims that failed at once.
//
// Thread safety: every method is safe to call from many threads at once. mu_ guards the map,
// the pools' index and the down set; no I/O happens under it. The pools live as long as the
// client; the prober stops in the destructor.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_CLUSTER_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_CLUSTER_H_

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/base/thread_annotations.h"
#include "src/coord/redis/redis_connection.h"

namespace gnomon::coord {

inline constexpr int kClusterSlots = 16384;

// Whether `s` answers a call refused, with nothing of it run, because it touched a slot not
// served where it went: a script that met a key of a slot its server does not serve (the map is
// out of date), or a script without its keys declared that was answered ASK (the slot is being
// migrated; RedisClusterClient::Eval). A call over fewer slots may succeed.
bool IsSlotNotServed(const Status& s);

// The hash slot of `key`: CRC16 (XMODEM) of the key mod 16384, or of its hash tag: the text
// between the first '{' and the first '}' after it, when that text is not empty.
int ClusterKeySlot(std::string_view key);

// One primary and the slots it owns, as `CLUSTER SHARDS` lists them.
struct ClusterShard {
  std::string host;
  int port = 0;
  std::vector<std::pair<int, int>> slots;  // inclusive ranges
};

// The shards of a `CLUSTER SHARDS` reply that have an online primary and slots. InvalidArgument
// naming what is malformed (a slot out of range, an odd slot list, a primary without an
// address, more such shards than slots).
Result<std::vector<ClusterShard>> ParseClusterShards(const RedisReply& reply);

// A redirect carried by an error reply: "MOVED <slot> <host>:<port>" or "ASK ...".
struct ClusterRedirect {
  bool ask = false;  // ASK (one command) rather than MOVED (the slot's new owner)
  int slot = 0;
  std::string host;
  int port = 0;
};
std::optional<ClusterRedirect> ParseClusterRedirect(std::string_view error);

class RedisClusterClient {
 public:
  static constexpr int kMaxRedirects = 5;
  static constexpr Duration kMinRefreshGap = std::chrono::milliseconds(100);
  static constexpr Duration kTryAgainGap = std::chrono::milliseconds(10);
  static constexpr Duration kProbeGap = std::chrono::milliseconds(100);

  // Reads the slot map from the first of `seeds` that answers. `base`: the settings of every
  // connection (host and port are replaced per node; sentinels must be empty). `pool_size`
  // connections per primary. `scripts`: Lua sources for Eval, registered on every primary's
  // pool (script id = index), loaded on a node at its first use there. Unavailable when no seed
  // answers or the cluster has a slot without a primary.
  static Result<std::unique_ptr<RedisClusterClient>> Connect(
      const RedisConnectionConfig& base, std::vector<std::pair<std::string, int>> seeds,
      int pool_size, std::vector<std::string> scripts = {});
  ~RedisClusterClient();
  RedisClusterClient(const RedisClusterClient&) = delete;
  RedisClusterClient& operator=(const RedisClusterClient&) = delete;

  // Runs `argv` on the primary owning `slot` (0-16383), following redirects as described above.
  Result<RedisReply> Command(int slot, const std::vector<std::string>& argv);
  // EVALSHA of script `id` on the primary owning `slot`, routed as Command. The server decides
  // redirects from `keys` (in `slot`). With `keys_declared`, they are every key the script
  // touches, and an ASK is followed. Without, the script builds keys of its own, which an
  // importing node would read as absent while they are still at the source: an ASK answers
  // Unavailable (the slot is being migrated) and the script runs nowhere. A script error is
  // Internal, as RedisConnection::Eval's.
  Result<RedisReply> Eval(int slot, int id, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args, bool keys_declared = true);
  // Eval, then `then` on the same connection right after a script answer that is not an error
  // (e.g. WAIT: it counts the replicas of that primary that have the script's writes); its reply
  // goes to `then_reply`. A failure of `then` is the call's.
  Result<RedisReply> EvalThen(int slot, int id, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args,
                              const std::vector<std::string>& then, RedisReply& then_reply,
                              bool keys_declared = true);
  // Reads the slot map again now (from a primary of the current map, else a seed).
  Status Refresh();
  // Reads it again when a call found it out of date (at most once per kMinRefreshGap), as the
  // next routed call would: for callers that plan calls by OwnerOf.
  void RefreshIfStale();
  // "host:port" of the primary `slot` belongs to in the current map.
  std::string OwnerOf(int slot) const;
  // Its host and port (nullopt when the map has none for `slot`).
  std::optional<std::pair<std::string, int>> OwnerEndpointOf(int slot) const;
  // "host:port" of every primary in the current map, sorted.
  std::vector<std::string> Primaries() const;
  // Whether calls to the primary at "host:port" answer Unavailable at once (held down: its last
  // call failed and no probe has reached it since).
  bool IsDown(const std::string& address) const;
  // Its listeners are called (Changed) after each read of the map that gave a slot to another
  // primary (a failed primary's replica promoted, slots moved) and after each probe that found a
  // primary held down answering again, from the thread that read or probed, with no lock of the
  // client held. The base config's (a store's), or the client's own when it has none.
  RedisRoutes& routes() const { return *routes_; }

 private:
  struct Node {
    std::string host;
    int port = 0;
    std::string address;  // "host:port"
  };

  RedisClusterClient(RedisConnectionConfig base, std::vector<std::pair<std::string, int>> seeds,
                     int pool_size, std::vector<std::string> scripts);
  // Sends one call (`send`: on a node's pool, with ASKING first or not) to `slot`'s primary and
  // follows the redirects (an ASK only with `follow_ask`, else Unavailable).
  Result<RedisReply> Route(
      int slot, const std::function<Result<RedisReply>(RedisConnectionPool&, bool)>& send,
      bool follow_ask = true);
  // The pool of `host:port`, connected on first use.
  Result<RedisConnectionPool*> PoolOf(const std::string& host, int port);
  // Reads the map from `host:port` and installs it.
  Status RefreshFrom(const std::string& host, int port);
  // Refresh(), unless one ran less than kMinRefreshGap ago.
  void RefreshSoon();
  // Holds `address` down (see the header comment) and wakes the prober.
  void MarkDown(const std::string& host, int port, const std::string& why);
  // The prober thread: probes the primaries held down until the destructor stops it.
  void ProbeLoop();

  const RedisConnectionConfig base_;
  const std::vector<std::pair<std::string, int>> seeds_;
  const int pool_size_;
  const std::vector<std::string> scripts_;
  mutable Mutex mu_;
  std::vector<Node> nodes_ GNOMON_GUARDED_BY(mu_);                     // the map's primaries
  std::array<int16_t, kClusterSlots> owner_ GNOMON_GUARDED_BY(mu_){};  // index into nodes_
  std::map<std::string, std::unique_ptr<RedisConnectionPool>> pools_ GNOMON_GUARDED_BY(mu_);
  Duration last_refresh_ GNOMON_GUARDED_BY(mu_){0};  // SteadyNow() of the last Refresh
  bool stale_ GNOMON_GUARDED_BY(mu_) = false;        // a call failed: read the map before the next
  struct Down {
    std::string host;
    int port = 0;
    std::string why;  // the failure that held it down
  };
  std::map<std::string, Down> down_ GNOMON_GUARDED_BY(mu_);  // by "host:port"
  bool stopping_ GNOMON_GUARDED_BY(mu_) = false;
  std::condition_variable probe_cv_;  // wakes the prober: a primary went down, or stopping_
  std::thread prober_ GNOMON_GUARDED_BY(mu_);  // started by the first MarkDown
  const std::shared_ptr<RedisRoutes> routes_;  // called with no lock of the client held
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_CLUSTER_H_
