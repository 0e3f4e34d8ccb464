#!/usr/bin/env python3
"""libgnomon for embedders: install, find_package(gnomon) and pkg-config from the installed prefix,
then three copies of examples/embed on one SQLite file run each fire once."""
import os
import signal
import subprocess
import tempfile
import time
import unittest

SOURCE = os.environ.get("GNOMON_SOURCE_DIR", ".")
BUILD = os.environ.get("GNOMON_BUILD_DIR", "build/dev")
SANITIZE = os.environ.get("GNOMON_SANITIZE", "")


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout[-4000:]))
    return r.stdout


class Embed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gnomon-embed-")
        cls.prefix = os.path.join(cls.dir, "prefix")
        run(["cmake", "--install", BUILD, "--prefix", cls.prefix])
        cls.flags = ""
        if SANITIZE:
            cls.flags = "-fsanitize=" + SANITIZE

    def test_find_package_and_three_copies_run_each_fire_once(self):
        build = os.path.join(self.dir, "embed-build")
        run(["cmake", "-S", os.path.join(SOURCE, "examples/embed"), "-B", build, "-G", "Ninja",
             "-DCMAKE_PREFIX_PATH=" + self.prefix, "-DCMAKE_CXX_FLAGS=" + self.flags,
             "-DCMAKE_EXE_LINKER_FLAGS=" + self.flags])
        run(["cmake", "--build", build])
        binary = os.path.join(build, "settlement_service")
        db = os.path.join(self.dir, "embed.db")
        ledger = os.path.join(self.dir, "ledger.txt")
        env = dict(os.environ, GNOMON_EXAMPLE_FAST="1")
        procs = [subprocess.Popen([binary, db, "svc-%d" % i, ledger], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
                 for i in range(3)]
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if os.path.exists(ledger) and len(open(ledger).read().splitlines()) >= 12:
                    break
                time.sleep(0.2)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            codes = [p.wait(timeout=60) for p in procs]
        self.assertEqual(codes, [0, 0, 0])
        lines = [l.split() for l in open(ledger).read().splitlines()]
        self.assertGreaterEqual(len(lines), 12)
        runs = [l[1] for l in lines]
        self.assertEqual(len(runs), len(set(runs)), "a fire ran twice")
        self.assertEqual({l[0] for l in lines}, {"monthly-settlement", "exchange-rate-sync"})
        for job in ("monthly-settlement", "exchange-rate-sync"):
            tokens = [int(l[2]) for l in lines if l[0] == job]
            self.assertEqual(tokens, sorted(tokens), "fencing tokens went backwards for " + job)

    def test_pkg_config(self):
        src = os.path.join(self.dir, "pc.cc")
        with open(src, "w") as f:
            f.write('#include <gnomon/cron.h>\n#include <iostream>\n'
                    'int main() { auto e = gnomon::CronExpr::Parse("0 0 2 1 * *");\n'
                    '  std::cout << e->Describe() << "\\n"; return e.ok() ? 0 : 1; }\n')
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.prefix, "lib", "pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", "gnomon"], env=env).split()
        out = os.path.join(self.dir, "pc")
        run(["g++", src, "-o", out, *flags, *([self.flags] if self.flags else [])])
        self.assertEqual(run([out]).strip(), "At 02:00, on day 1 of the month")


if __name__ == "__main__":
    unittest.main(verbosity=2)
