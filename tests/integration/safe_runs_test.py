#!/usr/bin/env python3
"""Running other people's commands safely, tried as an attacker would against a real `gnomon serve`
(docs/operations.md "Running safely"):

- a namespaced admin defines a job that prints the daemon's environment, command line (with a
  Redis password given in --backend), config file and the other runs' secrets, then reads the
  output with a read token of its namespace: none of it is there;
- a run whose child starts its own session (setsid) and ignores SIGTERM leaves nothing behind
  when it times out;
- definitions that only failed at run time are refused with 400 naming the field;
- data files are created 0600;
- TLS to every peer through the daemon: the API listener (with mutual TLS and the CLI),
  Redis (rediss://) and etcd (https endpoints); a wrong CA fails at start naming the peer.

Certificates are made here with the openssl command line. The tests run as root (the daemon
switches users for run_as)."""
import json
import os
import signal
import ssl
import stat
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import free_port, wait_for

GNOMON = os.environ.get("GNOMON_BIN", "build/dev/apps/gnomon/gnomon")
DAEMON_SECRET = "daemon-only-secret-6f1d2c"
REDIS_PASSWORD = "redis-pass-93b1e7"
OTHER_TOKEN = "other-team-token-0123456789abcdef"
TEAM_ADMIN = "team-admin-token-0123456789abcdef"
TEAM_READ = "team-read-token-0123456789abcdef0"


def make_certificates(d):
    """ca.crt, server.crt/key (127.0.0.1, localhost), client.crt/key (CN=gnomon-client),
    other-ca.crt."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    def key(name):
        run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name)

    for ca in ("ca", "other-ca"):
        key(ca + ".key")
        run("req", "-x509", "-new", "-key", ca + ".key", "-subj", "/CN=" + ca, "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE", "-out", ca + ".crt")
    for name, cn, ext in (
            ("server", "localhost",
             "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
            ("client", "gnomon-client", "extendedKeyUsage=clientAuth\n")):
        key(name + ".key")
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        run("req", "-new", "-key", name + ".key", "-subj", "/CN=" + cn, "-out", name + ".csr")
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out", name + ".crt")
    for f in os.listdir(d):
        if f.endswith(".key"):
            os.chmod(os.path.join(d, f), 0o600)


class Receiver:
    """An HTTP(S) server on 127.0.0.1 that answers 200 and records each request's path (and the
    client certificate's subject, over mutual TLS)."""

    def __init__(self, test, ssl_context=None):
        self.requests = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def record(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                peer = self.connection.getpeercert() if ssl_context else None
                subject = dict(x[0] for x in peer["subject"]) if peer else {}
                received.append((self.path, subject.get("commonName")))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = record
            do_POST = record

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        test.addCleanup(lambda: (self.server.shutdown(), self.server.server_close()))

    def paths(self):
        return [r[0] for r in self.requests]


class Daemon:
    """One `gnomon serve` process with a config file, and helpers to call its API."""

    def __init__(self, test, config, backend=None, env=None, scheme="http", ssl_context=None,
                 extra_args=()):
        self.test = test
        self.dir = test.dir
        self.port = free_port()
        self.scheme = scheme
        self.ssl_context = ssl_context
        self.config = os.path.join(self.dir, "gnomon-%d.toml" % self.port)
        with open(self.config, "w") as f:
            f.write(config)
        os.chmod(self.config, 0o600)
        self.backend = backend or "sqlite://%s/gnomon.db" % self.dir
        self.log_path = os.path.join(self.dir, "serve-%d.log" % self.port)
        self.log = open(self.log_path, "w")
        test.addCleanup(self.log.close)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [GNOMON, "serve", "--config", self.config, "--backend", self.backend,
             "--listen", "127.0.0.1:%d" % self.port, "--node-id", "safe", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        test.addCleanup(self.stop)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def wait_healthy(self):
        def healthy():
            if self.proc.poll() is not None:
                raise AssertionError("gnomon serve exited:\n" + self.output())
            try:
                return self.call("GET", "/healthz")[0] == 200
            except OSError:
                return False
        wait_for(healthy, 30, "gnomon serve to answer /healthz")
        return self

    def output(self):
        with open(self.log_path) as f:
            return f.read()

    def call(self, method, path, token=None, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request("%s://127.0.0.1:%d%s" % (self.scheme, self.port, path),
                                     data=data, method=method)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.ssl_context) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def run_to_end(self, job_id, token, timeout=60):
        status, body = self.call("POST", "/api/v1/jobs/%s/trigger" % job_id, token)
        self.test.assertEqual(status, 202, body)
        run_id = urllib.parse.quote(body["run_id"], safe="")
        result = {}

        def finished():
            s, b = self.call("GET", "/api/v1/runs/" + run_id, token)
            if s == 200 and b["attempts"] and b["attempts"][-1].get("finished_at"):
                result.update(b["attempts"][-1])
                return True
            return False
        wait_for(finished, timeout, "run %s to finish" % body["run_id"])
        return result


class SafeRunsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        os.chmod(self.dir, 0o755)  # the run_as user may enter it, not read the 0600 files
        self.addCleanup(self.tmp.cleanup)

    @staticmethod
    def tokens():
        """A cluster admin, and an admin and a reader of the namespace "team."."""
        return """
[[token]]
name = "root-admin"
token = "%s"
role = "admin"
[[token]]
name = "team-admin"
token = "%s"
role = "admin"
namespaces = ["team."]
[[token]]
name = "team-read"
token = "%s"
role = "read"
namespaces = ["team."]
""" % (OTHER_TOKEN, TEAM_ADMIN, TEAM_READ)

    def team_config(self, extra=""):
        return self.tokens() + """
[[policy]]
allow_root = false
[[policy]]
namespace = "team."
run_as = "nobody"
%s
""" % extra

    def start_redis_with_password(self):
        port = free_port()
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--dir", self.dir, "--requirepass", REDIS_PASSWORD],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: (proc.kill(), proc.wait()))

        def answers():
            r = subprocess.run(["redis-cli", "-p", str(port), "-a", REDIS_PASSWORD,
                                "--no-auth-warning", "ping"], capture_output=True, text=True)
            return r.stdout.strip() == "PONG"
        wait_for(answers, 30, "redis-server to answer")
        return port

    def test_an_api_job_cannot_read_the_daemons_secrets(self):
        redis_port = self.start_redis_with_password()
        d = Daemon(self, self.team_config(),
                   backend="redis://:%s@127.0.0.1:%d" % (REDIS_PASSWORD, redis_port),
                   env={"DAEMON_SECRET": DAEMON_SECRET}).wait_healthy()
        # The command line the daemon shows every local user has no password any more.
        with open("/proc/%d/cmdline" % d.proc.pid, "rb") as f:
            self.assertNotIn(REDIS_PASSWORD.encode(), f.read())
        self.assertIn("password", d.output())  # the warning about a password in --backend
        # The attack: print everything a run could reach.
        script = ("env; echo ---; cat /proc/%d/cmdline; echo; cat /proc/%d/environ; "
                  "cat %s; cat /proc/$PPID/environ; id -u" % (d.proc.pid, d.proc.pid, d.config))
        status, body = d.call("POST", "/api/v1/jobs", TEAM_ADMIN, {
            "id": "team.leak", "schedule": "@yearly", "command": script,
            "env": {"TEAM_VISIBLE": "yes"}})
        self.assertEqual(status, 201, body)
        run = d.run_to_end("team.leak", TEAM_ADMIN)
        # What the namespace's read token sees of the run.
        s, seen = d.call("GET", "/api/v1/runs/" + urllib.parse.quote(run["run_id"], safe=""),
                         TEAM_READ)
        self.assertEqual(s, 200, seen)
        output = json.dumps(seen)
        self.assertIn("TEAM_VISIBLE=yes", output)        # the job's own env is there
        self.assertIn("GNOMON_JOB_ID=team.leak", output)
        nobody_uid = subprocess.run(["id", "-u", "nobody"], capture_output=True,
                                    text=True).stdout.strip()
        self.assertIn("\\n%s\\n" % nobody_uid, output)  # it ran as the policy's user
        for secret in (DAEMON_SECRET, REDIS_PASSWORD, OTHER_TOKEN, TEAM_READ):
            self.assertNotIn(secret, output)

    def test_http_jobs_and_webhooks_follow_the_egress_rule_of_their_policy(self):
        receiver = Receiver(self)
        target = "http://localhost:%d" % receiver.port  # a name: judged when connecting
        d = Daemon(self, self.tokens() + """
[[policy]]
egress_deny = ["127.0.0.0/8", "::1/128"]
[[policy]]
namespace = "team."
egress_allow = ["127.0.0.1/32"]
egress_deny = []
[[job]]
id = "file.hook"
schedule = "@yearly"
http = { url = "%s/file" }
[[alert]]
name = "local"
url = "%s/alert"
events = ["run_failed"]
""" % (target, target)).wait_healthy()
        # An address outside the namespace's allow list is refused when defined.
        status, body = d.call("POST", "/api/v1/jobs", TEAM_ADMIN, {
            "id": "team.direct", "schedule": "@yearly", "http": {"url": "http://10.0.0.1/"}})
        self.assertEqual(status, 403, body)
        self.assertIn("egress", body["error"]["message"])
        # The namespace allows 127.0.0.1: its job reaches the receiver through the name.
        for job_id in ("team.hook", "ops.hook"):
            status, body = d.call("POST", "/api/v1/jobs", OTHER_TOKEN, {
                "id": job_id, "schedule": "@yearly", "http": {"url": target + "/" + job_id}})
            self.assertEqual(status, 201, body)
        run = d.run_to_end("team.hook", TEAM_ADMIN)
        self.assertEqual(run["outcome"], "succeeded", run)
        # The default policy denies loopback: the same name is refused at connect time.
        run = d.run_to_end("ops.hook", OTHER_TOKEN)
        self.assertEqual(run["outcome"], "failed", run)
        self.assertIn("is denied by egress_deny", run.get("error", ""), run)
        # A job from a file keeps full rights.
        run = d.run_to_end("file.hook", OTHER_TOKEN)
        self.assertEqual(run["outcome"], "succeeded", run)
        self.assertEqual(sorted(receiver.paths()), ["/file", "/team.hook"])
        # The run_failed webhook follows the default policy: refused, and logged.
        wait_for(lambda: "alert_failed" in d.output(), 60, "the alert to be given up")
        self.assertIn("is denied by egress_deny", d.output())
        self.assertNotIn("/alert", receiver.paths())

    def test_a_worker_applies_its_policy_before_each_queued_run(self):
        redis_port = self.start_redis_with_password()
        backend = "redis://:%s@127.0.0.1:%d" % (REDIS_PASSWORD, redis_port)
        d = Daemon(self, self.team_config(), backend=backend, extra_args=["--mode", "schedule"])
        d.wait_healthy()
        # The worker's policy for team. allows argv only: a command job defined through a node
        # that allows it fails on the worker, naming the rule.
        worker_config = os.path.join(self.dir, "worker.toml")
        with open(worker_config, "w") as f:
            f.write('backend_password_file = "%s"\n[[policy]]\nallow_root = false\n'
                    '[[policy]]\nnamespace = "team."\nrun_as = "nobody"\n'
                    'executors = ["argv"]\n' % os.path.join(self.dir, "redis.password"))
        with open(os.path.join(self.dir, "redis.password"), "w") as f:
            f.write(REDIS_PASSWORD + "\n")
        os.chmod(os.path.join(self.dir, "redis.password"), 0o600)
        os.chmod(worker_config, 0o600)
        log = open(os.path.join(self.dir, "worker.log"), "w")
        self.addCleanup(log.close)
        worker = subprocess.Popen(
            [GNOMON, "worker", "--config", worker_config, "--backend",
             "redis://127.0.0.1:%d" % redis_port, "--node-id", "w1"],
            stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: (worker.kill(), worker.wait()))
        for job in ({"id": "team.cmd", "schedule": "@yearly", "command": "echo ran"},
                    {"id": "team.argv", "schedule": "@yearly", "argv": ["/bin/echo", "ran"]}):
            status, body = d.call("POST", "/api/v1/jobs", TEAM_ADMIN, job)
            self.assertEqual(status, 201, body)
        run = d.run_to_end("team.argv", TEAM_ADMIN)
        self.assertEqual((run["outcome"], run.get("node_id")), ("succeeded", "w1"), run)
        run = d.run_to_end("team.cmd", TEAM_ADMIN)
        self.assertEqual((run["outcome"], run.get("node_id")), ("failed", "w1"), run)
        self.assertIn("the command executor is not allowed", run.get("error", ""), run)

    def test_a_run_leaves_no_process_behind(self):
        d = Daemon(self, self.team_config()).wait_healthy()
        pid_file = os.path.join(self.dir, "escaped.pid")
        # A child in its own session that ignores SIGTERM, then the run times out.
        script = ("setsid sh -c 'trap \"\" TERM; echo $$ > %s; exec sleep 300' "
                  "</dev/null >/dev/null 2>&1 & sleep 300" % pid_file)
        status, body = d.call("POST", "/api/v1/jobs", OTHER_TOKEN, {
            "id": "escape", "schedule": "@yearly", "command": script, "timeout": "2s",
            "run_as": "root"})
        self.assertEqual(status, 403, body)  # the default policy: no root for API jobs
        self.assertEqual(body["error"]["code"], "policy_denied")
        status, body = d.call("POST", "/api/v1/jobs", OTHER_TOKEN, {
            "id": "team.escape", "schedule": "@yearly", "command": script, "timeout": "2s"})
        self.assertEqual(status, 201, body)
        os.chmod(self.dir, 0o777)  # nobody writes the pid file
        run = d.run_to_end("team.escape", OTHER_TOKEN)
        self.assertEqual(run["outcome"], "timed_out", run)
        with open(pid_file) as f:
            escaped = int(f.read())

        def gone():
            try:
                with open("/proc/%d/stat" % escaped) as f:
                    return f.read().split(")")[-1].split()[0] == "Z"  # a zombie is gone too
            except FileNotFoundError:
                return True
        wait_for(gone, 10, "the escaped process %d to be gone" % escaped)

    def test_definitions_that_would_fail_later_are_refused_naming_the_field(self):
        d = Daemon(self, self.team_config()).wait_healthy()
        cases = [
            ({"http": {"url": "http://127.0.0.1:9/", "headers": {"X-A": "a\r\nInjected: 1"}}},
             "headers"),
            ({"http": {"url": "http://127.0.0.1:9/", "headers": {"X:A": "a"}}}, "headers"),
            ({"http": {"url": "http://user:pw@127.0.0.1:9/"}}, "url"),
            ({"http": {"url": "http://127.0.0.1:9/\r\nX: y"}}, "url"),
            ({"argv": [""]}, "argv"),
        ]
        for extra, field in cases:
            job = {"id": "late", "schedule": "@yearly"}
            job.update(extra)
            status, body = d.call("POST", "/api/v1/jobs", OTHER_TOKEN, job)
            self.assertEqual(status, 400, (extra, body))
            self.assertIn(field, body["error"]["message"], extra)
        for bad_id in (".", ".."):
            status, body = d.call("POST", "/api/v1/jobs", OTHER_TOKEN,
                                  {"id": bad_id, "schedule": "@yearly", "command": "true"})
            self.assertEqual(status, 400, (bad_id, body))
            self.assertIn("id", body["error"]["message"])

    def test_data_files_are_owner_only(self):
        Daemon(self, self.team_config()).wait_healthy()
        db = os.path.join(self.dir, "gnomon.db")
        self.assertEqual(stat.S_IMODE(os.stat(db).st_mode) & 0o077, 0, oct(os.stat(db).st_mode))

    def test_the_config_file_readable_by_others_is_warned_about(self):
        d = Daemon(self, self.team_config())
        os.chmod(d.config, 0o644)  # before the daemon reads it
        d.wait_healthy()
        wait_for(lambda: "config_warning" in d.output(), 10, "the config warning")
        self.assertIn(d.config, d.output())


class TlsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.addCleanup(self.tmp.cleanup)
        self.certs = os.path.join(self.dir, "certs")
        os.mkdir(self.certs)
        make_certificates(self.certs)

    def cert(self, name):
        return os.path.join(self.certs, name)

    def test_the_api_over_mutual_tls_with_the_cli(self):
        config = """
[api]
tls_cert = "%s"
tls_key = "%s"
client_ca = "%s"
[[token]]
name = "ci"
subject = "CN=gnomon-client"
role = "admin"
""" % (self.cert("server.crt"), self.cert("server.key"), self.cert("ca.crt"))
        ctx = ssl.create_default_context(cafile=self.cert("ca.crt"))
        ctx.load_cert_chain(self.cert("client.crt"), self.cert("client.key"))
        d = Daemon(self, config, scheme="https", ssl_context=ctx).wait_healthy()
        self.assertIn("https://127.0.0.1:%d" % d.port, d.output())
        # The certificate stands for the "ci" token: no bearer token needed.
        status, body = d.call("POST", "/api/v1/jobs", None,
                              {"id": "tls-job", "schedule": "@yearly", "command": "true",
                               "run_as": "nobody"})
        self.assertEqual(status, 201, body)
        server = "https://127.0.0.1:%d" % d.port
        # A stale local admin token in ./gnomon-data: the certificate, not that token, says who
        # is calling.
        os.makedirs(os.path.join(self.dir, "gnomon-data"), mode=0o700)
        with open(os.path.join(self.dir, "gnomon-data", "admin.token"), "w") as f:
            f.write("stale-token-of-another-node\n")
        os.chmod(os.path.join(self.dir, "gnomon-data", "admin.token"), 0o600)
        ok = subprocess.run([GNOMON, "job", "--server", server, "--ca-file", self.cert("ca.crt"),
                             "--cert", self.cert("client.crt"), "--key", self.cert("client.key"),
                             "ls"], capture_output=True, text=True, cwd=self.dir)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("tls-job", ok.stdout)
        # The wrong CA: the CLI refuses the server.
        wrong = subprocess.run([GNOMON, "job", "--server", server, "--ca-file",
                                self.cert("other-ca.crt"), "--cert", self.cert("client.crt"),
                                "--key", self.cert("client.key"), "ls"],
                               capture_output=True, text=True)
        self.assertEqual(wrong.returncode, 1, wrong.stdout)
        self.assertIn(server, wrong.stderr)
        # No client certificate: the handshake fails, nothing is listed.
        bare = subprocess.run([GNOMON, "job", "--server", server, "--ca-file", self.cert("ca.crt"),
                               "ls"], capture_output=True, text=True)
        self.assertNotEqual(bare.returncode, 0)
        self.assertNotIn("tls-job", bare.stdout)
        # Plain HTTP to the TLS port gets no answer.
        with self.assertRaises(OSError):
            urllib.request.urlopen("http://127.0.0.1:%d/api/v1/jobs" % d.port, timeout=5).read()

    def test_http_jobs_and_webhooks_over_mutual_tls_with_the_configured_ca(self):
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.cert("ca.crt"))
        ctx.load_cert_chain(self.cert("server.crt"), self.cert("server.key"))
        ctx.verify_mode = ssl.CERT_REQUIRED
        receiver = Receiver(self, ssl_context=ctx)
        target = "https://localhost:%d" % receiver.port
        config = """
[[token]]
name = "admin"
token = "%s"
role = "admin"
[http_client]
tls_ca = "%s"
tls_cert = "%s"
tls_key = "%s"
[[job]]
id = "tls.hook"
schedule = "@yearly"
http = { url = "%s/job" }
[[job]]
id = "tls.fails"
schedule = "@yearly"
command = "exit 3"
[[alert]]
name = "tls"
url = "%s/alert"
events = ["run_failed"]
""" % (OTHER_TOKEN, self.cert("ca.crt"), self.cert("client.crt"), self.cert("client.key"),
           target, target)
        d = Daemon(self, config).wait_healthy()
        run = d.run_to_end("tls.hook", OTHER_TOKEN)
        self.assertEqual(run["outcome"], "succeeded", run)
        run = d.run_to_end("tls.fails", OTHER_TOKEN)
        self.assertEqual(run["outcome"], "failed", run)
        wait_for(lambda: "/alert" in receiver.paths(), 30, "the webhook over TLS")
        self.assertIn(("/job", "gnomon-client"), receiver.requests)
        self.assertIn(("/alert", "gnomon-client"), receiver.requests)
        d.stop()
        # Without the CA the same job fails, naming the peer and the verification.
        d = Daemon(self, config.replace('tls_ca = "%s"\n' % self.cert("ca.crt"), "")).wait_healthy()
        run = d.run_to_end("tls.hook", OTHER_TOKEN)
        self.assertEqual(run["outcome"], "failed", run)
        self.assertIn("localhost:%d" % receiver.port, run.get("error", ""))
        self.assertIn("not verified", run.get("error", ""))

    def start_tls_redis(self):
        port = free_port()
        proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
             "--tls-cert-file", self.cert("server.crt"), "--tls-key-file", self.cert("server.key"),
             "--tls-ca-cert-file", self.cert("ca.crt"), "--tls-auth-clients", "no",
             "--save", "", "--appendonly", "yes", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: (proc.kill(), proc.wait()))

        def answers():
            r = subprocess.run(["redis-cli", "--tls", "--cacert", self.cert("ca.crt"), "-p",
                                str(port), "ping"], capture_output=True, text=True)
            return r.stdout.strip() == "PONG"
        wait_for(answers, 30, "redis-server to answer over TLS")
        return port

    def start_tls_etcd(self):
        client, peer = free_port(), free_port()
        data = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else self.dir,
                            "gnomon-etcd-tls-%d-%d" % (os.getpid(), client))
        client_url = "https://127.0.0.1:%d" % client
        peer_url = "http://127.0.0.1:%d" % peer
        log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            ["/usr/bin/etcd", "--name", "tls", "--data-dir", data,
             "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", "tls=" + peer_url, "--initial-cluster-state", "new",
             "--cert-file", self.cert("server.crt"), "--key-file", self.cert("server.key")],
            stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: (proc.kill(), proc.wait(),
                                 subprocess.run(["rm", "-rf", data])))
        ctx = ssl.create_default_context(cafile=self.cert("ca.crt"))

        def healthy():
            try:
                with urllib.request.urlopen(client_url + "/health", timeout=1, context=ctx) as r:
                    return b'"true"' in r.read()
            except OSError:
                return False
        wait_for(healthy, 30, "etcd to be healthy over TLS")
        return client

    def serve_once(self, backend):
        """Starts gnomon serve on `backend`: (exit code or None when it serves, its output)."""
        port = free_port()
        p = subprocess.Popen([GNOMON, "serve", "--backend", backend, "--listen",
                              "127.0.0.1:%d" % port, "--node-id", "tls"], cwd=self.dir,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and p.poll() is None:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1):
                    p.send_signal(signal.SIGTERM)
                    return None, p.communicate(timeout=30)[0]
            except OSError:
                time.sleep(0.1)
        if p.poll() is None:
            p.kill()
        return p.wait(), p.communicate()[0]

    def test_redis_over_tls_and_a_wrong_ca(self):
        port = self.start_tls_redis()
        code, out = self.serve_once("rediss://127.0.0.1:%d?tls_ca=%s" % (port,
                                                                       self.cert("ca.crt")))
        self.assertIsNone(code, out)
        code, out = self.serve_once("rediss://127.0.0.1:%d?tls_ca=%s" % (
            port, self.cert("other-ca.crt")))
        self.assertIsNotNone(code)
        self.assertNotEqual(code, 0)
        self.assertIn("127.0.0.1:%d" % port, out)
        self.assertIn("certificate verify failed", out)

    def test_etcd_over_https_and_a_wrong_ca(self):
        port = self.start_tls_etcd()
        code, out = self.serve_once("etcd://https://127.0.0.1:%d?tls_ca=%s" % (
            port, self.cert("ca.crt")))
        self.assertIsNone(code, out)
        code, out = self.serve_once("etcd://https://127.0.0.1:%d?tls_ca=%s" % (
            port, self.cert("other-ca.crt")))
        self.assertIsNotNone(code)
        self.assertNotEqual(code, 0)
        self.assertIn("127.0.0.1:%d" % port, out)
        self.assertIn("certificate is not trusted", out)


if __name__ == "__main__":
    unittest.main()
