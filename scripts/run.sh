#!/usr/bin/env bash
# `make run`: starts `gnomon serve` on the embedded SQLite default with the example jobs.
set -euo pipefail
bin=${1:-build/dev/apps/gnomon/gnomon}
cat <<MSG
gnomon serve: backend sqlite://./gnomon-data/gnomon.db, jobs examples/jobs.toml
  dashboard: the link in the http_listening line below signs in with the generated admin token
            (gnomon-data/admin.token, mode 0600; \`gnomon job\` on this host uses it)
  API:      http://127.0.0.1:8080/api/v1/jobs  (runs: /api/v1/runs, metrics: /metrics; docs/http-api.md)
  logs:     this terminal (one line per event: claimed, run_started, run_finished ...)
  history:  sqlite3 gnomon-data/gnomon.db 'select run_id, node_id, outcome, fencing_token from runs order by scheduled_ms desc limit 20'
  schedule: $bin cron explain '<expr>' --tz <zone>
  reload:   kill -HUP <pid> after editing examples/jobs.toml; stop with Ctrl-C (graceful)
MSG
exec "$bin" serve --jobs examples/jobs.toml
