#!/usr/bin/env bash
# Runs the Google Benchmark programs of a release build and prints medians of 5 repetitions.
set -euo pipefail
build=${1:-build/release}
for b in "$build"/bench/*_bench; do
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
       --benchmark_display_aggregates_only=true 2>&1 | grep -E "^(BM_|Run on|CPU|Load)|median"
done
