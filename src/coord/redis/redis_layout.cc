#include "src/coord/redis/redis_layout.h"

#include <vector>

#include "gnomon/job.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_scripts.h"
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

// The move to the ledger layout, one key per call (KEYS[1]: the key-group layout's key; the
// job's other keys are in its slot). Each reads what it moves, writes it into the job's hash J
// and deletes the old key, so a move stopped halfway is finished by the next run.

// KEYS[1] = J:state (or, for a job without one, J:live's job: "J:state" all the same). Its
// fields (paused, reason, fails, last, token, trim_at) become J's, the open fires of J:live its
// "live", and its listing's count "hn".
constexpr const char* kMoveState = R"lua(
local jb = string.sub(KEYS[1], 1, -7)
local st = redis.call('HGETALL', KEYS[1])
if #st > 0 then redis.call('HSET', jb, unpack(st)) end
local live = {}
for _, fid in ipairs(redis.call('ZRANGE', jb .. ':live', '0', '-1')) do
  live[#live + 1] = fid .. ' '
end
redis.call('HSET', jb, 'live', table.concat(live), 'hn', S(redis.call('ZCARD', jb .. ':runs')))
return redis.call('DEL', KEYS[1], jb .. ':live')
)lua";

// KEYS[1] = J:fire:<ms>:<shard>; ARGV = job, ms, shard. The marker becomes J's field m:<fid>
// (its attempt's start and cause read from that attempt's record) and its checkpoint cp:<fid>;
// a fire with no listing entry left (its records were trimmed) gets one, so that the job's cap
// drops its marker in turn.
constexpr const char* kMoveMarker = R"lua(
local job, ms_s, shard_s = ARGV[1], ARGV[2], ARGV[3]
local fid = ms_s .. ':' .. shard_s
local jb = string.sub(KEYS[1], 1, -(#fid + 7))
local f = redis.call('HMGET', KEYS[1], 'att', 'tok', 'node', 'lease', 'open', 'sc', 'cp')
if not f[1] then return 0 end
local r = redis.call('HMGET', jb .. ':run:' .. fid .. ':' .. f[1], 'st', 'cause')
local open = '0'
if f[5] == '1' then open = '1' end
redis.call('HSET', jb, 'm:' .. fid, marker_of(f[1], f[2] or '0', f[4] or '0', open, f[6] or '1',
                                              r[1] or '0', f[3] or '', r[2] or ''))
if f[7] then redis.call('HSET', jb, 'cp:' .. fid, f[7]) end
local p = string.sub(member(job, ms_s + 0, shard_s + 0, 1), 1, -11)
if #redis.call('ZRANGEBYLEX', jb .. ':runs', '[' .. p, '(' .. p .. '~', 'LIMIT', '0', '1') == 0 then
  redis.call('ZADD', jb .. ':runs', '0', member(job, ms_s + 0, shard_s + 0, f[1] + 0))
  redis.call('HINCRBY', jb, 'hn', '1')
end
return redis.call('DEL', KEYS[1])
)lua";

// KEYS[1] = J:run:<ms>:<shard>:<attempt>; ARGV = job, ms, shard, attempt. The record becomes J's
// field r:<member>, but a running record without output: its fire's marker lists it.
constexpr const char* kMoveRecord = R"lua(
local job, ms_s, shard_s, att_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local jb = string.sub(KEYS[1], 1, -(#ms_s + #shard_s + #att_s + 8))
local r = redis.call('HGETALL', KEYS[1])
if #r == 0 then return 0 end
local f = {}
for i = 1, #r, 2 do f[r[i]] = r[i + 1] end
local m = member(job, ms_s + 0, shard_s + 0, att_s + 0)
if f.out ~= 'running' or (f.output or '') ~= '' then
  redis.call('HSET', jb, 'r:' .. m, record_of(f.out or 'running', f.sc or '1', f.tok or '0',
                                              f.node or '', f.st or '0', f.fin or '0',
                                              f.err or '', f.output or '', f.skip or '',
                                              f.params or '', f.cause or '', f.exit or ''))
end
if not redis.call('ZSCORE', jb .. ':runs', m) then
  redis.call('ZADD', jb .. ':runs', '0', m)
  redis.call('HINCRBY', jb, 'hn', '1')
end
return redis.call('DEL', KEYS[1])
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

// The layout the marker names ("" when there is none); FailedPrecondition when it names one this
// version does not know.
Result<std::string> MarkedLayout(RedisConnectionPool& conn, const std::string& base) {
  Result<RedisReply> marker = Checked(conn, {"GET", Marker(base)});
  if (!marker.ok()) return marker.status();
  if (marker->type != RedisReply::Type::kString) return std::string();
  if (marker->str != kGroupLayout && marker->str != kLedgerLayout) {
    return UnknownLayout(conn.address(), base, marker->str);
  }
  return marker->str;
}

// Writes the marker `layout`; with `only_new`, only where there is none (a migration that
// finished first wins).
Status Mark(RedisConnectionPool& conn, const std::string& base, std::string_view layout,
            bool only_new) {
  std::vector<std::string> argv = {"SET", Marker(base), std::string(layout)};
  if (only_new) argv.push_back("NX");
  return Checked(conn, argv).status();
}

Status EarlierLayout(const std::string& address, const std::string& base, const char* which) {
  return FailedPreconditionError("redis " + address + ": the keyspace " + base +
                                 " holds the key layout of an earlier gnomon (" + which +
                                 "); stop every node, then run `gnomon migrate redis-groups "
                                 "--backend <this backend's URL>` once");
}

// OK when no node's heartbeat in the expiry index `exp` is still live on the server's clock;
// FailedPrecondition naming them otherwise (a node of the earlier release still running would
// claim again the fires whose markers move).
Status NoLiveNodes(const KeyCommand& command, const std::string& exp, const std::string& address) {
  Result<RedisReply> time = command(exp, {"TIME"});
  if (!time.ok()) return time.status();
  int64_t sec = 0, usec = 0;
  if (!IsArray(*time, 2) || !IntAt(*time, 0, sec) || !IntAt(*time, 1, usec)) {
    return Malformed("TIME");
  }
  Result<RedisReply> live =
      command(exp, {"ZRANGEBYSCORE", exp, std::to_string(sec * 1000 + usec / 1000), "+inf"});
  if (!live.ok()) return live.status();
  if (live->is_error()) return InternalError("redis " + address + ": " + live->str);
  if (!live->elements.empty()) {
    std::string names;
    for (size_t i = 0; i < live->elements.size() && i < 10; ++i) {
      names += (i ? ", " : "") + live->elements[i].str;
    }
    return FailedPreconditionError(
        "redis " + address + ": " + std::to_string(live->elements.size()) +
        " node(s) of the earlier release still send heartbeats (" + names +
        "): stop every node first, then run the migration again (a stopped node's heartbeat "
        "expires within its ttl)");
  }
  return Status::Ok();
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
  Result<std::string> marked = MarkedLayout(conn, base);
  if (!marked.ok()) return marked.status();
  if (*marked == kLedgerLayout) return Status::Ok();
  if (*marked == kGroupLayout) return EarlierLayout(conn.address(), base, "key groups");
  Result<bool> earlier = HoldsEarlierLayout(conn, base);
  if (!earlier.ok()) return earlier.status();
  if (*earlier) return EarlierLayout(conn.address(), base, "one slot per job");
  // A keyspace with nothing of gnomon's: this version's.
  return Mark(conn, base, kLedgerLayout, true);
}

Status CheckClusterLayout(RedisClusterClient& cluster, const std::string& base) {
  const std::string marker = Marker(base);
  const int slot = ClusterKeySlot(marker);
  Result<RedisReply> set = cluster.Command(slot, {"SET", marker, std::string(kLedgerLayout), "NX"});
  if (!set.ok()) return set.status();
  Result<RedisReply> got = cluster.Command(slot, {"GET", marker});
  if (!got.ok()) return got.status();
  if (set->is_error() || got->type != RedisReply::Type::kString) {
    return UnavailableError("redis " + cluster.OwnerOf(slot) + ": cannot read the layout marker " +
                            marker + (set->is_error() ? ": " + set->str : ""));
  }
  if (got->str == kGroupLayout) return EarlierLayout(cluster.OwnerOf(slot), base, "key groups");
  if (got->str != kLedgerLayout) return UnknownLayout(cluster.OwnerOf(slot), base, got->str);
  return Status::Ok();
}

Result<KeyGroupMigration> MigrateToGroups(RedisConnectionPool& conn, const std::string& base) {
  KeyGroupMigration done;
  Result<std::string> marked = MarkedLayout(conn, base);
  if (!marked.ok()) return marked.status();
  Result<bool> earlier = !marked->empty() ? Result<bool>(false) : HoldsEarlierLayout(conn, base);
  if (!earlier.ok()) return earlier.status();
  if (!*earlier) {
    // Key groups already, or a keyspace with nothing of gnomon's (this version's layout).
    if (marked->empty()) GNOMON_RETURN_IF_ERROR(Mark(conn, base, kLedgerLayout, true));
    done.already_done = true;
    return done;
  }

  // No node of the earlier release may still run: it would claim again a fire whose marker moved.
  GNOMON_RETURN_IF_ERROR(NoLiveNodes(
      [&](const std::string&, const std::vector<std::string>& argv) { return Checked(conn, argv); },
      base + ":nodes:exp", conn.address()));

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
  GNOMON_RETURN_IF_ERROR(Mark(conn, base, kGroupLayout, false));
  return done;
}

Status MigrateToLedger(const KeyCommand& command, const std::vector<std::string>& scan_keys,
                       const std::string& base, KeyGroupMigration& done) {
  const std::string state = redis_scripts::SourceOf(kMoveState);
  const std::string marker = redis_scripts::SourceOf(kMoveMarker);
  const std::string record = redis_scripts::SourceOf(kMoveRecord);
  auto eval = [&](const std::string& source, const std::string& key,
                  std::vector<std::string> args) -> Status {
    std::vector<std::string> argv = {"EVAL", source, "1", key};
    for (std::string& a : args) argv.push_back(std::move(a));
    Result<RedisReply> r = command(key, argv);
    if (!r.ok()) return r.status();
    if (r->is_error()) return InternalError("redis: moving " + key + ": " + r->str);
    done.ledger_keys += r->integer;
    return Status::Ok();
  };
  // A key-group key "<base>:{g<G>}:job:<job><rest>": `rest`'s part after the job, else nothing.
  auto moved = [&](const std::string& key, bool records) -> Status {
    const std::string head = base + ":{g";
    if (!key.starts_with(head)) return Status::Ok();
    const size_t job_at = key.find("}:job:", head.size());
    if (job_at == std::string::npos) return Status::Ok();
    const size_t from = job_at + 6;
    const size_t colon = key.find(':', from);
    if (colon == std::string::npos) return Status::Ok();  // the job's hash J itself
    const std::string job = key.substr(from, colon - from);
    const std::string_view rest = std::string_view(key).substr(colon);
    const std::string jb = key.substr(0, colon);
    std::vector<std::string> parts;  // rest's ':'-separated numbers
    auto numbers = [&](std::string_view tail, size_t n) {
      parts.clear();
      size_t at = 0;
      while (at <= tail.size()) {
        const size_t next = std::min(tail.find(':', at), tail.size());
        parts.emplace_back(tail.substr(at, next - at));
        at = next + 1;
      }
      int64_t v = 0;
      for (const std::string& p : parts) {
        if (!ParseInt(p, v)) return false;
      }
      return parts.size() == n;
    };
    if (!records) {
      if (rest == ":state") return eval(state, key, {});
      if (rest.starts_with(":fire:") && numbers(rest.substr(6), 2)) {
        return eval(marker, key, {job, parts[0], parts[1]});
      }
      return Status::Ok();
    }
    if (rest == ":live") return eval(state, jb + ":state", {});
    if (rest.starts_with(":run:") && numbers(rest.substr(5), 3)) {
      return eval(record, key, {job, parts[0], parts[1], parts[2]});
    }
    return Status::Ok();
  };
  // Markers and states first (a marker reads its attempt's record), then records and live sets
  // left without a state.
  for (const bool records : {false, true}) {
    for (const std::string& route : scan_keys) {
      std::string cursor = "0";
      do {
        Result<RedisReply> r =
            command(route, {"SCAN", cursor, "MATCH", base + ":{g*}:job:*", "COUNT", "1000"});
        if (!r.ok()) return r.status();
        if (!IsArray(*r, 2) || r->elements[1].type != RedisReply::Type::kArray) {
          return Malformed("SCAN");
        }
        cursor = r->elements[0].str;
        for (const RedisReply& key : r->elements[1].elements) {
          GNOMON_RETURN_IF_ERROR(moved(key.str, records));
        }
      } while (cursor != "0");
    }
  }
  Result<RedisReply> set = command(Marker(base), {"SET", Marker(base), std::string(kLedgerLayout)});
  if (!set.ok()) return set.status();
  if (set->is_error()) return InternalError("redis: writing the layout marker: " + set->str);
  return Status::Ok();
}

Status MoveToLedger(const KeyCommand& command, const std::vector<std::string>& scan_keys,
                    const std::string& base, const std::string& address, KeyGroupMigration& done) {
  Result<RedisReply> marker = command(Marker(base), {"GET", Marker(base)});
  if (!marker.ok()) return marker.status();
  if (marker->is_error()) return InternalError("redis " + address + ": " + marker->str);
  if (marker->type != RedisReply::Type::kString) {
    // Nothing of gnomon's: this version's layout.
    Result<RedisReply> set =
        command(Marker(base), {"SET", Marker(base), std::string(kLedgerLayout), "NX"});
    if (!set.ok()) return set.status();
    return Status::Ok();
  }
  if (marker->str == kLedgerLayout) return Status::Ok();
  if (marker->str != kGroupLayout) return UnknownLayout(address, base, marker->str);
  GNOMON_RETURN_IF_ERROR(NoLiveNodes(command, base + ":{~shared}:nodes:exp", address));
  done.already_done = false;
  return MigrateToLedger(command, scan_keys, base, done);
}

}  // namespace gnomon::coord::redis
