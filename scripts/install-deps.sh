#!/usr/bin/env bash
# Installs the Debian packages gnomon needs to build, test and run, skipping those already there.
# Uses sudo when not root. Safe to run again; prints what it installs.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git clang-14 libclang-rt-14-dev clang-format
  # libraries (Debian's, never vendored)
  libcctz-dev tzdata nlohmann-json3-dev libtomlplusplus-dev libcpp-httplib-dev libcli11-dev
  libspdlog-dev libfmt-dev libboost-dev libsqlite3-dev sqlite3 libhiredis-dev libssl-dev zlib1g-dev
  libcurl4-openssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # servers and tools the tests start
  redis-server etcd-server etcd-client faketime iproute2 iptables procps curl python3 openssl
  # the API's answers checked against its OpenAPI document (tests/openapi/contract.py)
  python3-jsonschema
  # the HTTP API load benchmark (bench/api_load.sh, run by `make bench`)
  wrk
  # the cron search against robfig/cron (bench/cron_vs_robfig.py, run by `make bench`)
  golang-go golang-github-robfig-cron-dev
  # the dashboard's browser tests (tests/e2e): Debian's chromium, driven by npm playwright-core
  chromium nodejs
)
# Debian's nodejs has npm in a separate package; NodeSource's nodejs bundles it (and conflicts
# with Debian's npm), so ask for npm only when the command is missing.
if ! command -v npm >/dev/null; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# A package's service may have been started by the install; the tests start their own.
if [[ " ${missing[*]} " == *" redis-server "* ]] && command -v service >/dev/null; then
  $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v service >/dev/null; then
  $SUDO service etcd stop >/dev/null 2>&1 || true
fi
echo "install-deps: done"
