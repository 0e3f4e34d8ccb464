#!/usr/bin/env bash
# The dashboard's browser tests (ctest: e2e_dashboard, label e2e). Needs Debian's chromium at
# /usr/bin/chromium (scripts/install-deps.sh installs it) and node/npm; never downloads a browser.
# GNOMON_BIN: the binary under test (default build/dev/apps/gnomon/gnomon).
set -euo pipefail
cd "$(dirname "$0")"

chromium="${CHROMIUM_BIN:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  echo "e2e: FAIL: $chromium is missing. Install Debian's chromium (scripts/install-deps.sh" \
       "installs the 'chromium' package); these tests never download a browser." >&2
  exit 1
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "e2e: FAIL: $tool is missing (scripts/install-deps.sh installs nodejs and npm)." >&2
    exit 1
  fi
done

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --prefer-offline --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
exec node --test --test-reporter=spec dashboard.test.mjs cross_origin.test.mjs job_form.test.mjs rules.test.mjs
