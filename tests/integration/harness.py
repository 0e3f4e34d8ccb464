"""Small helpers shared by the multi-process tests (serve_cluster_test.py, chaos/chaos.py)."""
import json
import os
import socket
import time


def wait_for(pred, timeout, what):
    """Polls `pred` every 100 ms until it holds; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def read_records(path):
    """The JSON lines the jobs' commands appended to `path` (none yet: [])."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def free_port():
    """A loopback TCP port that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
