#!/usr/bin/env python3
"""make bench-scale: many jobs with mixed schedules over three gnomon nodes and one Redis, or a
Redis Cluster.

    python3 bench/scale_bench.py BUILD_DIR        (env: SCALE_JOBS, SCALE_PER_SECOND,
                                                   SCALE_KINDS, SCALE_SECONDS, SCALE_WARMUP,
                                                   SCALE_WORKERS, SCALE_DRAIN,
                                                   SCALE_REDIS_ARGS: more redis-server flags,
                                                   SCALE_SETUPS: single,single-pinned,
                                                   cluster,cluster-wait (default single),
                                                   SCALE_PRIMARIES: 3,
                                                   SCALE_REPLICAS: 0,
                                                   SCALE_SWEEP: 1 for the capacity sweep)

For each setup of SCALE_SETUPS, one after another: "single" starts redis-server as
bench/backend_bench.py does (appendonly yes, appendfsync everysec), "single-pinned" the same with
its process on CPU 0 alone (taskset) and its AOF rewrite child (aof_rewrite_cpulist) and the nodes
on the other CPUs, as a Redis host that runs nothing else would be, "cluster" SCALE_PRIMARIES such
servers formed into a Redis Cluster (backend_bench.RedisCluster) with SCALE_REPLICAS replicas per
primary, "cluster-wait" the same with `?wait_replicas=1` on the URL (SCALE_REPLICAS >= 1), data on
/dev/shm when present; then three `fleet_load scale` processes (bench/fleet_load.cc) with the same
SCALE_JOBS in-process jobs: SCALE_PER_SECOND of them every second, the rest spread evenly over
SCALE_KINDS (default "10s,1m,5m,1h,1d": every 10 s, every minute, every 5 minutes, hourly and
daily). Every node measures the same window of SCALE_SECONDS after a warm-up: the fires the job set
schedules in it (counted from the schedules), the ones it ran by the window's end plus SCALE_DRAIN
seconds (default 10; a fire still waiting then counts as not run), their lateness (start minus
scheduled instant, a reservoir of samples), its claim attempts, CPU and resident memory, and the
worst lateness of each of the window's seconds, laid beside the intervals in which a primary
rewrote its AOF (INFO persistence, polled every 0.2 s). Prints, per setup, markdown tables and a
RESULT json line (and with two setups a table of both side by side). Fires cannot run twice (each
run is a claimed fire: the backend refuses a second claim), so the runs summed over the nodes
against the scheduled count is the share of the window's fires that ran.

With SCALE_SWEEP=1, each setup looks for the highest rate it carries at the target (at least
SCALE_TARGET_SHARE percent, default 95, of the window's fires run, and a worst-node p99 lateness
under SCALE_TARGET_P99_MS, default 1000): the SCALE_KINDS mix and the same mix with 1 to
SCALE_SWEEP_STEPS (default 7) more daily kinds (the same jobs, fewer of them on the frequent
schedules: at a million jobs 24,058 fires/s down to 10,031), one run per step: the slowest
first, then bisecting toward the fastest; it prints each step and a `SWEEP` json line per
setup.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_bench import Redis, RedisCluster  # noqa: E402  (make bench's redis-server set-up)


PERIOD_S = {"10s": 10, "1m": 60, "5m": 300, "1h": 3600, "1d": 86400}


def expected_rate(jobs, per_second, kinds):
    """Fires per second of the job mix (see RunScale in bench/fleet_load.cc): per_second jobs
    every second, the rest spread evenly over `kinds`."""
    rest = max(0, jobs - per_second)
    n = len(kinds)
    return per_second + sum((rest // n + (1 if i < rest % n else 0)) / PERIOD_S[k]
                            for i, k in enumerate(kinds))


def children_cpu(info):
    """CPU seconds a server's forked children (AOF rewrites) used so far, from INFO cpu; a
    child's are counted when it is reaped, at the rewrite's end."""
    return float(info["used_cpu_user_children"]) + float(info["used_cpu_sys_children"])


class PersistenceSampler:
    """Polls each primary's INFO persistence every 0.2 s in a thread: the intervals (unix
    seconds) in which it was rewriting its AOF (a forked child writing the whole dataset), each
    rewrite's fork time and the CPU its child used, so a lateness spike can be laid beside
    them."""

    def __init__(self, servers):
        self.servers = servers
        self.rewrites = []  # (server index, start, end or None, fork ms, child CPU s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        open_at = {}
        while not self._stop.wait(0.2):
            for i, server in enumerate(self.servers):
                try:
                    info = server.info("persistence", "stats", "cpu")
                except Exception:  # a server gone at the end
                    continue
                now = time.time()
                busy = info.get("aof_rewrite_in_progress") == "1"
                children = children_cpu(info)
                if busy and i not in open_at:
                    open_at[i] = (now, children)
                elif not busy and i in open_at:
                    start, before = open_at.pop(i)
                    self.rewrites.append((i, start, now,
                                          int(info.get("latest_fork_usec", "0")) / 1000.0,
                                          children - before))
        for i, (start, _) in open_at.items():
            self.rewrites.append((i, start, None, 0.0, 0.0))

    def stop(self):
        self._stop.set()
        self._thread.join()
        return sorted(self.rewrites, key=lambda r: r[1])


def run_setup(setup, tool, params):
    """Runs the benchmark once against `setup` ("single": one redis-server; "cluster": a Redis
    Cluster of SCALE_PRIMARIES primaries), prints its tables and returns its RESULT dict."""
    jobs, per_second, kinds = params["jobs"], params["per_second"], params["kinds"]
    seconds, warmup, workers, drain = (params["seconds"], params["warmup"], params["workers"],
                                       params["drain"])
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    tmp = tempfile.mkdtemp(prefix="gnomon-scale-", dir=root)
    extra = os.environ.get("SCALE_REDIS_ARGS", "").split()
    # single-pinned: the primary's process (its main thread and its bio and allocator threads)
    # on CPU 0 alone; its AOF rewrite child and the nodes on the other CPUs.
    others = "1" if os.cpu_count() == 2 else "1-%d" % (os.cpu_count() - 1)
    redis_prefix, node_prefix = ((["taskset", "-c", "0"], ["taskset", "-c", others])
                                 if setup == "single-pinned" else ([], []))
    if setup == "single-pinned":
        extra = extra + ["--aof_rewrite_cpulist", others, "--bgsave_cpulist", others]
    redis = (RedisCluster(tmp, int(os.environ.get("SCALE_PRIMARIES", "3")), extra,
                          int(os.environ.get("SCALE_REPLICAS", "0")))
             if setup.startswith("cluster") else Redis(tmp, extra, prefix=redis_prefix))
    url = redis.url + ("?wait_replicas=1" if setup == "cluster-wait" else "")
    primaries = redis.primaries if hasattr(redis, "primaries") else [redis]
    sampler = PersistenceSampler(primaries)

    def persistence_totals():
        """The primaries' forked children's CPU so far, their AOF sizes and their used memory,
        each summed."""
        infos = [p.info("persistence", "cpu", "memory") for p in primaries]
        return (sum(children_cpu(i) for i in infos),
                sum(int(i.get("aof_current_size", "0")) for i in infos),
                sum(int(i.get("used_memory", "0")) for i in infos))

    try:
        t0 = time.time()
        measure_at = t0 + warmup
        nodes = [subprocess.Popen(node_prefix + [tool, "scale", "--backend", url,
                                   "--measure-at", "%.3f" % measure_at,
                                   "--jobs", str(jobs), "--per-second", str(per_second),
                                   "--kinds", ",".join(kinds),
                                   "--seconds", str(seconds), "--drain", str(drain),
                                   "--workers", workers,
                                   "--node", "n%d" % i],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for i in (1, 2, 3)]
        # Redis's CPU (per primary) and commands over the same window, read beside the nodes.
        redis_at = []
        for at in (measure_at, measure_at + seconds):
            time.sleep(max(0.0, at - time.time()))
            redis_at.append((redis.cpus(), redis.command_stats(),
                             redis.replica_cpus() if hasattr(redis, "replica_cpus") else [],
                             *persistence_totals()))
        results = []
        for p in nodes:
            out, _ = p.communicate(timeout=seconds * 4 + drain + 600)
            line = [l for l in out.splitlines() if l.startswith("{")]
            if p.returncode != 0 or not line:
                sys.exit("scale_bench: a node failed:\n" + out[-2000:])
            results.append(json.loads(line[-1]))
            results[-1]["notes"] = [l for l in out.splitlines() if l.startswith("fleet_load: ")]
        redis_mem = redis.memory()
    finally:
        rewrites = sampler.stop()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    runs = sum(r["runs"] for r in results)
    claims = sum(r["claimed"] + r["claim_lost"] for r in results)
    rate = runs / seconds
    want = expected_rate(jobs, per_second, kinds)
    scheduled = results[0]["scheduled"]
    if any(r["scheduled"] != scheduled for r in results):
        sys.exit("scale_bench: the nodes counted different schedules: %s" %
                 [r["scheduled"] for r in results])
    ran = sum(r["window_runs"] for r in results)
    primary_cores = [(b - a) / seconds for a, b in zip(redis_at[0][0], redis_at[1][0])]
    redis_cores = sum(primary_cores)
    replica_cores = [(b - a) / seconds for a, b in zip(redis_at[0][2], redis_at[1][2])]
    per_command = {c: (calls - redis_at[0][1].get(c, (0, 0))[0],
                       usec - redis_at[0][1].get(c, (0, 0))[1])
                   for c, (calls, usec) in redis_at[1][1].items()}
    where = ("one Redis" if setup == "single"
             else "one Redis, pinned: its process on CPU 0, its rewrite child and the nodes on "
             "CPU %s" % others if setup == "single-pinned"
             else "a Redis Cluster of %d primaries (%s replicas each)%s" % (
                 len(primary_cores), os.environ.get("SCALE_REPLICAS", "0"),
                 ", ?wait_replicas=1" if setup == "cluster-wait" else ""))
    print("\n### bench-scale: %d jobs (%d every second, the rest every %s), 3 nodes, %s, "
          "%.0f s measured" % (jobs, per_second, " / ".join(kinds), where, seconds))
    print("load average at the end: %s" % open("/proc/loadavg").read().split()[0])
    print("\n| node | window fires run | fires run/s | claims/fire | catch-ups | lateness p50 | "
          "p99 | max | CPU (cores) | RSS after load | RSS at end | job load time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print("| %s | %d | %.0f | %.2f | %s | %.1f ms | %.1f ms | %.0f ms | %.2f | %.0f MiB | "
              "%.0f MiB | %.1f s |" % (r["node"], r["window_runs"], r["runs"] / seconds,
                            (r["claimed"] + r["claim_lost"]) / max(1, r["runs"]),
                            "%.1f %%" % (100.0 * r["catch_ups"] / max(1, r["claimed"]))
                            if "catch_ups" in r else "n/a", r["p50_ms"],
                            r["p99_ms"], r["max_ms"], r["cpu_s"] / seconds, r["rss_loaded_mib"],
                            r["rss_mib"], r["load_s"]))
    print("\nfleet: %d of the window's %d scheduled fires ran within %.0f s after it (%.2f%%); "
          "%.0f fires/s run (the mix averages %.0f/s), %.2f claim attempts per fire; Redis: %.2f cores "
          "(%s per primary; %.1f us per fire run), memory %s; wall %.0f s" % (
              ran, scheduled, drain, 100.0 * ran / scheduled if scheduled else 0, rate, want,
              claims / max(1, runs), redis_cores, " / ".join("%.2f" % c for c in primary_cores),
              1e6 * redis_cores / rate if rate else 0, redis_mem, time.time() - t0))
    if replica_cores:
        print("replicas: %s cores" % " / ".join("%.2f" % c for c in replica_cores))
    print("\nRedis commands in the window, per fire run (INFO commandstats, summed over the "
          "primaries; the scripts' own commands are counted in their rows and in evalsha):\n")
    print("| command | calls per fire | us per fire |")
    print("|---|---:|---:|")
    for c, (calls, usec) in sorted(per_command.items(), key=lambda kv: -kv[1][1])[:16]:
        if calls:
            print("| %s | %.2f | %.1f |" % (c, calls / (rate * seconds), usec / (rate * seconds)))
    # The window's worst seconds beside the AOF rewrites (times from the window's start).
    win0 = results[0]["window_start_ms"] / 1000.0
    worst = [max(col) for col in zip(*(r["worst_ms_by_second"] for r in results))]
    rewrite_cores = (redis_at[1][3] - redis_at[0][3]) / seconds
    print("\nAOF rewrites from start-up to the end (seconds from the window's start; primary, "
          "fork ms, the child's CPU s): %s" % ("; ".join(
              "%+.1f to %s (%d, %.1f ms, %.1f s)" % (
                  a - win0, "%+.1f" % (b - win0) if b else "end", i, fork, cpu)
              for i, a, b, fork, cpu in rewrites) or "none"))
    print("the rewrites' forked children that ended in the window used %.2f cores over it "
          "(besides the primaries' own)" % rewrite_cores)
    # The AOF's growth per fire, when no rewrite overlapped the window (a rewrite restarts it).
    in_window = [r for r in rewrites
                 if r[1] < win0 + seconds + 1 and (r[2] is None or r[2] > win0 - 1)]
    aof_per_fire = None if in_window or not runs else (redis_at[1][4] - redis_at[0][4]) / runs
    print("AOF growth per fire run over the window: %s" % (
        "%.0f bytes" % aof_per_fire if aof_per_fire is not None
        else "n/a (a rewrite overlapped it)"))
    # What the dataset grew by per fire: mostly its fire marker, kept fire_retention (7 days) after
    # the fire closes, once the history caps hold the records.
    memory_per_fire = (redis_at[1][5] - redis_at[0][5]) / runs if runs else None
    print("Redis memory growth per fire run over the window (used_memory): %s" % (
        "%.0f bytes" % memory_per_fire if memory_per_fire is not None else "n/a"))
    print("window starts at unix ms %s; runs over 5 s late: %s; of them retries (attempt > 1): %s; "
          "errors: %s, of fires in the window: %s; lost-run resolutions: %s (per node)" % (
              (results[0]["window_start_ms"],) + tuple(
                  " / ".join(str(r.get(k, "n/a")) for r in results)
                  for k in ("over_5s", "over_5s_retries", "errors", "window_errors",
                            "lost_runs"))))
    for r in results:
        for note in r["notes"][:6]:
            print("  %s %s" % (r["node"], note))
    print("worst lateness of each scheduled second of the window, over the nodes (ms): %s" %
          " ".join(str(w) for w in worst))
    result = {"setup": setup, "jobs": jobs, "per_second": per_second, "kinds": kinds,
              "scheduled": scheduled, "ran": ran, "drain_s": drain,
              "redis_cores": redis_cores, "primary_cores": primary_cores,
              "rate": rate, "scheduled_rate": want, "claims_per_fire": claims / max(1, runs),
              "nodes": results, "redis_memory": redis_mem, "replica_cores": replica_cores,
              "rewrite_cores": rewrite_cores, "aof_bytes_per_fire": aof_per_fire,
              "memory_bytes_per_fire": memory_per_fire,
              "aof_rewrites": [[i, a - win0, b - win0 if b else None, fork, cpu]
                               for i, a, b, fork, cpu in rewrites]}
    print("RESULT " + json.dumps(result))
    return result


def share_and_p99(result):
    """A run's share of the window's fires run (percent) and its worst node's p99 lateness (ms)."""
    return (100.0 * result["ran"] / max(1, result["scheduled"]),
            max(n["p99_ms"] for n in result["nodes"]))


def sweep(setup, tool, params):
    """The highest rate of the diluted mixes (params["kinds"] plus 0..SCALE_SWEEP_STEPS daily
    kinds, fastest first) that `setup` carries at the target: the slowest is run first, then
    the rest bisected (a rate the fleet carries is taken to mean it carries every slower one);
    one run per step."""
    steps = int(os.environ.get("SCALE_SWEEP_STEPS", "7"))
    target_share = float(os.environ.get("SCALE_TARGET_SHARE", "95"))
    target_p99_ms = float(os.environ.get("SCALE_TARGET_P99_MS", "1000"))
    mixes = [params["kinds"] + ["1d"] * extra for extra in range(steps + 1)]
    tried = {}  # mix index -> (RESULT dict, whether it meets the target)

    def run(i):
        if i not in tried:
            r = run_setup(setup, tool, dict(params, kinds=mixes[i]))
            share, p99_ms = share_and_p99(r)
            tried[i] = (r, share >= target_share and p99_ms < target_p99_ms)
        return tried[i][1]

    lo, hi = 0, len(mixes) - 1  # the answer, if any, is in [lo, hi]
    if not run(hi):
        best = None
    else:
        while lo < hi:
            mid = (lo + hi) // 2
            if run(mid):
                hi = mid
            else:
                lo = mid + 1
        best = lo
    print("\n### bench-scale sweep: %s, %d jobs, the target: >= %g %% run, worst-node p99 "
          "under %g ms\n" % (setup, params["jobs"], target_share, target_p99_ms))
    print("| mix | fires/s scheduled | run | fires of the window run | worst-node p99 | "
          "Redis cores | nodes' cores | meets |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for i in sorted(tried):
        r, meets = tried[i]
        share, p99_ms = share_and_p99(r)
        print("| %s | %.0f | %.0f | %.2f %% | %.2f s | %.2f | %.2f | %s |" % (
            ",".join(params["kinds"]) + (" + %d × 1d" % i if i else ""),
            r["scheduled_rate"], r["rate"], share, p99_ms / 1000.0, r["redis_cores"],
            sum(n["cpu_s"] for n in r["nodes"]) / params["seconds"], "yes" if meets else "no"))
    carried = tried[best][0]["scheduled_rate"] if best is not None else None
    print("\n%s carries %s" % (
        setup, "none of the mixes at the target" if carried is None
        else "%.0f fires/s at the target%s" % (
            carried, " (the fastest mix: it may carry more)" if best == 0 else "")))
    print("SWEEP " + json.dumps({"setup": setup, "carried_rate": carried,
                                 "carried_kinds": mixes[best] if best is not None else None,
                                 "steps": [{"kinds": mixes[i],
                                            "rate": tried[i][0]["scheduled_rate"],
                                            "meets": tried[i][1]}
                                           for i in sorted(tried)]}))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    tool = os.path.join(build, "bench", "fleet_load")
    if not os.access(tool, os.X_OK):
        sys.exit("scale_bench: %s not built (cmake --build %s --target fleet_load)" % (tool, build))
    if not shutil.which("redis-server"):
        print("scale_bench: SKIP: redis-server is not installed")
        return 0
    setups = os.environ.get("SCALE_SETUPS", "single").split(",")
    if any(s not in ("single", "single-pinned", "cluster", "cluster-wait") for s in setups):
        sys.exit("scale_bench: SCALE_SETUPS: a comma list of single, single-pinned, cluster, "
                 "cluster-wait")
    if "single-pinned" in setups and (os.cpu_count() < 2 or not shutil.which("taskset")):
        sys.exit("scale_bench: single-pinned needs 2 CPUs and taskset")
    if "cluster-wait" in setups and int(os.environ.get("SCALE_REPLICAS", "0")) < 1:
        sys.exit("scale_bench: cluster-wait needs SCALE_REPLICAS >= 1")
    if any(s.startswith("cluster") for s in setups) and not shutil.which("redis-cli"):
        sys.exit("scale_bench: a cluster needs redis-cli")
    jobs = int(os.environ.get("SCALE_JOBS", "1000000"))
    kinds = os.environ.get("SCALE_KINDS", "10s,1m,5m,1h,1d").split(",")
    if any(k not in PERIOD_S for k in kinds):
        sys.exit("scale_bench: SCALE_KINDS: a comma list of %s" % " ".join(PERIOD_S))
    params = {
        "jobs": jobs,
        "per_second": int(os.environ.get("SCALE_PER_SECOND", "0")),
        "kinds": kinds,
        "seconds": float(os.environ.get("SCALE_SECONDS", "30")),
        # Every node measures the same window, after loading its jobs and a warm-up in which
        # ownership settles (each node has read the others' heartbeats).
        "warmup": float(os.environ.get("SCALE_WARMUP", str(20 + jobs / 50000))),
        "workers": os.environ.get("SCALE_WORKERS", "16"),
        "drain": float(os.environ.get("SCALE_DRAIN", "10")),
    }
    if os.environ.get("SCALE_SWEEP") == "1":
        for setup in setups:
            sweep(setup, tool, params)
        return 0
    done = [run_setup(setup, tool, params) for setup in setups]
    if len(done) > 1:
        print("\n### bench-scale: the setups side by side (same job set, one after another)\n")
        print("| setup | fires of the window run | fires run/s | worst-node p50 / p99 | "
              "Redis cores (per primary) | Redis us per fire run | node CPU | node RSS at end |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in done:
            nodes = r["nodes"]
            print("| %s | %.2f %% (%d of %d) | %.0f | %.0f ms / %.0f ms | %.2f (%s) | %.1f | "
                  "%.2f-%.2f cores | %.0f-%.0f MiB |" % (
                      r["setup"], 100.0 * r["ran"] / max(1, r["scheduled"]), r["ran"],
                      r["scheduled"], r["rate"], max(n["p50_ms"] for n in nodes),
                      max(n["p99_ms"] for n in nodes), r["redis_cores"],
                      " / ".join("%.2f" % c for c in r["primary_cores"]),
                      1e6 * r["redis_cores"] / r["rate"] if r["rate"] else 0,
                      min(n["cpu_s"] for n in nodes) / params["seconds"],
                      max(n["cpu_s"] for n in nodes) / params["seconds"],
                      min(n["rss_mib"] for n in nodes), max(n["rss_mib"] for n in nodes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
