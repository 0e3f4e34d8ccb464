#!/usr/bin/env bash
# The HTTP API under load (docs/benchmarks.md "HTTP API under load"): `gnomon serve` on a SQLite
# backend seeded with 10,000 dynamic jobs and 1,000,000 history records, loaded by wrk with 64
# connections on 2 threads against the job list, one job's runs, /metrics and, as the reference
# measured in the same run, /healthz (no backend, no JSON beyond a constant). Prints a markdown
# table of requests/s, p50 and p99 latency (the median over the rounds) and the ratios to the
# reference.
#
#   bench/api_load.sh [BUILD_DIR]          (default build/release; `make bench` runs it)
#
# Environment (defaults in brackets):
#   API_LOAD_SECONDS [30]  wrk duration per endpoint and round (shorten for trials)
#   API_LOAD_ROUNDS [3]    rounds over all endpoints; figures are the median per endpoint
#   API_LOAD_CONNECTIONS [64], API_LOAD_THREADS [2]   wrk -c / -t
#   API_LOAD_JOBS [10000], API_LOAD_RUNS [1000000]    the seed
#   API_LOAD_SEED_DIR [build/api-seed]  where the seeded file is kept and reused while valid
#                                       (same counts and same bench/api_seed.cc)
#   API_LOAD_CONFIG [""]   more lines for the server's config file (e.g. "[api]
#                          handler_threads = 64")
# Needs wrk and curl (scripts/install-deps.sh installs them).
set -euo pipefail
build=$(realpath "${1:-build/release}")
cd "$(dirname "$0")/.."
seconds=${API_LOAD_SECONDS:-30}
rounds=${API_LOAD_ROUNDS:-3}
connections=${API_LOAD_CONNECTIONS:-64}
threads=${API_LOAD_THREADS:-2}
jobs=${API_LOAD_JOBS:-10000}
runs=${API_LOAD_RUNS:-1000000}
seed_dir=${API_LOAD_SEED_DIR:-build/api-seed}
gnomon=$build/apps/gnomon/gnomon
seeder=$build/bench/api_seed

for tool in wrk curl python3 awk; do
  command -v "$tool" >/dev/null || { echo "api_load: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
for bin in "$gnomon" "$seeder"; do
  [ -x "$bin" ] || { echo "api_load: $bin is missing (build with GNOMON_BUILD_BENCH=ON)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/gnomon-api-load.XXXXXX")
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then
    kill "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- seed (cached) -------------------------------------------------------------------------------
stamp="jobs=$jobs runs=$runs seeder=$(sha256sum bench/api_seed.cc | cut -c1-16)"
if [ -f "$seed_dir/gnomon.db" ] && [ "$(cat "$seed_dir/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "api_load: reusing the seed in $seed_dir ($stamp)"
else
  rm -rf "$seed_dir"
  mkdir -p "$seed_dir"
  # Seeding is about 2 million small transactions; on tmpfs their fsyncs cost nothing.
  seed_tmp=$work
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then seed_tmp=$(mktemp -d /dev/shm/gnomon-api-seed.XXXXXX); fi
  echo "api_load: seeding $jobs jobs and $runs history records ($seed_tmp)"
  if ! "$seeder" --db "$seed_tmp/gnomon.db" --jobs "$jobs" --runs "$runs" | tee "$seed_dir/seed.log"; then
    [ "$seed_tmp" = "$work" ] || rm -rf "$seed_tmp"
    exit 1
  fi
  mv "$seed_tmp/gnomon.db" "$seed_dir/gnomon.db"
  [ "$seed_tmp" = "$work" ] || rm -rf "$seed_tmp"
  echo "$stamp" >"$seed_dir/stamp"
fi
# serve writes (heartbeats, its jobs' state): it gets a copy, the cache stays as seeded.
cp "$seed_dir/gnomon.db" "$work/gnomon.db"

# --- serve ---------------------------------------------------------------------------------------
token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/gnomon.toml" <<EOF
backend = "sqlite://$work/gnomon.db"
listen = "127.0.0.1:$port"
log_level = "warn"

[[token]]
name = "bench"
token = "$token"
role = "read"

${API_LOAD_CONFIG:-}
EOF
base="http://127.0.0.1:$port"
auth="Authorization: Bearer $token"
started=$(date +%s.%N)
"$gnomon" serve --config "$work/gnomon.toml" >"$work/serve.log" 2>&1 &
serve_pid=$!
# Ready = /readyz answers and every seeded job is installed (serve loads them after listening).
loaded=""
for _ in $(seq 1 1200); do
  if ! kill -0 "$serve_pid" 2>/dev/null; then
    echo "api_load: gnomon serve exited:" >&2
    cat "$work/serve.log" >&2
    exit 1
  fi
  if curl -fs "$base/readyz" >/dev/null 2>&1; then
    loaded=$(curl -fs -H "$auth" "$base/metrics" | awk '$1 == "gnomon_jobs" {print $2}')
    [ "${loaded:-0}" -ge "$jobs" ] && break
  fi
  sleep 0.1
done
if [ "${loaded:-0}" -lt "$jobs" ]; then
  echo "api_load: serve did not load $jobs jobs in 120 s (gnomon_jobs = ${loaded:-?})" >&2
  exit 1
fi
echo "api_load: serve ready with $loaded jobs in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"

one_job=$(printf 'bench.job-%05d' $((jobs / 2)))
# Sanity: each endpoint answers 200 with what the benchmark claims to measure.
page=$(curl -fs -H "$auth" "$base/api/v1/jobs")
runs_page=$(curl -fs -H "$auth" "$base/api/v1/runs?job=$one_job")
python3 - "$page" "$runs_page" <<'EOF'
import json, sys
jobs, runs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert len(jobs["jobs"]) == 100 and jobs["next_cursor"], "job list: expected a full first page"
assert len(runs["runs"]) == 50 and runs["next_cursor"], "runs: expected a full page of the job's runs"
print(f"api_load: job list page: {len(sys.argv[1])} bytes; one job's runs page: {len(sys.argv[2])} bytes")
EOF

cat >"$work/auth.lua" <<EOF
wrk.headers["Authorization"] = "Bearer $token"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("API_LOAD %d %.6f %d %d %d %d %d\n", summary.requests,
    summary.duration / 1e6, latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write, e.timeout))
end
EOF

# --- load ----------------------------------------------------------------------------------------
names=("/healthz (reference)" "/api/v1/jobs (first page, 100 jobs)" "/api/v1/runs?job=<one> (50 runs)" "/metrics")
paths=("/healthz" "/api/v1/jobs" "/api/v1/runs?job=$one_job" "/metrics")
echo "api_load: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "api_load: wrk -t$threads -c$connections -d${seconds}s --latency, $rounds round(s) over ${#paths[@]} endpoints"
: >"$work/results"
for round in $(seq 1 "$rounds"); do
  for i in "${!paths[@]}"; do
    out=$(wrk -t"$threads" -c"$connections" -d"${seconds}s" --timeout 10s --latency \
      -s "$work/auth.lua" "$base${paths[$i]}")
    line=$(grep '^API_LOAD ' <<<"$out") || { echo "$out" >&2; exit 1; }
    echo "$i $line" >>"$work/results"
    read -r _ requests duration p50 p99 status_errors socket_errors timeouts <<<"$line"
    awk -v r="$round" -v n="${names[$i]}" -v q="$requests" -v d="$duration" -v p50="$p50" \
      -v p99="$p99" -v s="$status_errors" -v e="$socket_errors" -v t="$timeouts" 'BEGIN {
      printf "api_load: round %d %-40s %8.0f req/s  p50 %7.2f ms  p99 %7.2f ms  non-2xx %d  socket errors %d  timeouts %d\n",
        r, n, q / d, p50 / 1000, p99 / 1000, s, e, t }'
  done
done
kill -0 "$serve_pid" 2>/dev/null || { echo "api_load: gnomon serve died during the load" >&2; cat "$work/serve.log" >&2; exit 1; }
# It counts runnable threads, the server's 64 workers and wrk's included: it shows the load
# beside the benchmark only when read before it.
echo "api_load: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"

# --- report --------------------------------------------------------------------------------------
python3 - "$work/results" "${names[@]}" <<'EOF'
import statistics, sys
path, names = sys.argv[1], sys.argv[2:]
rows = {}
for line in open(path):
    i, _, requests, duration, p50, p99, status, socket, timeout = line.split()
    rows.setdefault(int(i), []).append(
        (int(requests) / float(duration), int(p50) / 1000, int(p99) / 1000,
         int(status) + int(socket) + int(timeout)))
med = {i: tuple(statistics.median(r[k] for r in v) for k in range(3)) + (sum(r[3] for r in v),)
       for i, v in rows.items()}
ref = med[0]
print(f"\nMedians of {len(rows[0])} round(s); ratios against /healthz measured in the same run.\n")
print("| endpoint | requests/s | p50 | p99 | req/s ÷ reference | p99 ÷ reference | errors |")
print("|---|---:|---:|---:|---:|---:|---:|")
for i, name in enumerate(names):
    rps, p50, p99, errors = med[i]
    print(f"| `{name}` | {rps:,.0f} | {p50:.2f} ms | {p99:.2f} ms | {rps / ref[0]:.3f} | "
          f"{p99 / ref[2]:.1f}× | {errors} |")
missed = [names[i] for i in range(1, len(names)) if med[i][2] >= 50]
print("\nTarget p99 < 50 ms: " + ("met by every endpoint" if not missed else
      "MISSED by " + ", ".join(missed)))
EOF
