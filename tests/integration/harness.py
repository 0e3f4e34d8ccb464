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


def free_cluster_port(taken=()):
    """free_port() for a Redis Cluster node: its cluster bus listens on port + 10000, so the port
    is at most 55535, its bus port was free a moment ago too, and it is not one of `taken`."""
    while True:
        port = free_port()
        if port > 55535 or port in taken:
            continue
        bus = socket.socket()
        try:
            bus.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        finally:
            bus.close()
        return port


def temp_dir(prefix):
    """A new directory under the temp root for one test's files, removed when this Python process
    exits (GNOMON_KEEP_TEST_DIRS=1 keeps it for a look after a failure): a test run must not leave
    servers' data and build trees behind on the machine that runs it."""
    import atexit
    import shutil
    import tempfile
    path = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("GNOMON_KEEP_TEST_DIRS") != "1":
        atexit.register(shutil.rmtree, path, True)
    return path


def start_etcd(workdir, name="etcd0"):
    """A single-member etcd (Debian's /usr/bin/etcd) on free loopback ports, its data in `workdir`
    (or /dev/shm when present: fsync-bound etcd is slow on some disks; removed when this Python
    process exits). Returns (process, url). The caller kills the process."""
    import atexit
    import shutil
    import subprocess
    import urllib.request
    client, peer = free_port(), free_port()
    data_root = "/dev/shm" if os.path.isdir("/dev/shm") else workdir
    data = os.path.join(data_root, "gnomon-etcd-%d-%d" % (os.getpid(), client))
    atexit.register(shutil.rmtree, data, True)
    log = open(os.path.join(workdir, name + ".log"), "w")
    peer_url = "http://127.0.0.1:%d" % peer
    client_url = "http://127.0.0.1:%d" % client
    proc = subprocess.Popen(
        ["/usr/bin/etcd", "--name", name, "--data-dir", data,
         "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
         "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
         "--initial-cluster", "%s=%s" % (name, peer_url), "--initial-cluster-state", "new"],
        stdout=log, stderr=subprocess.STDOUT)

    def healthy():
        try:
            with urllib.request.urlopen(client_url + "/health", timeout=1) as r:
                return b'"true"' in r.read()
        except OSError:
            return False
    wait_for(healthy, 30, "etcd to be healthy")
    return proc, "etcd://127.0.0.1:%d" % client


def start_redis(workdir, appendonly="yes"):
    """A redis-server (Debian's) on a free loopback port, its data in `workdir`. Returns
    (process, port). The caller kills the process."""
    import subprocess
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", appendonly, "--dir", workdir, "--protected-mode", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def answers():
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        return r.stdout.strip() == "PONG"
    wait_for(answers, 30, "redis-server to answer")
    return proc, port
