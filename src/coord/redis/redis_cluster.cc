#include "src/coord/redis/redis_cluster.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <set>

namespace gnomon::coord {
namespace {

using Type = RedisReply::Type;

// CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes keys by.
uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc = static_cast<uint16_t>(crc ^ (byte << 8));
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

std::optional<int> ParseInt(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// An integer element, or a decimal string one (the reply's forms differ between versions).
std::optional<int> IntOf(const RedisReply& r) {
  if (r.type == Type::kInteger) {
    if (r.integer < INT32_MIN || r.integer > INT32_MAX) return std::nullopt;
    return static_cast<int>(r.integer);
  }
  if (r.type == Type::kString || r.type == Type::kStatus) return ParseInt(r.str);
  return std::nullopt;
}

// The value of `name` in a flat name/value array ("slots", [...], "nodes", [...]).
const RedisReply* Field(const RedisReply& map, std::string_view name) {
  if (map.type != Type::kArray) return nullptr;
  for (size_t i = 0; i + 1 < map.elements.size(); i += 2) {
    if (map.elements[i].str == name) return &map.elements[i + 1];
  }
  return nullptr;
}

std::string Address(const std::string& host, int port) { return host + ":" + std::to_string(port); }

// Waits `d` of real time (between TRYAGAIN answers).
void Pause(Duration d) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  SystemClock::Get().WaitFor(lock, cv, d, [] { return false; });
}

}  // namespace

int ClusterKeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

Result<std::vector<ClusterShard>> ParseClusterShards(const RedisReply& reply) {
  auto bad = [](const std::string& what) {
    return InvalidArgumentError("redis cluster: CLUSTER SHARDS: " + what);
  };
  if (reply.type != Type::kArray) return bad("not an array");
  std::vector<ClusterShard> out;
  for (const RedisReply& shard : reply.elements) {
    const RedisReply* slots = Field(shard, "slots");
    const RedisReply* nodes = Field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || slots->type != Type::kArray ||
        nodes->type != Type::kArray) {
      return bad("a shard without slots or nodes");
    }
    if (slots->elements.size() % 2 != 0) return bad("an odd number of slot bounds");
    ClusterShard s;
    for (size_t i = 0; i < slots->elements.size(); i += 2) {
      const std::optional<int> first = IntOf(slots->elements[i]);
      const std::optional<int> last = IntOf(slots->elements[i + 1]);
      if (!first || !last || *first < 0 || *last >= kClusterSlots || *first > *last) {
        return bad("a slot range out of 0-16383");
      }
      s.slots.emplace_back(*first, *last);
    }
    for (const RedisReply& node : nodes->elements) {
      const RedisReply* role = Field(node, "role");
      const RedisReply* health = Field(node, "health");
      if (role == nullptr || role->str != "master") continue;
      if (health != nullptr && health->str != "online") continue;
      const RedisReply* endpoint = Field(node, "endpoint");
      const RedisReply* ip = Field(node, "ip");
      const RedisReply* port = Field(node, "port");
      if (port == nullptr) port = Field(node, "tls-port");
      std::string host;
      if (endpoint != nullptr && !endpoint->str.empty() && endpoint->str != "?") {
        host = endpoint->str;
      } else if (ip != nullptr) {
        host = ip->str;
      }
      const std::optional<int> p = port == nullptr ? std::nullopt : IntOf(*port);
      if (host.empty() || !p || *p <= 0 || *p > 65535) return bad("a primary without an address");
      s.host = host;
      s.port = *p;
    }
    // A shard whose primary is not online (failing over) or that owns no slots routes nothing.
    if (!s.host.empty() && !s.slots.empty()) out.push_back(std::move(s));
    if (out.size() > kClusterSlots) return bad("more primaries with slots than slots");
  }
  return out;
}

namespace {
constexpr std::string_view kNotRunWhileMigrating =
    " is being migrated, and the script's keys are not all declared (it is not run at the "
    "importing node)";
}  // namespace

bool IsSlotNotServed(const Status& s) {
  return s.code() == StatusCode::kUnavailable &&
         (s.message().find(RedisReply::kNonLocalKey) != std::string::npos ||
          s.message().find(kNotRunWhileMigrating) != std::string::npos);
}

std::optional<ClusterRedirect> ParseClusterRedirect(std::string_view error) {
  ClusterRedirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  const size_t colon = error.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  const std::optional<int> slot = ParseInt(error.substr(0, space));
  const std::optional<int> port = ParseInt(error.substr(colon + 1));
  if (!slot || *slot < 0 || *slot >= kClusterSlots || !port || *port <= 0 || *port > 65535) {
    return std::nullopt;
  }
  r.slot = *slot;
  r.host = std::string(error.substr(space + 1, colon - space - 1));
  r.port = *port;
  if (r.host.empty()) return std::nullopt;
  return r;
}

// --- RedisClusterClient ---------------------------------------------------------------------

RedisClusterClient::RedisClusterClient(RedisConnectionConfig base,
                                       std::vector<std::pair<std::string, int>> seeds,
                                       int pool_size, std::vector<std::string> scripts)
    : base_(std::move(base)),
      seeds_(std::move(seeds)),
      pool_size_(pool_size),
      scripts_(std::move(scripts)),
      routes_(base_.routes ? base_.routes : std::make_shared<RedisRoutes>()) {
  owner_.fill(-1);
}

RedisClusterClient::~RedisClusterClient() {
  std::thread prober;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    prober = std::move(prober_);
  }
  probe_cv_.notify_all();
  if (prober.joinable()) prober.join();
}

Result<std::unique_ptr<RedisClusterClient>> RedisClusterClient::Connect(
    const RedisConnectionConfig& base, std::vector<std::pair<std::string, int>> seeds,
    int pool_size, std::vector<std::string> scripts) {
  if (seeds.empty()) return InvalidArgumentError("redis cluster: no seed address");
  if (!base.sentinels.empty()) {
    return InvalidArgumentError("redis cluster: sentinels cannot be used with a cluster");
  }
  if (pool_size < 1) return InvalidArgumentError("redis cluster: the pool needs at least 1");
  std::unique_ptr<RedisClusterClient> c(
      new RedisClusterClient(base, std::move(seeds), pool_size, std::move(scripts)));
  GNOMON_RETURN_IF_ERROR(c->Refresh());
  return c;
}

Result<RedisConnectionPool*> RedisClusterClient::PoolOf(const std::string& host, int port) {
  const std::string address = Address(host, port);
  {
    MutexLock lock(mu_);
    auto it = pools_.find(address);
    if (it != pools_.end()) return it->second.get();
  }
  RedisConnectionConfig config = base_;
  config.host = host;
  config.port = port;
  Result<std::unique_ptr<RedisConnectionPool>> pool =
      RedisConnectionPool::Connect(config, pool_size_);
  if (!pool.ok()) return pool.status();
  for (const std::string& source : scripts_) (*pool)->AddScript(source);
  MutexLock lock(mu_);
  auto [it, added] = pools_.emplace(address, std::move(*pool));
  return it->second.get();  // another caller's, when it connected first
}

Status RedisClusterClient::RefreshFrom(const std::string& host, int port) {
  Result<RedisConnectionPool*> pool = PoolOf(host, port);
  if (!pool.ok()) return pool.status();
  Result<RedisReply> r = (*pool)->Command({"CLUSTER", "SHARDS"});
  if (!r.ok()) return r.status();
  if (r->is_error()) {
    return UnavailableError("redis cluster " + Address(host, port) + ": CLUSTER SHARDS: " + r->str);
  }
  Result<std::vector<ClusterShard>> shards = ParseClusterShards(*r);
  if (!shards.ok()) return shards.status();
  std::vector<Node> nodes;
  std::array<int16_t, kClusterSlots> owner;
  owner.fill(-1);
  for (const ClusterShard& s : *shards) {
    const auto index = static_cast<int16_t>(nodes.size());
    nodes.push_back(Node{s.host, s.port, Address(s.host, s.port)});
    for (const auto& [first, last] : s.slots) {
      std::fill(owner.begin() + first, owner.begin() + last + 1, index);
    }
  }
  const auto unowned = std::find(owner.begin(), owner.end(), -1);
  if (unowned != owner.end()) {
    return UnavailableError("redis cluster " + Address(host, port) + ": slot " +
                            std::to_string(unowned - owner.begin()) + " has no online primary");
  }
  bool moved = false;
  {
    MutexLock lock(mu_);
    for (int slot = 0; slot < kClusterSlots && !moved; ++slot) {
      moved = owner_[slot] >= 0 && nodes_[owner_[slot]].address != nodes[owner[slot]].address;
    }
    nodes_ = std::move(nodes);
    owner_ = owner;
    stale_ = false;
  }
  if (moved) routes_->Changed();
  return Status::Ok();
}

Status RedisClusterClient::Refresh() {
  {
    MutexLock lock(mu_);
    last_refresh_ = SystemClock::Get().SteadyNow();
  }
  // The primaries of the current map first (any of them knows the whole map), then the seeds.
  // A primary held down is left out: it would only hold the caller for io_timeout.
  std::vector<std::pair<std::string, int>> candidates;
  {
    MutexLock lock(mu_);
    for (const Node& n : nodes_) candidates.emplace_back(n.host, n.port);
    candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
    std::erase_if(candidates, [&](const std::pair<std::string, int>& c) {
      mu_.AssertHeld();
      return down_.contains(Address(c.first, c.second));
    });
  }
  std::set<std::pair<std::string, int>> tried;
  Status last = UnavailableError("redis cluster: no node to read the slot map from");
  for (const auto& [host, port] : candidates) {
    if (!tried.insert({host, port}).second) continue;
    last = RefreshFrom(host, port);
    if (last.ok()) return last;
  }
  return last;
}

void RedisClusterClient::RefreshIfStale() {
  {
    MutexLock lock(mu_);
    if (!stale_) return;
  }
  RefreshSoon();
}

void RedisClusterClient::RefreshSoon() {
  {
    MutexLock lock(mu_);
    if (SystemClock::Get().SteadyNow() - last_refresh_ < kMinRefreshGap) return;
  }
  (void)Refresh();  // on failure the current map stays, and the next redirect tries again
}

std::optional<std::pair<std::string, int>> RedisClusterClient::OwnerEndpointOf(int slot) const {
  MutexLock lock(mu_);
  if (slot < 0 || slot >= kClusterSlots || owner_[slot] < 0) return std::nullopt;
  const Node& n = nodes_[owner_[slot]];
  return std::make_pair(n.host, n.port);
}

std::string RedisClusterClient::OwnerOf(int slot) const {
  MutexLock lock(mu_);
  if (slot < 0 || slot >= kClusterSlots || owner_[slot] < 0) return "";
  return nodes_[owner_[slot]].address;
}

std::vector<std::string> RedisClusterClient::Primaries() const {
  std::vector<std::string> out;
  {
    MutexLock lock(mu_);
    for (const Node& n : nodes_) out.push_back(n.address);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool RedisClusterClient::IsDown(const std::string& address) const {
  MutexLock lock(mu_);
  return down_.contains(address);
}

void RedisClusterClient::MarkDown(const std::string& host, int port, const std::string& why) {
  {
    MutexLock lock(mu_);
    stale_ = true;  // perhaps failed over: the next call reads the map first
    down_.insert_or_assign(Address(host, port), Down{host, port, why});
    if (!prober_.joinable() && !stopping_) prober_ = std::thread([this] { ProbeLoop(); });
  }
  probe_cv_.notify_all();
}

void RedisClusterClient::ProbeLoop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    if (down_.empty()) {
      probe_cv_.wait(lock.native());
      continue;
    }
    lock.Unlock();
    // A failover gives a down primary's slots to its replica: the map says so.
    (void)Refresh();
    lock.Lock();
    // A primary the map no longer names (its slots went to its promoted replica) is let go:
    // nothing is routed to it, and it might not answer a probe for as long as it is away.
    std::erase_if(down_, [&](const auto& entry) {
      mu_.AssertHeld();
      return std::none_of(nodes_.begin(), nodes_.end(),
                          [&](const Node& n) { return n.address == entry.first; });
    });
    std::vector<Down> down;
    for (const auto& [address, d] : down_) down.push_back(d);
    lock.Unlock();
    bool still_down = false;
    bool answered = false;
    for (const Down& d : down) {
      RedisConnectionConfig config = base_;
      config.host = d.host;
      config.port = d.port;
      Result<std::unique_ptr<RedisConnection>> conn = RedisConnection::Connect(config);
      Result<RedisReply> pong = conn.ok() ? (*conn)->Command({"PING"}) : conn.status();
      if (pong.ok() && !pong->is_error()) {
        MutexLock up(mu_);
        down_.erase(Address(d.host, d.port));
        stale_ = true;  // its slots may have moved meanwhile
        answered = true;
      } else {
        still_down = true;
      }
    }
    // Back without a failover (a pause or a cut shorter than cluster-node-timeout): the claims
    // that failed on it may be made now.
    if (answered) routes_->Changed();
    lock.Lock();
    if (still_down) {
      probe_cv_.wait_for(lock.native(), kProbeGap, [&] {
        mu_.AssertHeld();
        return stopping_;
      });
    }
  }
}

Result<RedisReply> RedisClusterClient::Command(int slot, const std::vector<std::string>& argv) {
  return Route(slot, [&](RedisConnectionPool& pool, bool asking) {
    return asking ? pool.CommandAsking(argv) : pool.Command(argv);
  });
}

Result<RedisReply> RedisClusterClient::Eval(int slot, int id, const std::vector<std::string>& keys,
                                            const std::vector<std::string>& args,
                                            bool keys_declared) {
  RedisReply unused;
  return EvalThen(slot, id, keys, args, {}, unused, keys_declared);
}

Result<RedisReply> RedisClusterClient::EvalThen(int slot, int id,
                                                const std::vector<std::string>& keys,
                                                const std::vector<std::string>& args,
                                                const std::vector<std::string>& then,
                                                RedisReply& then_reply, bool keys_declared) {
  if (id < 0 || static_cast<size_t>(id) >= scripts_.size()) {
    return InvalidArgumentError("redis cluster: no script " + std::to_string(id));
  }
  Result<RedisReply> r = Route(
      slot,
      [&](RedisConnectionPool& pool, bool asking) {
        return pool.EvalRouted(id, keys, args, asking, then, &then_reply);
      },
      keys_declared);
  if (r.ok() && r->is_error()) {
    return InternalError("redis cluster: slot " + std::to_string(slot) +
                         ": script error: " + r->str);
  }
  return r;
}

Result<RedisReply> RedisClusterClient::Route(
    int slot, const std::function<Result<RedisReply>(RedisConnectionPool&, bool)>& send,
    bool follow_ask) {
  if (slot < 0 || slot >= kClusterSlots) {
    return InvalidArgumentError("redis cluster: slot " + std::to_string(slot) + " out of range");
  }
  bool stale = false;
  {
    MutexLock lock(mu_);
    stale = stale_;
  }
  if (stale) RefreshSoon();
  std::string host;
  int port = 0;
  {
    MutexLock lock(mu_);
    const Node& n = nodes_[owner_[slot]];
    host = n.host;
    port = n.port;
  }
  const Duration deadline = SystemClock::Get().SteadyNow() + base_.io_timeout;
  bool asking = false;
  for (int redirects = 0; redirects <= kMaxRedirects;) {
    {
      MutexLock lock(mu_);
      auto down = down_.find(Address(host, port));
      if (down != down_.end()) {
        return UnavailableError("redis cluster " + down->first +
                                ": held down until it answers a probe (" + down->second.why + ")");
      }
    }
    Result<RedisConnectionPool*> pool = PoolOf(host, port);
    Result<RedisReply> r = pool.ok() ? send(**pool, asking) : Result<RedisReply>(pool.status());
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kUnavailable) MarkDown(host, port, r.status().message());
      return r;
    }
    if (!r->is_error()) return r;
    if (std::optional<ClusterRedirect> to = ParseClusterRedirect(r->str)) {
      if (to->ask && !follow_ask) {
        return UnavailableError("redis cluster " + Address(host, port) + ": slot " +
                                std::to_string(slot) + std::string(kNotRunWhileMigrating));
      }
      ++redirects;
      host = to->host;
      port = to->port;
      asking = to->ask;
      if (!to->ask) RefreshSoon();
      continue;
    }
    if (r->str.starts_with("TRYAGAIN")) {
      if (SystemClock::Get().SteadyNow() + kTryAgainGap > deadline) {
        return UnavailableError("redis cluster " + Address(host, port) + ": slot " +
                                std::to_string(slot) + " is still being migrated (" + r->str + ")");
      }
      Pause(kTryAgainGap);
      continue;
    }
    // A batch script (allow-cross-slot-keys) routed by one group's slot reached a key of a slot
    // this primary does not serve: the map is out of date.
    if (r->str.starts_with("CLUSTERDOWN") || r->is_non_local_key()) {
      MutexLock lock(mu_);
      stale_ = true;
      return UnavailableError("redis cluster " + Address(host, port) + ": " + r->str);
    }
    return r;  // the command's own error, for the caller to judge
  }
  return UnavailableError("redis cluster: slot " + std::to_string(slot) + ": more than " +
                          std::to_string(kMaxRedirects) + " redirects");
}

}  // namespace gnomon::coord
