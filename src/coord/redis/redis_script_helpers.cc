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
    {"jb_in", R"lua(
-- The base of `job`'s keys, in its key group `g` (group_of).
local function jb_in(g, job) return NB .. ':{g' .. g .. '}:job:' .. job end
)lua"},
    {"jb_of", R"lua(
local function jb_of(job) return jb_in(group_of(job), job) end
)lua"},
    {"check_local", R"lua(
-- On one primary every key is local.
local function check_local(g, job) end
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
    {"enc", R"lua(
-- Text fields, each "<length>:<value>" (the codec of redis_codec.cc, AppendField).
local function enc(...)
  local parts = {...}
  for i = 1, #parts do parts[i] = #parts[i] .. ':' .. parts[i] end
  return table.concat(parts)
end
)lua"},
    {"record_of", R"lua(
-- A history record as its field r:<member> of the job's hash holds it: "<outcome>\n", then sc
-- tok node st fin err output skip params cause exit, each enc()'d ("" exit: not known). The
-- client encodes the records it reports the same way (redis_codec.cc EncodeRecord).
local function record_of(out, sc, tok, node, st, fin, err, output, skip, params, cause, exit)
  return out .. '\n' .. enc(sc, tok, node, st, fin, err, output, skip, params, cause, exit)
end
)lua"},
    {"parse_record", R"lua(
-- record_of's fields back: {out, sc, tok, node, st, fin, err, output, skip, params, cause, exit}.
local function parse_record(blob)
  local nl = string.find(blob, '\n', 1, true)
  local r = {string.sub(blob, 1, nl - 1)}
  local at = nl + 1
  while at <= #blob do
    local colon = string.find(blob, ':', at, true)
    local len = string.sub(blob, at, colon - 1) + 0
    r[#r + 1] = string.sub(blob, colon + 1, colon + len)
    at = colon + len + 1
  end
  return r
end
)lua"},
    {"marker_of", R"lua(
-- A fire marker, the field m:<ms>:<shard> of the job's hash J:
-- "<attempt> <token> <lease end> <open 1/0> <shard count> <attempt start> <len>:<node><cause>".
local function marker_of(att, tok, lease, open, sc, st, node, cause)
  return att .. ' ' .. tok .. ' ' .. lease .. ' ' .. open .. ' ' .. sc .. ' ' .. st .. ' ' ..
         #node .. ':' .. node .. cause
end
)lua"},
    {"parse_marker", R"lua(
-- marker_of's fields back as a table {att, tok, lease, open, sc, st, node, cause} (text), or nil.
local function parse_marker(v)
  if not v then return nil end
  local att, tok, lease, open, sc, st, len, rest =
    string.match(v, '^(%d+) (%d+) (%d+) ([01]) (%d+) (%d+) (%d+):(.*)$')
  if not att then return nil end
  len = len + 0
  return {att = att, tok = tok, lease = lease, open = open, sc = sc, st = st,
          node = string.sub(rest, 1, len), cause = string.sub(rest, len + 1)}
end
)lua"},
    {"marker_with", R"lua(
-- The marker `mk` (parse_marker) with its open flag and lease end replaced.
local function marker_with(mk, open, lease)
  return marker_of(mk.att, mk.tok, lease, open, mk.sc, mk.st, mk.node, mk.cause)
end
)lua"},
    {"live_without", R"lua(
-- "live", the job's open fires: "<ms>:<shard> " each. A lease renewal does not touch it.
local function live_without(live, fid)
  -- Mostly the fire is the job's one open fire: no search.
  if live == fid .. ' ' then return '' end
  local at = string.find(' ' .. live, ' ' .. fid .. ' ', 1, true)
  if not at then return live end
  return string.sub(live, 1, at - 1) .. string.sub(live, at + #fid + 1)
end
)lua"},
    {"fence", R"lua(
-- nil and the marker closed when `tok` holds the live lease of the fire whose marker field is
-- `v`, else the reason it does not. No table: a report runs it once per fire.
local function fence(v, tok)
  local att, mtok, lease, open = string.match(v or '', '^(%d+) (%d+) (%d+) ([01]) ')
  if not att then return 'the fire has no claim' end
  if mtok ~= tok then return 'fenced off by token ' .. mtok end
  if open ~= '1' then return 'the lease was released or revoked' end
  if lease + 0 <= NOW then return 'the lease expired' end
  return nil, att .. ' ' .. mtok .. ' ' .. lease .. ' 0' .. string.sub(v, #att + #mtok + #lease + 5)
end
)lua"},
    {"fenced", R"lua(
-- fence, with the marker (parse_marker) in place of the closed one.
local function fenced(v, tok)
  local why = fence(v, tok)
  if why then return why end
  return nil, parse_marker(v)
end
)lua"},
    {"slack_of", R"lua(
-- The trim slack of a cap: cap / 16, 1 to 64.
local function slack_of(cap)
  local slack = (cap - cap % 16) / 16
  if slack > 64 then return 64 elseif slack < 1 then return 1 end
  return slack
end
)lua"},
    {"drop_entries", R"lua(
-- Drops, of the job's listing members `rows` (oldest first), the first `want` whose fire is
-- closed: their entries (J:runs, the all-jobs listing), their records (r:<member>) and their fires'
-- markers and checkpoints; the job's cutoff "pr" rises past their instants (a claim before it is
-- refused: the marker that would refuse it may be gone). A fire that is open (a retry runs)
-- keeps its entries and marker. -> how many were dropped.
local function drop_entries(jb, rows, want)
  local victims, gone = {}, {}
  local cut = tonumber(redis.call('HGET', jb, 'pr')) or 0
  for from = 1, #rows, 256 do
    if #victims >= want then break end
    local to = math.min(#rows, from + 255)
    local fields, at = {}, {}
    for k = from, to do
      local _, ms, shard = parse_member(rows[k])
      at[#at + 1] = ms
      fields[#fields + 1] = 'm:' .. S(ms) .. ':' .. S(shard)
    end
    local got = redis.call('HMGET', jb, unpack(fields))
    for k = 1, #fields do
      if #victims >= want then break end
      local mk = parse_marker(got[k])
      if not mk or mk.open == '0' then
        victims[#victims + 1] = rows[from + k - 1]
        gone[#gone + 1] = 'r:' .. rows[from + k - 1]
        gone[#gone + 1] = fields[k]
        gone[#gone + 1] = 'cp:' .. string.sub(fields[k], 3)
        if at[k] + 1 > cut then cut = at[k] + 1 end
      end
    end
  end
  if #victims == 0 then return 0 end
  local dropped = 0
  for from = 1, #victims, 256 do
    local to = math.min(#victims, from + 255)
    dropped = dropped + redis.call('ZREM', jb .. ':runs', unpack(victims, from, to))
    for i = from, to do g_run(victims[i], false) end
  end
  for from = 1, #gone, 768 do
    redis.call('HDEL', jb, unpack(gone, from, math.min(#gone, from + 767)))
  end
  redis.call('HSET', jb, 'pr', S(cut))
  redis.call('HINCRBY', jb, 'hn', S(-dropped))
  return #victims
end
)lua"},
    {"TRIM_AT", R"lua(
-- Bounds a job's listing (J:runs) to its cap (ARGV[2]) plus a slack: nothing happens until the
-- entries `hn` reach TRIM_AT (cap + slack, computed once per script), and then the oldest
-- entries of closed fires beyond the cap go in one batch (drop_entries), so in steady state the
-- listing holds at most cap + slack - 1 entries besides open fires', and one trim serves `slack`
-- fires. Open fires (up to 64 of them among the oldest are looked past) are kept: when they hold
-- the trim back, trim_at (now + 1 s) says to look again only a second later, so the claims
-- meanwhile pay nothing for it. Late claims of old instants (a misfire catch-up) list at the old
-- end of the listing.
local CAP = ARGV[2] + 0
local TRIM_AT = CAP + slack_of(CAP)
)lua"},
    {"trim_job", R"lua(
local function trim_job(jb, hn, trim_at)
  if hn < TRIM_AT or (trim_at and NOW < trim_at + 0) then return end
  local want = math.min(hn - CAP, 4 * slack_of(CAP))
  local rows = redis.call('ZREVRANGEBYLEX', jb .. ':runs', '+', '-', 'LIMIT', '0', S(want + 64))
  local dropped = drop_entries(jb, rows, want)
  if dropped < want then
    redis.call('HSET', jb, 'trim_at', S(NOW + 1000))
  elseif trim_at then
    redis.call('HDEL', jb, 'trim_at')
  end
end
)lua"},
    {"LEASE_KEEPER", R"lua(
-- A member that every lease index holds at score +inf, where no lease ends (so no scan reads it).
-- Longer than zset-max-listpack-value (64 by default), it puts the index in Redis's skiplist
-- encoding, and, never removed, keeps the index from being emptied and made again small. A small
-- sorted set (up to 128 members) is a listpack, which every ZADD and ZREM walks: a batch of 128
-- claims, then of their reports, against an index of at most 128 leases cost the server some
-- 21k instructions more per fire than in a skiplist (callgrind; docs/benchmarks.md).
local LEASE_KEEPER = '~ keeps this lease index a skiplist: a member longer than ' ..
                     'zset-max-listpack-value, at +inf (redis_script_helpers.cc)'
)lua"},
    {"apply_pend", R"lua(
-- Writes one GPEND table to the sorted set `key`: one ZADD per 256 members added (each with its
-- pending score, or `score` when given; with `keeper` too, at +inf, when any is added) and one
-- ZREM per 256 removed. -> the number added.
local function apply_pend(pend, key, score, keeper)
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
  local added = #add / 2
  if keeper and added > 0 then
    add[#add + 1] = '+inf'
    add[#add + 1] = keeper
  end
  send('ZADD', add, 512)
  send('ZREM', rem, 256)
  return added
end
)lua"},
    {"flush_global", R"lua(
-- Applies GPEND; then bounds the all-jobs listing to its cap (ARGV[3]) plus a slack, once for all
-- the members the script added: its oldest members leave it and their records go (a running
-- attempt's live output too: its next save writes it again). Their jobs' entries and markers
-- stay, bounded by each job's cap (trim_job), so no fire can be claimed again because this cap
-- dropped its record; the job's listing skips an entry without a record.
local function flush_global()
  apply_pend(GPEND.leases, GB .. ':leases', nil, LEASE_KEEPER)
  local added = apply_pend(GPEND.runs, GB .. ':runs')
  GPEND.leases, GPEND.runs = {}, {}
  if added == 0 then return end
  local cap = ARGV[3] + 0
  local excess = redis.call('ZCARD', GB .. ':runs') - cap
  if excess < slack_of(cap) then return end
  local rows = redis.call('ZREVRANGEBYLEX', GB .. ':runs', '+', '-', 'LIMIT', '0',
                          S(math.max(excess, 4 * slack_of(cap))))
  local by_job = {}
  for _, m in ipairs(rows) do
    local job = string.match(m, '^%d+ (%S+) ')
    local l = by_job[job]
    if not l then
      l = {}
      by_job[job] = l
    end
    l[#l + 1] = 'r:' .. m
  end
  for job, l in pairs(by_job) do redis.call('HDEL', jb_of(job), unpack(l)) end
  for from = 1, #rows, 256 do
    redis.call('ZREM', GB .. ':runs', unpack(rows, from, math.min(#rows, from + 255)))
  end
end
)lua"},
    {"list_attempt", R"lua(
-- Lists the attempt of listing member `m` in its job's listing and the all-jobs one (GPEND).
-- -> 1 when the job's listing had no entry for it (its count "hn" grows), else 0.
local function list_attempt(jb, m)
  g_run(m, true)
  return redis.call('ZADD', jb .. ':runs', '0', m)
end
)lua"},
    {"running_record", R"lua(
-- The record of the attempt that holds the fire of marker `mk`, while it runs.
local function running_record(mk, output)
  return record_of('running', mk.sc, mk.tok, mk.node, mk.st, '0', '', output or '', '', '',
                   mk.cause, '')
end
)lua"},
    {"finish_running", R"lua(
-- Ends the record of the attempt holding the fire of marker `mk` with `outcome` and `err`, when
-- it still runs (it has no record, or its live output's); one that reported already (a retry
-- was to follow) keeps its record.
local function finish_running(jb, job, ms, shard, mk, outcome, err)
  local m = member(job, ms, shard, mk.att + 0)
  local cur = redis.call('HGET', jb, 'r:' .. m)
  local output = ''
  if cur then
    if string.sub(cur, 1, 8) ~= 'running\n' then return end
    output = parse_record(cur)[8]
  end
  redis.call('HSET', jb, 'r:' .. m, record_of(outcome, mk.sc, mk.tok, mk.node, mk.st, NOW_S,
                                              err, output, '', '', mk.cause, ''))
end
)lua"},
    {"record_skipped", R"lua(
-- A fire skipped by `node` for `reason`: its marker (closed), its record (listing member `m`, the
-- first attempt's) and its listing entries, then the job's trim. `hn`, `last`, `trim_at`: the
-- job's fields as read.
local function record_skipped(jb, m, ms_s, shard_s, sc_s, node, reason, hn, last, trim_at)
  local ms = ms_s + 0
  redis.call('HSET', jb, 'r:' .. m,
             record_of('skipped', sc_s, '0', node, NOW_S, NOW_S, '', '', reason, '', '', ''))
  hn = hn + list_attempt(jb, m)
  local mk = marker_of('1', '0', NOW_S, '0', sc_s, NOW_S, node, '')
  if not last or last + 0 < ms then
    redis.call('HSET', jb, 'm:' .. ms_s .. ':' .. shard_s, mk, 'hn', S(hn), 'last', ms_s)
  else
    redis.call('HSET', jb, 'm:' .. ms_s .. ':' .. shard_s, mk, 'hn', S(hn))
  end
  trim_job(jb, hn, trim_at)
end
)lua"},
    {"open_attempt", R"lua(
-- Opens attempt `att_s` of a fire that has a marker (a retry, a re-run, a lost run run again): a
-- token above every earlier one of the job, a lease of `ttl` ms, its marker and listing entry.
-- -> the token and the lease end, as text.
local function open_attempt(jb, job, fid, ms, shard, sc_s, att_s, node, ttl, cause)
  local s = redis.call('HMGET', jb, 'token', 'live', 'hn', 'trim_at')
  local tok_s, lease_s = S(counter_after(s[1])), S(NOW + ttl)
  local live = s[2] or ''
  if not string.find(' ' .. live, ' ' .. fid .. ' ', 1, true) then live = live .. fid .. ' ' end
  local hn = (tonumber(s[3]) or 0) + list_attempt(jb, member(job, ms, shard, att_s + 0))
  redis.call('HSET', jb, 'm:' .. fid, marker_of(att_s, tok_s, lease_s, '1', sc_s, NOW_S, node,
                                                cause), 'token', tok_s, 'live', live, 'hn', S(hn))
  g_lease(job, fid, lease_s)
  trim_job(jb, hn, s[4])
  return tok_s, lease_s
end
)lua"},
    {"record_at", R"lua(
-- The record of listing member `m`: its field r:<member> of the job's hash, else, while its
-- attempt runs, the running record its fire's marker makes; nil when it has neither (dropped by
-- the all-jobs cap).
local function record_at(m)
  local job, ms, shard, att = parse_member(m)
  local jb = jb_of(job)
  local rec = redis.call('HGET', jb, 'r:' .. m)
  if rec then return rec end
  local mk = parse_marker(redis.call('HGET', jb, 'm:' .. S(ms) .. ':' .. S(shard)))
  if mk and mk.open == '1' and mk.att + 0 == att then return running_record(mk) end
  return nil
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
-- A batch calls this with each of its jobs and its key group `g` (the client's KeyGroup) before
-- it writes anything: it reads, once per group, the group's key "probe", which is never written.
-- The server refuses it when it does not serve the group's slot, and also while the slot is
-- being migrated away (a key absent from a MIGRATING slot is redirected), so such a group fails
-- the call there with nothing written. The slots cannot move while a script runs. The group is
-- kept for group_of, which flush_global asks for each lease's index.
local LOCAL = {}
local function check_local(g, job)
  GROUP[job] = g
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
  for g, pend in pairs(by_group) do
    apply_pend(pend, NB .. ':{g' .. g .. '}:leases', nil, LEASE_KEEPER)
  end
  apply_pend(GPEND.runs, GB .. ':runs_new', NOW_S)
  GPEND.leases, GPEND.runs = {}, {}
end
)lua"},
};

}  // namespace

std::span<const ScriptHelper> ScriptHelpers() { return kHelpers; }
std::span<const ScriptHelper> ClusterHelpers() { return kClusterHelpers; }

}  // namespace gnomon::coord::redis_scripts
