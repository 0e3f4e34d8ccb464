#!/usr/bin/env bash
# Runs the Google Benchmark programs of a release build and prints medians of 5 repetitions, then
# the HTTP API load benchmark (bench/api_load.sh; API_LOAD=0 skips it, API_LOAD_SECONDS and
# API_LOAD_ROUNDS shorten it).
set -euo pipefail
build=${1:-build/release}
for b in "$build"/bench/*_bench; do
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
       --benchmark_display_aggregates_only=true 2>&1 | grep -E "^(BM_|Run on|CPU|Load)|median"
done
if [ "${API_LOAD:-1}" != 0 ]; then
  echo "== api_load (HTTP API under load)"
  "$(dirname "$0")/../bench/api_load.sh" "$build"
fi
