#!/usr/bin/env python3
"""The HTTP transport of a real `gnomon serve` under the attacks of docs/reliability.md: a 100 MB
flood of header lines on one connection, one 100 MB header line, and 150 connections that each
send a byte every 1.5 s. The daemon's resident memory (VmRSS, /proc) must grow by less than
64 MB, and /healthz must answer within 1 s throughout; with `[api] probe_listen`, probes have a
lane of their own that a full API listener cannot take."""
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import free_port, wait_for

GNOMON = os.environ.get("GNOMON_BIN", "build/dev/apps/gnomon/gnomon")
MB = 1024 * 1024


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def healthz_ms(port, timeout=1.0):
    """Milliseconds a fresh GET /healthz took, or None when it was not answered in `timeout`."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            if not data.startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return (time.monotonic() - start) * 1000


class Prober(threading.Thread):
    """Probes /healthz every 200 ms until stopped; records the worst time and failures."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.worst, self.failures, self.probes = port, 0.0, 0, 0
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            ms = healthz_ms(self.port)
            self.probes += 1
            if ms is None:
                self.failures += 1
            else:
                self.worst = max(self.worst, ms)
            self.stopping.wait(0.2)

    def stop(self):
        self.stopping.set()
        self.join()


class HttpLimitsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.port = free_port()
        config = os.path.join(self.tmp.name, "gnomon.toml")
        self.probe_port = free_port()
        with open(config, "w") as f:
            f.write('[api]\nprobe_listen = "127.0.0.1:%d"\nmax_connections = 200\n'
                    'max_connections_per_client = 200\nidle_timeout = "60s"\n' % self.probe_port)
        self.log = open(os.path.join(self.tmp.name, "serve.log"), "w")
        self.proc = subprocess.Popen(
            [GNOMON, "serve", "--config", config, "--backend",
             "sqlite://%s/gnomon.db" % self.tmp.name, "--listen", "127.0.0.1:%d" % self.port],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: healthz_ms(self.port) is not None, 30, "gnomon serve to answer")
        # Settle: the first requests allocate what the server keeps.
        for _ in range(20):
            healthz_ms(self.port)

    def tearDown(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        self.tmp.cleanup()

    def flood(self, payload, total):
        """Sends a request head followed by `payload` repeated up to `total` bytes on one
        connection, until the server closes it. Returns the bytes sent."""
        sent = 0
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            try:
                while sent < total:
                    s.sendall(payload)
                    sent += len(payload)
            except OSError:
                pass  # closed by the server, as it should
        return sent

    def test_header_floods_are_cut_and_memory_stays_bounded(self):
        before = rss_kb(self.proc.pid)
        prober = Prober(self.port)
        prober.start()
        lines = (b"X-Flood: " + b"a" * 1000 + b"\r\n") * 64
        one_line = b"b" * (64 * 1024)
        sent_lines = self.flood(lines, 100 * MB)
        sent_line = self.flood(one_line, 100 * MB)
        # Three at once, as in the report that found the flaw.
        threads = [threading.Thread(target=self.flood, args=(lines, 100 * MB)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        prober.stop()
        grown_mb = (rss_kb(self.proc.pid) - before) / 1024
        self.assertLess(sent_lines, 100 * MB, "the server read the whole flood")
        self.assertLess(sent_line, 100 * MB, "the server read the whole line")
        self.assertLess(grown_mb, 64, "resident memory grew by %.1f MB" % grown_mb)
        self.assertEqual(prober.failures, 0)
        self.assertIsNotNone(healthz_ms(self.port))

    def test_slow_clients_do_not_take_the_probes(self):
        conns = []
        for _ in range(150):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall(b"GET /api/v1/jobs HTTP/1.1\r\n")
            conns.append(s)
        prober = Prober(self.port)
        prober.start()
        deadline = time.monotonic() + 12  # past header_timeout (10 s): they are cut and return
        while time.monotonic() < deadline:
            for i, s in enumerate(conns):
                try:
                    s.sendall(b"X")
                except OSError:  # cut at header_timeout: an attacker reconnects
                    s.close()
                    conns[i] = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                    conns[i].sendall(b"GET / HTTP/1.1\r\n")
            time.sleep(1.5)
        prober.stop()
        for s in conns:
            s.close()
        self.assertGreater(prober.probes, 40)
        self.assertEqual(prober.failures, 0)
        self.assertLess(prober.worst, 1000, "a probe took %.0f ms" % prober.worst)

    def test_the_probe_listener_answers_when_the_api_is_full(self):
        # Each of the 200 is answered once, so the server has admitted it (not just the kernel).
        conns = []
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 200"))
            conns.append(s)
        self.assertIsNone(healthz_ms(self.port), "the 201st connection is refused")
        self.assertIsNotNone(healthz_ms(self.probe_port))
        with socket.create_connection(("127.0.0.1", self.probe_port), timeout=5) as s:
            s.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 404"), "only probes on that lane")
        for s in conns:
            s.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
