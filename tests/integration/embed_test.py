#!/usr/bin/env python3
"""libgnomon for embedders: install, find_package(gnomon COMPONENTS redis etcd) and the pkg-config
modules (gnomon, gnomon-redis, gnomon-etcd) from the installed prefix, then three copies of
examples/embed on one backend run each fire once: on a SQLite file, on redis-server and on etcd."""
import os
import signal
import subprocess
import time
import unittest

from harness import free_port, start_etcd, start_redis, temp_dir

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
        cls.dir = temp_dir("gnomon-embed-")
        cls.prefix = os.path.join(cls.dir, "prefix")
        run(["cmake", "--install", BUILD, "--prefix", cls.prefix])
        cls.flags = ""
        if SANITIZE:
            cls.flags = "-fsanitize=" + SANITIZE

    @classmethod
    def example(cls):
        """examples/embed built once against the installed package (all three backends)."""
        if not hasattr(cls, "binary"):
            build = os.path.join(cls.dir, "embed-build")
            run(["cmake", "-S", os.path.join(SOURCE, "examples/embed"), "-B", build, "-G", "Ninja",
                 "-DCMAKE_PREFIX_PATH=" + cls.prefix, "-DCMAKE_CXX_FLAGS=" + cls.flags,
                 "-DCMAKE_EXE_LINKER_FLAGS=" + cls.flags])
            run(["cmake", "--build", build])
            cls.binary = os.path.join(build, "settlement_service")
        return cls.binary

    def three_copies_run_each_fire_once(self, backend, name):
        binary = self.example()
        ledger = os.path.join(self.dir, name + "-ledger.txt")
        env = dict(os.environ, GNOMON_EXAMPLE_FAST="1")
        procs = [subprocess.Popen([binary, backend, "%s-%d" % (name, i), ledger], env=env,
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

    def test_find_package_and_three_copies_run_each_fire_once(self):
        self.three_copies_run_each_fire_once(os.path.join(self.dir, "embed.db"), "sqlite")

    def on_a_server(self, start, name):
        """Three copies on a server that `start(workdir)` starts: (process, backend URL)."""
        work = os.path.join(self.dir, name)
        os.makedirs(work)
        server, backend = start(work)
        try:
            self.three_copies_run_each_fire_once(backend, name)
        finally:
            server.kill()
            server.wait()

    @unittest.skipUnless(os.path.exists("/usr/bin/redis-server"), "redis-server is not installed")
    def test_the_redis_component(self):
        def redis(work):
            proc, port = start_redis(work)
            return proc, "redis://127.0.0.1:%d" % port
        self.on_a_server(redis, "redis")

    @unittest.skipUnless(os.path.exists("/usr/bin/etcd"), "etcd is not installed")
    def test_the_etcd_component(self):
        self.on_a_server(start_etcd, "etcd")

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

    def test_pkg_config_components(self):
        # Each coordinator from its own module; Open against a closed port links the whole
        # client (and answers with an error naming the endpoint).
        port = free_port()
        programs = {
            "gnomon-redis": ('#include <gnomon/redis_coordinator.h>\n'
                             'auto Open() { return gnomon::RedisCoordinator::Open('
                             '*gnomon::ParseRedisUrl("redis://127.0.0.1:%d")); }\n' % port),
            "gnomon-etcd": ('#include <gnomon/etcd_coordinator.h>\n'
                            'auto Open() { return gnomon::EtcdCoordinator::Open('
                            '*gnomon::ParseEtcdUrl("etcd://127.0.0.1:%d")); }\n' % port),
        }
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.prefix, "lib", "pkgconfig"))
        for module, code in programs.items():
            src = os.path.join(self.dir, module + ".cc")
            with open(src, "w") as f:
                f.write(code + '#include <iostream>\nint main() { auto c = Open();\n'
                        '  std::cout << c.status().ToString() << "\\n"; return c.ok() ? 1 : 0; }\n')
            flags = run(["pkg-config", "--cflags", "--libs", module], env=env).split()
            out = os.path.join(self.dir, module)
            run(["g++", src, "-o", out, *flags, *([self.flags] if self.flags else [])])
            said = run([out])
            self.assertIn("127.0.0.1:%d" % port, said, module)


if __name__ == "__main__":
    unittest.main(verbosity=2)
