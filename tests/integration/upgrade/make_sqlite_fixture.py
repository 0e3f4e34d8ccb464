#!/usr/bin/env python3
"""Makes tests/testdata/upgrade/sqlite-7784bb4.db: the SQLite backend as the release at 7784bb4
leaves it after a user's first minutes, for upgrade_test.py.

    git worktree add /tmp/old 7784bb4 && (cd /tmp/old && cmake --preset dev && \
        cmake --build build/dev --target gnomon)
    python3 tests/integration/upgrade/make_sqlite_fixture.py /tmp/old/build/dev/apps/gnomon/gnomon

It runs `gnomon serve` on a new SQLite file and, through the HTTP API, creates three jobs (one
firing every two seconds, one daily, one with an env secret), pauses one, triggers
one, lets the two-second job fire a few times, makes one refused call (an audit record of a
failure), then stops the daemon with SIGTERM. Next to the file it writes what the old release
answered (jobs, runs, audit), which the test compares with what the new release answers.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from harness import free_port, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "testdata", "upgrade")

JOBS = [
    {"id": "tick", "schedule": "*/2 * * * * *", "command": "echo tick $GNOMON_RUN_ID",
     "timezone": "UTC", "retries": 1},
    {"id": "nightly", "schedule": "0 30 2 * * *", "command": "echo nightly",
     "timezone": "Europe/Berlin", "timeout": "10m", "overlap": "forbid"},
    {"id": "report", "schedule": "0 0 6 * * 1-5", "command": "echo report",
     "timezone": "America/New_York",
     "env": {"TOKEN": "s3cret"}, "description": "weekday report"},
]


def call(port, token, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def exercise(port, token=None):
    """Through the HTTP API of a running old release: creates JOBS, pauses one, triggers one,
    waits for four ticks and the triggered run, makes one refused call; returns what the old
    release then shows (jobs, runs, audit)."""
    def up():
        try:
            return call(port, token, "GET", "/healthz")[0] == 200
        except OSError:
            return False
    wait_for(up, 30, "gnomon serve")
    for job in JOBS:
        status, body = call(port, token, "POST", "/api/v1/jobs", job)
        assert status == 201, (status, body)
    assert call(port, token, "POST", "/api/v1/jobs/nightly/pause")[0] == 200
    status, body = call(port, token, "POST", "/api/v1/jobs/report/trigger")
    assert status == 202, (status, body)
    # A refused call: a second create of the same id.
    assert call(port, token, "POST", "/api/v1/jobs", JOBS[0])[0] == 409

    def runs():
        return call(port, token, "GET", "/api/v1/runs?limit=100")[1]["runs"]
    wait_for(lambda: sum(1 for r in runs() if r["job_id"] == "tick" and
                         r["outcome"] == "succeeded") >= 4, 30, "four tick runs")
    wait_for(lambda: any(r["job_id"] == "report" and r["outcome"] == "succeeded"
                         for r in runs()), 30, "the triggered run")
    # What the old release answers, read after the last write call (a tick that lands between
    # this read and the stop is in the backend but not here; the test allows for that).
    return {
        "jobs": [call(port, token, "GET", "/api/v1/jobs/" + j["id"])[1] for j in JOBS],
        "runs": [call(port, token, "GET", "/api/v1/runs/" + r["run_id"].replace("#", "%23"))[1]
                 for r in runs()],
        "audit": call(port, token, "GET", "/api/v1/audit?limit=100")[1]["entries"],
    }


def write_shown(shown, name):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(shown, f, indent=1, sort_keys=True)
        f.write("\n")


def run_old(gnomon, work, backend):
    """Runs the old release's `gnomon serve` on `backend`, exercise()s it, stops it with SIGTERM
    and returns what it showed."""
    port = free_port()
    log = open(os.path.join(work, "serve.log"), "w")
    p = subprocess.Popen([gnomon, "serve", "--backend", backend,
                          "--listen", "127.0.0.1:%d" % port, "--node-id", "old"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        shown = exercise(port)  # that release serves loopback without a token
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        return shown
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()


def main():
    work = tempfile.mkdtemp()
    shown = run_old(sys.argv[1], work, "sqlite://%s/gnomon.db" % work)
    leftovers = [f for f in os.listdir(work) if f.startswith("gnomon.db-")]
    assert not leftovers, "the stopped daemon left " + ", ".join(leftovers)
    os.makedirs(OUT, exist_ok=True)
    shutil.copyfile(os.path.join(work, "gnomon.db"), os.path.join(OUT, "sqlite-7784bb4.db"))
    write_shown(shown, "sqlite-7784bb4.json")
    print(work)


if __name__ == "__main__":
    main()
