#include "src/coord/redis/redis_store.h"

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <thread>
#include <utility>

#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_layout.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using redis::IntAt;
using redis::IsArray;
using redis::IsValidKeyPart;
using redis::Malformed;
using redis::Ms;

// Durability: acknowledged claims must survive a server restart (docs/reliability.md F3/F4), and
// the server must not evict keys to make room (an evicted fire marker lets the fire be claimed
// again; markers carry a TTL, so even the volatile-* policies pick them).
// -> true when the server runs with `appendonly yes` and `maxmemory-policy noeviction`; false
// when it does not and `allow_unsafe` lets it through; FailedPrecondition otherwise.
Result<bool> CheckPersistence(RedisConnectionPool& conn, bool allow_unsafe) {
  std::string why;
  Result<RedisReply> aof = conn.Command({"CONFIG", "GET", "appendonly"});
  if (!aof.ok()) return aof.status();
  Result<RedisReply> policy = conn.Command({"CONFIG", "GET", "maxmemory-policy"});
  if (!policy.ok()) return policy.status();
  if (aof->is_error() || policy->is_error()) {
    why = "cannot read its persistence settings (CONFIG GET appendonly, maxmemory-policy: " +
          (aof->is_error() ? aof->str : policy->str) + ")";
  } else if (!IsArray(*aof, 2) || aof->elements[1].str != "yes") {
    why = "it runs without `appendonly yes`, so a restart loses acknowledged claims";
  } else if (!IsArray(*policy, 2) || policy->elements[1].str != "noeviction") {
    why = "it runs with `maxmemory-policy " +
          (IsArray(*policy, 2) ? policy->elements[1].str : std::string("?")) +
          "`, so a full server may evict fire markers and let a fire run twice; set "
          "`maxmemory-policy noeviction`";
  } else {
    return true;
  }
  if (!allow_unsafe) {
    return FailedPreconditionError("redis " + conn.address() + ": " + why +
                                   "; fix it or set allow_unsafe to run anyway");
  }
  return false;
}

}  // namespace

Result<RedisConnectionConfig> RedisStore::ConnectionConfigOf(const RedisOptions& options) {
  if (!options.sentinels.empty() && options.sentinel_master.empty()) {
    return InvalidArgumentError("redis: sentinels need a master name");
  }
  RedisConnectionConfig config;
  if (options.tls.enabled) {
    Result<std::shared_ptr<const RedisTlsContext>> tls = RedisTlsContext::Create(options.tls);
    if (!tls.ok()) return tls.status();
    config.tls = std::move(*tls);
  } else if (options.tls != TlsOptions{}) {
    return InvalidArgumentError("redis: TLS options are set but tls.enabled is false");
  }
  config.host = options.host;
  config.port = options.port;
  config.user = options.user;
  config.password = options.password;
  config.db = options.db;
  config.connect_timeout = options.connect_timeout;
  config.io_timeout = options.io_timeout;
  config.backoff_min = options.reconnect_backoff_min;
  config.backoff_max = options.reconnect_backoff_max;
  config.sentinels = options.sentinels;
  config.sentinel_master = options.sentinel_master;
  config.routes = std::make_shared<RedisRoutes>();
  return config;
}

Status RedisStore::CheckOptions(const RedisOptions& options) {
  if (!options.cluster_seeds.empty()) {
    if (!options.sentinels.empty()) {
      return InvalidArgumentError("redis: a Cluster is not reached through sentinels");
    }
    if (options.db != 0) return InvalidArgumentError("redis: a Cluster has only database 0");
    if (options.cluster_seeds.size() > 64) {
      return InvalidArgumentError("redis: more than 64 cluster seeds");
    }
    for (const auto& [host, port] : options.cluster_seeds) {
      if (host.empty() || port < 1 || port > 65535) {
        return InvalidArgumentError("redis: a cluster seed needs a host and a port 1-65535");
      }
    }
  }
  if (options.host.empty()) return InvalidArgumentError("redis: host is empty");
  if (options.port < 1 || options.port > 65535) {
    return InvalidArgumentError("redis: port " + std::to_string(options.port) + " is not 1-65535");
  }
  if (options.db < 0) return InvalidArgumentError("redis: db is negative");
  if (!IsValidKeyPart(options.prefix) || !IsValidKeyPart(options.ns)) {
    return InvalidArgumentError("redis: prefix and ns must match [A-Za-z0-9_.-]{1,64}");
  }
  if (options.connect_timeout <= Duration(0) || options.io_timeout <= Duration(0)) {
    return InvalidArgumentError("redis: connect_timeout and io_timeout must be positive");
  }
  if (options.reconnect_backoff_min <= Duration(0) ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return InvalidArgumentError("redis: reconnect backoff must be positive and min <= max");
  }
  if (options.fire_retention < kMinFireRetention || options.fire_retention > kMaxFireRetention) {
    return InvalidArgumentError("redis: fire_retention must be from 1h to 366d");
  }
  if (options.max_records_per_job < 1 || options.max_records_total < 1) {
    return InvalidArgumentError("redis: record caps must be at least 1");
  }
  if (options.wait_replicas < 0 || options.wait_replicas > 16) {
    return InvalidArgumentError("redis: wait_replicas must be 0-16, not " +
                                std::to_string(options.wait_replicas));
  }
  if (options.wait_replicas > 0 &&
      (options.wait_timeout <= Duration(0) || options.wait_timeout >= options.io_timeout)) {
    return InvalidArgumentError(
        "redis: wait_timeout must be positive and below io_timeout with wait_replicas");
  }
  if (options.connections < 1 || options.connections > 64) {
    return InvalidArgumentError("redis: connections must be 1-64, not " +
                                std::to_string(options.connections));
  }
  return Status::Ok();
}

Result<std::unique_ptr<RedisStore>> RedisStore::Open(const RedisOptions& options) {
  GNOMON_RETURN_IF_ERROR(CheckOptions(options));
  Result<RedisConnectionConfig> config = ConnectionConfigOf(options);
  if (!config.ok()) return config.status();
  if (!options.cluster_seeds.empty()) return OpenCluster(options, *config);
  Result<std::unique_ptr<RedisConnectionPool>> conn =
      RedisConnectionPool::Connect(*config, options.connections);
  if (!conn.ok()) return conn.status();
  Result<bool> durable = CheckPersistence(**conn, options.allow_unsafe);
  if (!durable.ok()) return durable.status();
  for (int id = 0; id < scripts::kCount; ++id) {
    GNOMON_CHECK((*conn)->AddScript(scripts::Source(static_cast<scripts::Id>(id))) == id);
  }
  GNOMON_RETURN_IF_ERROR((*conn)->LoadScripts());
  GNOMON_RETURN_IF_ERROR(redis::CheckLayout(**conn, options.prefix + ":" + options.ns));
  std::unique_ptr<RedisStore> store(
      new RedisStore(options, *config, std::move(*conn), nullptr, !*durable));
  (void)store->Now();  // measures the server's clock offset for claim deadlines
  return store;
}

Result<std::unique_ptr<RedisStore>> RedisStore::OpenCluster(const RedisOptions& options,
                                                            const RedisConnectionConfig& config) {
  std::vector<std::string> sources;
  for (int id = 0; id < scripts::kCount; ++id) {
    sources.push_back(scripts::Source(static_cast<scripts::Id>(id), scripts::Topology::kCluster));
  }
  Result<std::unique_ptr<RedisClusterClient>> cluster = RedisClusterClient::Connect(
      config, options.cluster_seeds, options.connections, std::move(sources));
  if (!cluster.ok()) return cluster.status();
  // Every primary must keep what it acknowledged across its restart.
  bool durable = true;
  for (const std::string& address : (*cluster)->Primaries()) {
    RedisConnectionConfig one = config;
    one.host = address.substr(0, address.rfind(':'));
    one.port = std::stoi(address.substr(address.rfind(':') + 1));
    Result<std::unique_ptr<RedisConnectionPool>> conn = RedisConnectionPool::Connect(one, 1);
    if (!conn.ok()) return conn.status();
    Result<bool> d = CheckPersistence(**conn, options.allow_unsafe);
    if (!d.ok()) return d.status();
    durable = durable && *d;
  }
  const std::string base = options.prefix + ":" + options.ns;
  GNOMON_RETURN_IF_ERROR(redis::CheckClusterLayout(**cluster, base));
  std::unique_ptr<RedisStore> store(
      new RedisStore(options, config, nullptr, std::move(*cluster), !durable));
  (void)store->Now();
  return store;
}

RedisStore::RedisStore(const RedisOptions& options, const RedisConnectionConfig& config,
                       std::unique_ptr<RedisConnectionPool> conn,
                       std::unique_ptr<RedisClusterClient> cluster, bool unsafe_persistence)
    : options_(options),
      base_(options.prefix + ":" + options.ns),
      shared_(base_ + ":{~shared}"),
      config_(config),
      conn_(std::move(conn)),
      cluster_(std::move(cluster)),
      unsafe_persistence_(unsafe_persistence) {
  GNOMON_CHECK(config_.routes != nullptr);  // ConnectionConfigOf's, shared with the connections
}

std::string RedisStore::JobBase(const std::string& job_id) const {
  return redis::GroupBase(base_, redis::KeyGroup(job_id)) + ":job:" + job_id;
}

std::string RedisStore::IndexBase(const std::string& job_id) const {
  if (!cluster_) return shared_;
  return redis::GroupBase(base_, redis::KeyGroup(job_id));
}

std::string RedisStore::AddressOf(const std::string& key) const {
  if (!cluster_) return conn_->address();
  return cluster_->OwnerOf(ClusterKeySlot(key));
}

std::optional<RedisConnectionConfig> RedisStore::ConfigFor(const std::string& key) const {
  if (!cluster_) return config_;
  std::optional<std::pair<std::string, int>> owner = cluster_->OwnerEndpointOf(ClusterKeySlot(key));
  if (!owner) return std::nullopt;
  RedisConnectionConfig config = config_;
  config.host = owner->first;
  config.port = owner->second;
  return config;
}

Result<RedisReply> RedisStore::Command(const std::string& key,
                                       const std::vector<std::string>& argv) {
  if (!cluster_) return conn_->Command(argv);
  return cluster_->Command(ClusterKeySlot(key), argv);
}

Result<RedisReply> RedisStore::Eval(scripts::Id id, const std::vector<std::string>& keys,
                                    const std::vector<std::string>& args) {
  if (!cluster_) return conn_->Eval(id, keys, args);
  GNOMON_CHECK(keys.size() == 2);
  // gnomon's scripts build their keys from KEYS[1..2] (bases, not keys): never run at an
  // importing node, where keys still at the source would read as absent.
  Result<RedisReply> r =
      cluster_->Eval(ClusterKeySlot(keys[1]), id, keys, args, /*keys_declared=*/false);
  if (r.ok()) AfterGroupScript(id, keys[1]);
  return r;
}

Result<RedisReply> RedisStore::EvalThen(scripts::Id id, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args,
                                        const std::vector<std::string>& then,
                                        RedisReply& then_reply) {
  if (!cluster_) return conn_->EvalThen(id, keys, args, then, then_reply);
  GNOMON_CHECK(keys.size() == 2);
  Result<RedisReply> r = cluster_->EvalThen(ClusterKeySlot(keys[1]), id, keys, args, then,
                                            then_reply, /*keys_declared=*/false);
  if (r.ok()) AfterGroupScript(id, keys[1]);
  return r;
}

void RedisStore::AfterGroupScript(scripts::Id id, const std::string& index_base) {
  if (index_base == shared_ || !scripts::ListsRecords(id)) return;
  // index_base is "<base>:{g<group>}".
  const size_t open = index_base.rfind("{g");
  int64_t group = 0;
  if (open == std::string::npos ||
      !redis::ParseInt(std::string_view(index_base).substr(open + 2, index_base.size() - open - 3),
                       group)) {
    return;
  }
  // The records are listed under their job already; the all-jobs listing catches up at the
  // next sweep (RedisFires::ListExpired) when this copy fails.
  (void)CopyNewRuns(static_cast<int>(group));
}

Result<RedisReply> RedisStore::EvalBatch(const BatchItems& items, const SendPart& send) {
  if (!cluster_) return send(items, shared_);
  cluster_->RefreshIfStale();  // the parts are planned by the map
  // One call per primary, with the items of every key group it serves (the batch scripts are
  // CrossSlot), routed by the base of its first item's group; the primaries at once (one thread
  // each but the first, which is the caller's), so that a slow or unreachable primary holds back
  // its own items only.
  struct Part {
    std::string owner;
    std::vector<int> groups;                // in the order they first appear
    std::map<int, std::vector<size_t>> at;  // group -> its items
  };
  std::vector<Part> parts;
  std::map<int, size_t> part_of_group;
  for (size_t i = 0; i < items.size(); ++i) {
    const int group = redis::KeyGroup(items[i]->front());
    auto [known, added] = part_of_group.try_emplace(group, 0);
    if (added) {
      std::string owner = AddressOf(redis::GroupBase(base_, group));
      auto p = std::find_if(parts.begin(), parts.end(),
                            [&](const Part& part) { return part.owner == owner; });
      if (p == parts.end()) p = parts.insert(parts.end(), Part{std::move(owner), {}, {}});
      p->groups.push_back(group);
      known->second = static_cast<size_t>(p - parts.begin());
    }
    parts[known->second].at[group].push_back(i);
  }
  RedisReply out;
  out.type = RedisReply::Type::kArray;
  out.elements.resize(items.size());
  // One call over the items of `groups` (of one part), routed by the first group's base;
  // -> false when it failed because a group's slot is not served where the call went.
  auto send_groups = [&](const Part& p, std::span<const int> groups) {
    std::vector<size_t> at;
    for (int group : groups) at.insert(at.end(), p.at.at(group).begin(), p.at.at(group).end());
    BatchItems part;
    for (size_t i : at) part.push_back(items[i]);
    const std::string base = redis::GroupBase(base_, groups.front());
    Result<RedisReply> r = send(part, base);
    if (!r.ok() && groups.size() > 1 && IsSlotNotServed(r.status())) return false;
    for (size_t k = 0; k < at.size(); ++k) {
      RedisReply& e = out.elements[at[k]];
      if (r.ok() && r->type == RedisReply::Type::kArray && r->elements.size() == at.size()) {
        e = std::move(r->elements[k]);
        continue;
      }
      e.type = RedisReply::Type::kError;
      e.str = !r.ok()         ? r.status().message()
              : r->is_error() ? "redis " + AddressOf(base) + ": " + r->str
                              : "redis " + AddressOf(base) + ": malformed reply to a batch";
    }
    return true;
  };
  // Each part's items are elements of their own: the threads write disjoint elements. A call
  // that met a group its primary does not serve wrote nothing (the scripts check every group
  // first; IsSlotNotServed): the map is out of date, or a slot is being migrated, and the part
  // goes again as one call per group, each routed by its own group's slot.
  auto send_part = [&](const Part& p) {
    if (send_groups(p, p.groups)) return;
    for (const int& group : p.groups) (void)send_groups(p, std::span<const int>(&group, 1));
  };
  std::vector<std::thread> others;
  for (size_t p = 1; p < parts.size(); ++p) others.emplace_back(send_part, std::cref(parts[p]));
  if (!parts.empty()) send_part(parts.front());
  for (std::thread& t : others) t.join();
  return out;
}

Status RedisStore::CopyNewRuns(int group, std::optional<Instant> came_before) {
  GNOMON_CHECK(cluster_ != nullptr);
  const std::string key = redis::GroupBase(base_, group) + ":runs_new";
  const std::string max = came_before ? "(" + Ms(*came_before) : "+inf";
  // Bounded: at most 1,024 members per call (a sweep comes back for the rest).
  Result<RedisReply> members =
      Command(key, {"ZRANGEBYSCORE", key, "-inf", max, "LIMIT", "0", "1024"});
  if (!members.ok()) return members.status();
  return MoveNewRuns(group, *members);
}

std::vector<std::vector<int>> RedisStore::GroupsByPrimary() const {
  GNOMON_CHECK(cluster_ != nullptr);
  cluster_->RefreshIfStale();
  std::vector<std::vector<int>> out;
  std::map<std::string, size_t> index;
  for (int group = 0; group < redis::kKeyGroups; ++group) {
    auto [it, added] = index.try_emplace(AddressOf(redis::GroupBase(base_, group)), out.size());
    if (added) out.emplace_back();
    out[it->second].push_back(group);
  }
  return out;
}

Status RedisStore::SweepNewRuns(const std::vector<int>& groups, Instant came_before) {
  GNOMON_CHECK(cluster_ != nullptr && !groups.empty());
  scripts::ArgList args(scripts::ArgNames(scripts::kSweepNewRuns), CommonArgs());
  args.Add("before", Ms(came_before));
  for (int group : groups) args.Add("groups...", std::to_string(group));
  const std::string base = redis::GroupBase(base_, groups.front());
  Result<RedisReply> r = Eval(scripts::kSweepNewRuns, {base, base}, args.Take());
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kArray || r->elements.size() != groups.size()) {
    return Malformed("sweep of runs_new");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    GNOMON_RETURN_IF_ERROR(MoveNewRuns(groups[i], r->elements[i]));
  }
  return Status::Ok();
}

Status RedisStore::MoveNewRuns(int group, const RedisReply& members) {
  if (members.type != RedisReply::Type::kArray) return Malformed("runs_new");
  if (members.elements.empty()) return Status::Ok();
  const std::string key = redis::GroupBase(base_, group) + ":runs_new";
  std::vector<std::string> add = {"ZADD", shared_ + ":runs"};
  std::vector<std::string> rem = {"ZREM", key};
  for (const RedisReply& m : members.elements) {
    add.push_back("0");
    add.push_back(m.str);
    rem.push_back(m.str);
  }
  Result<RedisReply> added = Command(shared_, add);
  if (!added.ok()) return added.status();
  if (added->is_error()) return UnavailableError("redis: copying new runs: " + added->str);
  // The listing keeps max_records_total members: its members all score 0, so it sorts by
  // member, newest instant first, and the oldest beyond the cap leave it. Their records stay
  // listed under their jobs, within each job's own cap.
  Result<RedisReply> trimmed = Command(shared_, {"ZREMRANGEBYRANK", shared_ + ":runs",
                                                 std::to_string(options_.max_records_total), "-1"});
  if (!trimmed.ok()) return trimmed.status();
  return Command(key, rem).status();
}

std::vector<std::string> RedisStore::CommonArgs() const {
  return {options_.clock_override ? Ms(options_.clock_override->Now()) : std::string(),
          std::to_string(options_.max_records_per_job), std::to_string(options_.max_records_total),
          Ms(options_.fire_retention)};
}

std::vector<std::string> RedisStore::BatchArgs(scripts::Id id, const BatchItems& part) const {
  const std::span<const std::string_view> names = scripts::ArgNames(id);
  GNOMON_CHECK(names.size() == 2 && names[0] == "n");
  scripts::ArgList args(names, CommonArgs());
  args.Add("n", std::to_string(part.size()));
  for (const std::vector<std::string>* item : part) {
    for (const std::string& arg : *item) args.Add(names[1], arg);
  }
  return args.Take();
}

Result<Instant> RedisStore::Now() {
  if (options_.clock_override) return options_.clock_override->Now();
  Result<RedisReply> r = Command(shared_, {"TIME"});
  if (!r.ok()) return r.status();
  int64_t sec = 0, usec = 0;
  if (!IsArray(*r, 2) || !IntAt(*r, 0, sec) || !IntAt(*r, 1, usec)) return Malformed("TIME");
  const Instant server = Instant::FromUnixMillis(sec * 1000 + usec / 1000);
  server_offset_ms_ = (server - SystemClock::Get().Now()).count();
  server_offset_known_ = true;
  return server;
}

std::string RedisStore::ClaimDeadline(Duration lease_ttl) const {
  // The client waits io_timeout for the answer; half a second more covers the offset's error.
  // Never more than half the lease: a claim applied later would reach a holder that already
  // counts most of its lease as gone (it self-fences at ttl - margin after sending the claim).
  const Duration allowance =
      std::min<Duration>(options_.io_timeout + std::chrono::milliseconds(500), lease_ttl / 2);
  if (options_.clock_override) return Ms(options_.clock_override->Now() + allowance);
  if (!server_offset_known_) return "";
  return Ms(SystemClock::Get().Now() + Duration(server_offset_ms_.load()) + allowance);
}

namespace redis {

int KeyGroup(std::string_view job_id) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : job_id) h = (h ^ c) * 0x100000001b3ULL;
  return static_cast<int>(h % kKeyGroups);
}

std::string GroupBase(const std::string& base, int group) {
  return base + ":{g" + std::to_string(group) + "}";
}

Status ErrorOf(const RedisReply& element) { return UnavailableError(element.str); }

scripts::ArgList FireArgs(scripts::Id id, const FireKey& fire, std::vector<std::string> common) {
  scripts::ArgList args(scripts::ArgNames(id), std::move(common));
  args.Add("job", fire.job_id)
      .Add("ms", Ms(fire.scheduled_at))
      .Add("shard", std::to_string(fire.shard));
  return args;
}

scripts::ArgList FencedArgs(scripts::Id id, const gnomon::Claim& claim,
                            std::vector<std::string> common) {
  scripts::ArgList args = FireArgs(id, claim.fire, std::move(common));
  args.Add("token", std::to_string(claim.fencing_token));
  return args;
}

}  // namespace redis
}  // namespace gnomon::coord
