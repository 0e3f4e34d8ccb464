#!/usr/bin/env python3
"""gnomon's CronExpr::Next against robfig/cron v3's Schedule.Next, side by side in one run.

    bench/cron_vs_robfig.py [BUILD_DIR]        (default build/release; run by scripts/bench.sh)

Builds bench/robfig/main.go with Debian's Go and robfig/cron (GO111MODULE=off,
GOPATH=/usr/share/gocode, its cache in BUILD_DIR/bench/robfig), then runs ROUNDS (5) rounds, each
BUILD_DIR/bench/cron_bench --benchmark_filter=BM_Starts/ and then the Go program: the same cases
(bench/cron_bench.cc's BM_Starts/*) and the same 1,000 seeded start instants. Both report CPU time
per Next. Prints, per case, the medians over the rounds and gnomon / robfig (target: at most 0.5
on the first five cases, docs/benchmarks.md "Cron search"). CRON_BEFORE=<another cron_bench
binary> adds a column timed in the same rounds (a build of an earlier commit). Python 3 standard
library only.
"""
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_CASES = ["every_5_minutes", "quarter_hours_weekdays", "monthly", "leap_day", "new_york_dst"]


def gnomon_ns(binary):
    out = subprocess.run([binary, "--benchmark_filter=^BM_Starts/", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for b in json.loads(out)["benchmarks"]:
        scale = {"ns": 1, "us": 1e3, "ms": 1e6}[b.get("time_unit", "ns")]
        result[b["name"].split("/", 1)[1]] = b["cpu_time"] * scale
    return result


def robfig_ns(binary):
    out = subprocess.run([binary, "-reps", "1"], check=True, capture_output=True, text=True).stdout
    return {name: float(ns) for name, ns in (line.split() for line in out.splitlines())}


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    rounds = int(os.environ.get("ROUNDS", "5"))
    before = os.environ.get("CRON_BEFORE")
    out_dir = os.path.join(build, "bench", "robfig")
    os.makedirs(out_dir, exist_ok=True)
    robfig = os.path.join(out_dir, "robfig_next")
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOCACHE=os.path.abspath(os.path.join(out_dir, "gocache")), GOFLAGS="")
    subprocess.run(["go", "build", "-o", os.path.abspath(robfig), "./bench/robfig"], cwd=ROOT,
                   env=env, check=True)
    samples = {"gnomon": [], "robfig": [], "before": []}
    for _ in range(rounds):
        samples["gnomon"].append(gnomon_ns(os.path.join(build, "bench", "cron_bench")))
        samples["robfig"].append(robfig_ns(robfig))
        if before:
            samples["before"].append(gnomon_ns(before))

    def median(who, case):
        return statistics.median(s[case] for s in samples[who])

    print(f"{rounds} rounds, medians, CPU ns per Next over 1,000 seeded start instants")
    header = f"{'case':34} {'gnomon ns':>10} {'robfig ns':>10} {'ratio':>6}"
    print(header + (f" {'before ns':>10}" if before else "") + "  target")
    for case in samples["gnomon"][0]:
        g, r = median("gnomon", case), median("robfig", case)
        target = ("met" if g <= 0.5 * r else "NOT MET") if case in TARGET_CASES else "-"
        line = f"{case:34} {g:10.1f} {r:10.1f} {g / r:6.2f}"
        print(line + (f" {median('before', case):10.1f}" if before else "") + f"  {target}")


if __name__ == "__main__":
    main()
