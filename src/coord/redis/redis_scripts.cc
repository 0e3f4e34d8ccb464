#include "src/coord/redis/redis_scripts.h"

#include "gnomon/status.h"

namespace gnomon::coord::redis_scripts {
namespace {

// Shared helpers. Numbers are formatted with %d: Lua's tostring() would print a token
// (about 1.8e15) in exponent notation. Instants stay within +-1e15 ms (checked by the caller),
// so the listing member's inverted instant always has 16 digits.
constexpr const char* kPrelude = R"lua(
local JB = KEYS[1]
local GB = KEYS[2]
local CAP_JOB = tonumber(ARGV[2])
local CAP_ALL = tonumber(ARGV[3])
local RETAIN = tonumber(ARGV[4])
local function S(n) return string.format('%d', n) end
local function server_time()
  local t = redis.call('TIME')
  return tonumber(t[1]), tonumber(t[2])
end
local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local sec, usec = server_time()
  NOW = sec * 1000 + math.floor(usec / 1000)
end
-- A counter that never goes backwards, also after a restart that lost its last value:
-- max(previous + 1, server clock in microseconds).
local function next_counter(key, field)
  local sec, usec = server_time()
  local floor = sec * 1000000 + usec
  local v = tonumber(redis.call('HGET', key, field) or '0') + 1
  if floor > v then v = floor end
  redis.call('HSET', key, field, S(v))
  return v
end
-- Every definition or pause-state change: a new jobs version, announced on the events channel
-- (nodes waiting in WaitJobsChange wake at once; a missed message is healed by their resync).
local function bump_jobs_version()
  local v = next_counter(GB .. ':meta', 'jobs_version')
  redis.call('PUBLISH', GB .. ':events', S(v))
  return v
end
local function jb_of(job) return GB .. ':{' .. job .. '}' end
local function fid_of(ms, shard) return S(ms) .. ':' .. S(shard) end
local function fire_key(job, ms, shard) return jb_of(job) .. ':fire:' .. fid_of(ms, shard) end
local function rec_key(job, ms, shard, att)
  return jb_of(job) .. ':run:' .. fid_of(ms, shard) .. ':' .. S(att)
end
local function member(job, ms, shard, att)
  return string.format('%016d %s %010d %010d', 9000000000000000 - ms, job, shard,
                       2147483647 - att)
end
local function parse_member(m)
  local inv, job, shard, iatt = string.match(m, '^(%d+) (%S+) (%d+) (%d+)$')
  return job, 9000000000000000 - tonumber(inv), tonumber(shard), 2147483647 - tonumber(iatt)
end
local function drop_record(m)
  local job, ms, shard, att = parse_member(m)
  redis.call('DEL', rec_key(job, ms, shard, att))
  redis.call('ZREM', jb_of(job) .. ':runs', m)
  redis.call('ZREM', GB .. ':runs', m)
end
-- Drops the oldest finished records of an index beyond `cap` (running ones are kept).
local function trim(zkey, cap)
  local excess = redis.call('ZCARD', zkey) - cap
  if excess <= 0 then return end
  local oldest = redis.call('ZREVRANGEBYLEX', zkey, '+', '-', 'LIMIT', 0, excess + 64)
  for _, m in ipairs(oldest) do
    if excess <= 0 then break end
    local job, ms, shard, att = parse_member(m)
    if redis.call('HGET', rec_key(job, ms, shard, att), 'out') ~= 'running' then
      drop_record(m)
      excess = excess - 1
    end
  end
end
local function put_record(job, ms, shard, att, fields)
  local rk = rec_key(job, ms, shard, att)
  redis.call('DEL', rk)
  redis.call('HSET', rk, unpack(fields))
  local m = member(job, ms, shard, att)
  redis.call('ZADD', jb_of(job) .. ':runs', 0, m)
  redis.call('ZADD', GB .. ':runs', 0, m)
  trim(jb_of(job) .. ':runs', CAP_JOB)
  trim(GB .. ':runs', CAP_ALL)
end
local function advance_last(job, ms)
  local sk = jb_of(job) .. ':state'
  local cur = redis.call('HGET', sk, 'last')
  if not cur or tonumber(cur) < ms then redis.call('HSET', sk, 'last', S(ms)) end
end
local function finish_running(job, ms, shard, att, outcome, err)
  local rk = rec_key(job, ms, shard, att)
  if redis.call('HGET', rk, 'out') == 'running' then
    redis.call('HSET', rk, 'out', outcome, 'fin', S(NOW), 'err', err)
  end
end
local function close_fire(job, ms, shard)
  local fk = fire_key(job, ms, shard)
  redis.call('HSET', fk, 'open', '0')
  redis.call('PEXPIRE', fk, RETAIN)
  redis.call('ZREM', jb_of(job) .. ':live', fid_of(ms, shard))
  redis.call('ZREM', GB .. ':leases', job .. ' ' .. fid_of(ms, shard))
end
local function start_attempt(job, ms, shard, sc, att, node, ttl)
  local fk = fire_key(job, ms, shard)
  local tok = next_counter(jb_of(job) .. ':state', 'token')
  local lease = NOW + ttl
  redis.call('HSET', fk, 'att', S(att), 'tok', S(tok), 'node', node, 'lease', S(lease),
             'open', '1', 'sc', S(sc))
  redis.call('PERSIST', fk)
  redis.call('ZADD', jb_of(job) .. ':live', S(lease), fid_of(ms, shard))
  redis.call('ZADD', GB .. ':leases', S(lease), job .. ' ' .. fid_of(ms, shard))
  put_record(job, ms, shard, att, {'sc', S(sc), 'tok', S(tok), 'node', node, 'st', S(NOW),
             'fin', '0', 'out', 'running', 'err', '', 'output', '', 'skip', ''})
  return tok, lease
end
local function record_skipped(job, ms, shard, sc, node, reason)
  local fk = fire_key(job, ms, shard)
  redis.call('HSET', fk, 'att', '1', 'tok', '0', 'node', node, 'lease', S(NOW), 'open', '0',
             'sc', S(sc))
  redis.call('PEXPIRE', fk, RETAIN)
  put_record(job, ms, shard, 1, {'sc', S(sc), 'tok', '0', 'node', node, 'st', S(NOW),
             'fin', S(NOW), 'out', 'skipped', 'err', '', 'output', '', 'skip', reason})
  advance_last(job, ms)
end
-- nil and the attempt when `tok` holds the fire's live lease, else the reason it does not.
local function fenced(job, ms, shard, tok)
  local f = redis.call('HMGET', fire_key(job, ms, shard), 'tok', 'open', 'lease', 'att')
  if not f[1] then return 'the fire has no claim' end
  if f[1] ~= tok then return 'fenced off by token ' .. f[1] end
  if f[2] ~= '1' then return 'the lease was released or revoked' end
  if tonumber(f[3]) <= NOW then return 'the lease expired' end
  return nil, tonumber(f[4])
end
)lua";

// claim_one(A, i): A[i..i+9] = job, ms, shard, shard_count, node, ttl_ms, skew_ms, overlap,
// run_id, deadline.
// -> CLAIMED now token lease replaced("<ms>:<shard>:<shard_count>")... | ALREADY/EARLY/... now
constexpr const char* kClaimFn = R"lua(
local function claim_one(A, i)
  local job, ms, shard, sc = A[i], tonumber(A[i + 1]), tonumber(A[i + 2]), tonumber(A[i + 3])
  local node, ttl, skew, overlap, run_id = A[i + 4], tonumber(A[i + 5]), tonumber(A[i + 6]),
    A[i + 7], A[i + 8]
  local jb = jb_of(job)
  -- A claim executed after its client gave up (it waited in a buffer) is not applied.
  if A[i + 9] ~= '' and NOW > tonumber(A[i + 9]) then return {'LATE', S(NOW)} end
  if redis.call('EXISTS', fire_key(job, ms, shard)) == 1 then return {'ALREADY', S(NOW)} end
  if ms > NOW + skew then return {'EARLY', S(NOW)} end
  if redis.call('HGET', jb .. ':state', 'paused') == '1' then
    record_skipped(job, ms, shard, sc, node, 'paused')
    return {'PAUSED', S(NOW)}
  end
  local out = {'CLAIMED', S(NOW), '', ''}
  local live_key = jb .. ':live'
  redis.call('ZREMRANGEBYSCORE', live_key, '-inf', S(NOW))
  if overlap ~= 'allow' then
    for _, ofid in ipairs(redis.call('ZRANGE', live_key, 0, -1)) do
      local oms_s, oshard_s = string.match(ofid, '^(-?%d+):(%d+)$')
      local oms, oshard = tonumber(oms_s), tonumber(oshard_s)
      if oms ~= ms then
        if overlap == 'forbid' then
          record_skipped(job, ms, shard, sc, node, 'overlap')
          return {'OVERLAP', S(NOW)}
        end
        local of = redis.call('HMGET', fire_key(job, oms, oshard), 'att', 'sc')
        finish_running(job, oms, oshard, tonumber(of[1]), 'cancelled', 'replaced by ' .. run_id)
        close_fire(job, oms, oshard)
        out[#out + 1] = ofid .. ':' .. of[2]
      end
    end
  end
  local tok, lease = start_attempt(job, ms, shard, sc, 1, node, ttl)
  advance_last(job, ms)
  out[3] = S(tok)
  out[4] = S(lease)
  return out
end
)lua";

// ARGV[5..]: job ids. -> per job: paused reason fails last (each false when unset).
constexpr const char* kGetJobStatesBody = R"lua(
local out = {}
for i = 5, #ARGV do
  out[#out + 1] = redis.call('HMGET', jb_of(ARGV[i]) .. ':state', 'paused', 'reason', 'fails',
                             'last')
end
return out
)lua";

// ARGV[5..14]: one claim (claim_one).
constexpr const char* kClaimBody = R"lua(
return claim_one(ARGV, 5)
)lua";

// ARGV[5]: n; ARGV[6..]: n claims of 10 arguments each (claim_one). -> one reply per claim.
constexpr const char* kClaimManyBody = R"lua(
local out = {}
for k = 0, tonumber(ARGV[5]) - 1 do out[k + 1] = claim_one(ARGV, 6 + k * 10) end
return out
)lua";

// ARGV[5..]: job, ms, shard, token, ttl_ms. -> OK lease | LEASE reason
constexpr const char* kRenewBody = R"lua(
local job, ms, shard = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local why = fenced(job, ms, shard, ARGV[8])
if why then return {'LEASE', why} end
local lease = NOW + tonumber(ARGV[9])
redis.call('HSET', fire_key(job, ms, shard), 'lease', S(lease))
redis.call('ZADD', JB .. ':live', S(lease), fid_of(ms, shard))
redis.call('ZADD', GB .. ':leases', S(lease), job .. ' ' .. fid_of(ms, shard))
return {'OK', S(lease)}
)lua";

// ARGV[5..]: job, ms, shard, token, ttl_ms, node. -> OK attempt token lease | LEASE reason
constexpr const char* kNextAttemptBody = R"lua(
local job, ms, shard = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local why, att = fenced(job, ms, shard, ARGV[8])
if why then return {'LEASE', why} end
local sc = tonumber(redis.call('HGET', fire_key(job, ms, shard), 'sc'))
finish_running(job, ms, shard, att, 'failed',
               'superseded by attempt ' .. S(att + 1) .. ' without a report')
local tok, lease = start_attempt(job, ms, shard, sc, att + 1, ARGV[10], tonumber(ARGV[9]))
return {'OK', S(att + 1), S(tok), S(lease)}
)lua";

// ARGV[5..]: job, ms, shard, token, attempt, final (1/0), failure effect (reset/inc/none),
// then the record's field/value pairs. -> OK | LEASE reason
constexpr const char* kReportBody = R"lua(
local job, ms, shard = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local why = fenced(job, ms, shard, ARGV[8])
if why then return {'LEASE', why} end
local fields = {}
for i = 12, #ARGV do fields[#fields + 1] = ARGV[i] end
put_record(job, ms, shard, tonumber(ARGV[9]), fields)
if ARGV[10] == '1' then
  close_fire(job, ms, shard)
  if ARGV[11] == 'reset' then
    redis.call('HSET', JB .. ':state', 'fails', '0')
  elseif ARGV[11] == 'inc' then
    redis.call('HINCRBY', JB .. ':state', 'fails', 1)
  end
end
return {'OK'}
)lua";

// KEYS[1] = global base. ARGV[5]: limit.
// -> OK, then per fire: job ms shard shard_count attempt token node lease
constexpr const char* kListExpiredBody = R"lua(
local rows = redis.call('ZRANGEBYSCORE', GB .. ':leases', '-inf', S(NOW), 'LIMIT', 0,
                        tonumber(ARGV[5]))
local out = {'OK'}
for _, m in ipairs(rows) do
  local job, ms_s, shard_s = string.match(m, '^(%S+) (-?%d+):(%d+)$')
  local f = redis.call('HMGET', fire_key(job, tonumber(ms_s), tonumber(shard_s)), 'att', 'tok',
                       'node', 'sc', 'open', 'lease')
  if f[1] and f[5] == '1' then
    for _, v in ipairs({job, ms_s, shard_s, f[4], f[1], f[2], f[3], f[6]}) do
      out[#out + 1] = v
    end
  else
    redis.call('ZREM', GB .. ':leases', m)
  end
end
return out
)lua";

// ARGV[5..]: job, ms, shard, token, policy (fail/rerun), node, ttl_ms.
// -> OK [attempt token lease] | NOTFOUND | PRECOND
constexpr const char* kResolveLostBody = R"lua(
local job, ms, shard = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local f = redis.call('HMGET', fire_key(job, ms, shard), 'tok', 'open', 'lease', 'att', 'node',
                     'sc')
if not f[1] then return {'NOTFOUND'} end
if f[2] ~= '1' or f[1] ~= ARGV[8] or tonumber(f[3]) > NOW then return {'PRECOND'} end
local att = tonumber(f[4])
finish_running(job, ms, shard, att, 'lost', 'lease expired; holder ' .. f[5] .. ' vanished')
if ARGV[9] == 'fail' then
  close_fire(job, ms, shard)
  redis.call('HINCRBY', JB .. ':state', 'fails', 1)
  return {'OK'}
end
local tok, lease = start_attempt(job, ms, shard, tonumber(f[6]), att + 1, ARGV[10],
                                 tonumber(ARGV[11]))
return {'OK', S(att + 1), S(tok), S(lease)}
)lua";

// ARGV[5..]: job, ms, shard, shard_count, node, reason. -> OK | EXISTS
constexpr const char* kRecordSkippedBody = R"lua(
local job, ms, shard = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
if redis.call('EXISTS', fire_key(job, ms, shard)) == 1 then return {'EXISTS'} end
record_skipped(job, ms, shard, tonumber(ARGV[8]), ARGV[9], ARGV[10])
return {'OK'}
)lua";

// ARGV[5..]: job, ms, shard, token, value. -> OK | LEASE reason
constexpr const char* kSaveCheckpointBody = R"lua(
local job, ms, shard = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local why = fenced(job, ms, shard, ARGV[8])
if why then return {'LEASE', why} end
redis.call('HSET', fire_key(job, ms, shard), 'cp', ARGV[9])
return {'OK'}
)lua";

// ARGV[5..]: paused (1/0), reason. -> OK
constexpr const char* kSetPausedBody = R"lua(
local reason = ARGV[6]
if ARGV[5] ~= '1' then reason = '' end
redis.call('HSET', JB .. ':state', 'paused', ARGV[5], 'reason', reason)
bump_jobs_version()
return {'OK'}
)lua";

// ARGV[5..]: keep_last, max_age_ms. -> OK
constexpr const char* kPruneBody = R"lua(
local keep, cutoff = tonumber(ARGV[5]), NOW - tonumber(ARGV[6])
local fires, current = 0, nil
for _, m in ipairs(redis.call('ZRANGE', JB .. ':runs', 0, -1)) do
  local job, ms, shard, att = parse_member(m)
  local fid = fid_of(ms, shard)
  if fid ~= current then
    current = fid
    fires = fires + 1
  end
  if (fires > keep or ms < cutoff) and
     redis.call('HGET', rec_key(job, ms, shard, att), 'out') ~= 'running' then
    drop_record(m)
  end
end
return {'OK'}
)lua";

// KEYS[1] = the index (a job's or the global runs zset). ARGV[5..]: start bound (ZRANGEBYLEX
// syntax), outcome ("" = any), scheduled_from ms ("" = none), how many to return.
// -> OK, then per record: member, HGETALL array
constexpr const char* kListRunsBody = R"lua(
local start, outcome, want = ARGV[5], ARGV[6], tonumber(ARGV[8])
local from = nil
if ARGV[7] ~= '' then from = tonumber(ARGV[7]) end
local out = {'OK'}
local n = 0
while n < want do
  local batch = redis.call('ZRANGEBYLEX', JB, start, '+', 'LIMIT', 0, 256)
  if #batch == 0 then break end
  for _, m in ipairs(batch) do
    local job, ms, shard, att = parse_member(m)
    if from and ms < from then return out end
    local rec = redis.call('HGETALL', rec_key(job, ms, shard, att))
    local match = #rec > 0
    if match and outcome ~= '' then
      match = false
      for i = 1, #rec, 2 do
        if rec[i] == 'out' then match = rec[i + 1] == outcome end
      end
    end
    if match then
      out[#out + 1] = m
      out[#out + 1] = rec
      n = n + 1
      if n >= want then return out end
    end
  end
  start = '(' .. batch[#batch]
end
return out
)lua";

// ARGV[5]: the members' common prefix for one fire. -> OK, then per attempt (descending):
// member, HGETALL array
constexpr const char* kGetRunBody = R"lua(
local p = ARGV[5]
local out = {'OK'}
for _, m in ipairs(redis.call('ZRANGEBYLEX', JB .. ':runs', '[' .. p, '(' .. p .. '~')) do
  local job, ms, shard, att = parse_member(m)
  local rec = redis.call('HGETALL', rec_key(job, ms, shard, att))
  if #rec > 0 then
    out[#out + 1] = m
    out[#out + 1] = rec
  end
end
return out
)lua";

// KEYS[1] = global base. ARGV[5..]: node, ttl_ms, encoded info. -> OK
constexpr const char* kHeartbeatBody = R"lua(
redis.call('HSET', GB .. ':nodes', ARGV[5], S(NOW) .. '\n' .. ARGV[7])
redis.call('ZADD', GB .. ':nodes:exp', S(NOW + tonumber(ARGV[6])), ARGV[5])
return {'OK'}
)lua";

// KEYS[1] = global base. -> OK, then per live node: node, "<last heartbeat>\n<info>"
constexpr const char* kListNodesBody = R"lua(
local exp = GB .. ':nodes:exp'
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', exp, '-inf', S(NOW))) do
  redis.call('HDEL', GB .. ':nodes', dead)
  redis.call('ZREM', exp, dead)
end
local out = {'OK'}
for _, node in ipairs(redis.call('ZRANGE', exp, 0, -1)) do
  local info = redis.call('HGET', GB .. ':nodes', node)
  if info then
    out[#out + 1] = node
    out[#out + 1] = info
  end
end
return out
)lua";

// KEYS[1] = global base. ARGV[5..]: job, definition, expected version.
// -> OK version | EXISTS | PRECOND current-version-or-""
constexpr const char* kPutJobBody = R"lua(
local cur = redis.call('HGET', GB .. ':jobs', ARGV[5])
if not cur then
  if ARGV[7] ~= '0' then return {'PRECOND', ''} end
else
  local ver = string.match(cur, '^(%d+)\n')
  if ARGV[7] == '0' then return {'EXISTS'} end
  if ver ~= ARGV[7] then return {'PRECOND', ver} end
end
local v = bump_jobs_version()
redis.call('HSET', GB .. ':jobs', ARGV[5], S(v) .. '\n' .. ARGV[6])
return {'OK', S(v)}
)lua";

// KEYS[1] = global base. ARGV[5..]: job, expected version (-1 = any).
// -> OK | NOTFOUND | PRECOND current-version
constexpr const char* kDeleteJobBody = R"lua(
local cur = redis.call('HGET', GB .. ':jobs', ARGV[5])
if not cur then return {'NOTFOUND'} end
local ver = string.match(cur, '^(%d+)\n')
if ARGV[6] ~= '-1' and ver ~= ARGV[6] then return {'PRECOND', ver} end
redis.call('HDEL', GB .. ':jobs', ARGV[5])
bump_jobs_version()
return {'OK'}
)lua";

// KEYS[1] = global base. ARGV[5..]: keep, encoded record (without seq and time).
// -> OK seq. Members are "<seq>\n<at ms>\n<record>", scored by seq.
constexpr const char* kAppendAuditBody = R"lua(
local seq = next_counter(GB .. ':meta', 'audit_seq')
redis.call('ZADD', GB .. ':audit', seq, S(seq) .. '\n' .. S(NOW) .. '\n' .. ARGV[6])
redis.call('ZREMRANGEBYRANK', GB .. ':audit', 0, -(tonumber(ARGV[5]) + 1))
return {'OK', S(seq)}
)lua";

// KEYS[1] = global base. ARGV[5..]: triples job, ms, shard. -> OK, then 1/0 per fire.
constexpr const char* kFiresRecordedBody = R"lua(
local out = {'OK'}
for i = 5, #ARGV, 3 do
  out[#out + 1] = redis.call('EXISTS', fire_key(ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])))
end
return out
)lua";

}  // namespace

std::string Source(Id id) {
  const char* body = nullptr;
  switch (id) {
    case kClaim:
      return std::string(kPrelude) + kClaimFn + kClaimBody;
    case kClaimMany:
      return std::string(kPrelude) + kClaimFn + kClaimManyBody;
    case kGetJobStates:
      body = kGetJobStatesBody;
      break;
    case kRenew:
      body = kRenewBody;
      break;
    case kNextAttempt:
      body = kNextAttemptBody;
      break;
    case kReport:
      body = kReportBody;
      break;
    case kListExpired:
      body = kListExpiredBody;
      break;
    case kResolveLost:
      body = kResolveLostBody;
      break;
    case kRecordSkipped:
      body = kRecordSkippedBody;
      break;
    case kSaveCheckpoint:
      body = kSaveCheckpointBody;
      break;
    case kSetPaused:
      body = kSetPausedBody;
      break;
    case kPrune:
      body = kPruneBody;
      break;
    case kListRuns:
      body = kListRunsBody;
      break;
    case kGetRun:
      body = kGetRunBody;
      break;
    case kHeartbeat:
      body = kHeartbeatBody;
      break;
    case kListNodes:
      body = kListNodesBody;
      break;
    case kPutJob:
      body = kPutJobBody;
      break;
    case kDeleteJob:
      body = kDeleteJobBody;
      break;
    case kAppendAudit:
      body = kAppendAuditBody;
      break;
    case kFiresRecorded:
      body = kFiresRecordedBody;
      break;
    case kCount:
      break;
  }
  GNOMON_CHECK(body != nullptr);
  return std::string(kPrelude) + body;
}

}  // namespace gnomon::coord::redis_scripts
