#!/usr/bin/env python3
"""Makes tests/testdata/upgrade/redis-7784bb4.rdb: the Redis backend's keyspace as the release at
7784bb4 leaves it after a user's first minutes, for upgrade_test.py.

    git worktree add /tmp/old 7784bb4 && (cd /tmp/old && cmake --preset dev && \
        cmake --build build/dev --target gnomon)
    python3 tests/integration/upgrade/make_redis_fixture.py /tmp/old/build/dev/apps/gnomon/gnomon

It starts a redis-server (appendonly yes), runs that release's `gnomon serve` on it and does
through the HTTP API what make_sqlite_fixture.py does (definitions, a paused job, a trigger,
history, a refused call), stops the daemon with SIGTERM, then saves the keyspace (SAVE) as the
fixture. Next to it, what the old release answered (redis-7784bb4.json).
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from harness import start_redis  # noqa: E402
from make_sqlite_fixture import OUT, run_old, write_shown  # noqa: E402


def main():
    work = tempfile.mkdtemp()
    redis, redis_port = start_redis(work)
    try:
        shown = run_old(sys.argv[1], work, "redis://127.0.0.1:%d/0" % redis_port)
        subprocess.run(["redis-cli", "-p", str(redis_port), "save"], check=True,
                       stdout=subprocess.DEVNULL)
        os.makedirs(OUT, exist_ok=True)
        shutil.copyfile(os.path.join(work, "dump.rdb"), os.path.join(OUT, "redis-7784bb4.rdb"))
        write_shown(shown, "redis-7784bb4.json")
    finally:
        redis.kill()
        redis.wait()
    print(work)


if __name__ == "__main__":
    main()
