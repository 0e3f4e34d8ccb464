#!/usr/bin/env bash
# `make run`: shows the cron engine at work. (`gnomon serve` lands with the engine issue.)
set -euo pipefail
bin=${1:-build/dev/apps/gnomon/gnomon}
echo "gnomon built at $bin"
echo
echo "\$ gnomon cron explain '0 0 2 1 * *' --tz Asia/Shanghai"
"$bin" cron explain '0 0 2 1 * *' --tz Asia/Shanghai
echo
echo "\$ gnomon cron next '30 2 * * *' --tz America/New_York --from 2025-03-08T00:00:00Z -n 3"
"$bin" cron next '30 2 * * *' --tz America/New_York --from 2025-03-08T00:00:00Z -n 3
echo
echo "Try: $bin cron --help"
