#!/usr/bin/env bash
# The differential test of gnomon's cron Next/Prev against croner (ctest: cron_diff; see
# cron_diff.mjs and docs/semantics.md "Search"). Needs node/npm (scripts/install-deps.sh installs
# them). Usage: run.sh DRIVER [--seed N] [--cases N], DRIVER = the gnomon_cron_diff_driver binary.
set -euo pipefail
driver="$(realpath "${1:?usage: run.sh DRIVER [--seed N] [--cases N]}")"
shift
cd "$(dirname "$0")"
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "cron_diff: FAIL: $tool is missing (scripts/install-deps.sh installs nodejs and npm)." >&2
    exit 1
  fi
done
npm ci --no-audit --no-fund --prefer-offline --loglevel=error
exec node cron_diff.mjs "$driver" "$@"
