#!/usr/bin/env python3
"""Upgrades keep data: a SQLite file and a Redis keyspace written by the release at 7784bb4 (made
by upgrade/make_sqlite_fixture.py and upgrade/make_redis_fixture.py: definitions made through the
API, a paused job, history, audit, fire markers and fencing counters) open under this build (the
Redis keyspace after `gnomon migrate redis-groups`) with nothing lost, keep working, and run no
recorded fire again."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

from harness import free_port, start_redis, wait_for

GNOMON = os.environ.get("GNOMON_BIN", "build/dev/apps/gnomon/gnomon")
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "testdata", "upgrade")
FIXTURE = os.path.join(FIXTURES, "sqlite-7784bb4")


def call(port, token, method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


def quoted(run_id):
    return run_id.replace("#", "%23")


class UpgradeChecks:
    """The checks, on a backend that setUp filled from a fixture (self.old: what the old release
    showed) and a `gnomon serve` of this build on it (start_serve)."""

    def start_serve(self, backend):
        self.port = free_port()
        # That release ran API jobs as the daemon's user; this one refuses root unless the
        # policy allows it (operations.md "Upgrading"), and the tests may run as root.
        config = os.path.join(self.dir, "gnomon.toml")
        with open(config, "w") as f:
            f.write('data_dir = "%s"\n' % self.dir)
            f.write("[[policy]]\nallow_root = true\n" if os.geteuid() == 0 else "")
        self.log = open(os.path.join(self.dir, "serve.log"), "w")
        self.proc = subprocess.Popen(
            [GNOMON, "serve", "--backend", backend,
             "--listen", "127.0.0.1:%d" % self.port, "--node-id", "new", "--config", config],
            stdout=self.log, stderr=subprocess.STDOUT)
        token_file = os.path.join(self.dir, "admin.token")
        wait_for(lambda: os.path.exists(token_file) or self.proc.poll() is not None, 30,
                 "the generated admin token")
        self.assertIsNone(self.proc.poll(), self.serve_log())
        with open(token_file) as f:
            self.token = f.read().strip()
        wait_for(self.up, 30, "gnomon serve on the old data")

    def stop_serve(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()

    def serve_log(self):
        with open(os.path.join(self.dir, "serve.log")) as f:
            return f.read()

    def up(self):
        try:
            return call(self.port, self.token, "GET", "/readyz")[0] == 200
        except OSError:
            return False

    def get(self, path):
        status, body, _ = call(self.port, self.token, "GET", path)
        self.assertEqual(status, 200, "%s: %s" % (path, body))
        return body

    def assertKeeps(self, old, new, where):
        """Every field the old release showed is shown the same (new fields may be added)."""
        for key, value in old.items():
            if key in ("next_fire", "last_run", "running"):
                continue  # they move with time and with new runs
            self.assertIn(key, new, "%s: %s is gone" % (where, key))
            if isinstance(value, dict) and isinstance(new[key], dict):
                self.assertKeeps(value, new[key], "%s.%s" % (where, key))
            else:
                self.assertEqual(new[key], value, "%s.%s changed" % (where, key))

    def test_the_old_file_opens_with_nothing_lost_and_keeps_working(self):
        # Definitions and pause state.
        for job in self.old["jobs"]:
            new = self.get("/api/v1/jobs/" + job["id"])
            self.assertKeeps(job, new, "job " + job["id"])
        # History: every run and attempt the old release showed, unchanged.
        old_runs = {r["run_id"]: r for r in self.old["runs"]}
        self.assertGreaterEqual(len(old_runs), 5)
        for run_id, run in old_runs.items():
            new = self.get("/api/v1/runs/" + quoted(run_id))
            self.assertEqual(len(new["attempts"]), len(run["attempts"]), run_id)
            for old_attempt, new_attempt in zip(run["attempts"], new["attempts"]):
                self.assertKeeps(old_attempt, new_attempt, run_id)
        # Audit: the old entries, in order, with who, what, when and the outcome.
        entries = {e["seq"]: e for e in self.get("/api/v1/audit?limit=100")["entries"]}
        for old in self.old["audit"]:
            self.assertIn(old["seq"], entries)
            new = entries[old["seq"]]
            for key in ("action", "target", "who", "at", "before", "after"):
                self.assertEqual(new.get(key), old.get(key), "audit %d %s" % (old["seq"], key))
            if "status" in new:
                self.assertEqual(new["status"], old["status"])

        # It keeps working: the two-second job fires under this build with fencing tokens above
        # every token the old release gave, and no recorded fire runs again.
        old_top = max(a["fencing_token"] for r in old_runs.values() for a in r["attempts"])

        def new_runs():
            runs = self.get("/api/v1/runs?job=tick&limit=100")["runs"]
            return [r for r in runs if r["node_id"] == "new" and r["outcome"] == "succeeded"]
        wait_for(lambda: len(new_runs()) >= 2, 30, "two ticks under the new build")
        for r in new_runs():
            self.assertNotIn(r["run_id"], old_runs, "a recorded fire ran again")
            self.assertGreater(r["fencing_token"], old_top)
        for run_id, run in old_runs.items():
            self.assertEqual(len(self.get("/api/v1/runs/" + quoted(run_id))["attempts"]),
                             len(run["attempts"]), run_id + " ran again")
        # The paused job stays paused and does not fire; definitions stay editable by version.
        nightly = self.get("/api/v1/jobs/nightly")
        self.assertTrue(nightly["paused"])
        self.assertEqual(self.get("/api/v1/runs?job=nightly&limit=10")["runs"], [])
        status, body, headers = call(self.port, self.token, "GET", "/api/v1/jobs/report")
        spec = dict(body["spec"])
        spec["description"] = "weekday report, edited"
        spec.pop("env", None)  # shown redacted; a PUT without it keeps nothing secret around
        status, body, _ = call(self.port, self.token, "PUT", "/api/v1/jobs/report", spec,
                               {"If-Match": headers["ETag"]})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.get("/api/v1/jobs/report")["spec"]["description"],
                         "weekday report, edited")
        # New audit entries follow the old ones.
        top = max(e["seq"] for e in self.get("/api/v1/audit?limit=1")["entries"])
        self.assertGreater(top, max(e["seq"] for e in self.old["audit"]))


class SqliteUpgradeTest(UpgradeChecks, unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        os.chmod(self.dir, 0o700)
        shutil.copyfile(FIXTURE + ".db", os.path.join(self.dir, "gnomon.db"))
        with open(FIXTURE + ".json") as f:
            self.old = json.load(f)
        self.start_serve("sqlite://%s/gnomon.db" % self.dir)

    def tearDown(self):
        self.stop_serve()
        self.tmp.cleanup()


@unittest.skipUnless(os.path.exists("/usr/bin/redis-server"), "redis-server is not installed")
class RedisUpgradeTest(UpgradeChecks, unittest.TestCase):
    """The keyspace loads from the old release's RDB snapshot into a redis-server that then
    turns on `appendonly yes` (as production runs it), and `gnomon migrate redis-groups` moves it
    to key groups before this build serves it."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        os.chmod(self.dir, 0o700)
        data = os.path.join(self.dir, "redis")
        os.makedirs(data)
        shutil.copyfile(os.path.join(FIXTURES, "redis-7784bb4.rdb"), os.path.join(data, "dump.rdb"))
        with open(os.path.join(FIXTURES, "redis-7784bb4.json")) as f:
            self.old = json.load(f)
        self.redis, redis_port = start_redis(data, appendonly="no")
        cli = ["redis-cli", "-p", str(redis_port)]
        self.assertGreater(int(subprocess.run(cli + ["dbsize"], capture_output=True,
                                              text=True).stdout), 0, "the fixture did not load")
        subprocess.run(cli + ["config", "set", "appendonly", "yes"], check=True,
                       capture_output=True)
        wait_for(lambda: "aof_rewrite_in_progress:0" in subprocess.run(
            cli + ["info", "persistence"], capture_output=True, text=True).stdout and
            "aof_enabled:1" in subprocess.run(cli + ["info", "persistence"], capture_output=True,
                                              text=True).stdout, 30, "appendonly to be on")
        url = "redis://127.0.0.1:%d/0" % redis_port
        # That release kept one slot per job: serve refuses the keyspace and names the step that
        # moves it to key groups; the step then moves it, and a second run finds nothing to do.
        refused = subprocess.run(
            [GNOMON, "serve", "--backend", url, "--listen", "127.0.0.1:%d" % free_port(),
             "--node-id", "new"], cwd=self.dir, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        self.assertIn("gnomon migrate redis-groups", refused.stderr)
        for expected in ("moved to this release's layout", "already on this release's layout"):
            migrated = subprocess.run([GNOMON, "migrate", "redis-groups", "--backend", url],
                                      capture_output=True, text=True, timeout=120)
            self.assertEqual(migrated.returncode, 0, migrated.stderr)
            self.assertIn(expected, migrated.stdout)
        self.start_serve(url)

    def tearDown(self):
        self.stop_serve()
        self.redis.kill()
        self.redis.wait()
        self.tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
