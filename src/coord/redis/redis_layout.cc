#include "src/coord/redis/redis_layout.h"

#include <vector>

#include "gnomon/job.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord::redis {
namespace {

// The global keys of the earlier layout, each moved to "<base>:{~shared}:<name>".
constexpr const char* kSharedNames[] = {"jobs",  "meta",         "nodes", "nodes:exp",
                                        "audit", "audit_failed", "runs",  "leases"};

// Renames ARGV's (from, to) pairs whose `from` still exists (a fire marker may expire between
// the SCAN that found it and this call). -> the number renamed. The keys are not declared: the
// earlier layout ran on one primary only.
constexpr const char* kRenamePairs = R"lua(
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('EXISTS', ARGV[i]) == 1 then
    redis.call('RENAME', ARGV[i], ARGV[i + 1])
    n = n + 1
  end
end
return n
)lua";

std::string Marker(const std::string& base) { return base + ":{~shared}:layout"; }

Result<RedisReply> Checked(RedisConnectionPool& conn, const std::vector<std::string>& argv) {
  Result<RedisReply> r = conn.Command(argv);
  if (r.ok() && r->is_error()) {
    return InternalError("redis " + conn.address() + ": " + argv[0] + ": " + r->str);
  }
  return r;
}

// Calls `each` with every key SCAN finds under "<base>:{*" (a key present for the whole scan is
// found at least once); stops early when `each` answers false.
template <typename F>
Status ScanTagged(RedisConnectionPool& conn, const std::string& base, F each) {
  std::string cursor = "0";
  do {
    Result<RedisReply> r = Checked(conn, {"SCAN", cursor, "MATCH", base + ":{*", "COUNT", "1000"});
    if (!r.ok()) return r.status();
    if (!IsArray(*r, 2) || r->elements[1].type != RedisReply::Type::kArray) {
      return Malformed("SCAN");
    }
    cursor = r->elements[0].str;
    for (const RedisReply& key : r->elements[1].elements) {
      if (!each(key.str)) return Status::Ok();
    }
  } while (cursor != "0");
  return Status::Ok();
}

// Whether the keyspace holds keys of the earlier layout: one of its global keys, else (a
// keyspace that never had them, e.g. an embedder's without definitions or heartbeats) a per-job
// key, found by a SCAN that stops at the first.
Result<bool> HoldsEarlierLayout(RedisConnectionPool& conn, const std::string& base) {
  std::vector<std::string> exists = {"EXISTS"};
  for (const char* name : kSharedNames) exists.push_back(base + ":" + name);
  Result<RedisReply> n = Checked(conn, exists);
  if (!n.ok()) return n.status();
  if (n->integer > 0) return true;
  bool found = false;
  GNOMON_RETURN_IF_ERROR(ScanTagged(conn, base, [&](const std::string& key) {
    found = GroupKeyOf(base, key).has_value();
    return !found;
  }));
  return found;
}

Status UnknownLayout(const std::string& address, const std::string& base, const std::string& v) {
  return FailedPreconditionError("redis " + address + ": the keyspace " + base +
                                 " holds key layout \"" + v.substr(0, 64) +
                                 "\", which this version of gnomon does not know");
}

// True when the marker says key groups, false when there is none; FailedPrecondition when it
// names a layout this version does not know.
Result<bool> MarkedGroups(RedisConnectionPool& conn, const std::string& base) {
  Result<RedisReply> marker = Checked(conn, {"GET", Marker(base)});
  if (!marker.ok()) return marker.status();
  if (marker->type != RedisReply::Type::kString) return false;
  if (marker->str != kGroupLayout) return UnknownLayout(conn.address(), base, marker->str);
  return true;
}

// Writes the marker; with `only_new`, only where there is none (a migration that finished first
// wins).
Status MarkGroups(RedisConnectionPool& conn, const std::string& base, bool only_new) {
  std::vector<std::string> argv = {"SET", Marker(base), std::string(kGroupLayout)};
  if (only_new) argv.push_back("NX");
  return Checked(conn, argv).status();
}

}  // namespace

std::optional<std::string> GroupKeyOf(const std::string& base, std::string_view key) {
  const std::string head = base + ":{";
  if (key.substr(0, head.size()) != head) return std::nullopt;
  const size_t close = key.find('}', head.size());
  if (close == std::string_view::npos) return std::nullopt;
  const std::string job(key.substr(head.size(), close - head.size()));
  const std::string_view rest = key.substr(close + 1);
  const bool per_job = rest == ":state" || rest == ":live" || rest == ":runs" ||
                       rest.starts_with(":fire:") || rest.starts_with(":run:");
  if (!per_job || !IsValidJobId(job)) return std::nullopt;
  return GroupBase(base, KeyGroup(job)) + ":job:" + job + std::string(rest);
}

Status CheckLayout(RedisConnectionPool& conn, const std::string& base) {
  Result<bool> marked = MarkedGroups(conn, base);
  if (!marked.ok()) return marked.status();
  if (*marked) return Status::Ok();
  Result<bool> earlier = HoldsEarlierLayout(conn, base);
  if (!earlier.ok()) return earlier.status();
  if (*earlier) {
    return FailedPreconditionError(
        "redis " + conn.address() + ": the keyspace " + base +
        " holds the key layout of an earlier gnomon (one slot per job); stop every node, then "
        "run `gnomon migrate redis-groups --backend <this backend's URL>` once");
  }
  // A keyspace with nothing of gnomon's: this version's.
  return MarkGroups(conn, base, true);
}

Status CheckClusterLayout(RedisClusterClient& cluster, const std::string& base) {
  const std::string marker = Marker(base);
  const int slot = ClusterKeySlot(marker);
  Result<RedisReply> set = cluster.Command(slot, {"SET", marker, std::string(kGroupLayout), "NX"});
  if (!set.ok()) return set.status();
  Result<RedisReply> got = cluster.Command(slot, {"GET", marker});
  if (!got.ok()) return got.status();
  if (set->is_error() || got->type != RedisReply::Type::kString) {
    return UnavailableError("redis " + cluster.OwnerOf(slot) + ": cannot read the layout marker " +
                            marker + (set->is_error() ? ": " + set->str : ""));
  }
  if (got->str != kGroupLayout) return UnknownLayout(cluster.OwnerOf(slot), base, got->str);
  return Status::Ok();
}

Result<KeyGroupMigration> MigrateToGroups(RedisConnectionPool& conn, const std::string& base) {
  KeyGroupMigration done;
  Result<bool> marked = MarkedGroups(conn, base);
  if (!marked.ok()) return marked.status();
  Result<bool> earlier = *marked ? Result<bool>(false) : HoldsEarlierLayout(conn, base);
  if (!earlier.ok()) return earlier.status();
  if (!*earlier) {
    if (!*marked) GNOMON_RETURN_IF_ERROR(MarkGroups(conn, base, true));
    done.already_done = true;
    return done;
  }

  // No node of the earlier release may still run: it would claim again a fire whose marker moved.
  Result<RedisReply> time = Checked(conn, {"TIME"});
  if (!time.ok()) return time.status();
  int64_t sec = 0, usec = 0;
  if (!IsArray(*time, 2) || !IntAt(*time, 0, sec) || !IntAt(*time, 1, usec)) {
    return Malformed("TIME");
  }
  Result<RedisReply> live = Checked(conn, {"ZRANGEBYSCORE", base + ":nodes:exp",
                                           std::to_string(sec * 1000 + usec / 1000), "+inf"});
  if (!live.ok()) return live.status();
  if (!live->elements.empty()) {
    std::string names;
    for (size_t i = 0; i < live->elements.size() && i < 10; ++i) {
      names += (i ? ", " : "") + live->elements[i].str;
    }
    return FailedPreconditionError(
        "redis " + conn.address() + ": " + std::to_string(live->elements.size()) +
        " node(s) of the earlier release still send heartbeats (" + names +
        "): stop every node first, then run the migration again (a stopped node's heartbeat "
        "expires within its ttl)");
  }

  // 1. Every per-job key into its group, a SCAN batch per call.
  std::vector<std::string> batch;
  // Renames the batch's pairs; adds the number renamed to `count`.
  auto flush = [&](int64_t& count) -> Status {
    if (batch.empty()) return Status::Ok();
    std::vector<std::string> argv = {"EVAL", kRenamePairs, "0"};
    argv.insert(argv.end(), batch.begin(), batch.end());
    batch.clear();
    Result<RedisReply> n = Checked(conn, argv);
    if (!n.ok()) return n.status();
    count += n->integer;
    return Status::Ok();
  };
  Status renamed;
  Status scanned = ScanTagged(conn, base, [&](const std::string& key) {
    if (std::optional<std::string> to = GroupKeyOf(base, key)) {
      batch.push_back(key);
      batch.push_back(std::move(*to));
    }
    if (batch.size() >= 2000) renamed = flush(done.job_keys);
    return renamed.ok();
  });
  GNOMON_RETURN_IF_ERROR(scanned);
  GNOMON_RETURN_IF_ERROR(renamed);
  GNOMON_RETURN_IF_ERROR(flush(done.job_keys));

  // 2. The global keys under {~shared}, then the marker: from here on this version opens it.
  for (const char* name : kSharedNames) {
    batch.push_back(base + ":" + name);
    batch.push_back(base + ":{~shared}:" + name);
  }
  GNOMON_RETURN_IF_ERROR(flush(done.shared_keys));
  GNOMON_RETURN_IF_ERROR(MarkGroups(conn, base, false));
  return done;
}

}  // namespace gnomon::coord::redis
