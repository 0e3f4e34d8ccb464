#!/usr/bin/env bash
# The OpenAPI document's lint (ctest: openapi_lint): `redocly lint` with the recommended rules and
# the exceptions in src/server/redocly.yaml. Needs node/npm (scripts/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")"
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "openapi_lint: FAIL: $tool is missing (scripts/install-deps.sh installs nodejs and npm)." >&2
    exit 1
  fi
done
npm ci --no-audit --no-fund --prefer-offline --loglevel=error
exec npx --no-install redocly lint --config ../../src/server/redocly.yaml ../../src/server/openapi.json
