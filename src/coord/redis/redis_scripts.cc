#include "src/coord/redis/redis_scripts.h"

#include <string>
#include <string_view>

#include "gnomon/status.h"

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
// them from kHelpers), and the hot paths (a claim, a report) read and write each key once,
// write only what changes, build key names from the job's base once, and pass the instant,
// shard and shard count on as the caller's text (the client formats them canonically, so they
// equal S() of their value) instead of reformatting them.
//
// Numbers are formatted with %d: Lua's tostring() would print a token (about 1.8e15) in exponent
// notation. Instants stay within +-1e15 ms (checked by the caller), so the listing member's
// inverted instant always has 16 digits.
//
// Key names (B = KEYS[2], the global base; jb = a job's base "B:{job}", KEYS[1] in the scripts of
// one job): jb:state, jb:fire:<fid>, jb:live, jb:runs, jb:run:<fid>:<attempt>, where the fid is
// "<ms>:<shard>"; see gnomon/redis_coordinator.h.

// The shared definitions, each `local <name>` or `local function <name>(`, in dependency order
// (one uses only those above it). WithHelpers includes one when the script's body, or a
// definition it includes, names it.
struct Helper {
  const char* name;
  const char* code;
};
constexpr Helper kHelpers[] = {
    {"GB", R"lua(
local GB = KEYS[2]
)lua"},
    {"JB", R"lua(
local JB = KEYS[1]
)lua"},
    {"format", R"lua(
local format = string.format
)lua"},
    {"S", R"lua(
local function S(n) return format('%d', n) end
)lua"},
    {"server_ms", R"lua(
-- The server's clock in ms, read (TIME) at most once per script.
local server_ms_read
local function server_ms()
  if not server_ms_read then
    local t = redis.call('TIME')
    local usec = t[2] + 0
    server_ms_read = t[1] * 1000 + (usec - usec % 1000) / 1000
  end
  return server_ms_read
end
)lua"},
    {"NOW", R"lua(
-- "Now" in ms: ARGV[1] (the test seam), else the server's clock.
local NOW
if ARGV[1] ~= '' then NOW = ARGV[1] + 0 else NOW = server_ms() end
)lua"},
    {"NOW_S", R"lua(
local NOW_S = S(NOW)
)lua"},
    {"counter_after", R"lua(
-- The value after `prev` (text or false) of a counter that never goes backwards, also after a
-- restart that lost its last value: max(prev + 1, server clock in microseconds). The clock is
-- the script's one TIME read, in ms times 1000: a value handed out while the server's clock
-- read M ms is below (M + 1) * 1000 unless one counter advanced 1,000 times within that
-- millisecond, which cannot happen (each advance is a claim or a definition change, several µs
-- of server CPU each, and a batch holds at most 128 claims), so after a restart (its clock at
-- least a millisecond later) the first value is larger than any issued before it.
local function counter_after(prev)
  local v = (prev or 0) + 1
  local floor = server_ms() * 1000
  if floor > v then v = floor end
  return v
end
)lua"},
    {"next_counter", R"lua(
local function next_counter(key, field)
  local v = counter_after(redis.call('HGET', key, field))
  redis.call('HSET', key, field, S(v))
  return v
end
)lua"},
    {"bump_jobs_version", R"lua(
-- Every definition or pause-state change: a new jobs version, announced on the events channel
-- (nodes waiting in WaitJobsChange wake at once; a missed message is healed by their resync).
local function bump_jobs_version()
  local v = next_counter(GB .. ':meta', 'jobs_version')
  redis.call('PUBLISH', GB .. ':events', S(v))
  return v
end
)lua"},
    {"jb_of", R"lua(
local function jb_of(job) return GB .. ':{' .. job .. '}' end
)lua"},
    {"member", R"lua(
local function member(job, ms, shard, att)
  return format('%016d %s %010d %010d', 9000000000000000 - ms, job, shard, 2147483647 - att)
end
)lua"},
    {"parse_member", R"lua(
local function parse_member(m)
  local inv, job, shard, iatt = string.match(m, '^(%d+) (%S+) (%d+) (%d+)$')
  return job, 9000000000000000 - inv, shard + 0, 2147483647 - iatt
end
)lua"},
    {"rec_key_of", R"lua(
local function rec_key_of(m)
  local job, ms, shard, att = parse_member(m)
  return jb_of(job) .. ':run:' .. S(ms) .. ':' .. S(shard) .. ':' .. S(att)
end
)lua"},
    {"drop_records", R"lua(
-- Deletes the records of the listing members `ms` and their index entries, 256 per command.
local function drop_records(ms)
  for from = 1, #ms, 256 do
    local to = math.min(#ms, from + 255)
    local keys, by_job = {}, {}
    for i = from, to do
      local m = ms[i]
      local job = string.match(m, '^%d+ (%S+) ')
      keys[#keys + 1] = rec_key_of(m)
      local l = by_job[job]
      if not l then
        l = {}
        by_job[job] = l
      end
      l[#l + 1] = m
    end
    redis.call('DEL', unpack(keys))
    redis.call('ZREM', GB .. ':runs', unpack(ms, from, to))
    for job, l in pairs(by_job) do redis.call('ZREM', jb_of(job) .. ':runs', unpack(l)) end
  end
end
)lua"},
    {"trim", R"lua(
-- Bounds an index (a job's or the global listing) to `cap` finished records plus a slack:
-- nothing happens until the excess reaches the slack (cap / 16, 1 to 64), and then the oldest
-- finished records beyond the cap go in one batch of at most 4 slacks, so one fetch and a few
-- deletions serve `slack` writes and, in steady state, an index holds at most cap + slack - 1
-- records besides running ones. One call looks at no more than 4 slacks + 64 records.
-- A job's index keeps its running records (up to 64 of them among the oldest are looked past):
-- when more hold the trim back, the state's trim_at (now + 1 s) says to look again only a second
-- later (runs end with time), so the writes meanwhile pay one HGET, not a scan of the excess each.
-- The global index (no `hint`) never waits for running records: a running one among its oldest
-- leaves the global listing only (it stays listed under its job, which trims it once finished).
-- Late claims of old instants (a misfire catch-up) list at the old end of the indexes; a trim that
-- scanned past all of them at every write made a backlog slow every claim down.
local function trim(zkey, cap, hint)
  local global = not hint
  local n = redis.call('ZCARD', zkey)
  local excess = n - cap
  local slack = (cap - cap % 16) / 16
  if slack > 64 then slack = 64 elseif slack < 1 then slack = 1 end
  if excess < slack then return end
  local wait = nil
  if not global then
    wait = redis.call('HGET', hint, 'trim_at')
    if wait and NOW < wait + 0 then return end
  end
  local want = excess
  if want > 4 * slack then want = 4 * slack end
  local victims, unlisted = {}, {}
  local look = want + 64
  if global then look = want end
  for _, m in ipairs(redis.call('ZREVRANGEBYLEX', zkey, '+', '-', 'LIMIT', '0', S(look))) do
    if #victims >= want then break end
    if redis.call('HGET', rec_key_of(m), 'out') ~= 'running' then
      victims[#victims + 1] = m
    elseif global then
      unlisted[#unlisted + 1] = m
    end
  end
  drop_records(victims)
  if #unlisted > 0 then redis.call('ZREM', zkey, unpack(unlisted)) end
  if global then return end
  if #victims < want then
    redis.call('HSET', hint, 'trim_at', S(NOW + 1000))
  elseif wait then
    redis.call('HDEL', hint, 'trim_at')
  end
end
)lua"},
    {"index_record", R"lua(
-- Lists a new record in its job's index (jb:runs) and the global one, and trims both.
local function index_record(jb, job, ms, shard, att)
  local m = member(job, ms, shard, att)
  redis.call('ZADD', jb .. ':runs', '0', m)
  redis.call('ZADD', GB .. ':runs', '0', m)
  trim(jb .. ':runs', ARGV[2] + 0, jb .. ':state')
  trim(GB .. ':runs', ARGV[3] + 0, nil)
end
)lua"},
    {"new_record", R"lua(
-- Writes the record of a new attempt (or of a skipped fire); `...` are its field/value pairs.
-- Fields a running record does not have yet (err, output, skip, exit) are left out; readers
-- take a missing one as empty. HSET answers how many fields it added: all of them when the
-- record is new (then it is indexed); fewer when a record of an earlier claim of the fire is
-- still there (kept longer than its fire marker), which is replaced whole (it is indexed
-- already).
local function new_record(jb, job, fid, ms, shard, att, att_s, ...)
  local rk = jb .. ':run:' .. fid .. ':' .. att_s
  if redis.call('HSET', rk, ...) * 2 == select('#', ...) then
    index_record(jb, job, ms, shard, att)
  else
    redis.call('DEL', rk)
    redis.call('HSET', rk, ...)
  end
end
)lua"},
    {"advance_last", R"lua(
local function advance_last(jb, ms, ms_s)
  local cur = redis.call('HGET', jb .. ':state', 'last')
  if not cur or cur + 0 < ms then redis.call('HSET', jb .. ':state', 'last', ms_s) end
end
)lua"},
    {"finish_running", R"lua(
local function finish_running(jb, fid, att_s, outcome, err)
  local rk = jb .. ':run:' .. fid .. ':' .. att_s
  if redis.call('HGET', rk, 'out') == 'running' then
    redis.call('HSET', rk, 'out', outcome, 'fin', NOW_S, 'err', err)
  end
end
)lua"},
    {"close_fire", R"lua(
local function close_fire(jb, job, fid)
  local fk = jb .. ':fire:' .. fid
  redis.call('HSET', fk, 'open', '0')
  redis.call('PEXPIRE', fk, ARGV[4])
  redis.call('ZREM', jb .. ':live', fid)
  redis.call('ZREM', GB .. ':leases', job .. ' ' .. fid)
end
)lua"},
    {"start_attempt", R"lua(
-- Opens attempt `att` of a fire with fencing token `tok` and a lease of `ttl` ms: on a new
-- marker (a claim) or an open one (a retry, a rerun); neither has a TTL (PEXPIRE comes only
-- when a marker closes), so there is none to remove. -> token and lease end as text.
local function start_attempt(jb, job, fid, ms, shard, sc_s, att, att_s, node, ttl, tok)
  local tok_s, lease_s = S(tok), S(NOW + ttl)
  redis.call('HSET', jb .. ':fire:' .. fid, 'att', att_s, 'tok', tok_s, 'node', node, 'lease',
             lease_s, 'open', '1', 'sc', sc_s)
  redis.call('ZADD', jb .. ':live', lease_s, fid)
  redis.call('ZADD', GB .. ':leases', lease_s, job .. ' ' .. fid)
  new_record(jb, job, fid, ms, shard, att, att_s, 'sc', sc_s, 'tok', tok_s, 'node', node, 'st',
             NOW_S, 'fin', '0', 'out', 'running')
  return tok_s, lease_s
end
)lua"},
    {"record_skipped", R"lua(
local function record_skipped(jb, job, ms_s, shard_s, sc_s, node, reason)
  local fid = ms_s .. ':' .. shard_s
  local fk = jb .. ':fire:' .. fid
  redis.call('HSET', fk, 'att', '1', 'tok', '0', 'node', node, 'lease', NOW_S, 'open', '0',
             'sc', sc_s)
  redis.call('PEXPIRE', fk, ARGV[4])
  local ms = ms_s + 0
  new_record(jb, job, fid, ms, shard_s + 0, 1, '1', 'sc', sc_s, 'tok', '0', 'node', node, 'st',
             NOW_S, 'fin', NOW_S, 'out', 'skipped', 'skip', reason)
  advance_last(jb, ms, ms_s)
end
)lua"},
    {"fenced", R"lua(
-- nil and the marker's fields tok open lease ... (the extra ones asked for) when `tok` holds
-- the live lease of the fire whose marker is `fk`, else the reason it does not.
local function fenced(fk, tok, ...)
  local f = redis.call('HMGET', fk, 'tok', 'open', 'lease', ...)
  if not f[1] then return 'the fire has no claim' end
  if f[1] ~= tok then return 'fenced off by token ' .. f[1] end
  if f[2] ~= '1' then return 'the lease was released or revoked' end
  if f[3] + 0 <= NOW then return 'the lease expired' end
  return nil, f
end
)lua"},
};

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

// claim_one(A, i): A[i..i+10] = job, ms, shard, shard_count, node, ttl_ms, skew_ms, overlap,
// run_id, deadline, cause ('' = by schedule).
// -> CLAIMED now token lease replaced("<ms>:<shard>:<shard_count>")... | ALREADY/EARLY/... now
constexpr const char* kClaimFn = R"lua(
local function claim_one(A, i)
  local job, ms_s, shard_s, sc_s, node = A[i], A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  -- A claim executed after its client gave up (it waited in a buffer) is not applied.
  if A[i + 9] ~= '' and NOW > A[i + 9] + 0 then return {'LATE', NOW_S} end
  local jb, fid = jb_of(job), ms_s .. ':' .. shard_s
  if redis.call('EXISTS', jb .. ':fire:' .. fid) == 1 then return {'ALREADY', NOW_S} end
  local ms = ms_s + 0
  if ms > NOW + A[i + 6] then return {'EARLY', NOW_S} end
  -- The job's state, read once: paused, the token counter, the last claimed instant.
  local st = redis.call('HMGET', jb .. ':state', 'paused', 'token', 'last')
  if st[1] == '1' then
    record_skipped(jb, job, ms_s, shard_s, sc_s, node, 'paused')
    return {'PAUSED', NOW_S}
  end
  local out = {'CLAIMED', NOW_S, '', ''}
  -- The job's open fires matter only to the overlap policies that look at them. Under allow
  -- the set is not pruned here; it holds only open fires (each leaves at its close, and a lost
  -- one at its resolution), so it stays as small as the job's open fires.
  local overlap = A[i + 7]
  if overlap ~= 'allow' then
    redis.call('ZREMRANGEBYSCORE', jb .. ':live', '-inf', NOW_S)
    for _, ofid in ipairs(redis.call('ZRANGE', jb .. ':live', '0', '-1')) do
      if string.match(ofid, '^(-?%d+):') ~= ms_s then
        if overlap == 'forbid' then
          record_skipped(jb, job, ms_s, shard_s, sc_s, node, 'overlap')
          return {'OVERLAP', NOW_S}
        end
        local of = redis.call('HMGET', jb .. ':fire:' .. ofid, 'att', 'sc')
        finish_running(jb, ofid, of[1], 'cancelled', 'replaced by ' .. A[i + 8])
        close_fire(jb, job, ofid)
        out[#out + 1] = ofid .. ':' .. of[2]
      end
    end
  end
  local tok_s, lease_s = start_attempt(jb, job, fid, ms, shard_s + 0, sc_s, 1, '1', node,
                                       A[i + 5], counter_after(st[2]))
  if A[i + 10] ~= '' then redis.call('HSET', jb .. ':run:' .. fid .. ':1', 'cause', A[i + 10]) end
  if not st[3] or st[3] + 0 < ms then
    redis.call('HSET', jb .. ':state', 'token', tok_s, 'last', ms_s)
  else
    redis.call('HSET', jb .. ':state', 'token', tok_s)
  end
  out[3] = tok_s
  out[4] = lease_s
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

// ARGV[5]: n; ARGV[6..]: n claims of 11 arguments each (claim_one). -> one reply per claim.
constexpr const char* kClaimManyBody = R"lua(
local out = {}
for k = 0, ARGV[5] - 1 do out[k + 1] = claim_one(ARGV, 6 + k * 11) end
return out
)lua";

// ARGV[5..]: job, ms, shard, token, ttl_ms. -> OK lease | LEASE reason
constexpr const char* kRenewBody = R"lua(
local fid = ARGV[6] .. ':' .. ARGV[7]
local fk = JB .. ':fire:' .. fid
local why = fenced(fk, ARGV[8])
if why then return {'LEASE', why} end
local lease_s = S(NOW + ARGV[9])
redis.call('HSET', fk, 'lease', lease_s)
redis.call('ZADD', JB .. ':live', lease_s, fid)
redis.call('ZADD', GB .. ':leases', lease_s, ARGV[5] .. ' ' .. fid)
return {'OK', lease_s}
)lua";

// ARGV[5..]: job, ms, shard, token, ttl_ms, node. -> OK attempt token lease | LEASE reason
constexpr const char* kNextAttemptBody = R"lua(
local fid = ARGV[6] .. ':' .. ARGV[7]
local why, f = fenced(JB .. ':fire:' .. fid, ARGV[8], 'att', 'sc')
if why then return {'LEASE', why} end
local att = f[4] + 1
local att_s = S(att)
finish_running(JB, fid, f[4], 'failed', 'superseded by attempt ' .. att_s .. ' without a report')
local tok_s, lease_s = start_attempt(JB, ARGV[5], fid, ARGV[6] + 0, ARGV[7] + 0, f[5], att,
                                     att_s, ARGV[10], ARGV[9],
                                     next_counter(JB .. ':state', 'token'))
return {'OK', att_s, tok_s, lease_s}
)lua";

// report_one(A, i, last): A[i..i+6] = job, ms, shard, token, attempt, final (1/0), failure
// effect (reset/inc/none); A[i+7..last] the record's field/value pairs: all of sc tok node st fin
// out err output skip, and exit last when known. -> OK | LEASE reason
constexpr const char* kReportFn = R"lua(
local function report_one(A, i, last)
  local job, ms_s, shard_s = A[i], A[i + 1], A[i + 2]
  local jb, fid = jb_of(job), ms_s .. ':' .. shard_s
  local why = fenced(jb .. ':fire:' .. fid, A[i + 3])
  if why then return {'LEASE', why} end
  -- The attempt's record, written when it started, is updated in place (HSET answers the number
  -- of fields it added: all of them only when the record is gone, e.g. trimmed after a non-final
  -- report, and then it is listed again). Every field but exit is overwritten.
  local rk = jb .. ':run:' .. fid .. ':' .. A[i + 4]
  if redis.call('HSET', rk, unpack(A, i + 7, last)) * 2 == last - i - 6 then
    index_record(jb, job, ms_s + 0, shard_s + 0, A[i + 4] + 0)
  elseif A[last - 1] ~= 'exit' then
    redis.call('HDEL', rk, 'exit')
  end
  if A[i + 5] == '1' then
    close_fire(jb, job, fid)
    if A[i + 6] == 'inc' then
      redis.call('HINCRBY', jb .. ':state', 'fails', '1')
    elseif A[i + 6] == 'reset' then
      -- Read first: a write costs the server several times a read, and fails is mostly 0
      -- (readers take a missing field as 0).
      local fails = redis.call('HGET', jb .. ':state', 'fails')
      if fails and fails ~= '0' then redis.call('HSET', jb .. ':state', 'fails', '0') end
    end
  end
  return {'OK'}
end
)lua";

// ARGV[5]: n; then n reports, each its argument count and its arguments (report_one).
// -> one reply per report.
constexpr const char* kReportManyBody = R"lua(
local out = {}
local at = 6
for k = 1, ARGV[5] + 0 do
  local n = ARGV[at] + 0
  out[k] = report_one(ARGV, at + 1, at + n)
  at = at + n + 1
end
return out
)lua";

// KEYS[1] = global base. ARGV[5]: limit.
// -> OK, then per fire: job ms shard shard_count attempt token node lease
constexpr const char* kListExpiredBody = R"lua(
local rows = redis.call('ZRANGEBYSCORE', GB .. ':leases', '-inf', NOW_S, 'LIMIT', '0', ARGV[5])
local out = {'OK'}
for _, m in ipairs(rows) do
  local job, ms_s, shard_s = string.match(m, '^(%S+) (-?%d+):(%d+)$')
  local f = redis.call('HMGET', jb_of(job) .. ':fire:' .. ms_s .. ':' .. shard_s, 'att', 'tok',
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
local fid = ARGV[6] .. ':' .. ARGV[7]
local f = redis.call('HMGET', JB .. ':fire:' .. fid, 'tok', 'open', 'lease', 'att', 'node', 'sc')
if not f[1] then return {'NOTFOUND'} end
if f[2] ~= '1' or f[1] ~= ARGV[8] or f[3] + 0 > NOW then return {'PRECOND'} end
finish_running(JB, fid, f[4], 'lost', 'lease expired; holder ' .. f[5] .. ' vanished')
if ARGV[9] == 'fail' then
  close_fire(JB, ARGV[5], fid)
  redis.call('HINCRBY', JB .. ':state', 'fails', '1')
  return {'OK'}
end
local att = f[4] + 1
local att_s = S(att)
local tok_s, lease_s = start_attempt(JB, ARGV[5], fid, ARGV[6] + 0, ARGV[7] + 0, f[6], att,
                                     att_s, ARGV[10], ARGV[11],
                                     next_counter(JB .. ':state', 'token'))
return {'OK', att_s, tok_s, lease_s}
)lua";

// ARGV[5..]: job, ms, shard, shard_count, node, reason. -> OK | EXISTS
constexpr const char* kRecordSkippedBody = R"lua(
if redis.call('EXISTS', JB .. ':fire:' .. ARGV[6] .. ':' .. ARGV[7]) == 1 then
  return {'EXISTS'}
end
record_skipped(JB, ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
return {'OK'}
)lua";

// ARGV[5..]: job, ms, shard, token, value. -> OK | LEASE reason
constexpr const char* kSaveCheckpointBody = R"lua(
local fk = JB .. ':fire:' .. ARGV[6] .. ':' .. ARGV[7]
local why = fenced(fk, ARGV[8])
if why then return {'LEASE', why} end
redis.call('HSET', fk, 'cp', ARGV[9])
return {'OK'}
)lua";

// ARGV[5..]: job, ms, shard, token, output. -> OK | LEASE reason. Into the attempt's record,
// while it runs.
constexpr const char* kSaveLiveOutputBody = R"lua(
local fk = JB .. ':fire:' .. ARGV[6] .. ':' .. ARGV[7]
local why = fenced(fk, ARGV[8])
if why then return {'LEASE', why} end
local rk = JB .. ':run:' .. ARGV[6] .. ':' .. ARGV[7] .. ':' .. redis.call('HGET', fk, 'att')
if redis.call('HGET', rk, 'out') == 'running' then redis.call('HSET', rk, 'output', ARGV[9]) end
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

// ARGV[5..]: job, ms, shard, reason. -> OK | NOTFOUND | PRECOND (the fire ended). The record
// change is coord::CancelRecord's: a running attempt ends cancelled; one that already ended (the
// fire waits for its retry) keeps its outcome and its error says the retry was cancelled.
constexpr const char* kCancelFireBody = R"lua(
local fid = ARGV[6] .. ':' .. ARGV[7]
local f = redis.call('HMGET', JB .. ':fire:' .. fid, 'att', 'open')
if not f[1] then return {'NOTFOUND'} end
if f[2] ~= '1' then return {'PRECOND'} end
local rk = JB .. ':run:' .. fid .. ':' .. f[1]
local r = redis.call('HMGET', rk, 'out', 'err')
if r[1] == 'running' then
  redis.call('HSET', rk, 'out', 'cancelled', 'fin', NOW_S, 'err', ARGV[8])
elseif r[1] then
  local err = r[2] or ''
  if err == '' then err = 'retry ' .. ARGV[8] else err = err .. '; retry ' .. ARGV[8] end
  redis.call('HSET', rk, 'err', err)
end
close_fire(JB, ARGV[5], fid)
bump_jobs_version()
return {'OK'}
)lua";

// ARGV[5..]: job, ms, shard, ttl ms, node, cause. -> OK attempt token lease | NOTFOUND | PRECOND
// (the fire runs or waits for its retry). A closed marker has a TTL (close_fire): it goes.
constexpr const char* kRerunFireBody = R"lua(
local fid = ARGV[6] .. ':' .. ARGV[7]
local fk = JB .. ':fire:' .. fid
local f = redis.call('HMGET', fk, 'att', 'open', 'sc')
if not f[1] then return {'NOTFOUND'} end
if f[2] == '1' then return {'PRECOND'} end
redis.call('PERSIST', fk)
local att = f[1] + 1
local att_s = S(att)
local tok_s, lease_s = start_attempt(JB, ARGV[5], fid, ARGV[6] + 0, ARGV[7] + 0, f[3], att,
                                     att_s, ARGV[9], ARGV[8],
                                     next_counter(JB .. ':state', 'token'))
if ARGV[10] ~= '' then
  redis.call('HSET', JB .. ':run:' .. fid .. ':' .. att_s, 'cause', ARGV[10])
end
return {'OK', att_s, tok_s, lease_s}
)lua";

// ARGV[5..]: keep_last, max_age_ms. -> OK
constexpr const char* kPruneBody = R"lua(
local keep, cutoff = ARGV[5] + 0, NOW - ARGV[6]
local fires, current = 0, nil
local victims = {}
for _, m in ipairs(redis.call('ZRANGE', JB .. ':runs', '0', '-1')) do
  local _, ms, shard = parse_member(m)
  local fid = S(ms) .. ':' .. S(shard)
  if fid ~= current then
    current = fid
    fires = fires + 1
  end
  if (fires > keep or ms < cutoff) and redis.call('HGET', rec_key_of(m), 'out') ~= 'running' then
    victims[#victims + 1] = m
  end
end
drop_records(victims)
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
    local _, ms = parse_member(m)
    if from and ms < from then return out end
    local rec = redis.call('HGETALL', rec_key_of(m))
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
  local rec = redis.call('HGETALL', rec_key_of(m))
  if #rec > 0 then
    out[#out + 1] = m
    out[#out + 1] = rec
  end
end
return out
)lua";

// KEYS[1] = global base. ARGV[5..]: node, ttl_ms, encoded info. -> OK
constexpr const char* kHeartbeatBody = R"lua(
redis.call('HSET', GB .. ':nodes', ARGV[5], NOW_S .. '\n' .. ARGV[7])
redis.call('ZADD', GB .. ':nodes:exp', S(NOW + tonumber(ARGV[6])), ARGV[5])
return {'OK'}
)lua";

// KEYS[1] = global base. -> OK, then per live node: node, "<last heartbeat>\n<info>"
constexpr const char* kListNodesBody = R"lua(
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

// KEYS[1] = global base. ARGV[5..]: keep, encoded record (without seq and time), class ("failed"
// for a call not done: B:audit_failed, else B:audit; each capped at its own keep).
// -> OK seq. Members are "<seq>\n<at ms>\n<record>", scored by seq.
constexpr const char* kAppendAuditBody = R"lua(
local seq = next_counter(GB .. ':meta', 'audit_seq')
local log = GB .. ':audit'
if ARGV[7] == 'failed' then log = GB .. ':audit_failed' end
redis.call('ZADD', log, seq, S(seq) .. '\n' .. NOW_S .. '\n' .. ARGV[6])
redis.call('ZREMRANGEBYRANK', log, 0, -(tonumber(ARGV[5]) + 1))
return {'OK', S(seq)}
)lua";

// KEYS[1] = global base. ARGV[5..]: triples job, ms, shard. -> OK, then 1/0 per fire.
constexpr const char* kFiresRecordedBody = R"lua(
local out = {'OK'}
for i = 5, #ARGV, 3 do
  out[#out + 1] = redis.call('EXISTS', jb_of(ARGV[i]) .. ':fire:' .. ARGV[i + 1] .. ':' .. ARGV[i + 2])
end
return out
)lua";

// The definitions `body` needs (directly or through another helper), then `body`.
std::string WithHelpers(const std::string& body) {
  constexpr size_t kCount = sizeof(kHelpers) / sizeof(kHelpers[0]);
  bool needed[kCount] = {};
  std::string scanned = body;
  for (size_t i = kCount; i-- > 0;) {
    if (Uses(scanned, kHelpers[i].name)) {
      needed[i] = true;
      scanned += kHelpers[i].code;
    }
  }
  std::string out;
  for (size_t i = 0; i < kCount; ++i) {
    if (needed[i]) out += kHelpers[i].code;
  }
  return out + body;
}

}  // namespace

std::string Source(Id id) {
  const char* body = nullptr;
  switch (id) {
    case kClaimMany:
      return WithHelpers(std::string(kClaimFn) + kClaimManyBody);
    case kGetJobStates:
      body = kGetJobStatesBody;
      break;
    case kRenew:
      body = kRenewBody;
      break;
    case kNextAttempt:
      body = kNextAttemptBody;
      break;
    case kReportMany:
      return WithHelpers(std::string(kReportFn) + kReportManyBody);
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
    case kSaveLiveOutput:
      body = kSaveLiveOutputBody;
      break;
    case kSetPaused:
      body = kSetPausedBody;
      break;
    case kPrune:
      body = kPruneBody;
      break;
    case kCancelFire:
      body = kCancelFireBody;
      break;
    case kRerunFire:
      body = kRerunFireBody;
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
  return WithHelpers(body);
}

}  // namespace gnomon::coord::redis_scripts
