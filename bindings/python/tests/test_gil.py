"""Stores that keep the GIL during their calls (Store(keep_gil=True), the
default for memory: and sqlite:) give it up wherever libconvo waits: a thread
in SQLite's busy wait or in the pool's wait for a connection does not stop the
process's other threads, and export / import with Python callbacks beside
threads appending to the same store end. Each scenario runs in a child
process: a wait that kept the GIL would hang it, and the child's timeout
(generous, never reached when it works) turns that into a failure."""

import io
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import convo

HERE = os.path.dirname(os.path.abspath(__file__))

# Another process holding SQLite's write lock on argv[1] until a line on stdin.
HOLDER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
con.execute("COMMIT")
"""


def hold_lock(path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    if holder.stdout.readline().strip() != "locked":
        raise RuntimeError("the lock holder did not start")
    return holder


def release_lock(holder):
    holder.stdin.write("\n")
    holder.stdin.close()
    holder.wait()
    holder.stdout.close()


# ---- the scenarios, each run by a child process (main below) ----

def scenario_waits(path, keep_gil):
    """T1 appends while another process holds the write lock (a busy wait,
    holding the pool's only connection); T2 loads (a wait for that
    connection); T3, pure Python, must finish before either returns. With a
    switch interval of 1,000 s, a thread gives the GIL up only where it
    blocks, so T2 and T3 run at all only if the waits gave it up. Without
    keep_gil (the control), T1 and T2 race for the connection: all must end."""
    keep = keep_gil == "True"
    store = convo.Store("sqlite:%s?busy_timeout=60000&pool=1" % path, keep_gil=keep)
    store.append("t", {"role": "user", "content": "first"})
    holder = hold_lock(path)
    order, errors = [], []
    in_t1, in_t2 = threading.Event(), threading.Event()

    def t1():
        in_t1.set()
        try:
            store.append("t", {"role": "user", "content": "second"})
        except Exception as e:
            errors.append("append: %r" % e)
        order.append("t1")

    def t2():
        in_t1.wait()
        in_t2.set()
        try:
            # keeping the GIL, T1 holds the connection before T2 runs; without,
            # either may take it first
            if len(store.load("t")[0]) != 2 and keep:
                errors.append("load did not see the append it waited for")
        except Exception as e:
            errors.append("load: %r" % e)
        order.append("t2")

    def t3():
        in_t2.wait()
        n = 0
        for _ in range(100000):
            n += 1
        order.append("t3")

    threads = [threading.Thread(target=f) for f in (t1, t2, t3)]
    sys.setswitchinterval(1000)
    for t in threads:
        t.start()
    threads[2].join()
    release_lock(holder)
    for t in threads[:2]:
        t.join()
    print("order:", order, "errors:", errors)
    first_ok = order[0] == "t3" or not keep
    return 0 if first_ok and sorted(order) == ["t1", "t2", "t3"] and not errors else 1


def scenario_callbacks(url, keep_gil):
    """export (a Python writer) and import (a Python reader) each wait in their
    first callback until two threads appending to the same store have made
    progress; everything must end, with everything stored."""
    keep = keep_gil == "True"
    store = convo.Store(url, keep_gil=keep)
    for i in range(3):
        store.append("x%d" % i, [{"role": "user", "content": "m%d" % j} for j in range(50)])
    failures = []

    def appenders(target, tag):
        done, lock, progressed = [0], threading.Lock(), threading.Event()

        def run(k):
            for i in range(20):
                target.append("%s%d" % (tag, k), {"role": "user", "content": str(i)})
                with lock:
                    done[0] += 1
                    if done[0] == 10:
                        progressed.set()
        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        return threads, progressed

    class Writer(io.BytesIO):
        def write(self, b):
            if self.tell() == 0 and not progressed.wait(120):
                failures.append("no append ended during the export's callback")
            return super().write(b)

    threads, progressed = appenders(store, "a")
    out = Writer()
    stats = store.export(out, ["x0", "x1", "x2"])
    for t in threads:
        t.join()
    if stats.messages != 150:
        failures.append("export: %r" % (stats,))

    dst = convo.Store(url if url == "memory:" else url.replace(".db", "-dst.db"), keep_gil=keep)
    threads, progressed = appenders(dst, "b")

    class Reader(io.BytesIO):
        def readinto(self, b):
            if self.tell() == 0 and not progressed.wait(120):
                failures.append("no append ended during the import's callback")
            return super().readinto(b)

    stats = dst.import_(Reader(out.getvalue()))
    for t in threads:
        t.join()
    if stats.messages != 150:
        failures.append("import: %r" % (stats,))
    for s, tag in ((store, "a"), (dst, "b")):
        for k in range(2):
            if len(s.load("%s%d" % (tag, k))[0]) != 20:
                failures.append("%s%d lost appends" % (tag, k))
    print("failures:", failures)
    return 1 if failures else 0


def run_scenario(test, name, *args):
    """Runs scenario NAME(*args) in a child process; a hang is a failure."""
    try:
        out = subprocess.run([sys.executable, "-c",
                              "import sys, test_gil; sys.exit(test_gil.scenario_%s(*sys.argv[1:]))"
                              % name] + list(args), cwd=HERE, capture_output=True, text=True,
                             timeout=int(os.environ.get('GIL_T', 600)))
    except subprocess.TimeoutExpired as e:
        test.fail("scenario %s%r did not end in time (a wait kept the GIL?): %s %s"
                  % (name, args, e.stdout, e.stderr))
    test.assertEqual(out.returncode, 0, "scenario %s%r: %s %s" % (name, args, out.stdout,
                                                                  out.stderr))


class GilTests(unittest.TestCase):
    def setUp(self):
        if "sqlite" not in convo.drivers():
            self.skipTest("the sqlite driver is not built into libconvo")
        self.dir = tempfile.TemporaryDirectory(prefix="convo-gil-")
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_defaults_and_choices(self):
        with convo.Store("memory:") as s:
            self.assertIs(s.keep_gil, True)
        with convo.Store("sqlite:" + self.path("a.db")) as s:
            self.assertIs(s.keep_gil, True)
        with convo.Store("sqlite:" + self.path("a.db"), keep_gil=False) as s:
            self.assertIs(s.keep_gil, False)
            s.append("t", {"role": "user"})
        for url in ("redis://127.0.0.1:1", "postgres://x@127.0.0.1:1/x", "mongodb://127.0.0.1:1"):
            with self.assertRaisesRegex(convo.InvalidError, "memory: and sqlite: stores only"):
                convo.Store(url, keep_gil=True)
        with self.assertRaisesRegex(convo.InvalidError, "keep_gil must be"):
            convo.Store("memory:", keep_gil="yes")

    def test_busy_wait_and_pool_wait_give_the_gil_up(self):
        run_scenario(self, "waits", self.path("w.db"), "True")

    def test_busy_wait_and_pool_wait_without_keeping_the_gil(self):
        run_scenario(self, "waits", self.path("w2.db"), "False")

    def test_callbacks_beside_appends(self):
        for keep in ("True", "False"):
            for url in ("memory:", "sqlite:" + self.path("c%s.db" % keep) + "?pool=1",
                        "sqlite:" + self.path("d%s.db" % keep)):
                with self.subTest(url=url, keep_gil=keep):
                    run_scenario(self, "callbacks", url, keep)

    def test_busy_timeout_error_is_unchanged(self):
        path = self.path("t.db")
        for keep in (True, False):
            with convo.Store("sqlite:%s?busy_timeout=100" % path, keep_gil=keep) as s:
                s.append("t", {"role": "user"})
                holder = hold_lock(path)
                try:
                    with self.assertRaises(convo.ConvoError) as cm:
                        s.append("t", {"role": "user"})
                finally:
                    release_lock(holder)
                self.assertEqual(cm.exception.code, convo.ETIMEOUT)
                self.assertIn("still locked after 100 ms", str(cm.exception))

    def test_a_libconvo_without_the_hooks_releases_the_gil(self):
        """an older libconvo refuses convo_store_opts version 3: the store is
        opened again with version 2 and keep_gil=False"""
        from unittest import mock
        from convo import _lib
        seen = []

        class Old:
            def convo_open_ex(self, handle, url, opts, err):
                seen.append(opts._obj.version)
                err._obj.message = b"unsupported convo_store_opts version 3"
                return _lib.EINVAL

        real_open = _lib.lib.convo_open_ex

        def open_v2(handle, url, opts, err):
            seen.append(opts._obj.version)
            return real_open(handle, url, opts, err)
        with mock.patch.object(_lib, "kept", Old()), \
                mock.patch.object(_lib.lib, "convo_open_ex", open_v2):
            s = convo.Store("memory:")
        with s:
            self.assertEqual(seen, [3, 2])
            self.assertIs(s.keep_gil, False)
            s.append("t", {"role": "user"})
            self.assertEqual(len(s.load("t")[0]), 1)
        # another InvalidError of the open is raised, not retried without the hooks
        with self.assertRaisesRegex(convo.InvalidError, "bogus"):
            convo.Store("sqlite:" + self.path("bad.db") + "?bogus=1")

    def test_copy_between_a_store_keeping_the_gil_and_one_not(self):
        with convo.Store("memory:") as src, \
                convo.Store("sqlite:" + self.path("copy.db"), keep_gil=False) as dst:
            src.append("t", [{"role": "user", "content": str(i)} for i in range(5)])
            src.save_extra("t", {"k": 1})
            stats = src.copy(dst)
            self.assertEqual((stats.threads, stats.messages), (1, 5))
            self.assertEqual(dst.load("t"), src.load("t"))
            dst.append("u", {"role": "user"})
            stats = dst.copy(src, ["u"])
            self.assertEqual((stats.threads, stats.messages), (1, 1))
            self.assertEqual(len(src.load("u")[0]), 1)


if __name__ == "__main__":
    unittest.main()
