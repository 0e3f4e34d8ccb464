#!/usr/bin/env bash
# Runs the Google Benchmark programs of a release build and prints medians of 5 repetitions, then
# gnomon's cron search against robfig/cron's on the same cases (bench/cron_vs_robfig.py;
# CRON_VS_ROBFIG=0 skips it, ROUNDS shortens it), then the HTTP API load benchmark (bench/api_load.sh; API_LOAD=0 skips it, API_LOAD_SECONDS and
# API_LOAD_ROUNDS shorten it), then the backend benchmarks (bench/backend_bench.py: Redis, etcd and
# SQLite claims/s, fire lateness, failover; BACKEND_BENCH=0 skips them, BENCH_SECONDS,
# BACKEND_ROUNDS, LATENESS_SECONDS and FAILOVER_TRIALS shorten them), then the Redis server's CPU
# per fire of the claim and report scripts (bench/redis_script_cost.py; SCRIPT_COST=0 skips it),
# then lateness and CPU per fire with ?wait_replicas=1 against without (bench/wait_replicas_bench.py;
# WAIT_REPLICAS_BENCH=0 skips it), then what publishing live output costs each backend (bench/live_output_bench.py;
# LIVE_OUTPUT_BENCH=0 skips it).
set -euo pipefail
build=${1:-build/release}
for b in "$build"/bench/*_bench; do
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
       --benchmark_display_aggregates_only=true 2>&1 | grep -E "^(BM_|Run on|CPU|Load)|median"
done
if [ "${CRON_VS_ROBFIG:-1}" != 0 ]; then
  echo "== cron_vs_robfig (CronExpr::Next against robfig/cron v3, same cases and start instants)"
  python3 "$(dirname "$0")/../bench/cron_vs_robfig.py" "$build"
fi
if [ "${API_LOAD:-1}" != 0 ]; then
  echo "== api_load (HTTP API under load)"
  "$(dirname "$0")/../bench/api_load.sh" "$build"
fi
if [ "${BACKEND_BENCH:-1}" != 0 ]; then
  echo "== backend_bench (Redis, etcd, SQLite: claims/s, lateness, failover)"
  python3 "$(dirname "$0")/../bench/backend_bench.py" "$build"
fi
if [ "${SCRIPT_COST:-1}" != 0 ]; then
  echo "== redis_script_cost (Redis CPU per fire of the claim and report scripts)"
  python3 "$(dirname "$0")/../bench/redis_script_cost.py" "$build"
fi
if [ "${WAIT_REPLICAS_BENCH:-1}" != 0 ]; then
  echo "== wait_replicas_bench (lateness and CPU per fire with ?wait_replicas=1, against without)"
  python3 "$(dirname "$0")/../bench/wait_replicas_bench.py" "$build"
fi
if [ "${LIVE_OUTPUT_BENCH:-1}" != 0 ]; then
  echo "== live_output_bench (backend cost of publishing live output, against a fire)"
  python3 "$(dirname "$0")/../bench/live_output_bench.py" "$build"
fi
