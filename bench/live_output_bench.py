#!/usr/bin/env python3
"""What publishing live output costs each backend, against what a fire costs.

    python3 bench/live_output_bench.py BUILD_DIR   (env: OUTPUT_COUNT=2000, OUTPUT_ROUNDS=3,
                                                    BACKENDS=redis,etcd,sqlite)

For each backend (redis-server with appendonly yes / appendfsync everysec, a one-member etcd,
an SQLite file; data on /dev/shm when present) runs `fleet_load output` for three operations,
OUTPUT_ROUNDS times each, interleaved: `pair` (Claim + final Report of a fire: the reference),
`1k` and `64k` (Coordinator::SaveLiveOutput of a 1 KiB / 64 KiB tail into a held claim). Prints
the client's time per operation and, for Redis and etcd, the server's CPU per operation (INFO
cpu / /proc), medians over the rounds, and each as a ratio to `pair` of the same round.
docs/benchmarks.md "Live output" holds the figures and the decision they support.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_bench import Etcd, Redis, env_num, log, machine  # noqa: E402

OPS = ("pair", "1k", "64k")


def run(fleet, url, op, count, tag):
    r = subprocess.run([fleet, "output", "--backend", url, "--op", op, "--count", str(count),
                        "--tag", tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError("fleet_load output %s failed: %s" % (op, r.stderr.strip()))
    return json.loads(r.stdout)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    fleet = os.path.abspath(os.path.join(build, "bench", "fleet_load"))
    if not os.access(fleet, os.X_OK):
        sys.exit("live_output_bench: %s not found (build with -DGNOMON_BUILD_BENCH=ON)" % fleet)
    count = int(env_num("OUTPUT_COUNT", 2000))
    rounds = int(env_num("OUTPUT_ROUNDS", 3))
    backends = [b for b in os.environ.get("BACKENDS", "redis,etcd,sqlite").split(",") if b]
    data_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    workdir = tempfile.mkdtemp(prefix="gnomon-output-bench-", dir=data_root)
    log("machine: %s; %d operations per run, %d rounds" % (machine(), count, rounds))
    result = {}
    try:
        for b in backends:
            server = None
            if b == "redis":
                server = Redis(workdir)
                url = server.url
            elif b == "etcd":
                server = Etcd(workdir)
                url = server.url("")[:-1]
            else:
                url = "sqlite://" + os.path.join(workdir, "output.db")
            per = {op: {"us": [], "server_us": [], "ratio": [], "server_ratio": []} for op in OPS}
            for rnd in range(rounds):
                row = {}
                for op in OPS:
                    cpu0 = server.cpu() if server else 0.0
                    out = run(fleet, url, op, count, "%s-r%d-%s" % (b, rnd, op))
                    server_us = (server.cpu() - cpu0) * 1e6 / count if server else None
                    row[op] = (out["us_per_op"], server_us)
                for op in OPS:
                    us, server_us = row[op]
                    per[op]["us"].append(us)
                    per[op]["ratio"].append(us / row["pair"][0])
                    if server_us is not None:
                        per[op]["server_us"].append(server_us)
                        per[op]["server_ratio"].append(server_us / row["pair"][1])
            result[b] = {op: {k: statistics.median(v) for k, v in d.items() if v}
                         for op, d in per.items()}
            for op in OPS:
                m = result[b][op]
                log("%-6s %-4s client %8.1f us/op (x%.2f of a fire)%s" % (
                    b, op, m["us"], m["ratio"],
                    "; server CPU %.1f us/op (x%.2f)" % (m["server_us"], m["server_ratio"])
                    if "server_us" in m else ""))
            if server:
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
