#include "src/coord/redis/redis_scripts.h"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/status.h"
#include "src/coord/redis/redis_script_helpers.h"

namespace gnomon::coord::redis_scripts {
namespace {

// What a script costs the server. The Redis server's CPU is the fleet's bottleneck. Measured
// with callgrind on Redis 7.0 (AOF on), a script pays, besides its commands: about 1k
// instructions per argument it is passed, 1k per closure its chunk creates (every run re-creates
// every `local function` of its source), 2k per string.format or tonumber() (string arithmetic,
// `s + 0`, converts for half that), 1k per small table, 0.4k per call of a Lua function; a
// command costs about 3k to call, a write command several k more (it is also propagated to the
// AOF, argument by argument), and a number passed to redis.call 2k more than a string (it is
// formatted with %.17g). So a script's source holds only the helpers it uses (WithHelpers picks
// them from ScriptHelpers()), and the hot paths (a claim, a report) read and write each key once,
// write only what changes, build key names from the job's base once, and pass the instant,
// shard and shard count on as the caller's text (the client formats them canonically, so they
// equal S() of their value) instead of reformatting them.
//
// Numbers are formatted with %d: Lua's tostring() would print a token (about 1.8e15) in exponent
// notation. Instants stay within +-1e15 ms (checked by the caller), so the listing member's
// inverted instant always has 16 digits.
//
// Key names (GB = KEYS[2], the shared base "B:{~shared}"; NB = B; jb = a job's base
// "B:{g<group>}:job:<job>", KEYS[1] in the scripts of one job): jb (the job's hash: its state,
// its fire markers m:<fid>, checkpoints cp:<fid>, its open fires), jb:r (its records, by listing
// member), jb:runs (its listing), where the fid is "<ms>:<shard>"; see gnomon/redis_coordinator.h.

// True when `text` names `name`: not preceded nor followed by a name character.
bool Uses(std::string_view text, std::string_view name) {
  auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
    const size_t after = at + name.size();
    if ((at == 0 || !name_char(text[at - 1])) &&
        (after == text.size() || !name_char(text[after]))) {
      return true;
    }
  }
  return false;
}

// claim_one(A, i): A[i..i+11] = job, group (its key group, KeyGroup), ms, shard, shard_count,
// node, ttl_ms, skew_ms, overlap, deadline, cause ('' = by schedule), member (the listing member
// of the fire's first attempt, Member()). The client sends what it computes cheaper than the
// script: the group and the member.
// -> "<now> <token> <lease>" (claimed) | CLAIMED now token lease
// replaced("<ms>:<shard>:<shard_count>")... (claimed, replacing other fires) |
// ALREADY/EARLY/OLD/BUSY/... now
constexpr const char* kClaimFn = R"lua(
-- A[i..]: job group ms shard shard_count node ttl_ms skew_ms overlap deadline cause member
-- A fire at or before OLDEST (fire_retention before now), or before its job's cutoff (pr: its
-- marker may be gone with its history), is not claimed, by schedule or by a backfill.
local OLDEST = NOW - ARGV[4]
local function claim_one(A, i)
  local job, ms_s, shard_s, sc_s, node = A[i], A[i + 2], A[i + 3], A[i + 4], A[i + 5]
  -- A claim executed after its client gave up (it waited in a buffer) is not applied.
  if A[i + 9] ~= '' and NOW > A[i + 9] + 0 then return {'LATE', NOW_S} end
  local jb, fid, m = jb_in(A[i + 1], job), ms_s .. ':' .. shard_s, A[i + 11]
  local mf = 'm:' .. fid
  -- The job's fields, read once: the fire's marker, paused, the token counter, the last claimed
  -- instant, the cutoff, the open fires, the listing's count and trim deferral.
  local st = redis.call('HMGET', jb, mf, 'paused', 'token', 'last', 'pr', 'live', 'hn',
                        'trim_at')
  if st[1] then return {'ALREADY', NOW_S} end
  local ms = ms_s + 0
  if ms > NOW + A[i + 7] then return {'EARLY', NOW_S} end
  if ms <= OLDEST or (st[5] and ms < st[5] + 0) then return {'OLD', NOW_S} end
  local hn = tonumber(st[7]) or 0
  if st[2] == '1' then
    record_skipped(jb, m, ms_s, shard_s, sc_s, node, 'paused', hn, st[4], st[8])
    return {'PAUSED', NOW_S}
  end
  local replaced -- the fires this claim replaced, if any (overlap replace)
  -- The job's other open fires matter only to the overlap policies that look at them (their
  -- markers say whether their leases still hold).
  local live, overlap = st[6] or '', A[i + 8]
  if overlap ~= 'allow' and live ~= '' then
    for ofid in string.gmatch(live, '%S+') do
      local oms_s, oshard_s = string.match(ofid, '^(-?%d+):(%d+)$')
      local omk = oms_s ~= ms_s and parse_marker(redis.call('HGET', jb, 'm:' .. ofid))
      if omk and omk.open == '1' and omk.lease + 0 > NOW then
        if overlap == 'buffer_one' or overlap == 'buffer_all' then return {'BUSY', NOW_S} end
        if overlap == 'forbid' then
          record_skipped(jb, m, ms_s, shard_s, sc_s, node, 'overlap', hn, st[4], st[8])
          return {'OVERLAP', NOW_S}
        end
        -- The run id as FireKey::RunId() spells it.
        local run_id = job .. '@' .. ms_s .. (sc_s ~= '1' and '#' .. shard_s or '')
        finish_running(jb, job, oms_s + 0, oshard_s + 0, omk, 'cancelled',
                       'replaced by ' .. run_id)
        redis.call('HSET', jb, 'm:' .. ofid, marker_with(omk, '0', omk.lease))
        live = live_without(live, ofid)
        g_lease(job, ofid, false)
        replaced = replaced or {'CLAIMED', NOW_S, '', ''}
        replaced[#replaced + 1] = ofid .. ':' .. omk.sc
      end
    end
  end
  local tok_s, lease_s = S(counter_after(st[3])), S(NOW + A[i + 6])
  hn = hn + list_attempt(jb, m)
  local mk = marker_of('1', tok_s, lease_s, '1', sc_s, NOW_S, node, A[i + 10])
  if not st[4] or st[4] + 0 < ms then
    redis.call('HSET', jb, mf, mk, 'token', tok_s, 'live', live .. fid .. ' ', 'hn', S(hn),
               'last', ms_s)
  else
    redis.call('HSET', jb, mf, mk, 'token', tok_s, 'live', live .. fid .. ' ', 'hn', S(hn))
  end
  g_lease(job, fid, lease_s)
  trim_job(jb, hn, st[8])
  -- One string for the common answer: an array costs the server more to build and send.
  if not replaced then return NOW_S .. ' ' .. tok_s .. ' ' .. lease_s end
  replaced[3] = tok_s
  replaced[4] = lease_s
  return replaced
end
)lua";

// ARGV[5..]: job ids. -> per job: paused reason fails last (each false when unset).
constexpr const char* kGetJobStatesBody = R"lua(
-- ARGV[5..]: jobs...
local out = {}
for i = 5, #ARGV do
  out[#out + 1] = redis.call('HMGET', jb_of(ARGV[i]), 'paused', 'reason', 'fails', 'last')
end
return out
)lua";

// ARGV[5..]: job, ms, shard, token, ttl_ms. -> OK lease | LEASE reason
constexpr const char* kRenewBody = R"lua(
-- ARGV[5..]: job ms shard token ttl_ms
local fid = ARGV[6] .. ':' .. ARGV[7]
local why, mk = fenced(redis.call('HGET', JB, 'm:' .. fid), ARGV[8])
if why then return {'LEASE', why} end
local lease_s = S(NOW + ARGV[9])
redis.call('HSET', JB, 'm:' .. fid, marker_with(mk, '1', lease_s))
g_lease(ARGV[5], fid, lease_s)
return {'OK', lease_s}
)lua";

// ARGV[5..]: job, ms, shard, token, ttl_ms, node. -> OK attempt token lease | LEASE reason
constexpr const char* kNextAttemptBody = R"lua(
-- ARGV[5..]: job ms shard token ttl_ms node
local job, fid, ms, shard = ARGV[5], ARGV[6] .. ':' .. ARGV[7], ARGV[6] + 0, ARGV[7] + 0
local why, mk = fenced(redis.call('HGET', JB, 'm:' .. fid), ARGV[8])
if why then return {'LEASE', why} end
local att_s = S(mk.att + 1)
finish_running(JB, job, ms, shard, mk, 'failed',
               'superseded by attempt ' .. att_s .. ' without a report')
local tok_s, lease_s = open_attempt(JB, job, fid, ms, shard, mk.sc, att_s, ARGV[10], ARGV[9], '')
return {'OK', att_s, tok_s, lease_s}
)lua";

// report_one(A, i): A[i..i+7] = job, group (KeyGroup), fire "<ms>:<shard>", token, the
// attempt's listing member (Member()), final (1/0), failure effect (reset/inc/none), the record
// as the client encoded it (record_of). -> "OK" (a string) | LEASE reason
constexpr const char* kReportFn = R"lua(
-- A[i..]: job group fid token member final failure_effect record
local function report_one(A, i)
  local job, fid = A[i], A[i + 2]
  local jb, mf = jb_in(A[i + 1], job), 'm:' .. fid
  local s = redis.call('HMGET', jb, mf, 'live', 'fails')
  local why, closed = fence(s[1], A[i + 3])
  if why then return {'LEASE', why} end
  -- The attempt's record replaces whatever it had (its live output). Its listing entries stay
  -- while the fire is open, so it needs none.
  local rf = 'r:' .. A[i + 4]
  if A[i + 5] ~= '1' then
    redis.call('HSET', jb, rf, A[i + 7])
    return 'OK'
  end
  local live = live_without(s[2] or '', fid)
  -- fails is mostly 0 (or unset: read as 0), and a write costs the server more than the read.
  if A[i + 6] == 'inc' then
    redis.call('HSET', jb, rf, A[i + 7], mf, closed, 'live', live, 'fails',
               S((tonumber(s[3]) or 0) + 1))
  elseif A[i + 6] == 'reset' and s[3] and s[3] ~= '0' then
    redis.call('HSET', jb, rf, A[i + 7], mf, closed, 'live', live, 'fails', '0')
  else
    redis.call('HSET', jb, rf, A[i + 7], mf, closed, 'live', live)
  end
  g_lease(job, fid, false)
  return 'OK'
end
)lua";

// KEYS[1] unused. ARGV[5]: limit; ARGV[6..]: key groups (under a Cluster: the groups of the
// primary it runs on), else the lease index GB:leases.
// -> OK, then per fire: job ms shard shard_count attempt token node lease; the `limit` oldest
// (lease end, then member "<job> <ms>:<shard>") of the oldest `limit` of each index.
constexpr const char* kListExpiredBody = R"lua(
-- ARGV[5..]: limit groups...
local limit = ARGV[5] + 0
local found = {}
local function scan(base)
  local rows = redis.call('ZRANGEBYSCORE', base .. ':leases', '-inf', NOW_S, 'LIMIT', '0', ARGV[5])
  for _, m in ipairs(rows) do
    local job, ms_s, shard_s = string.match(m, '^(%S+) (-?%d+):(%d+)$')
    local fid = ms_s .. ':' .. shard_s
    local mk = parse_marker(redis.call('HGET', jb_of(job), 'm:' .. fid))
    if mk and mk.open == '1' then
      found[#found + 1] = {mk.lease + 0, m,
                           {job, ms_s, shard_s, mk.sc, mk.att, mk.tok, mk.node, mk.lease}}
    else
      g_lease(job, fid, false)
    end
  end
end
if #ARGV < 6 then
  scan(GB)
else
  for i = 6, #ARGV do scan(NB .. ':{g' .. ARGV[i] .. '}') end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
end
local out = {'OK'}
for i = 1, math.min(#found, limit) do
  for _, v in ipairs(found[i][3]) do out[#out + 1] = v end
end
return out
)lua";

// KEYS[1] unused. ARGV[5]: before (ms); ARGV[6..]: key groups. -> per group, the members of its
// runs_new that came before `before` (at most 1,024): what a copy into the all-jobs listing
// missed (RedisStore::CopyNewRuns), for ListExpired's sweep. Cluster only.
constexpr const char* kSweepNewRunsBody = R"lua(
-- ARGV[5..]: before groups...
local out = {}
for i = 6, #ARGV do
  out[#out + 1] = redis.call('ZRANGEBYSCORE', NB .. ':{g' .. ARGV[i] .. '}:runs_new', '-inf',
                             '(' .. ARGV[5], 'LIMIT', '0', '1024')
end
return out
)lua";

// ARGV[5..]: job, ms, shard, token, policy (fail/rerun), node, ttl_ms.
// -> OK [attempt token lease] | NOTFOUND | PRECOND
constexpr const char* kResolveLostBody = R"lua(
-- ARGV[5..]: job ms shard token policy node ttl_ms
local job, fid, ms, shard = ARGV[5], ARGV[6] .. ':' .. ARGV[7], ARGV[6] + 0, ARGV[7] + 0
local s = redis.call('HMGET', JB, 'm:' .. fid, 'live', 'fails')
local mk = parse_marker(s[1])
if not mk then return {'NOTFOUND'} end
if mk.open ~= '1' or mk.tok ~= ARGV[8] or mk.lease + 0 > NOW then return {'PRECOND'} end
finish_running(JB, job, ms, shard, mk, 'lost', 'lease expired; holder ' .. mk.node .. ' vanished')
if ARGV[9] == 'fail' then
  redis.call('HSET', JB, 'm:' .. fid, marker_with(mk, '0', mk.lease), 'live',
             live_without(s[2] or '', fid), 'fails', S((tonumber(s[3]) or 0) + 1))
  g_lease(job, fid, false)
  return {'OK'}
end
local att_s = S(mk.att + 1)
local tok_s, lease_s = open_attempt(JB, job, fid, ms, shard, mk.sc, att_s, ARGV[10], ARGV[11], '')
return {'OK', att_s, tok_s, lease_s}
)lua";

// ARGV[5..]: job, ms, shard, shard_count, node, reason. -> OK | EXISTS
constexpr const char* kRecordSkippedBody = R"lua(
-- ARGV[5..]: job ms shard shard_count node reason
local s = redis.call('HMGET', JB, 'm:' .. ARGV[6] .. ':' .. ARGV[7], 'hn', 'last', 'trim_at')
if s[1] then return {'EXISTS'} end
record_skipped(JB, member(ARGV[5], ARGV[6] + 0, ARGV[7] + 0, 1), ARGV[6], ARGV[7], ARGV[8],
               ARGV[9], ARGV[10], tonumber(s[2]) or 0, s[3], s[4])
return {'OK'}
)lua";

// The job is KEYS[1]'s. -> OK | LEASE reason
constexpr const char* kSaveCheckpointBody = R"lua(
-- ARGV[5..]: ms shard token value
local fid = ARGV[5] .. ':' .. ARGV[6]
local why = fenced(redis.call('HGET', JB, 'm:' .. fid), ARGV[7])
if why then return {'LEASE', why} end
redis.call('HSET', JB, 'cp:' .. fid, ARGV[8])
return {'OK'}
)lua";

// The job is KEYS[1]'s. -> OK | LEASE reason. The running attempt's record while it runs: one
// that reported already (a retry is to follow) keeps its record.
constexpr const char* kSaveLiveOutputBody = R"lua(
-- ARGV[5..]: job ms shard token value
local fid = ARGV[6] .. ':' .. ARGV[7]
local why, mk = fenced(redis.call('HGET', JB, 'm:' .. fid), ARGV[8])
if why then return {'LEASE', why} end
local m = member(ARGV[5], ARGV[6] + 0, ARGV[7] + 0, mk.att + 0)
local cur = redis.call('HGET', JB, 'r:' .. m)
if not cur or string.sub(cur, 1, 8) == 'running\n' then
  redis.call('HSET', JB, 'r:' .. m, running_record(mk, ARGV[9]))
end
return {'OK'}
)lua";

// ARGV[5..]: paused (1/0), reason. -> OK
constexpr const char* kSetPausedBody = R"lua(
-- ARGV[5..]: paused reason
local reason = ARGV[6]
if ARGV[5] ~= '1' then reason = '' end
redis.call('HSET', JB, 'paused', ARGV[5], 'reason', reason)
bump_jobs_version()
return {'OK'}
)lua";

// ARGV[5..]: job, ms, shard, reason. -> OK | NOTFOUND | PRECOND (the fire ended). The record
// change is coord::CancelRecord's: a running attempt ends cancelled; one that already ended (the
// fire waits for its retry) keeps its outcome and its error says the retry was cancelled.
constexpr const char* kCancelFireBody = R"lua(
-- ARGV[5..]: job ms shard reason
local job, fid, ms, shard = ARGV[5], ARGV[6] .. ':' .. ARGV[7], ARGV[6] + 0, ARGV[7] + 0
local s = redis.call('HMGET', JB, 'm:' .. fid, 'live')
local mk = parse_marker(s[1])
if not mk then return {'NOTFOUND'} end
if mk.open ~= '1' then return {'PRECOND'} end
local m = member(job, ms, shard, mk.att + 0)
local cur = redis.call('HGET', JB, 'r:' .. m)
if not cur or string.sub(cur, 1, 8) == 'running\n' then
  finish_running(JB, job, ms, shard, mk, 'cancelled', ARGV[8])
else
  local r = parse_record(cur)
  if r[7] == '' then r[7] = 'retry ' .. ARGV[8] else r[7] = r[7] .. '; retry ' .. ARGV[8] end
  redis.call('HSET', JB, 'r:' .. m, record_of(unpack(r)))
end
redis.call('HSET', JB, 'm:' .. fid, marker_with(mk, '0', mk.lease), 'live',
           live_without(s[2] or '', fid))
g_lease(job, fid, false)
bump_jobs_version()
return {'OK'}
)lua";

// ARGV[5..]: job, ms, shard, ttl ms, node, cause. -> OK attempt token lease | NOTFOUND | PRECOND
// (the fire runs or waits for its retry).
constexpr const char* kRerunFireBody = R"lua(
-- ARGV[5..]: job ms shard ttl_ms node cause
local fid = ARGV[6] .. ':' .. ARGV[7]
local mk = parse_marker(redis.call('HGET', JB, 'm:' .. fid))
if not mk then return {'NOTFOUND'} end
if mk.open == '1' then return {'PRECOND'} end
local att_s = S(mk.att + 1)
local tok_s, lease_s = open_attempt(JB, ARGV[5], fid, ARGV[6] + 0, ARGV[7] + 0, mk.sc, att_s,
                                    ARGV[9], ARGV[8], ARGV[10])
return {'OK', att_s, tok_s, lease_s}
)lua";

// prune_one(A, i): A[i..i+3] = job, group (KeyGroup), keep_last, max_age_ms. -> "OK". The
// records of the job's fires beyond the newest keep_last go (their listing entries and markers
// stay, so such a fire is still refused as claimed; the job's cap drops them later); fires older
// than max_age go whole, entries, records and closed markers, and the job's cutoff becomes
// now - max_age (drop_entries), as on the other backends. A job is pruned every few of its runs
// and swept once an hour, so a prune reads what changed since the last: the newest keep_last
// fires, the entries that crossed that boundary since (J's field pk, the boundary of the last
// prune; all of them the first time, at most the job's cap), and the oldest entries past
// max_age (at most 1,024 a prune).
constexpr const char* kPruneFn = R"lua(
-- A[i..]: job group keep_last max_age_ms
local function prune_one(A, i)
  local jb = jb_in(A[i + 1], A[i])
  local keep, cutoff = A[i + 2] + 0, NOW - A[i + 3]
  local runs = jb .. ':runs'
  -- The first entry beyond the newest keep_last fires (the listing is newest first).
  local boundary, fires, current, start = nil, 0, nil, '-'
  while not boundary do
    local rows = redis.call('ZRANGEBYLEX', runs, start, '+', 'LIMIT', '0', S(keep + 64))
    if #rows == 0 then break end
    for _, m in ipairs(rows) do
      local _, ms, shard = parse_member(m)
      local fid = S(ms) .. ':' .. S(shard)
      if fid ~= current then
        current = fid
        fires = fires + 1
      end
      if fires > keep then
        boundary = m
        break
      end
    end
    start = '(' .. rows[#rows]
  end
  if boundary then
    -- Records from the boundary to the last prune's, but a running attempt's (live output).
    local last = redis.call('HGET', jb, 'pk')
    local stop = '+'
    if last and last > boundary then stop = '(' .. last end
    local beyond = redis.call('ZRANGEBYLEX', runs, '[' .. boundary, stop)
    for from = 1, #beyond, 256 do
      local part = {}
      for k = from, math.min(#beyond, from + 255) do part[#part + 1] = 'r:' .. beyond[k] end
      local got = redis.call('HMGET', jb, unpack(part))
      local gone = {}
      for k, v in ipairs(got) do
        if v and string.sub(v, 1, 8) ~= 'running\n' then gone[#gone + 1] = part[k] end
      end
      if #gone > 0 then redis.call('HDEL', jb, unpack(gone)) end
    end
    redis.call('HSET', jb, 'pk', boundary)
  end
  -- Entries older than max_age: from the old end, at most 1,024 (oldest first).
  local old = redis.call('ZREVRANGEBYLEX', runs, '+',
                         '[' .. format('%016d', 9000000000000000 - cutoff + 1), 'LIMIT', '0',
                         '1024')
  if #old > 0 and drop_entries(jb, old, #old) > 0 then
    local pr = redis.call('HGET', jb, 'pr')
    if not pr or pr + 0 < cutoff then redis.call('HSET', jb, 'pr', S(cutoff)) end
  end
  return 'OK'
end
)lua";

// KEYS[1] = the index (a job's J:runs or the all-jobs listing). ARGV[5..]: start bound
// (ZRANGEBYLEX syntax), outcome ("" = any), scheduled_from ms ("" = none), how many to return.
// -> OK, then per record: member, record (record_of)
constexpr const char* kListRunsBody = R"lua(
-- ARGV[5..]: start outcome from_ms count
local start, outcome, want = ARGV[5], ARGV[6], tonumber(ARGV[8])
local from = nil
if ARGV[7] ~= '' then from = tonumber(ARGV[7]) end
local prefix = outcome .. '\n'
local out = {'OK'}
local n = 0
while n < want do
  local batch = redis.call('ZRANGEBYLEX', JB, start, '+', 'LIMIT', 0, 256)
  if #batch == 0 then break end
  for _, m in ipairs(batch) do
    local _, ms = parse_member(m)
    if from and ms < from then return out end
    local rec = record_at(m)
    if rec and (outcome == '' or string.sub(rec, 1, #prefix) == prefix) then
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
// member, record (record_of)
constexpr const char* kGetRunBody = R"lua(
-- ARGV[5..]: member_prefix
local p = ARGV[5]
local out = {'OK'}
for _, m in ipairs(redis.call('ZRANGEBYLEX', JB .. ':runs', '[' .. p, '(' .. p .. '~')) do
  local rec = record_at(m)
  if rec then
    out[#out + 1] = m
    out[#out + 1] = rec
  end
end
return out
)lua";

// KEYS[1] unused. ARGV[5..]: node, ttl_ms, encoded info. -> OK
constexpr const char* kHeartbeatBody = R"lua(
-- ARGV[5..]: node ttl_ms info
redis.call('HSET', GB .. ':nodes', ARGV[5], NOW_S .. '\n' .. ARGV[7])
redis.call('ZADD', GB .. ':nodes:exp', S(NOW + tonumber(ARGV[6])), ARGV[5])
return {'OK'}
)lua";

// KEYS[1] unused. -> OK, then per live node: node, "<last heartbeat>\n<info>"
constexpr const char* kListNodesBody = R"lua(
-- ARGV[5..]:
local exp = GB .. ':nodes:exp'
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', exp, '-inf', NOW_S)) do
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

// KEYS[1] unused. ARGV[5..]: job, definition, expected version.
// -> OK version | EXISTS | PRECOND current-version-or-""
constexpr const char* kPutJobBody = R"lua(
-- ARGV[5..]: job definition expected_version
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

// KEYS[1] unused. ARGV[5..]: job, expected version (-1 = any).
// -> OK | NOTFOUND | PRECOND current-version
constexpr const char* kDeleteJobBody = R"lua(
-- ARGV[5..]: job expected_version
local cur = redis.call('HGET', GB .. ':jobs', ARGV[5])
if not cur then return {'NOTFOUND'} end
local ver = string.match(cur, '^(%d+)\n')
if ARGV[6] ~= '-1' and ver ~= ARGV[6] then return {'PRECOND', ver} end
redis.call('HDEL', GB .. ':jobs', ARGV[5])
bump_jobs_version()
return {'OK'}
)lua";

// KEYS[1] unused. ARGV[5..]: keep, encoded record (without seq and time), class ("failed"
// for a call not done: B:audit_failed, else B:audit; each capped at its own keep).
// -> OK seq. Members are "<seq>\n<at ms>\n<record>", scored by seq.
constexpr const char* kAppendAuditBody = R"lua(
-- ARGV[5..]: keep record class
local seq = next_counter(GB .. ':meta', 'audit_seq')
local log = GB .. ':audit'
if ARGV[7] == 'failed' then log = GB .. ':audit_failed' end
redis.call('ZADD', log, seq, S(seq) .. '\n' .. NOW_S .. '\n' .. ARGV[6])
redis.call('ZREMRANGEBYRANK', log, 0, -(tonumber(ARGV[5]) + 1))
return {'OK', S(seq)}
)lua";

// KEYS[1] unused. ARGV[5..]: triples job, ms, shard. -> OK, then 1/0 per fire.
constexpr const char* kFiresRecordedBody = R"lua(
-- ARGV[5..]: fires...
local out = {'OK'}
for i = 5, #ARGV, 3 do
  out[#out + 1] = redis.call('HEXISTS', jb_of(ARGV[i]), 'm:' .. ARGV[i + 1] .. ':' .. ARGV[i + 2])
end
return out
)lua";

// KEYS[1] unused. ARGV[5..]: quadruples job, ms, shard, token: claims whose batch fewer
// replicas acknowledged than wait_replicas asks (RedisClaims::SendClaims). Each one still held by
// its token (attempt 1, lease live) is withdrawn whole: its marker, its record and their listing
// entries go, so the fire reads as never claimed and its retry claims it anew. The job's token
// counter and last instant stay (a counter never goes back). -> OK, then OK / LEASE per claim.
constexpr const char* kUnclaimBody = R"lua(
-- ARGV[5..]: fires...
local out = {'OK'}
for i = 5, #ARGV, 4 do
  local job, fid = ARGV[i], ARGV[i + 1] .. ':' .. ARGV[i + 2]
  local jb = jb_of(job)
  local s = redis.call('HMGET', jb, 'm:' .. fid, 'live')
  local why, mk = fenced(s[1], ARGV[i + 3])
  if why or mk.att ~= '1' then
    out[#out + 1] = 'LEASE'
  else
    local m = member(job, ARGV[i + 1] + 0, ARGV[i + 2] + 0, 1)
    local gone = redis.call('ZREM', jb .. ':runs', m)
    g_run(m, false)
    redis.call('HDEL', jb, 'r:' .. m, 'm:' .. fid, 'cp:' .. fid)
    redis.call('HSET', jb, 'live', live_without(s[2] or '', fid))
    if gone == 1 then redis.call('HINCRBY', jb, 'hn', '-1') end
    g_lease(job, fid, false)
    out[#out + 1] = 'OK'
  end
end
return out
)lua";

// -> OK version. The second step of a pause-state change under a Cluster.
constexpr const char* kBumpJobsVersionBody = R"lua(
-- ARGV[5..]:
return {'OK', S(bump_jobs_version())}
)lua";

// The helper definitions of `topology`: ScriptHelpers(), with ClusterHelpers()' in place of
// those of the same name under a Cluster.
std::vector<ScriptHelper> HelpersOf(Topology topology) {
  std::vector<ScriptHelper> helpers(ScriptHelpers().begin(), ScriptHelpers().end());
  if (topology != Topology::kCluster) return helpers;
  for (const ScriptHelper& cluster : ClusterHelpers()) {
    auto it = std::find_if(helpers.begin(), helpers.end(), [&](const ScriptHelper& h) {
      return std::string_view(h.name) == cluster.name;
    });
    GNOMON_CHECK(it != helpers.end());
    it->code = cluster.code;
  }
  return helpers;
}

// Which of `helpers` `body` needs, directly or through another helper.
std::vector<bool> Needed(std::span<const ScriptHelper> helpers, const std::string& body) {
  std::vector<bool> needed(helpers.size());
  std::string scanned = body;
  for (size_t i = helpers.size(); i-- > 0;) {
    if (Uses(scanned, helpers[i].name)) {
      needed[i] = true;
      scanned += helpers[i].code;
    }
  }
  return needed;
}

// A body whose writes to the global indexes wait in GPEND runs as a function, so that they are
// applied when it returns, and also when it fails halfway (then the writes made so far stay, as
// they would if each had been sent at once, and the error is answered after them, its text
// unchanged: redis.call's "ERR ..." or "OOM ...", or the Lua error).
constexpr const char* kDeferredHead = R"lua(
local function script_body()
)lua";
constexpr const char* kDeferredTail = R"lua(
end
local ok, reply = pcall(script_body)
flush_global()
if not ok then return redis.error_reply(tostring(reply)) end
return reply
)lua";

// The definitions `body` needs, then `body` (run as script_body when it defers writes). Under a
// Cluster the source starts with "#!lua": the server then refuses a key outside the slot of the
// script's first key (a script without it may touch any key of its node), or, with
// `cross_slot`, a key of a slot its node does not serve.
std::string WithHelpers(std::string body, Topology topology, bool cross_slot) {
  const std::vector<ScriptHelper> helpers = HelpersOf(topology);
  std::vector<bool> needed = Needed(helpers, body);
  for (size_t i = 0; i < helpers.size(); ++i) {
    if (needed[i] && std::string_view(helpers[i].name) == "GPEND") {
      body = kDeferredHead + body + kDeferredTail;
      needed = Needed(helpers, body);
      break;
    }
  }
  std::string out;
  if (topology == Topology::kCluster) {
    out = cross_slot ? "#!lua flags=allow-cross-slot-keys\n" : "#!lua\n";
  }
  for (size_t i = 0; i < helpers.size(); ++i) {
    if (needed[i]) out += helpers[i].code;
  }
  return out + body;
}

// Each script: its id, the item function placed before its body (or ""), its body; in Id order.
// A batch script has no body of its own: BatchBody calls its item function (`item_call`, whose
// arguments are `item`) once per item.
struct Script {
  Id id;
  const char* item_fn;
  const char* body;
  const char* item_call = nullptr;
  std::span<const std::string_view> item = {};
};
constexpr Script kScripts[] = {
    {kRenew, "", kRenewBody},
    {kNextAttempt, "", kNextAttemptBody},
    {kReportMany, kReportFn, nullptr, "report_one", kReportItem},
    {kListExpired, "", kListExpiredBody},
    {kResolveLost, "", kResolveLostBody},
    {kRecordSkipped, "", kRecordSkippedBody},
    {kSaveCheckpoint, "", kSaveCheckpointBody},
    {kSaveLiveOutput, "", kSaveLiveOutputBody},
    {kSetPaused, "", kSetPausedBody},
    {kPruneMany, kPruneFn, nullptr, "prune_one", kPruneItem},
    {kListRuns, "", kListRunsBody},
    {kGetRun, "", kGetRunBody},
    {kHeartbeat, "", kHeartbeatBody},
    {kListNodes, "", kListNodesBody},
    {kPutJob, "", kPutJobBody},
    {kDeleteJob, "", kDeleteJobBody},
    {kAppendAudit, "", kAppendAuditBody},
    {kFiresRecorded, "", kFiresRecordedBody},
    {kClaimMany, kClaimFn, nullptr, "claim_one", kClaimItem},
    {kGetJobStates, "", kGetJobStatesBody},
    {kCancelFire, "", kCancelFireBody},
    {kRerunFire, "", kRerunFireBody},
    {kUnclaim, "", kUnclaimBody},
    {kBumpJobsVersion, "", kBumpJobsVersionBody},
    {kSweepNewRuns, "", kSweepNewRunsBody},
};
static_assert(std::size(kScripts) == kCount);

// Each script's own arguments (see redis_scripts.h); in Id order.
constexpr std::string_view kRenewArgs[] = {"job", "ms", "shard", "token", "ttl_ms"};
constexpr std::string_view kNextAttemptArgs[] = {"job", "ms", "shard", "token", "ttl_ms", "node"};
constexpr std::string_view kReportManyArgs[] = {"n", "reports..."};
constexpr std::string_view kListExpiredArgs[] = {"limit", "groups..."};
constexpr std::string_view kResolveLostArgs[] = {"job",    "ms",   "shard", "token",
                                                 "policy", "node", "ttl_ms"};
constexpr std::string_view kRecordSkippedArgs[] = {"job",         "ms",   "shard",
                                                   "shard_count", "node", "reason"};
constexpr std::string_view kSaveCheckpointArgs[] = {"ms", "shard", "token", "value"};
constexpr std::string_view kSaveLiveOutputArgs[] = {"job", "ms", "shard", "token", "value"};
constexpr std::string_view kSetPausedArgs[] = {"paused", "reason"};
constexpr std::string_view kPruneManyArgs[] = {"n", "prunes..."};
constexpr std::string_view kListRunsArgs[] = {"start", "outcome", "from_ms", "count"};
constexpr std::string_view kGetRunArgs[] = {"member_prefix"};
constexpr std::string_view kHeartbeatArgs[] = {"node", "ttl_ms", "info"};
constexpr std::span<const std::string_view> kListNodesArgs;
constexpr std::string_view kPutJobArgs[] = {"job", "definition", "expected_version"};
constexpr std::string_view kDeleteJobArgs[] = {"job", "expected_version"};
constexpr std::string_view kAppendAuditArgs[] = {"keep", "record", "class"};
constexpr std::string_view kFiresRecordedArgs[] = {"fires..."};
constexpr std::string_view kClaimManyArgs[] = {"n", "claims..."};
constexpr std::string_view kGetJobStatesArgs[] = {"jobs..."};
constexpr std::string_view kCancelFireArgs[] = {"job", "ms", "shard", "reason"};
constexpr std::string_view kRerunFireArgs[] = {"job", "ms", "shard", "ttl_ms", "node", "cause"};
constexpr std::string_view kUnclaimArgs[] = {"fires..."};
constexpr std::span<const std::string_view> kBumpJobsVersionArgs;
constexpr std::string_view kSweepNewRunsArgs[] = {"before", "groups..."};
constexpr std::span<const std::string_view> kArgNames[] = {
    kRenewArgs,        kNextAttemptArgs,   kReportManyArgs,     kListExpiredArgs,
    kResolveLostArgs,  kRecordSkippedArgs, kSaveCheckpointArgs, kSaveLiveOutputArgs,
    kSetPausedArgs,    kPruneManyArgs,     kListRunsArgs,       kGetRunArgs,
    kHeartbeatArgs,    kListNodesArgs,     kPutJobArgs,         kDeleteJobArgs,
    kAppendAuditArgs,  kFiresRecordedArgs, kClaimManyArgs,      kGetJobStatesArgs,
    kCancelFireArgs,   kRerunFireArgs,     kUnclaimArgs,        kBumpJobsVersionArgs,
    kSweepNewRunsArgs,
};
static_assert(std::size(kArgNames) == kCount);

}  // namespace

namespace {

// A batch script's body: ARGV[5] = n, then n items of script.item's layout (job and key group
// first); every item's group is checked (check_local) before any is answered, then each by
// script.item_call. -> one reply per item, in order.
std::string BatchBody(const Script& script) {
  GNOMON_CHECK(script.item.size() >= 2 && script.item[0] == "job" && script.item[1] == "group");
  const std::span<const std::string_view> args = ArgNames(script.id);  // n, "<items>..."
  GNOMON_CHECK(args.size() == 2 && args[0] == "n");
  const std::string w = std::to_string(script.item.size());
  const std::string item = "ARGV, 6 + k * " + w;  // item k's first argument: A, i
  std::string out = "\n-- ARGV[5..]: n " + std::string(args[1]) + "\nlocal out = {}\n";
  out += "for k = 0, ARGV[5] - 1 do check_local(ARGV[7 + k * " + w + "], ARGV[6 + k * " + w;
  out += "]) end\nfor k = 0, ARGV[5] - 1 do out[k + 1] = " + std::string(script.item_call);
  out += "(" + item + ") end\nreturn out\n";
  return out;
}

}  // namespace

std::string Source(Id id, Topology topology) {
  GNOMON_CHECK(id >= 0 && id < kCount && kScripts[id].id == id);
  const Script& script = kScripts[id];
  const std::string body = script.body != nullptr ? script.body : BatchBody(script);
  return WithHelpers(script.item_fn + body, topology, CrossSlot(id));
}

std::string SourceOf(std::string body) {
  return WithHelpers(std::move(body), Topology::kSingle, false);
}

bool CrossSlot(Id id) {
  return id == kClaimMany || id == kReportMany || id == kPruneMany || id == kGetJobStates ||
         id == kFiresRecorded || id == kUnclaim || id == kListExpired || id == kSweepNewRuns;
}

bool ListsRecords(Id id) {
  return id == kClaimMany || id == kNextAttempt || id == kResolveLost || id == kRecordSkipped ||
         id == kRerunFire;
}

std::span<const std::string_view> ArgNames(Id id) {
  GNOMON_CHECK(id >= 0 && id < kCount);
  return kArgNames[id];
}

ArgList& ArgList::Add(std::string_view name, std::string value) {
  GNOMON_CHECK(next_ < names_.size() && names_[next_] == name);
  if (!name.ends_with("...")) ++next_;
  args_.push_back(std::move(value));
  return *this;
}

std::vector<std::string> ArgList::Take() {
  GNOMON_CHECK(next_ == names_.size() || names_[next_].ends_with("..."));
  return std::move(args_);
}

}  // namespace gnomon::coord::redis_scripts
