#!/usr/bin/env python3
"""Redis server CPU per fire of gnomon's claim and report scripts, and where it goes.

    python3 bench/redis_script_cost.py BUILD_DIR   (env: COST_JOBS=10000, COST_ROUNDS=800)

Starts redis-server (appendonly yes, appendfsync everysec, data on /dev/shm when present) on a
free loopback port, loads the claim-batch and report-batch scripts exactly as RedisCoordinator
does (`fleet_load scripts DIR` writes them), and drives them as a busy node does: rounds of 128
claims of distinct jobs (overlap allow) in one script call, then their 128 final reports in one
call, over COST_JOBS jobs, so the history indexes fill up and the trims run as in steady state
(a quarter of the rounds is warm-up). Prints the server's CPU per fire (INFO cpu, user + sys)
and, from INFO commandstats, each command's calls and microseconds per fire; the scripts' own
time (evalsha) minus the commands they call is the Lua interpreter's and the write propagation's
share. Also a "minimal" pair (MIN_CLAIM, MIN_REPORT: ten commands per fire, the floor of a
script-based layout with a key per fire), three "packed" pairs (a job's state and its fire markers
in one hash, its history in streams: the floor of a layout with fewer keys and commands per fire;
one of them drops old markers as the ledger backends do, another keeps each marker in a key of
its own) and a "no-op" pair of scripts that take the same arguments and do nothing: the cost of
passing a fire's arguments in and the replies out, the floor under any script design.

COST_BASELINE=DIR measures, in the same run and right after gnomon's, the claim and report
scripts another build wrote there (`fleet_load scripts DIR` of an earlier commit): a change to
the scripts is compared with what it replaces on the same machine state.

COST_BASELINE_FIRST=1 measures the baseline before gnomon's (alternate it between runs).

COST_FUNCTIONS=1 also measures gnomon's pair and the minimal pair loaded as Redis Functions
(FUNCTION LOAD of a library whose functions take the scripts' bodies, called with FCALL) instead
of scripts (EVALSHA): what Functions would save.

COST_PIN=1 runs redis-server on the machine's last CPU and this driver on its first (taskset), so
that the two never share a core nor move between them: less noise on a small shared machine.

COST_BATCH=N sends rounds of N fires instead of 128 (the per-call share of the cost: with fewer
fires a call, more of it). COST_ONLY=NAME[,NAME] measures only those pairs (e.g. gnomon).

COST_PRUNE=1 also measures gnomon's prune batch script after the fires, on the history they
left: µs of server CPU per job pruned, in calls of 1 and of 64 jobs (the client's chunk).

COST_INSTRUCTIONS=1 runs each redis-server under valgrind's callgrind and counts, instead of CPU
time, the instructions it executes per fire over the measured rounds (all of its threads): a
figure that does not move with the machine's load, to compare script designs (slow: use
COST_ROUNDS=100). It does not see what an instruction waits for (cache misses, the kernel).
"""
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_bench import Redis  # noqa: E402  (the same redis-server set-up as make bench)

BATCH = int(os.environ.get("COST_BATCH", "128"))
INSTRUCTIONS = os.environ.get("COST_INSTRUCTIONS") == "1"
PIN = os.environ.get("COST_PIN") == "1"
PRUNE = os.environ.get("COST_PRUNE") == "1"
PRUNE_SRC = None
# KEYS[1] and KEYS[2] of the batch scripts: the shared base (src/coord/redis/redis_scripts.h).
BASE = "gnomon:default:{~shared}"
# ARGV[1..4] as RedisCoordinator::CommonArgs: now (server's), records per job, records in total,
# fire marker retention (7 days).
COMMON = ["", "10000", "100000", str(7 * 86400 * 1000)]


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.f = self.sock.makefile("rb")

    def cmd(self, *args):
        self.sock.sendall(encode(args))
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


NOOP_CLAIM = """
local out = {}
for k = 0, ARGV[5] - 1 do out[k + 1] = {'CLAIMED', '0', '1', '2'} end
return out
"""
NOOP_REPORT = """
local out = {}
local at = 6
for k = 1, ARGV[5] + 0 do
  out[k] = {'OK'}
  at = at + ARGV[at] + 1
end
return out
"""


# A deliberately minimal pair, the floor of any layout that keeps a fenced claim and a fenced
# completion as scripts plus a history: a claim is EXISTS + HINCRBY (token) + one HSET of the
# fire (marker and record in one hash) + one ZADD (lease index); a report is HMGET (fence) +
# HSET + PEXPIRE + ZREM + two XADD MAXLEN ~ (per-job and global history streams). It leaves out
# what the contract needs besides (overlap checks, pause state, failure counts, record trims, the
# server-clock floor of tokens): a lower bound to compare gnomon's scripts with, not a design.
MIN_PROLOGUE = """local GB = KEYS[2]
local t = redis.call('TIME')
local NOW = t[1] * 1000 + math.floor(t[2] / 1000)
local format = string.format
local NOW_S = format('%d', NOW)
local out = {}
local A = ARGV
"""

MIN_CLAIM = MIN_PROLOGUE + """for k = 0, A[5] - 1 do
  local i = 6 + k * 11
  local job, ms_s, shard_s, sc_s, node = A[i], A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  local jb = GB .. ':{' .. job .. '}'
  local fid = ms_s .. ':' .. shard_s
  local fk = jb .. ':f:' .. fid
  if redis.call('EXISTS', fk) == 1 then
    out[k + 1] = {'ALREADY', NOW_S}
  else
    local tok_s = format('%d', redis.call('HINCRBY', jb .. ':s', 'tok', 1))
    local lease_s = format('%d', NOW + A[i + 5])
    redis.call('HSET', fk, 'tok', tok_s, 'node', node, 'lease', lease_s, 'st', NOW_S,
               'sc', sc_s, 'att', '1', 'open', '1')
    redis.call('ZADD', GB .. ':leases', lease_s, job .. ' ' .. fid)
    out[k + 1] = {'CLAIMED', NOW_S, tok_s, lease_s}
  end
end
return out"""

MIN_REPORT = MIN_PROLOGUE + """local i = 6
for k = 1, A[5] do
  local n = A[i] + 0
  local job, ms_s, shard_s, tok = A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  local last = i + n
  local jb = GB .. ':{' .. job .. '}'
  local fid = ms_s .. ':' .. shard_s
  local fk = jb .. ':f:' .. fid
  local f = redis.call('HMGET', fk, 'tok', 'open', 'lease')
  if f[1] ~= tok or f[2] ~= '1' or f[3] + 0 <= NOW then
    out[k] = {'LEASE', 'x'}
  else
    redis.call('HSET', fk, 'open', '0', unpack(A, i + 8, last))
    redis.call('PEXPIRE', fk, A[4])
    redis.call('ZREM', GB .. ':leases', job .. ' ' .. fid)
    redis.call('XADD', jb .. ':h', 'MAXLEN', '~', A[2], '*', 'f', fid)
    redis.call('XADD', GB .. ':h', 'MAXLEN', '~', A[3], '*', 'j', job, 'f', fid)
    out[k] = {'OK'}
  end
  i = last + 1
end
return out"""


# A packed pair, the floor of a layout that keeps each job's state, token and fire markers as
# fields of one hash per job (not gnomon's layout): a claim is one HMGET of the job's hash (token,
# running count, pause, the fire's marker field) + one HSET (token, running count, marker); a
# report is HMGET (marker, running count, failures) + HSET (marker closed, counts) + XADD of the
# whole record to the job's history stream + XADD of a pointer to the global stream; the lease
# index written once per batch (one ZADD, one ZREM). Overlap, pause, failure counts and the token
# floor cost no command here (fields of the same hash). It leaves out what such a layout would
# still need: dropping old marker fields (a hash field has no expiry on Redis 7.0), and a record
# while the attempt runs (listing running attempts): a lower bound, not a design.
def packed_claim(with_cutoff=False):
    """The packed claim; `with_cutoff` also reads the job's cutoff (field pr) in the same HMGET
    and refuses a fire before it (OLD)."""
    fields, marker, refuse = "'tok', 'run', 'paused', mf", "s[4]", ""
    if with_cutoff:
        fields, marker = "'tok', 'run', 'paused', 'pr', mf", "s[5]"
        refuse = ("  elseif s[4] and tonumber(ms_s) < tonumber(s[4]) then\n"
                  "    out[k + 1] = {'OLD', NOW_S}\n")
    return MIN_PROLOGUE + """local leases = {}
for k = 0, A[5] - 1 do
  local i = 6 + k * 11
  local job, ms_s, shard_s, node = A[i], A[i + 1], A[i + 2], A[i + 4]
  local jk = GB .. ':{' .. job .. '}'
  local mf = 'm:' .. ms_s .. ':' .. shard_s
  local s = redis.call('HMGET', jk, FIELDS)
  if MARKER or s[3] then
    out[k + 1] = {'ALREADY', NOW_S}
REFUSE  else
    local tok = math.max((tonumber(s[1]) or 0) + 1, NOW * 1000)
    local tok_s = format('%d', tok)
    local lease_s = format('%d', NOW + A[i + 5])
    redis.call('HSET', jk, 'tok', tok_s, 'run', (tonumber(s[2]) or 0) + 1,
               mf, tok_s .. ' 1 ' .. lease_s .. ' ' .. node)
    leases[#leases + 1] = lease_s
    leases[#leases + 1] = job .. ' ' .. mf
    out[k + 1] = {'CLAIMED', NOW_S, tok_s, lease_s}
  end
end
if #leases > 0 then redis.call('ZADD', GB .. ':leases', unpack(leases)) end
return out""".replace("FIELDS", fields).replace("MARKER", marker).replace("REFUSE", refuse)

PACKED_REPORT = MIN_PROLOGUE + """local done = {}
local i = 6
for k = 1, A[5] do
  local n = A[i] + 0
  local job, ms_s, shard_s, tok = A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  local last = i + n
  local jk = GB .. ':{' .. job .. '}'
  local mf = 'm:' .. ms_s .. ':' .. shard_s
  local s = redis.call('HMGET', jk, mf, 'run', 'fails')
  local m_tok, m_open, m_lease = string.match(s[1] or '', '^(%d+) (%d) (%d+)')
  if m_tok ~= tok or m_open ~= '1' or m_lease + 0 <= NOW then
    out[k] = {'LEASE', 'x'}
  else
    local id = redis.call('XADD', jk .. ':h', 'MAXLEN', '~', A[2], '*', unpack(A, i + 8, last))
    redis.call('HSET', jk, mf, tok .. ' 0 ' .. id, 'run', math.max((tonumber(s[2]) or 1) - 1, 0),
               'fails', 0)
    redis.call('XADD', GB .. ':h', 'MAXLEN', '~', A[3], '*', 'j', job, 'id', id)
    done[#done + 1] = job .. ' ' .. mf
    out[k] = {'OK'}
  end
  i = last + 1
end
if #done > 0 then redis.call('ZREM', GB .. ':leases', unpack(done)) end
return out"""


# The packed pair with its markers dropped with their history records instead, as the ledger
# backends drop theirs: no index, no command per fire more. A record (a stream entry) names its
# fire; the job's hash counts its records (hn), and a report that brings them to keep + slack
# reads the oldest beyond keep (XRANGE), drops their markers (HDEL) and them (XTRIM MAXLEN) and
# raises the job's cutoff past their instants, below which a claim is refused. With the defaults
# (COST_PRUNE_RECORDS=4, COST_PRUNE_RECORDS_SLACK=4) a job drops 4 markers every 4 of its fires
# (three commands per 4 fires): a real cap (10,000 records, a slack of 625) drops them 625 at a
# time, so this counts the dropping high. Its claim is packed_claim(with_cutoff=True).
PACKED_WITH_RECORDS_REPORT_TEMPLATE = MIN_PROLOGUE + """local done = {}
local i = 6
for k = 1, A[5] do
  local n = A[i] + 0
  local job, ms_s, shard_s, tok = A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  local last = i + n
  local jk = GB .. ':{' .. job .. '}'
  local mf = 'm:' .. ms_s .. ':' .. shard_s
  local s = redis.call('HMGET', jk, mf, 'run', 'hn', 'pr')
  local m_tok, m_open, m_lease = string.match(s[1] or '', '^(%d+) (%d) (%d+)')
  if m_tok ~= tok or m_open ~= '1' or m_lease + 0 <= NOW then
    out[k] = {'LEASE', 'x'}
  else
    local id = redis.call('XADD', jk .. ':h', '*', 'f', mf, unpack(A, i + 8, last))
    local hn = (tonumber(s[3]) or 0) + 1
    local set = {mf, tok .. ' 0 ' .. id, 'run', math.max((tonumber(s[2]) or 1) - 1, 0),
                 'fails', 0}
    if hn >= KEEP + SLACK then
      local old = redis.call('XRANGE', jk .. ':h', '-', '+', 'COUNT', hn - KEEP)
      local fields, cut = {}, tonumber(s[4]) or 0
      for _, e in ipairs(old) do
        fields[#fields + 1] = e[2][2]
        cut = math.max(cut, tonumber(string.match(e[2][2], '^m:(%d+)')) + 1)
      end
      redis.call('HDEL', jk, unpack(fields))
      redis.call('XTRIM', jk .. ':h', 'MAXLEN', KEEP)
      hn = KEEP
      set[#set + 1] = 'pr'
      set[#set + 1] = format('%d', cut)
    end
    set[#set + 1] = 'hn'
    set[#set + 1] = hn
    redis.call('HSET', jk, unpack(set))
    redis.call('XADD', GB .. ':h', 'MAXLEN', '~', A[3], '*', 'j', job, 'id', id)
    done[#done + 1] = job .. ' ' .. mf
    out[k] = {'OK'}
  end
  i = last + 1
end
if #done > 0 then redis.call('ZREM', GB .. ':leases', unpack(done)) end
return out"""


def packed_with_records_report(keep, slack):
    return PACKED_WITH_RECORDS_REPORT_TEMPLATE.replace("KEEP", str(keep)).replace(
        "SLACK", str(slack))


# The packed pair with each fire's marker a string key of its own instead of a field of the
# job's hash, so that the marker expires with a TTL (SET ... PX) and nothing has to drop old
# fields: a claim is HMGET (state) + SET NX PX (marker) + HSET (state); a report is GET (marker) +
# SET XX PX (marker closed) + HSET (state) + the two XADD. Also a lower bound, not a design.
PACKED_KEYS_CLAIM = MIN_PROLOGUE + """local leases = {}
for k = 0, A[5] - 1 do
  local i = 6 + k * 11
  local job, ms_s, shard_s, node = A[i], A[i + 1], A[i + 2], A[i + 4]
  local jk = GB .. ':{' .. job .. '}'
  local fid = ms_s .. ':' .. shard_s
  local s = redis.call('HMGET', jk, 'tok', 'run', 'paused')
  local tok = math.max((tonumber(s[1]) or 0) + 1, NOW * 1000)
  local tok_s = format('%d', tok)
  local lease_s = format('%d', NOW + A[i + 5])
  if s[3] or not redis.call('SET', jk .. ':f:' .. fid, tok_s .. ' 1 ' .. lease_s .. ' ' .. node,
                            'NX', 'PX', A[4]) then
    out[k + 1] = {'ALREADY', NOW_S}
  else
    redis.call('HSET', jk, 'tok', tok_s, 'run', (tonumber(s[2]) or 0) + 1)
    leases[#leases + 1] = lease_s
    leases[#leases + 1] = job .. ' ' .. fid
    out[k + 1] = {'CLAIMED', NOW_S, tok_s, lease_s}
  end
end
if #leases > 0 then redis.call('ZADD', GB .. ':leases', unpack(leases)) end
return out"""

PACKED_KEYS_REPORT = MIN_PROLOGUE + """local done = {}
local i = 6
for k = 1, A[5] do
  local n = A[i] + 0
  local job, ms_s, shard_s, tok = A[i + 1], A[i + 2], A[i + 3], A[i + 4]
  local last = i + n
  local jk = GB .. ':{' .. job .. '}'
  local fid = ms_s .. ':' .. shard_s
  local fk = jk .. ':f:' .. fid
  local m = redis.call('GET', fk)
  local m_tok, m_open, m_lease = string.match(m or '', '^(%d+) (%d) (%d+)')
  if m_tok ~= tok or m_open ~= '1' or m_lease + 0 <= NOW then
    out[k] = {'LEASE', 'x'}
  else
    local s = redis.call('HMGET', jk, 'run', 'fails')
    local id = redis.call('XADD', jk .. ':h', 'MAXLEN', '~', A[2], '*', unpack(A, i + 8, last))
    redis.call('SET', fk, tok .. ' 0 ' .. id, 'XX', 'PX', A[4])
    redis.call('HSET', jk, 'run', math.max((tonumber(s[1]) or 1) - 1, 0), 'fails', 0)
    redis.call('XADD', GB .. ':h', 'MAXLEN', '~', A[3], '*', 'j', job, 'id', id)
    done[#done + 1] = job .. ' ' .. fid
    out[k] = {'OK'}
  end
  i = last + 1
end
if #done > 0 then redis.call('ZREM', GB .. ':leases', unpack(done)) end
return out"""


# The packed pair with its markers dropped as the ledger backends drop theirs: the claim also
# indexes the marker by instant (ZADD to the job's marker index), and once the job's oldest
# marker (a field of its hash, read by the same HMGET) is older than keep + slack before the
# fire, it drops every marker older than keep (ZRANGEBYSCORE + HDEL + ZREMRANGEBYSCORE) and
# records that cutoff in the job's hash, below which a claim is refused. With 10,000 jobs each
# fires every ~78 rounds (78 s of fire time), so the defaults (COST_PRUNE_KEEP_S=80,
# COST_PRUNE_SLACK_S=120) prune a job every ~2-3 of its fires, from the end of the warm-up on: a
# real retention (days) drops thousands of markers per prune, so this counts the pruning high;
# COST_PRUNE_KEEP_S=80000 (no prune in the run) counts it as nothing but the index write.
PACKED_PRUNED_CLAIM_TEMPLATE = MIN_PROLOGUE + """local leases = {}
for k = 0, A[5] - 1 do
  local i = 6 + k * 11
  local job, ms_s, shard_s, node = A[i], A[i + 1], A[i + 2], A[i + 4]
  local ms = tonumber(ms_s)
  local jk = GB .. ':{' .. job .. '}'
  local mf = 'm:' .. ms_s .. ':' .. shard_s
  local s = redis.call('HMGET', jk, 'tok', 'run', 'paused', 'mo', 'pr', mf)
  if s[6] or s[3] then
    out[k + 1] = {'ALREADY', NOW_S}
  elseif s[5] and ms < tonumber(s[5]) then
    out[k + 1] = {'OLD', NOW_S}
  else
    local tok = math.max((tonumber(s[1]) or 0) + 1, NOW * 1000)
    local tok_s = format('%d', tok)
    local lease_s = format('%d', NOW + A[i + 5])
    local set = {'tok', tok_s, 'run', (tonumber(s[2]) or 0) + 1,
                 mf, tok_s .. ' 1 ' .. lease_s .. ' ' .. node}
    local mo = tonumber(s[4])
    if not mo or mo > ms then
      set[#set + 1] = 'mo'
      set[#set + 1] = ms_s
    elseif mo < ms - KEEP_MS - SLACK_MS then
      local cut = format('%d', ms - KEEP_MS)
      local old = redis.call('ZRANGEBYSCORE', jk .. ':mi', '-inf', '(' .. cut)
      if #old > 0 then
        redis.call('HDEL', jk, unpack(old))
        redis.call('ZREMRANGEBYSCORE', jk .. ':mi', '-inf', '(' .. cut)
      end
      for _, v in ipairs({'mo', cut, 'pr', cut}) do set[#set + 1] = v end
    end
    redis.call('HSET', jk, unpack(set))
    redis.call('ZADD', jk .. ':mi', ms_s, mf)
    leases[#leases + 1] = lease_s
    leases[#leases + 1] = job .. ' ' .. mf
    out[k + 1] = {'CLAIMED', NOW_S, tok_s, lease_s}
  end
end
if #leases > 0 then redis.call('ZADD', GB .. ':leases', unpack(leases)) end
return out"""


def packed_pruned_claim(keep_ms, slack_ms):
    return PACKED_PRUNED_CLAIM_TEMPLATE.replace("KEEP_MS", str(keep_ms)).replace(
        "SLACK_MS", str(slack_ms))


def encoded_record(fields):
    """A record as gnomon's client sends it since the ledger layout (EncodeRecord in
    src/coord/redis/redis_codec.cc): "<outcome>\\n", then shard count, token, node, start, end,
    error, output, skip reason, params, cause and exit code, each "<length>:<value>"."""
    v = dict(zip(fields[0::2], fields[1::2]))
    order = ["sc", "tok", "node", "st", "fin", "err", "output", "skip", "params", "cause", "exit"]
    return v["out"] + "\n" + "".join("%d:%s" % (len(v.get(k, "")), v.get(k, "")) for k in order)


def key_group(job):
    """A job's key group (KeyGroup in src/coord/redis/redis_store.cc): the low 10 bits of the job
    id's 64-bit FNV-1a hash."""
    h = 0xcbf29ce484222325
    for b in job.encode():
        h = ((h ^ b) * 0x100000001b3) % (1 << 64)
    return h % 1024


def member(job, ms, shard, attempt):
    """A history listing member (Member in src/coord/redis/redis_codec.cc)."""
    return "%016d %s %010d %010d" % (9000000000000000 - ms, job, shard, 2147483647 - attempt)


def item_names(src):
    """The names of the arguments of one item of a batch script: its "-- A[i..]:" line (the
    layout redis_scripts_test checks against the client's), or None for the bench's own pairs."""
    for line in src.splitlines():
        if line.startswith("-- A[i..]: "):
            return line[len("-- A[i..]: "):].split()
    return None


def callgrind_control(redis, what):
    """`what` (--zero: start counting anew; --dump: write the counts) for the callgrind that runs
    `redis`."""
    subprocess.run(["callgrind_control", what, str(redis.proc.pid)], check=True,
                   stdout=subprocess.DEVNULL)


def as_function(name, src):
    """A Redis Functions library with one function `name` whose body is the script `src`."""
    return ("#!lua name=%s\nredis.register_function{function_name='%s', "
            "callback=function(KEYS, ARGV)\n%s\nend}\n" % (name, name, src))


def measure_prune(conn, redis, jobs):
    """COST_PRUNE=1: the server CPU of the prune batch script per job pruned (keep the newest 10
    fires, max age 7 days, as `fleet_load scale` sets), in batches of 1 and of 64 (the client's
    chunk), each job once per pass: the first pass drops what the rounds left beyond 10 fires,
    the next ones find nothing to drop (a sweep's usual case)."""
    sha = conn.cmd("SCRIPT", "LOAD", PRUNE_SRC)
    for batch in (1, 64, 1, 64):
        cpu0 = redis.cpu()
        for first in range(0, jobs, batch):
            args = COMMON + [str(min(batch, jobs - first))]
            for k in range(first, min(jobs, first + batch)):
                j = "job-%06d" % k
                args += [j, str(key_group(j)), "10", str(7 * 86400 * 1000)]
            conn.cmd("EVALSHA", sha, "2", BASE, BASE, *args)
        print("prune, batches of %d: %.1f µs of server CPU per job" %
              (batch, (redis.cpu() - cpu0) / jobs * 1e6))


def measure(name, claim_src, report_src, jobs, rounds, workdir, functions=False,
            one_record=False):
    """`one_record`: the pair takes a report's record as one argument (items of 8, no count
    before each) and answers a claim "<now> <token> <lease end>" (gnomon's scripts since the
    ledger layout)."""
    data = tempfile.mkdtemp(dir=workdir)
    counts = os.path.join(data, "callgrind")
    prefix = ()
    if PIN:
        prefix = ("taskset", "-c", str(os.cpu_count() - 1))
    if INSTRUCTIONS:
        prefix += ("valgrind", "--tool=callgrind", "--callgrind-out-file=%s.%%p" % counts)
    redis = Redis(data, prefix=prefix)
    try:
        conn = Conn(redis.port)
        if functions:
            conn.cmd("FUNCTION", "LOAD", as_function("gclaim", claim_src))
            conn.cmd("FUNCTION", "LOAD", as_function("greport", report_src))
            call = {"claim": ("FCALL", "gclaim"), "report": ("FCALL", "greport")}
        else:
            call = {"claim": ("EVALSHA", conn.cmd("SCRIPT", "LOAD", claim_src)),
                    "report": ("EVALSHA", conn.cmd("SCRIPT", "LOAD", report_src))}
        # A round's fires are a second after the last round's, every one of them in the past.
        t0 = int(time.time() * 1000) - 10_000_000 - 1000 * (rounds + rounds // 4)
        next_job = 0

        claim_names, report_names = item_names(claim_src), item_names(report_src)

        def one_round(k):
            nonlocal next_job
            ms = str(t0 + k * 1000)
            batch = ["job-%06d" % ((next_job + i) % jobs) for i in range(BATCH)]
            next_job += BATCH
            args = COMMON + [str(BATCH)]
            for j in batch:
                if claim_names:  # gnomon's scripts: the arguments their header names
                    v = {"job": j, "group": str(key_group(j)), "ms": ms, "shard": "0",
                         "shard_count": "1", "node": "node-a", "ttl_ms": "30000",
                         "skew_ms": "1000", "overlap": "allow", "run_id": j + "@" + ms,
                         "deadline": "", "cause": "", "member": member(j, int(ms), 0, 1)}
                    args += [v[n] for n in claim_names]
                else:
                    args += [j, ms, "0", "1", "node-a", "30000", "1000", "allow", j + "@" + ms,
                             "", ""]
            claims = conn.cmd(*call["claim"], "2", BASE, BASE, *args)
            if one_record:  # "<now> <token> <lease end>"
                claims = [["CLAIMED"] + c.split(" ") if isinstance(c, str) else c
                          for c in claims]
            if len(claims) != BATCH or any(c[0] != "CLAIMED" for c in claims):
                raise RuntimeError("%s: a claim was refused: %r" % (name, claims[:2]))
            args = COMMON + [str(BATCH)]
            now = str(int(time.time() * 1000))
            for j, c in zip(batch, claims):
                tok = c[2]
                fields = ["sc", "1", "tok", tok, "node", "node-a", "st", now, "fin", now,
                          "out", "succeeded", "err", "", "output", "done\n", "skip", "",
                          "exit", "0"]
                if report_names:
                    v = {"job": j, "group": str(key_group(j)), "ms": ms, "shard": "0",
                         "fid": ms + ":0", "token": tok, "attempt": "1",
                         "member": member(j, int(ms), 0, 1), "final": "1",
                         "failure_effect": "reset", "record": encoded_record(fields)}
                    args += [v[n] for n in report_names]
                elif one_record:
                    args += [j, ms, "0", tok, "1", "1", "reset", encoded_record(fields)]
                else:
                    item = [j, ms, "0", tok, "1", "1", "reset"] + fields
                    args += [str(len(item))] + item
            reports = conn.cmd(*call["report"], "2", BASE, BASE, *args)
            if any(r != "OK" and r[0] != "OK" for r in reports):
                raise RuntimeError("%s: a report was refused: %r" % (name, reports[:2]))

        warm = rounds // 4
        for k in range(warm):
            one_round(k)
        redis.cli("CONFIG", "RESETSTAT")
        if INSTRUCTIONS:
            callgrind_control(redis, "--zero")
        cpu0 = redis.cpu()
        for k in range(warm, warm + rounds):
            one_round(k)
        cpu1 = redis.cpu()
        fires = rounds * BATCH
        cost = (cpu1 - cpu0) / fires * 1e6
        if INSTRUCTIONS:
            callgrind_control(redis, "--dump")
            dumps = sorted(glob.glob(counts + ".*"), key=os.path.getmtime)
            total = re.search(r"^(?:summary|totals): (\d+)", open(dumps[-1]).read(), re.M)
            cost = int(total.group(1)) / fires
            if os.environ.get("COST_KEEP_COUNTS"):  # a copy of the counts, for callgrind_annotate
                shutil.copy(dumps[-1], os.environ["COST_KEEP_COUNTS"])
        stats = sorted(((usec / fires, cmd, calls / fires)
                        for cmd, (calls, usec) in redis.command_stats().items()
                        if cmd not in ("info", "config|resetstat", "function|load")),
                       reverse=True)
        keys = int(conn.cmd("DBSIZE"))
        if PRUNE and name == "gnomon" and not INSTRUCTIONS:
            measure_prune(conn, redis, jobs)  # after the fires' figures: not counted in them
        return cost, stats, keys
    finally:
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    tool = os.path.join(build, "bench", "fleet_load")
    if not os.access(tool, os.X_OK):
        sys.exit("redis_script_cost: %s not built" % tool)
    if not shutil.which("redis-server"):
        print("redis_script_cost: SKIP: redis-server is not installed")
        return 0
    if PIN:
        os.sched_setaffinity(0, {0})
    jobs = int(os.environ.get("COST_JOBS", "10000"))
    rounds = int(os.environ.get("COST_ROUNDS", "800"))
    workdir = "/dev/shm" if os.path.isdir("/dev/shm") else None
    scripts = tempfile.mkdtemp()
    subprocess.run([tool, "scripts", scripts], check=True)
    claim = open(os.path.join(scripts, "claim_many.lua")).read()
    report = open(os.path.join(scripts, "report_many.lua")).read()
    global PRUNE_SRC
    PRUNE_SRC = open(os.path.join(scripts, "prune_many.lua")).read()
    shutil.rmtree(scripts)
    print("### Redis CPU per fire of the claim + report scripts: %d jobs, %d rounds of %d fires"
          % (jobs, rounds, BATCH))
    results = {}
    variants = [("gnomon", claim, report)]
    baseline = os.environ.get("COST_BASELINE")
    if baseline:
        base = ("baseline", open(os.path.join(baseline, "claim_many.lua")).read(),
                open(os.path.join(baseline, "report_many.lua")).read())
        # COST_BASELINE_FIRST=1 measures the baseline first: alternate the order between runs,
        # so that what the first measurement of a run pays (a colder machine) is not counted
        # against one side.
        if os.environ.get("COST_BASELINE_FIRST") == "1":
            variants.insert(0, base)
        else:
            variants.append(base)
    pruned_claim = packed_pruned_claim(int(os.environ.get("COST_PRUNE_KEEP_S", "80")) * 1000,
                                       int(os.environ.get("COST_PRUNE_SLACK_S", "120")) * 1000)
    with_records_report = packed_with_records_report(
        int(os.environ.get("COST_PRUNE_RECORDS", "4")),
        int(os.environ.get("COST_PRUNE_RECORDS_SLACK", "4")))
    variants += [("minimal", MIN_CLAIM, MIN_REPORT), ("packed", packed_claim(), PACKED_REPORT),
                 ("packed, markers pruned", pruned_claim, PACKED_REPORT),
                 ("packed, markers dropped with their records", packed_claim(with_cutoff=True),
                  with_records_report),
                 ("packed, markers as keys", PACKED_KEYS_CLAIM, PACKED_KEYS_REPORT),
                 ("no-op", NOOP_CLAIM, NOOP_REPORT)]
    if os.environ.get("COST_FUNCTIONS") == "1":
        variants += [("gnomon as functions", claim, report),
                     ("minimal as functions", MIN_CLAIM, MIN_REPORT)]
    only = os.environ.get("COST_ONLY")
    if only:
        variants = [v for v in variants if v[0] in only.split(",")]
    for name, c, r in variants:
        cpu, stats, keys = measure(name, c, r, jobs, rounds, workdir,
                                   functions=name.endswith("as functions"),
                                   one_record="'r:' .." in r)
        results[name] = cpu
        print("\n%s scripts: **%.1f %s per fire** (%d keys at the end)" %
              (name, cpu, "instructions" if INSTRUCTIONS else "µs of server CPU", keys))
        if name in ("gnomon", "baseline") and not INSTRUCTIONS:
            inner = sum(u for u, n, _ in stats if n != "evalsha")
            print("\n| command | calls per fire | µs per fire |\n|---|---:|---:|")
            for usec, cmd, calls in stats:
                if usec >= 0.05:
                    print("| %s | %.2f | %.2f |" % (cmd, calls, usec))
            evalsha = sum(u for u, n, _ in stats if n == "evalsha")
            # commandstats count wall time: on a busy machine it exceeds the CPU time.
            print("\nscripts (evalsha) %.1f µs per fire, of which the commands they call %.1f: "
                  "the Lua interpreter and write propagation %.1f (commandstats times are wall "
                  "time: run it on an idle machine)" % (evalsha, inner, evalsha - inner))
    # The RESULT line: each measured pair's figure, by the names it always had.
    keys = [("gnomon", "gnomon"), ("minimal", "minimal"), ("packed", "packed"),
            ("packed, markers pruned", "packed_pruned"),
            ("packed, markers dropped with their records", "packed_with_records"),
            ("packed, markers as keys", "packed_marker_keys"), ("no-op", "noop"),
            ("baseline", "baseline"), ("gnomon as functions", "gnomon_functions"),
            ("minimal as functions", "minimal_functions")]
    line = "RESULT {%s}" % ", ".join("\"%s_us_per_fire\": %.1f" % (key, results[name])
                                     for name, key in keys if name in results)
    if INSTRUCTIONS:
        line = line.replace("_us_per_fire", "_instructions_per_fire")
    print("\n" + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
