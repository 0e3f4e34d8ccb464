#!/usr/bin/env python3
"""make bench-scale: many jobs with mixed schedules over three gnomon nodes and one Redis.

    python3 bench/scale_bench.py BUILD_DIR        (env: SCALE_JOBS, SCALE_PER_SECOND,
                                                   SCALE_KINDS, SCALE_SECONDS, SCALE_WARMUP,
                                                   SCALE_WORKERS)

Starts redis-server (appendonly yes, appendfsync everysec, data on /dev/shm when present) on a
free loopback port, then three `fleet_load scale` processes (bench/fleet_load.cc) with the same
SCALE_JOBS in-process jobs: SCALE_PER_SECOND of them every second, the rest spread evenly over
SCALE_KINDS (default "10s,1m,5m,1h,1d": every 10 s, every minute, every 5 minutes, hourly and
daily). Each node measures, after a warm-up: the
fires it ran, its claim attempts, fire lateness (start minus scheduled instant, a reservoir of
samples), CPU and resident memory. Prints a markdown table and a RESULT json line. Fires cannot
run twice (each run is a claimed fire: the backend refuses a second claim); a miss shows as a
sustained rate below the schedule's rate, which is computed and printed beside it.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


PERIOD_S = {"10s": 10, "1m": 60, "5m": 300, "1h": 3600, "1d": 86400}


def expected_rate(jobs, per_second, kinds):
    """Fires per second of the job mix (see RunScale in bench/fleet_load.cc): per_second jobs
    every second, the rest spread evenly over `kinds`."""
    rest = max(0, jobs - per_second)
    n = len(kinds)
    return per_second + sum((rest // n + (1 if i < rest % n else 0)) / PERIOD_S[k]
                            for i, k in enumerate(kinds))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    tool = os.path.join(build, "bench", "fleet_load")
    if not os.access(tool, os.X_OK):
        sys.exit("scale_bench: %s not built (cmake --build %s --target fleet_load)" % (tool, build))
    if not shutil.which("redis-server"):
        print("scale_bench: SKIP: redis-server is not installed")
        return 0
    jobs = int(os.environ.get("SCALE_JOBS", "1000000"))
    per_second = int(os.environ.get("SCALE_PER_SECOND", "0"))
    kinds = os.environ.get("SCALE_KINDS", "10s,1m,5m,1h,1d").split(",")
    if any(k not in PERIOD_S for k in kinds):
        sys.exit("scale_bench: SCALE_KINDS: a comma list of %s" % " ".join(PERIOD_S))
    seconds = float(os.environ.get("SCALE_SECONDS", "30"))
    # Every node measures the same window, after loading its jobs and a warm-up in which
    # ownership settles (each node has read the others' heartbeats).
    warmup = float(os.environ.get("SCALE_WARMUP", str(20 + jobs / 50000)))
    workers = os.environ.get("SCALE_WORKERS", "16")
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    tmp = tempfile.mkdtemp(prefix="gnomon-scale-", dir=root)
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                              "--dir", tmp], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                               text=True)
            if r.stdout.strip() == "PONG":
                break
            time.sleep(0.1)
        t0 = time.time()
        measure_at = t0 + warmup
        nodes = [subprocess.Popen([tool, "scale", "--backend", "redis://127.0.0.1:%d" % port,
                                   "--measure-at", "%.3f" % measure_at,
                                   "--jobs", str(jobs), "--per-second", str(per_second),
                                   "--kinds", ",".join(kinds),
                                   "--seconds", str(seconds), "--workers", workers,
                                   "--node", "n%d" % i],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for i in (1, 2, 3)]
        results = []
        for p in nodes:
            out, _ = p.communicate(timeout=seconds * 4 + 600)
            line = [l for l in out.splitlines() if l.startswith("{")]
            if p.returncode != 0 or not line:
                sys.exit("scale_bench: a node failed:\n" + out[-2000:])
            results.append(json.loads(line[-1]))
        info = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"],
                              capture_output=True, text=True).stdout
        redis_mem = next((l.split(":")[1].strip() for l in info.splitlines()
                          if l.startswith("used_memory_human:")), "?")
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    runs = sum(r["runs"] for r in results)
    claims = sum(r["claimed"] + r["claim_lost"] for r in results)
    rate = runs / seconds
    want = expected_rate(jobs, per_second, kinds)
    print("\n### bench-scale: %d jobs (%d every second, the rest every %s), 3 nodes, one Redis, "
          "%.0f s measured" % (jobs, per_second, " / ".join(kinds), seconds))
    print("load average at the end: %s" % open("/proc/loadavg").read().split()[0])
    print("\n| node | fires run/s | claims/fire | lateness p50 | p99 | max | CPU (cores) | "
          "RSS after load | RSS at end | job load time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print("| %s | %.0f | %.2f | %.1f ms | %.1f ms | %.0f ms | %.2f | %.0f MiB | %.0f MiB | "
              "%.1f s |" % (r["node"], r["runs"] / seconds,
                            (r["claimed"] + r["claim_lost"]) / max(1, r["runs"]), r["p50_ms"],
                            r["p99_ms"], r["max_ms"], r["cpu_s"] / seconds, r["rss_loaded_mib"],
                            r["rss_mib"], r["load_s"]))
    print("\ncluster: %.0f fires/s run of %.0f/s scheduled (%.1f%%), %.2f claim attempts per fire, "
          "Redis memory %s, wall %.0f s" % (rate, want, 100 * rate / want if want else 0,
                                             claims / max(1, runs), redis_mem, time.time() - t0))
    print("RESULT " + json.dumps({"jobs": jobs, "per_second": per_second, "kinds": kinds,
                                  "rate": rate,
                                  "scheduled_rate": want, "claims_per_fire": claims / max(1, runs),
                                  "nodes": results, "redis_memory": redis_mem}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
