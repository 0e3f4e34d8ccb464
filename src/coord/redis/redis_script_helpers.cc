#include "src/coord/redis/redis_script_helpers.h"

namespace gnomon::coord::redis_scripts {
namespace {

// The shared definitions, each `local <name>` or `local function <name>(`, in dependency order
// (one uses only those above it). WithHelpers includes one when the script's body, or a
// definition it includes, names it.
constexpr ScriptHelper kHelpers[] = {
    {"GB", R"lua(
-- The shared keys' base "<prefix>:<ns>:{~shared}".
local GB = KEYS[2]
)lua"},
    {"NB", R"lua(
-- The namespace's base "<prefix>:<ns>" (GB without ":{~shared}").
local NB = string.sub(GB, 1, -11)
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
    {"group_of", R"lua(
-- A job's key group: the low 10 bits of the job id's 64-bit FNV-1a hash, which depend only on
-- the low 10 bits of the offset basis (805) and of the prime (435).
-- Computed once per job and script; about 0.6 µs for a 10-character id.
local GROUP, bxor, byte = {}, bit.bxor, string.byte
local function group_of(job)
  local h = GROUP[job]
  if h then return h end
  h = 805
  for i = 1, #job do h = (bxor(h, byte(job, i)) * 435) % 1024 end
  GROUP[job] = h
  return h
end
)lua"},
    {"GPEND", R"lua(
-- Writes to the two shared indexes (GB:leases, GB:runs) wait here, member -> score (false: to
-- remove), until the script ends (flush_global): a batch of fires then costs one variadic ZADD
-- or ZREM per index, not one command per fire, and the last write of a member wins, as the
-- commands in order would. A script that names GPEND (directly or through a helper) has its
-- body wrapped by WithHelpers so that flush_global runs when it ends, also after an error.
-- Scripts read these indexes only before they write them (ListExpired) or in flush_global.
local GPEND = {leases = {}, runs = {}}
)lua"},
    {"g_lease", R"lua(
-- The lease of `job`'s fire `fid` ("<ms>:<shard>"; member "<job> <fid>"): its end, or false.
local function g_lease(job, fid, lease_s) GPEND.leases[job .. ' ' .. fid] = lease_s end
)lua"},
    {"g_run", R"lua(
local function g_run(m, listed) GPEND.runs[m] = listed and '0' end
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
local function jb_of(job) return NB .. ':{g' .. group_of(job) .. '}:job:' .. job end
)lua"},
    {"check_local", R"lua(
-- On one primary every key is local.
local function check_local(job) end
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
    for i = from, to do g_run(ms[i], false) end
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
-- `at_least`: the global index is trimmed once per script (flush_global), after all its writes,
-- so one call may drop up to that many (the script's additions) when that is more than 4 slacks.
local function trim(zkey, cap, hint, at_least)
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
  local want, most = excess, 4 * slack
  if at_least and at_least > most then most = at_least end
  if want > most then want = most end
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
    {"apply_pend", R"lua(
-- Writes one GPEND table to the sorted set `key`: one ZADD per 256 members added (each with its
-- pending score, or `score` when given) and one ZREM per 256 removed. -> the number added.
local function apply_pend(pend, key, score)
  local function send(cmd, list, width)
    for from = 1, #list, width do
      redis.call(cmd, key, unpack(list, from, math.min(#list, from + width - 1)))
    end
  end
  local add, rem = {}, {}
  for m, v in pairs(pend) do
    if v then
      add[#add + 1] = score or v
      add[#add + 1] = m
    else
      rem[#rem + 1] = m
    end
  end
  send('ZADD', add, 512)
  send('ZREM', rem, 256)
  return #add / 2
end
)lua"},
    {"flush_global", R"lua(
-- Applies GPEND; then trims the global history listing once for all the members the script
-- added, and applies what that trim dropped.
local function flush_global()
  apply_pend(GPEND.leases, GB .. ':leases')
  local added = apply_pend(GPEND.runs, GB .. ':runs')
  GPEND.leases, GPEND.runs = {}, {}
  if added > 0 then
    trim(GB .. ':runs', ARGV[3] + 0, nil, added)
    apply_pend(GPEND.runs, GB .. ':runs')
    GPEND.runs = {}
  end
end
)lua"},
    {"index_record", R"lua(
-- Lists a new record in its job's index (jb:runs), trimmed here, and the global one (GPEND,
-- trimmed by flush_global).
local function index_record(jb, job, ms, shard, att)
  local m = member(job, ms, shard, att)
  redis.call('ZADD', jb .. ':runs', '0', m)
  g_run(m, true)
  trim(jb .. ':runs', ARGV[2] + 0, jb .. ':state')
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
    {"keep_closed", R"lua(
-- A closed marker is kept fire_retention (ARGV[4]) after the later of its close and its fire's
-- instant `ms`: while a claim by schedule is allowed (claim_one: until ms + fire_retention), the
-- marker that refuses it exists. The TTL is relative, so it runs on the server's own clock.
local function keep_closed(fk, ms)
  if ms > NOW then
    redis.call('PEXPIRE', fk, S(ARGV[4] + ms - NOW))
  else
    redis.call('PEXPIRE', fk, ARGV[4])
  end
end
)lua"},
    {"close_fire", R"lua(
-- `ms`: the fire's instant, a number.
local function close_fire(jb, job, fid, ms)
  local fk = jb .. ':fire:' .. fid
  redis.call('HSET', fk, 'open', '0')
  keep_closed(fk, ms)
  redis.call('ZREM', jb .. ':live', fid)
  g_lease(job, fid, false)
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
  g_lease(job, fid, lease_s)
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
  local ms = ms_s + 0
  keep_closed(fk, ms)
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

// The definitions that differ under a Redis Cluster (redis_scripts::Topology::kCluster), by
// name. A fire script there is sent to one primary with the jobs of any of that primary's key
// groups (the scripts declare allow-cross-slot-keys): GB (KEYS[2]) is the base
// "<prefix>:<ns>:{g<group>}" of one of those groups, which routes the call; the lease index the
// single primary keeps in the shared slot is each job's group's own, and the new history members
// go to GB's runs_new (docs/redis-cluster.md).
constexpr ScriptHelper kClusterHelpers[] = {
    {"GB", R"lua(
-- The base of the keys the script may touch: a key group's "<prefix>:<ns>:{g<group>}", or the
-- shared "<prefix>:<ns>:{~shared}" for a script of the shared slot.
local GB = KEYS[2]
)lua"},
    {"NB", R"lua(
-- The namespace's base "<prefix>:<ns>" (GB without ":{g<group>}").
local NB = string.match(GB, '^(.*):{g%d+}$')
)lua"},
    {"bump_jobs_version", R"lua(
-- The jobs version and the events channel are in the shared slot: a key group's script (one
-- that changes a pause state) leaves them to its caller's second call (kBumpJobsVersion).
local function bump_jobs_version()
  if string.sub(GB, -10) ~= ':{~shared}' then return nil end
  local v = next_counter(GB .. ':meta', 'jobs_version')
  redis.call('SPUBLISH', GB .. ':events', S(v))
  return v
end
)lua"},
    {"check_local", R"lua(
-- A batch calls this for each of its jobs before it writes anything: it reads, once per group,
-- the group's key "probe", which is never written. The server refuses it when it does not serve
-- the group's slot, and also while the slot is being migrated away (a key absent from a
-- MIGRATING slot is redirected), so such a group fails the call there with nothing written.
-- The slots cannot move while a script runs.
local LOCAL = {}
local function check_local(job)
  local g = group_of(job)
  if not LOCAL[g] then
    LOCAL[g] = true
    redis.call('EXISTS', NB .. ':{g' .. g .. '}:probe')
  end
end
)lua"},
    {"flush_global", R"lua(
-- Applies GPEND: each lease to its job's group's index ("<job> <fire>" members), and the new
-- history members to GB:runs_new, scored by when they came (the copy step moves them to the
-- all-jobs listing in the shared slot, and applies its cap there).
local function flush_global()
  local by_group = {}
  for m, v in pairs(GPEND.leases) do
    local g = group_of(string.match(m, '^(%S+) '))
    local pend = by_group[g]
    if not pend then
      pend = {}
      by_group[g] = pend
    end
    pend[m] = v
  end
  for g, pend in pairs(by_group) do apply_pend(pend, NB .. ':{g' .. g .. '}:leases') end
  apply_pend(GPEND.runs, GB .. ':runs_new', NOW_S)
  GPEND.leases, GPEND.runs = {}, {}
end
)lua"},
};

}  // namespace

std::span<const ScriptHelper> ScriptHelpers() { return kHelpers; }
std::span<const ScriptHelper> ClusterHelpers() { return kClusterHelpers; }

}  // namespace gnomon::coord::redis_scripts
