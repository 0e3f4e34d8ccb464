#!/usr/bin/env python3
"""What `?wait_replicas=1` costs: fire lateness and CPU per fire with and without it, same run.

    bench/wait_replicas_bench.py [BUILD_DIR]     (default build/release; run by scripts/bench.sh)

Starts a redis-server 7.0 (`--appendonly yes --appendfsync everysec`) and one replica of it (the
same settings, `--replicaof`), both on free loopback ports, then runs the lateness phase of
bench/backend_bench.py (three `fleet_load lateness` nodes, 1,000 in-process every-second jobs,
LATENESS_SECONDS (20) s after 3 s of warm-up) on `redis://…` and on `redis://…?wait_replicas=1`,
alternating, WAIT_ROUNDS (2) rounds each; prints the medians and one JSON line "RESULT {...}".
docs/benchmarks.md "Claims that wait for a replica" has the method and the figures.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from backend_bench import Redis, lateness_phase, log  # noqa: E402
from harness import free_port, wait_for  # noqa: E402


def start_replica(workdir, primary_port):
    port = free_port()
    data = os.path.join(workdir, "replica")
    os.makedirs(data)
    proc = subprocess.Popen(
        ["/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "yes", "--appendfsync", "everysec", "--dir", data,
         "--protected-mode", "no", "--replicaof", "127.0.0.1", str(primary_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    return proc


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    fleet = os.path.join(build, "bench", "fleet_load")
    seconds = float(os.environ.get("LATENESS_SECONDS", "20"))
    rounds = int(os.environ.get("WAIT_ROUNDS", "2"))
    workdir = tempfile.mkdtemp(prefix="gnomon-wait-", dir=os.environ.get("BENCH_DATA_DIR"))
    redis = Redis(workdir)
    redis.cli("config", "set", "repl-diskless-sync-delay", "0")
    replica = start_replica(workdir, redis.port)
    plain_url = redis.url
    results = {"plain": [], "wait_replicas=1": []}
    try:
        wait_for(lambda: "state=online" in redis.cli("info", "replication"), 30,
                 "the replica to be online")
        for r in range(rounds):
            for name, url in (("plain", plain_url), ("wait_replicas=1",
                                                     plain_url + "?wait_replicas=1")):
                redis.url = url
                res = lateness_phase(fleet, redis, workdir, seconds)
                log("round %d %-16s fires %d/%d p50 %.2f ms p99 %.2f ms redis CPU %.1f us/fire "
                    "node CPU %.1f us/fire round trips %.3f/fire" % (
                        r + 1, name, res["fires"], res["expected"], res["p50_ms"],
                        res["p99_ms"], res["server_cpu_us_per_fire"],
                        res["client_cpu_us_per_fire"], res["round_trips_per_fire"]))
                results[name].append(res)
    finally:
        replica.kill()
        replica.wait()
        redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {}
    for name, runs in results.items():
        med = lambda k: statistics.median(x[k] for x in runs)  # noqa: E731
        summary[name] = {k: med(k) for k in ("p50_ms", "p99_ms", "server_cpu_us_per_fire",
                                             "client_cpu_us_per_fire", "round_trips_per_fire")}
        summary[name]["fires"] = [x["fires"] for x in runs]
        summary[name]["expected"] = [x["expected"] for x in runs]
    log("")
    log("| | plain | wait_replicas=1 |")
    log("|---|---:|---:|")
    for k, label in (("p50_ms", "lateness p50 (ms)"), ("p99_ms", "lateness p99 (ms)"),
                     ("server_cpu_us_per_fire", "Redis primary CPU per fire (µs)"),
                     ("client_cpu_us_per_fire", "node CPU per fire (µs)"),
                     ("round_trips_per_fire", "round trips per fire")):
        log("| %s | %.2f | %.2f |" % (label, summary["plain"][k], summary["wait_replicas=1"][k]))
    print("RESULT " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
