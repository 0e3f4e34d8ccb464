#!/usr/bin/env bash
# Runs the cron parser fuzzer for FUZZ_SECONDS (default 60) from a seed corpus made of the
# conformance vectors' expressions. Fails on a crash, a sanitizer report or a slow input (>10 ms).
set -euo pipefail
build=${1:-build/fuzz}
seconds=${FUZZ_SECONDS:-60}
corpus=build/fuzz-corpus
mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import hashlib, json, os, sys
out = sys.argv[1]
for line in open("tests/testdata/cron-vectors.jsonl"):
    expr = json.loads(line)["expr"].encode()
    open(os.path.join(out, hashlib.sha1(expr).hexdigest()), "wb").write(expr)
for extra in [b"CRON_TZ=America/New_York 0 30 2 * * *", b"@every 1h30m", b"H H(0-5) * * 1-5",
              b"0 0 0 29 2 * 2100-2299", b"0 0 LW * *", b"0 0 * * FRI#L"]:
    open(os.path.join(out, hashlib.sha1(extra).hexdigest()), "wb").write(extra)
PY
echo "fuzz: $(ls "$corpus" | wc -l) seeds, ${seconds}s"
ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$build/fuzz/cron_parser_fuzzer" "$corpus" -max_total_time="$seconds" -timeout=1 \
  -rss_limit_mb=2048 -max_len=2048 -print_final_stats=1 -artifact_prefix=build/ 2>&1 | grep -vE "^(#[0-9]+|INFO:)" | tail -n 40
