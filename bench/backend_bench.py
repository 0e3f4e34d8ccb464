#!/usr/bin/env python3
"""Backend benchmarks: claims+completions/s, fire lateness and failover on Redis, etcd, SQLite.

    bench/backend_bench.py [BUILD_DIR]        (default build/release; run by scripts/bench.sh)

Needs BUILD_DIR/bench/fleet_load and BUILD_DIR/apps/gnomon/gnomon, /usr/bin/redis-server,
redis-benchmark, redis-cli and /usr/bin/etcd. Starts its own servers on free loopback ports, with
their data in one temp dir (BENCH_DATA_DIR, default the system temp dir: the same disk for all
three backends), and removes everything at the end. docs/benchmarks.md "Backends: throughput,
lateness, failover" describes the method and the figures.

1. Claims: for each backend, 3 `fleet_load claims` processes at once (4 threads each, one
   coordinator per thread) for BENCH_SECONDS (10), summed claims+completions per second; for
   Redis in the same round `redis-benchmark -c 12 SET key:__rand_int__ val NX PX 30000`, and the
   ratio. BACKEND_ROUNDS (3) rounds, medians. Also per operation: Redis commands (INFO
   commandstats, including the commands the Lua scripts call) and CPU (the three clients'
   getrusage; Redis's own from INFO cpu).
2. Lateness: 3 `fleet_load lateness` processes with the same 1,000 every-second in-process jobs
   on Redis; start - scheduled of every run in LATENESS_SECONDS (20, after 3 s of warm-up), all
   samples combined; commands and CPU per fire over the same window; then a 3-s MONITOR sample
   (outside the CPU window: MONITOR costs Redis CPU) for round trips per fire (lines from the
   clients, not from scripts).
3. Failover: 3 `gnomon serve` nodes per backend (lease 3 s, renewed every 1 s, housekeeping
   0.5 s); job "long" fires every 8 s (sleep 6, on_lost = rerun, overlap = allow). Each trial
   waits for a fire's attempt 1, kill -9's its holder 0.2-1.2 s after it started (uniform, so
   the kill falls anywhere in the renew period), and measures kill -> attempt 2's start on
   another node (start time written by the job itself); the node is then restarted.
   FAILOVER_TRIALS (20) per backend.

BACKENDS (redis,etcd,sqlite) picks backends; BENCH_SECONDS shortens every phase. Prints the
figures as tables, then one JSON line "RESULT {...}". Python 3 standard library only.
"""
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from harness import free_cluster_port, free_port, read_records, wait_for  # noqa: E402

LEASE_TTL_S = 3.0
RENEW_S = LEASE_TTL_S / 3
HEARTBEAT_S = 0.5
LONG_PERIOD_S = 8


def log(*a):
    print(*a, flush=True)


def env_num(name, default):
    v = os.environ.get(name)
    return type(default)(v) if v else default


def pct(sorted_vals, p):
    """Nearest-rank percentile of a sorted list (p in 0..100)."""
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def proc_cpu_s(pid):
    """utime + stime of a live process in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------- servers --
class Redis:
    """redis-server with appendonly yes and appendfsync everysec, data in `workdir`; `prefix`
    runs it under a command such as taskset."""

    def __init__(self, workdir, extra_args=(), port=None, prefix=()):
        self.port = port or free_port()
        self.dir = os.path.join(workdir, "redis")
        os.makedirs(self.dir)
        self.log = open(os.path.join(workdir, "redis.log"), "w")
        self.proc = subprocess.Popen(
            [*prefix, "/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
             "--dir", self.dir, "--protected-mode", "no", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.cli("ping", check=False).strip() == "PONG", 30, "redis-server")
        self.url = "redis://127.0.0.1:%d/0" % self.port

    def cli(self, *args, check=True):
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), *args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError("redis-cli %s: %s" % (" ".join(args), r.stdout))
        return r.stdout

    def info(self, *sections):
        """INFO of the given sections (Redis 7 takes several) as one {field: text} dict."""
        out = {}
        for line in self.cli("info", *sections).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.strip().split(":", 1)
                out[k] = v
        return out

    def commands(self):
        """Total commands executed so far (INFO commandstats, scripts' commands included),
        minus INFO itself."""
        total = 0
        for k, v in self.info("commandstats").items():
            if k.startswith("cmdstat_") and k not in ("cmdstat_info",):
                total += int(re.search(r"calls=(\d+)", v).group(1))
        return total

    def command_stats(self):
        """{command: (calls, usec)} from INFO commandstats."""
        out = {}
        for k, v in self.info("commandstats").items():
            if k.startswith("cmdstat_"):
                m = re.search(r"calls=(\d+),usec=(\d+)", v)
                out[k[len("cmdstat_"):]] = (int(m.group(1)), int(m.group(2)))
        return out

    def cpu(self):
        i = self.info("cpu")
        return float(i["used_cpu_user"]) + float(i["used_cpu_sys"])

    def cpus(self):
        """CPU seconds used so far, per primary (one), as RedisCluster.cpus."""
        return [self.cpu()]

    def memory(self):
        return self.info("memory").get("used_memory_human", "?")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


class RedisCluster:
    """`primaries` cluster-enabled redis-servers (each as Redis above: appendonly yes,
    appendfsync everysec), each with `replicas` replicas (the same settings), formed with
    `redis-cli --cluster create` (slots split evenly), `cluster-require-full-coverage no`; with
    replicas, waits until each is in sync. `url` is redis+cluster:// with every node. The
    figures (cpus, command_stats, memory) are the primaries'."""

    def __init__(self, workdir, primaries=3, extra_args=(), replicas=0):
        self.nodes = []
        for i in range(primaries * (1 + replicas)):
            d = os.path.join(workdir, "node%d" % i)
            os.makedirs(d)
            self.nodes.append(Redis(d, ["--cluster-enabled", "yes", "--cluster-config-file",
                                        os.path.join(d, "nodes.conf"), "--cluster-node-timeout",
                                        "5000", "--cluster-require-full-coverage", "no",
                                        *extra_args], free_cluster_port()))
        addresses = ["127.0.0.1:%d" % n.port for n in self.nodes]
        r = subprocess.run(["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas",
                            str(replicas), "--cluster-yes"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode != 0:
            self.stop()
            raise RuntimeError("redis-cli --cluster create: " + r.stdout[-2000:])
        wait_for(lambda: all("cluster_state:ok" in n.cli("cluster", "info", check=False)
                             for n in self.nodes), 30, "the cluster to be ok")
        self.primaries = [n for n in self.nodes
                          if n.cli("role", check=False).split("\n")[0] == "master"]
        self.replicas = [n for n in self.nodes if n not in self.primaries]
        wait_for(lambda: all("master_link_status:up" in n.cli("info", "replication", check=False)
                             for n in self.replicas), 60, "the replicas to sync")
        self.url = "redis+cluster://" + ",".join(addresses)

    def cpus(self):
        """CPU seconds used so far by each primary."""
        return [n.cpu() for n in self.primaries]

    def replica_cpus(self):
        """CPU seconds used so far by each replica."""
        return [n.cpu() for n in self.replicas]

    def command_stats(self):
        """{command: (calls, usec)} summed over the primaries."""
        out = {}
        for n in self.primaries:
            for c, (calls, usec) in n.command_stats().items():
                a, b = out.get(c, (0, 0))
                out[c] = (a + calls, b + usec)
        return out

    def memory(self):
        return " + ".join(n.memory() for n in self.primaries)

    def stop(self):
        for n in self.nodes:
            n.stop()


class Etcd:
    def __init__(self, workdir):
        client, peer = free_port(), free_port()
        data = os.path.join(workdir, "etcd")
        self.log = open(os.path.join(workdir, "etcd.log"), "w")
        peer_url = "http://127.0.0.1:%d" % peer
        self.client_url = "http://127.0.0.1:%d" % client
        self.proc = subprocess.Popen(
            ["/usr/bin/etcd", "--name", "bench", "--data-dir", data,
             "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", "bench=" + peer_url, "--initial-cluster-state", "new",
             "--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self.healthy, 30, "etcd to be healthy")
        self.port = client

    def healthy(self):
        try:
            with urllib.request.urlopen(self.client_url + "/health", timeout=1) as r:
                return b'"true"' in r.read()
        except OSError:
            return False

    def url(self, prefix):
        return "etcd://127.0.0.1:%d/%s" % (self.port, prefix)

    def cpu(self):
        return proc_cpu_s(self.proc.pid)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


# -------------------------------------------------------------------------------- claims --
def run_claims(fleet, url, seconds, tag, threads=4, procs=3):
    ps = [subprocess.Popen([fleet, "claims", "--backend", url, "--threads", str(threads),
                            "--seconds", str(seconds), "--jobs", "1000", "--node", "n%d" % (i + 1),
                            "--tag", tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True) for i in range(procs)]
    ops = errors = cpu = 0
    secs = []
    for p in ps:
        out, err = p.communicate(timeout=seconds + 120)
        if p.returncode != 0:
            raise RuntimeError("fleet_load claims failed: %s" % err.strip())
        r = json.loads(out.strip().splitlines()[-1])
        ops += r["ops"]
        errors += r["errors"]
        cpu += r["cpu_s"]
        secs.append(r["seconds"])
        if r["errors"]:
            log("   (%s: %d errors: %s)" % (r["node"], r["errors"], err.strip()[:200]))
    return {"ops": ops, "errors": errors, "ops_s": ops / max(secs), "cpu_s": cpu,
            "clients": threads * procs}


def redis_benchmark(redis, clients, n):
    r = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(redis.port), "-c",
                        str(clients), "-n", str(n), "-r", "1000000", "--csv",
                        "SET", "key:__rand_int__", "val", "NX", "PX", "30000"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    for line in r.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[0].startswith("SET"):
            return float(cells[1])
    raise RuntimeError("cannot parse redis-benchmark output: " + r.stdout[-500:])


def claims_phase(fleet, backends, workdir, seconds, rounds, redis, etcd):
    res = {}
    for b in backends:
        rows = []
        for k in range(rounds):
            tag = "r%d" % k
            extra = {}
            if b == "redis":
                redis.cli("flushall")
                c0, cpu0, st0 = redis.commands(), redis.cpu(), redis.command_stats()
                r = run_claims(fleet, redis.url, seconds, tag)
                c1, cpu1, st1 = redis.commands(), redis.cpu(), redis.command_stats()
                # The commands' own time per operation, largest first (scripts' usec include
                # the commands they call).
                extra["top_usec_per_op"] = sorted(
                    ((name, round((st1[name][1] - st0.get(name, (0, 0))[1]) / r["ops"], 1),
                      round((st1[name][0] - st0.get(name, (0, 0))[0]) / r["ops"], 2))
                     for name in st1 if name != "info"), key=lambda x: -x[1])[:12]
                extra["cmds_per_op"] = (c1 - c0) / r["ops"]
                extra["server_cpu_us_per_op"] = (cpu1 - cpu0) / r["ops"] * 1e6
                redis.cli("flushall")
                extra["set_nx_s"] = redis_benchmark(redis, r["clients"], 200000)
                extra["ratio"] = r["ops_s"] / extra["set_nx_s"]
            elif b == "etcd":
                cpu0 = etcd.cpu()
                r = run_claims(fleet, etcd.url("claims-%s" % tag), seconds, tag)
                extra["server_cpu_us_per_op"] = (etcd.cpu() - cpu0) / r["ops"] * 1e6
            else:
                db = "sqlite://" + os.path.join(workdir, "claims-%s.db" % tag)
                # Create the schema first: 12 connections opening a new file at once wait on
                # one another's schema transaction.
                run_claims(fleet, db, 0.1, "init", threads=1, procs=1)
                r = run_claims(fleet, db, seconds, tag)
            r.update(extra)
            r["client_cpu_us_per_op"] = r["cpu_s"] / r["ops"] * 1e6
            rows.append(r)
            log("  %-6s round %d: %8.0f claims+completions/s (%d errors)%s  load %s" % (
                b, k + 1, r["ops_s"], r["errors"],
                ("  SET NX %.0f/s, ratio %.2f" % (r["set_nx_s"], r["ratio"])
                 if "ratio" in r else ""), loadavg()))
        med = {k: statistics.median(x[k] for x in rows) for k in rows[0]
               if isinstance(rows[0][k], (int, float))}
        med["rounds"] = [round(x["ops_s"]) for x in rows]
        if "top_usec_per_op" in rows[-1]:
            med["top_usec_per_op"] = rows[-1]["top_usec_per_op"]
        res[b] = med
    return res


# ------------------------------------------------------------------------------ lateness --
def lateness_phase(fleet, redis, workdir, seconds, jobs=1000, warmup=3.0):
    redis.cli("flushall")
    run_s = warmup + seconds + 6.0
    files = [os.path.join(workdir, "late-n%d.txt" % (i + 1)) for i in range(3)]
    t_start = time.time()
    ps = [subprocess.Popen([fleet, "lateness", "--backend", redis.url, "--jobs", str(jobs),
                            "--seconds", str(run_s), "--node", "n%d" % (i + 1),
                            "--samples", files[i]], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for i in range(3)]
    # The CPU/command window: whole seconds [w0, w1) after the warm-up.
    w0 = int(t_start + warmup) + 1
    w1 = w0 + int(seconds)
    time.sleep(max(0, w0 - time.time()))
    c0, rc0 = redis.commands(), redis.cpu()
    p0 = [proc_cpu_s(p.pid) for p in ps]
    time.sleep(max(0, w1 - time.time()))
    c1, rc1 = redis.commands(), redis.cpu()
    p1 = [proc_cpu_s(p.pid) for p in ps]
    # Round trips: a MONITOR sample after the CPU window.
    mon_path = os.path.join(workdir, "monitor.txt")
    with open(mon_path, "w") as mf:
        mon = subprocess.Popen(["redis-cli", "-h", "127.0.0.1", "-p", str(redis.port), "monitor"],
                               stdout=mf, stderr=subprocess.DEVNULL)
        time.sleep(3.5)
        mon.terminate()
        try:
            mon.wait(timeout=5)
        except subprocess.TimeoutExpired:
            mon.kill()
            mon.wait()
    outs = []
    for p in ps:
        out, err = p.communicate(timeout=60)
        if p.returncode != 0:
            raise RuntimeError("fleet_load lateness failed: %s" % err.strip())
        outs.append(json.loads(out.strip().splitlines()[-1]))
    samples = []
    for path in files:
        with open(path) as f:
            for line in f:
                s, l_us = line.split()
                samples.append((int(s), int(l_us)))
    in_window = sorted(l_us / 1000.0 for s, l_us in samples if w0 * 1000 <= s < w1 * 1000)
    fires = len(in_window)
    expected = jobs * (w1 - w0)
    # MONITOR lines: '<ts> [<db> <client>] "cmd" ...'; a script's commands say [<db> lua].
    client_lines, lua_lines, ts, by_cmd = 0, 0, [], {}
    with open(mon_path, errors="replace") as f:
        for line in f:
            m = re.match(r'^(\d+\.\d+) \[\d+ ([^\]]+)\] "([^"]*)"', line)
            if not m:
                continue
            ts.append((float(m.group(1)), m.group(2) == "lua", m.group(3).lower()))
    if ts:
        m0, m1 = ts[0][0] + 0.25, ts[-1][0] - 0.25
        for t, lua, cmd in ts:
            if m0 <= t < m1:
                if lua:
                    lua_lines += 1
                else:
                    client_lines += 1
                    by_cmd[cmd] = by_cmd.get(cmd, 0) + 1
        mon_fires = sum(1 for s, l_us in samples if m0 <= (s / 1000.0 + l_us / 1e6) < m1)
    else:
        mon_fires = 0
    return {
        "fires": fires, "expected": expected,
        "p50_ms": pct(in_window, 50), "p99_ms": pct(in_window, 99),
        "p999_ms": pct(in_window, 99.9), "max_ms": in_window[-1] if in_window else float("nan"),
        "cmds_per_fire": (c1 - c0) / max(1, fires),
        "client_cpu_us_per_fire": (sum(p1) - sum(p0)) / max(1, fires) * 1e6,
        "server_cpu_us_per_fire": (rc1 - rc0) / max(1, fires) * 1e6,
        "round_trips_per_fire": client_lines / max(1, mon_fires),
        "monitor_cmds_per_fire": (client_lines + lua_lines) / max(1, mon_fires),
        "monitor_fires": mon_fires,
        "round_trips_by_command": {k: round(v / max(1, mon_fires), 3) for k, v in
                                   sorted(by_cmd.items(), key=lambda kv: -kv[1])},
        "per_node_runs": [o["runs"] for o in outs],
    }


# ------------------------------------------------------------------------------ failover --
def _record(out):
    return ('s=$(date +%s%3N); printf \'{"job":"%s","run":"%s","attempt":%s,"node":"%s",'
            '"started":%s}\\n\' "$GNOMON_JOB_ID" "$GNOMON_RUN_ID" "$GNOMON_ATTEMPT" '
            '"$GNOMON_NODE_ID" "$s" >> ' + out)


class Fleet:
    """Three `gnomon serve` nodes on one backend URL."""

    def __init__(self, gnomon, url, workdir):
        self.gnomon, self.url, self.dir = gnomon, url, workdir
        os.makedirs(workdir)
        self.out = os.path.join(workdir, "runs.jsonl")
        self.config = self.write("gnomon.toml", (
            '[scheduler]\nlease_ttl = "%ds"\nheartbeat_interval = "%dms"\nshutdown_grace = "2s"\n'
            'claim_grace = "1s"\n' % (LEASE_TTL_S, HEARTBEAT_S * 1000)))
        self.jobs = self.write("jobs.toml", (
            '[[job]]\nid = "long"\nschedule = "*/%d * * * * *"\non_lost = "rerun"\n'
            'overlap = "allow"\nenv = { BENCH_DIR = "%s" }\ncommand = \'\'\'%s; sleep 6\'\'\'\n'
            % (LONG_PERIOD_S, workdir, _record(self.out))))
        self.nodes = {}

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, name):
        logf = open(os.path.join(self.dir, name + ".log"), "a")
        self.nodes[name] = subprocess.Popen(
            [self.gnomon, "serve", "--backend", self.url, "--node-id", name, "--jobs", self.jobs,
             "--config", self.config, "--listen", "127.0.0.1:0"],
            stdout=logf, stderr=subprocess.STDOUT)
        logf.close()

    def starts(self):
        return read_records(self.out)

    def run_processes(self):
        marker = ("BENCH_DIR=" + self.dir).encode()
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        if marker in f.read().split(b"\0"):
                            found.append(int(pid))
                except OSError:
                    pass
        return found

    def stop(self):
        for p in self.nodes.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.nodes.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in self.run_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def failover_phase(gnomon, url, workdir, trials, rng):
    fleet = Fleet(gnomon, url, workdir)
    takeovers, problems = [], []
    try:
        for n in ("n1", "n2", "n3"):
            fleet.start(n)
        seen = set()
        for t in range(trials):
            def first_attempt():
                return [r for r in fleet.starts() if r["attempt"] == 1 and r["run"] not in seen]
            try:
                wait_for(first_attempt, 4 * LONG_PERIOD_S, "attempt 1 of a long fire")
            except AssertionError as e:
                problems.append(str(e))
                break
            r = first_attempt()[0]
            seen.add(r["run"])
            holder = r["node"]
            kill_at = r["started"] / 1000.0 + rng.uniform(0.2, 1.2)
            time.sleep(max(0, kill_at - time.time()))
            fleet.nodes[holder].kill()
            killed_ms = time.time() * 1000
            fleet.nodes[holder].wait()

            def second():
                return [x for x in fleet.starts() if x["run"] == r["run"] and x["attempt"] == 2]
            try:
                wait_for(second, 20, "attempt 2 of " + r["run"])
            except AssertionError as e:
                problems.append(str(e))
                fleet.start(holder)
                continue
            s = second()[0]
            if s["node"] == holder:
                problems.append("%s: attempt 2 ran on the killed node" % r["run"])
            takeovers.append((s["started"] - killed_ms) / 1000.0)
            fleet.start(holder)
            # Skip the fires that start while the restarted node comes up.
            seen.update(x["run"] for x in fleet.starts())
    finally:
        fleet.stop()
    takeovers.sort()
    return {"trials": len(takeovers), "p50_s": pct(takeovers, 50), "p99_s": pct(takeovers, 99),
            "max_s": takeovers[-1] if takeovers else float("nan"),
            "min_s": takeovers[0] if takeovers else float("nan"), "problems": problems,
            "all_s": [round(x, 2) for x in takeovers]}


# ---------------------------------------------------------------------------------- main --
def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%d cores, %s" % (os.cpu_count(), model)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    fleet = os.path.abspath(os.path.join(build, "bench", "fleet_load"))
    gnomon = os.path.abspath(os.path.join(build, "apps", "gnomon", "gnomon"))
    for path in (fleet, gnomon):
        if not os.access(path, os.X_OK):
            sys.exit("backend_bench: %s not found (build with -DGNOMON_BUILD_BENCH=ON)" % path)
    for tool in ("/usr/bin/redis-server", "/usr/bin/etcd"):
        if not os.access(tool, os.X_OK):
            log("SKIP backend_bench: %s is not installed" % tool)
            return 0
    seconds = env_num("BENCH_SECONDS", 10.0)
    rounds = env_num("BACKEND_ROUNDS", 3)
    late_s = env_num("LATENESS_SECONDS", min(20.0, 2 * seconds))
    trials = env_num("FAILOVER_TRIALS", 20)
    backends = [b for b in os.environ.get("BACKENDS", "redis,etcd,sqlite").split(",") if b]
    rng = random.Random(env_num("BENCH_SEED", 1))
    data_root = os.environ.get("BENCH_DATA_DIR") or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    workdir = tempfile.mkdtemp(prefix="gnomon-backend-bench-", dir=data_root)
    log("machine: %s; data in %s; load average %s" % (machine(), workdir, loadavg()))
    redis = etcd = None
    result = {"machine": machine(), "load_start": loadavg()}
    try:
        redis = Redis(workdir)
        etcd = Etcd(workdir) if "etcd" in backends else None
        log("-- claims+completions: 3 processes x 4 threads, %g s, %d rounds" % (seconds, rounds))
        result["claims"] = claims_phase(fleet, backends, workdir, seconds, rounds, redis, etcd)
        if "redis" in backends:
            log("-- lateness: 3 nodes, 1,000 every-second jobs on Redis, %g s" % late_s)
            result["lateness"] = lateness_phase(fleet, redis, workdir, late_s)
            log("   load %s" % loadavg())
        result["failover"] = {}
        for b in backends:
            log("-- failover: %s, %d trials" % (b, trials))
            if b == "redis":
                redis.cli("flushall")
                url = redis.url
            elif b == "etcd":
                url = etcd.url("")[:-1]  # `gnomon serve` takes no prefix: the default one
            else:
                url = "sqlite://" + os.path.join(workdir, "failover.db")
            result["failover"][b] = failover_phase(gnomon, url, os.path.join(workdir, "fo-" + b),
                                                   trials, rng)
            log("   %s  load %s" % (result["failover"][b], loadavg()))
    finally:
        for s in (redis, etcd):
            if s:
                s.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    result["load_end"] = loadavg()
    report(result, seconds, late_s, trials)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def report(r, seconds, late_s, trials):
    target_failover = LEASE_TTL_S + RENEW_S + 1
    log("\n== backends (%s; load %s -> %s)" % (r["machine"], r["load_start"], r["load_end"]))
    log("| backend | claims+completions/s (median of rounds) | rounds | client CPU/op | "
        "server CPU/op | Redis commands/op |")
    log("|---|---:|---|---:|---:|---:|")
    for b, c in r["claims"].items():
        log("| %s | %.0f | %s | %.0f µs | %s | %s |" % (
            b, c["ops_s"], ", ".join(str(x) for x in c["rounds"]), c["client_cpu_us_per_op"],
            "%.0f µs" % c["server_cpu_us_per_op"] if "server_cpu_us_per_op" in c else "in-process",
            "%.1f" % c["cmds_per_op"] if "cmds_per_op" in c else "-"))
    if "redis" in r["claims"]:
        c = r["claims"]["redis"]
        log("Redis time per claim+completion by command (µs, calls): %s" % ", ".join(
            "%s %.1f (%.2f)" % x for x in c.get("top_usec_per_op", [])))
        log("\nredis-benchmark SET NX PX, %d clients: %.0f/s; gnomon / SET NX = %.2f (target "
            ">= 0.35: %s)" % (c["clients"], c["set_nx_s"], c["ratio"],
                              "met" if c["ratio"] >= 0.35 else "MISSED"))
    if "lateness" in r:
        lt = r["lateness"]
        log("\nlateness (%d fires of %d expected in %g s): p50 %.2f ms, p99 %.2f ms (target < 10: "
            "%s), p99.9 %.2f ms, max %.2f ms" % (
                lt["fires"], lt["expected"], late_s, lt["p50_ms"], lt["p99_ms"],
                "met" if lt["p99_ms"] < 10 else "MISSED", lt["p999_ms"], lt["max_ms"]))
        log("per fire: %.2f round trips (MONITOR, target <= 3: %s), %.1f Redis commands, "
            "gnomon CPU %.0f µs (target <= 30: %s), Redis CPU %.0f µs" % (
                lt["round_trips_per_fire"], "met" if lt["round_trips_per_fire"] <= 3 else "MISSED",
                lt["cmds_per_fire"], lt["client_cpu_us_per_fire"],
                "met" if lt["client_cpu_us_per_fire"] <= 30 else "MISSED",
                lt["server_cpu_us_per_fire"]))
        log("round trips per fire by command: %s" % lt["round_trips_by_command"])
    log("\nfailover, kill -9 of the holder -> attempt 2 starts on another node (target p99 < "
        "%.1f s):" % target_failover)
    for b, f in r["failover"].items():
        log("  %-6s %d trials: p50 %.2f s, p99 %.2f s (%s), min %.2f, max %.2f%s" % (
            b, f["trials"], f["p50_s"], f["p99_s"],
            "met" if f["p99_s"] < target_failover else "MISSED", f["min_s"], f["max_s"],
            "; problems: %s" % f["problems"] if f["problems"] else ""))


if __name__ == "__main__":
    sys.exit(main())
