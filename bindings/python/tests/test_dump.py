"""Store.export / import_ / copy and the maintenance calls (sweep,
stored_bytes, bench_raw) against every driver: round trips through file
objects, progress, errors raised by the file, corrupt dumps, unknown threads."""

import io
import os
import tempfile
import time
import unittest

import convo
import support

J = "json"


class Unbuffered:
    """A file with read(n) only, returning a few bytes per call."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def read(self, n):
        chunk = self.data[self.pos:self.pos + min(n, 7)]
        self.pos += len(chunk)
        return chunk


class DumpTests:
    def fill(self, t):
        self.store.append(t, [{"role": "user", "content": "m%d" % i} for i in range(5)])
        self.store.save_extra(t, {"k": "v"})
        self.store.checkpoint_put(t, "c1", channels={"a": ("1", (J, b"1"))}, log_length=5,
                                  metadata={"step": 1})
        self.store.checkpoint_put_writes(t, "c1", "task", [(0, "a", ("bytes", b"\0\1"))])

    def test_export_import_round_trip(self):
        t = self.tid()
        self.fill(t)
        buf = io.BytesIO()
        seen = []
        stats = self.store.export(buf, [t], progress=seen.append)
        self.assertIsInstance(stats, convo.DumpStats)
        self.assertEqual((stats.threads, stats.messages, stats.checkpoints, stats.writes),
                         (1, 5, 1, 1))
        self.assertEqual(stats.bytes, len(buf.getvalue()))
        self.assertTrue(seen and isinstance(seen[-1], convo.DumpStats))
        self.store.delete(t)
        buf.seek(0)
        stats = self.store.import_(buf)
        self.assertEqual((stats.threads, stats.messages, stats.skipped), (1, 5, 0))
        self.assertEqual(self.store.load(t), ([{"role": "user", "content": "m%d" % i}
                                               for i in range(5)], {"k": "v"}))
        cp = self.store.checkpoint_get(t)
        self.assertEqual((cp.id, cp.log_length, cp.values), ("c1", 5, {"a": (J, b"1")}))
        self.assertEqual(cp.writes, (("task", "", 0, "a", ("bytes", b"\0\1")),))
        # the same dump again changes nothing; a reader with read() only works too
        stats = self.store.import_(Unbuffered(buf.getvalue()))
        self.assertEqual(stats.skipped, 5)
        self.assertEqual(len(self.store.load(t)[0]), 5)

    def test_export_to_a_real_file_and_copy(self):
        t = self.tid()
        self.fill(t)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "dump.bin")
            with open(path, "wb") as f:
                self.store.export(f, t)
            with convo.Store("sqlite:" + os.path.join(d, "other.db")) as other:
                with open(path, "rb") as f:
                    other.import_(f)
                self.assertEqual(other.load(t), self.store.load(t))
                third = convo.Store("memory:")
                self.addCleanup(third.close)
                stats = other.copy(third, [t])
                self.assertEqual((stats.threads, stats.messages), (1, 5))
                self.assertEqual(third.load(t), self.store.load(t))
                self.assertEqual(third.checkpoint_get(t), other.checkpoint_get(t)._replace(
                    created_at=third.checkpoint_get(t).created_at))

    def test_errors_of_the_file_and_of_progress_are_raised(self):
        t = self.tid()
        self.fill(t)

        class Full(io.RawIOBase):
            def writable(self):
                return True

            def write(self, b):
                raise OSError(28, "No space left on device")
        with self.assertRaises(OSError) as cm:
            self.store.export(Full(), [t])
        self.assertEqual(cm.exception.errno, 28)

        def stop(stats):
            raise KeyboardInterrupt
        with self.assertRaises(KeyboardInterrupt):
            self.store.export(io.BytesIO(), [t], progress=stop)

        class Broken:
            def read(self, n):
                raise ValueError("disk gone")
        with self.assertRaises(ValueError):
            self.store.import_(Broken())

    def test_bad_dumps_and_arguments(self):
        t = self.tid()
        self.fill(t)
        buf = io.BytesIO()
        self.store.export(buf, [t])
        data = buf.getvalue()
        self.store.delete(t)
        with self.assertRaises(convo.CorruptError) as cm:
            self.store.import_(io.BytesIO(data[:len(data) // 2]))
        self.assertIn("byte %d" % (len(data) // 2), cm.exception.message)
        self.assertIsNone(self.store.load(t))  # the thread it created was removed again
        with self.assertRaises(convo.CorruptError):
            self.store.import_(io.BytesIO(b"not a dump at all"))
        with self.assertRaises(convo.NotFoundError):
            self.store.export(io.BytesIO(), [self.tid("unknown")])
        for bad in (dict(file=object()), dict(file=io.BytesIO(), thread_ids=[]),
                    dict(file=io.BytesIO(), thread_ids=[""]),
                    dict(file=io.BytesIO(), progress=5)):
            with self.subTest(bad=bad), self.assertRaises(convo.InvalidError):
                self.store.export(**bad)
        with self.assertRaises(convo.InvalidError):
            self.store.import_(object())
        with self.assertRaises(convo.InvalidError):
            self.store.copy("memory:")
        closed = convo.Store("memory:")
        closed.close()
        with self.assertRaises(convo.InvalidError):
            self.store.copy(closed)

    def test_sweep_stored_bytes_bench_raw(self):
        self.assertEqual(self.store.sweep(), 0)  # no ttl in the URL: nothing expires
        self.store.append(self.tid(), [{"role": "user", "content": "x" * 1000}])
        self.assertGreater(self.store.stored_bytes(), 0)
        if self.driver == "memory":
            with self.assertRaises(convo.NotSupportedError):
                self.store.bench_raw(b'{"role":"user"}', 10)
        else:
            self.assertGreater(self.store.bench_raw(b'{"role":"user"}', 10), 0.0)
        with self.assertRaises(convo.InvalidError):
            self.store.bench_raw("text", 10)
        with self.assertRaises(convo.InvalidError):
            self.store.bench_raw(b"x", -1)

    def test_sweep_counts_expired_threads(self):
        if self.driver == "memory":
            with self.assertRaises(convo.InvalidError):  # memory: has no ttl
                convo.Store("memory:?ttl=1")
            return
        s = self.open_store_at(support.with_param(self.url, "ttl", "1"))
        a, b = self.tid("a"), self.tid("b")
        s.append(a, {"role": "user"})
        s.save_extra(b, {"k": 1})
        time.sleep(2.2)
        self.assertIsNone(s.load(a))
        # MongoDB's TTL index expires data on the server: nothing left to count.
        # Redis expires the keys too, but sweep counts the index entries it removes.
        self.assertEqual(s.sweep(), 0 if self.driver == "mongo" else 2)
        self.assertEqual(s.sweep(), 0)
        self.assertNotIn(a, s.thread_ids())

    def open_store_at(self, url):
        s = convo.Store(url)
        self.addCleanup(s.close)
        return s


support.per_driver(globals(), DumpTests)

if __name__ == "__main__":
    unittest.main()
