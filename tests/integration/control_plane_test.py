#!/usr/bin/env python3
"""`gnomon serve`'s control plane as a new user and an operator meet it: the generated admin token
(no anonymous API), the CLI finding it on the same host, `[api] auth = "none"` only on loopback,
and SIGHUP replacing tokens (all or nothing) and rotating the generated token."""
import json
import os
import re
import signal
import stat
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from harness import free_port, wait_for

GNOMON = os.environ.get("GNOMON_BIN", "build/dev/apps/gnomon/gnomon")


def request(port, method, path, token=None, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class ControlPlaneTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.procs = []
        self.logs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in self.logs:
            f.close()
        self.tmp.cleanup()

    def serve(self, *args, config=None):
        port = free_port()
        cmd = [GNOMON, "serve", "--backend", "sqlite://%s/gnomon.db" % self.dir,
               "--listen", "127.0.0.1:%d" % port, "--node-id", "cp"]
        if config:
            cmd += ["--config", config]
        log = open(os.path.join(self.dir, "serve.log"), "w")
        self.logs.append(log)
        p = subprocess.Popen(cmd + list(args), stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        wait_for(lambda: self.healthy(port), 30, "gnomon serve to answer /healthz")
        return p, port

    def healthy(self, port):
        try:
            return request(port, "GET", "/healthz")[0] == 200
        except OSError:
            return False

    def log(self):
        with open(os.path.join(self.dir, "serve.log")) as f:
            return f.read()

    def job(self, port, *args, env=None, cwd=None):
        return subprocess.run([GNOMON, "job", "--server", "http://127.0.0.1:%d" % port, *args],
                              capture_output=True, text=True, env=env or os.environ.copy(),
                              cwd=cwd)

    def test_no_tokens_means_a_generated_admin_token(self):
        _, port = self.serve()
        path = os.path.join(self.dir, "admin.token")
        mode = os.stat(path).st_mode
        self.assertEqual(stat.S_IMODE(mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.dir).st_mode) & 0o077, 0, "data dir 0700")
        with open(path) as f:
            secret = f.read().strip()
        self.assertGreaterEqual(len(secret), 40)
        # No anonymous calls, not even reads; the token works.
        self.assertEqual(request(port, "GET", "/api/v1/jobs")[0], 401)
        self.assertEqual(request(port, "POST", "/api/v1/jobs", body={"id": "x"})[0], 401)
        self.assertEqual(request(port, "GET", "/api/v1/jobs", secret)[0], 200)
        # The log names the file and gives the dashboard's sign-in link.
        wait_for(lambda: "dashboard=" in self.log(), 10, "the listening line")
        link = re.search(r"dashboard=\"?([^\s\"]+)", self.log()).group(1)
        self.assertEqual(link, "http://127.0.0.1:%d/#token=%s" % (port, secret))
        self.assertIn(path, self.log())
        # The CLI on this host finds it in the data directory; without it, it is refused.
        env = dict(os.environ)
        env.pop("GNOMON_TOKEN", None)
        r = self.job(port, "--data-dir", self.dir, "ls", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.job(port, "ls", env=dict(env, GNOMON_DATA_DIR=self.dir)).returncode, 0)
        r = self.job(port, "--data-dir", os.path.join(self.dir, "elsewhere"), "ls", env=env)
        self.assertEqual(r.returncode, 2, "no token: 401")
        # A second node on this host reuses the same token.
        _, port2 = self.serve()
        self.assertEqual(request(port2, "GET", "/api/v1/jobs", secret)[0], 200)

    def test_an_unsafe_token_file_is_refused(self):
        with open(os.path.join(self.dir, "admin.token"), "w") as f:
            f.write("a-token-readable-by-everyone-0123456789\n")
        os.chmod(os.path.join(self.dir, "admin.token"), 0o644)
        port = free_port()
        r = subprocess.run([GNOMON, "serve", "--backend", "sqlite://%s/gnomon.db" % self.dir,
                            "--listen", "127.0.0.1:%d" % port], capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("admin.token", r.stderr)
        self.assertIn("0600", r.stderr)

    def test_auth_none_is_loopback_only(self):
        config = os.path.join(self.dir, "gnomon.toml")
        with open(config, "w") as f:
            f.write('[api]\nauth = "none"\n')
        r = subprocess.run([GNOMON, "serve", "--config", config, "--backend",
                            "sqlite://%s/gnomon.db" % self.dir, "--listen", "0.0.0.0:%d" % free_port()],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn('auth = "none" is allowed only on a loopback', r.stderr)
        _, port = self.serve(config=config)
        self.assertEqual(request(port, "GET", "/api/v1/jobs")[0], 200)
        self.assertIn("auth_disabled", self.log())
        self.assertFalse(os.path.exists(os.path.join(self.dir, "admin.token")))

    def test_sighup_replaces_tokens_all_or_nothing(self):
        config = os.path.join(self.dir, "gnomon.toml")
        old, new = "old-secret-0123456789", "new-secret-0123456789"

        def write(secret, role="admin"):
            with open(config, "w") as f:
                f.write('[[token]]\nname = "ops"\ntoken = "%s"\nrole = "%s"\n' % (secret, role))
        write(old)
        p, port = self.serve(config=config)
        self.assertEqual(request(port, "GET", "/api/v1/jobs", old)[0], 200)
        write(new)
        p.send_signal(signal.SIGHUP)
        wait_for(lambda: request(port, "GET", "/api/v1/jobs", new)[0] == 200, 10, "the new token")
        self.assertEqual(request(port, "GET", "/api/v1/jobs", old)[0], 401)
        # A broken config changes nothing.
        write("third-secret-0123456789", role="root")
        p.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload_failed" in self.log(), 10, "the reload to fail")
        self.assertEqual(request(port, "GET", "/api/v1/jobs", new)[0], 200)
        self.assertEqual(request(port, "GET", "/api/v1/jobs", "third-secret-0123456789")[0], 401)
        # Revoked: no trace of the secrets in the log.
        for secret in (old, new):
            self.assertNotIn(secret, self.log())

    def test_sighup_reloads_quotas_with_the_jobs(self):
        config = os.path.join(self.dir, "gnomon.toml")
        token = "ops-secret-0123456789"

        def write(max_jobs, job_line=""):
            with open(config, "w") as f:
                f.write('[[token]]\nname = "ops"\ntoken = "%s"\nrole = "admin"\n\n'
                        '[[policy]]\nallow_root = true\n\n'
                        '[[quota]]\nnamespace = "q."\nmax_jobs = %d\n%s' % (token, max_jobs, job_line))
        write(1)
        p, port = self.serve(config=config)
        job = lambda i: {"id": "q.%d" % i, "schedule": "@yearly", "command": "true"}
        self.assertEqual(request(port, "POST", "/api/v1/jobs", token, job(1))[0], 201)
        self.assertEqual(request(port, "POST", "/api/v1/jobs", token, job(2))[0], 403)
        write(2, '\n[[job]]\nid = "from-file"\nschedule = "@yearly"\ncommand = "true"\n')
        p.send_signal(signal.SIGHUP)
        wait_for(lambda: request(port, "GET", "/api/v1/jobs/from-file", token)[0] == 200, 10,
                 "the reloaded jobs")
        self.assertEqual(request(port, "POST", "/api/v1/jobs", token, job(2))[0], 201)

    def test_sighup_rotates_the_generated_token(self):
        p, port = self.serve()
        path = os.path.join(self.dir, "admin.token")
        with open(path) as f:
            first = f.read().strip()
        os.unlink(path)
        p.send_signal(signal.SIGHUP)
        wait_for(lambda: os.path.exists(path), 10, "a new token file")
        with open(path) as f:
            second = f.read().strip()
        self.assertNotEqual(first, second)
        wait_for(lambda: request(port, "GET", "/api/v1/jobs", second)[0] == 200, 10, "the new token")
        self.assertEqual(request(port, "GET", "/api/v1/jobs", first)[0], 401)


if __name__ == "__main__":
    unittest.main(verbosity=2)
