"""The thread index through Store.list_threads / Store.threads and the asyncio
front end, against every driver: rows (times in microseconds, length, extra
and last message on request), the filter, each order both ways, cursors,
iterators, indexed_keys recorded in the store, and bad input writing nothing.
Each test tags its threads' extra with its own name and filters on it, so
tests sharing a namespace do not see each other's threads."""

import asyncio
import time

import convo
from convo.asyncio import Checkpointer
import support


def msg(role, content):
    return {"role": role, "content": content}


class ThreadIndexTests:
    def seed(self):
        """Threads a (u1), b (u2), c (u1) written in that order, then a again:
        recent order a, c, b; creation order c, b, a; id order a, b, c."""
        self.tag = self.tid("")
        ids = {}
        for name, user in (("a", "u1"), ("b", "u2"), ("c", "u1")):
            t = ids[name] = self.tid(name)
            self.store.append(t, [msg("user", "hi " + name)])
            self.store.save_extra(t, {"suite": self.tag, "user_id": user, "team": {"n": 1}})
            time.sleep(0.002)
        self.store.append(ids["a"], [msg("assistant", "last of a")])
        return ids

    def names(self, rows):
        return [r.id[len(self.tag):] for r in rows]

    def listed(self, **kwargs):
        where = dict(kwargs.pop("where", {}), suite=self.tag)
        return self.names(self.store.list_threads(where=where, **kwargs).threads)

    def test_rows_filter_orders(self):
        before = time.time() * 1e6
        ids = self.seed()
        page = self.store.list_threads(where={"suite": self.tag})
        self.assertIsInstance(page, convo.ThreadPage)
        self.assertEqual(self.names(page.threads), ["a", "c", "b"])
        self.assertIsNone(page.next)
        a = page.threads[0]
        self.assertIsInstance(a, convo.ThreadInfo)
        self.assertEqual(a._fields, ("id", "created_at", "updated_at", "length", "extra",
                                     "last_message", "cursor"))
        self.assertEqual((a.id, a.length, a.extra, a.last_message), (ids["a"], 2, None, None))
        h = self.store.load_history(ids["a"])
        # microseconds since the epoch, as Message.created_at
        self.assertLess(abs(a.created_at - h.messages[0].created_at), 1e6)
        self.assertLess(abs(a.updated_at - h.messages[1].created_at), 1e6)
        self.assertGreater(a.updated_at, a.created_at)
        self.assertTrue(before - 5e6 <= a.created_at <= time.time() * 1e6 + 5e6)
        self.assertIsInstance(a.cursor, str)
        self.assertEqual(self.listed(reverse=True), ["b", "c", "a"])
        self.assertEqual(self.listed(order="created"), ["c", "b", "a"])
        self.assertEqual(self.listed(order="created", reverse=True), ["a", "b", "c"])
        self.assertEqual(self.listed(order="id"), ["a", "b", "c"])
        self.assertEqual(self.listed(order="id", reverse=True), ["c", "b", "a"])
        self.assertEqual(self.listed(where={"user_id": "u1"}), ["a", "c"])
        self.assertEqual(self.listed(where={"team": {"n": 1}}, order="id"), ["a", "b", "c"])
        self.assertEqual(self.listed(where={"user_id": "u3"}), [])

    def test_extra_and_last_message(self):
        self.seed()
        empty = self.tid("empty")
        self.store.save_extra(empty, {"suite": self.tag, "user_id": "u1"})
        rows = self.store.list_threads(where={"suite": self.tag, "user_id": "u1"},
                                       with_extra=True, with_last_message=True).threads
        self.assertEqual(self.names(rows), ["empty", "a", "c"])
        self.assertEqual(rows[0].length, 0)
        self.assertIsNone(rows[0].last_message)
        self.assertEqual(rows[0].extra, {"suite": self.tag, "user_id": "u1"})
        self.assertEqual(rows[1].last_message, msg("assistant", "last of a"))
        self.assertEqual(rows[1].extra, {"suite": self.tag, "user_id": "u1", "team": {"n": 1}})
        only = self.store.list_threads(where={"suite": self.tag}, with_extra=True, limit=1)
        self.assertIsNotNone(only.threads[0].extra)
        self.assertIsNone(only.threads[0].last_message)
        self.assertEqual(only.threads[0].id, empty)

    def test_cursors_and_iterators(self):
        self.seed()
        where = {"suite": self.tag}
        for order in ("recent", "created", "id"):
            for reverse in (False, True):
                everything = self.listed(order=order, reverse=reverse)
                p1 = self.store.list_threads(where, order, reverse, limit=2)
                self.assertEqual(self.names(p1.threads), everything[:2])
                self.assertEqual(p1.next, p1.threads[1].cursor)
                p2 = self.store.list_threads(where, order, reverse, after=p1.next, limit=2)
                self.assertEqual((self.names(p2.threads), p2.next), (everything[2:], None))
                p3 = self.store.list_threads(where, order, reverse, after=p1.threads[0].cursor)
                self.assertEqual(self.names(p3.threads), everything[1:])
                walked = self.names(self.store.threads(where, order, reverse, limit=1))
                self.assertEqual(walked, everything)
        first = self.store.list_threads(where, limit=1).next
        self.assertEqual(self.names(self.store.threads(where, after=first, limit=1)), ["c", "b"])
        it = self.store.threads(where=where, limit=1, with_last_message=True)
        self.assertEqual(next(it).last_message, msg("assistant", "last of a"))

    def test_bad_input(self):
        t = self.tid()
        self.store.append(t, [msg("user", "x")])
        self.store.save_extra(t, {"suite": self.tid("")})
        bad = [
            (dict(where='{"user_id":"u1"}'), "where must be a dict"),
            (dict(where=[1]), "where must be a dict"),
            (dict(where={"x": object()}), "where cannot be serialized"),
            (dict(order="newest"), "order must be 'recent', 'created' or 'id'"),
            (dict(order=0), "order must be"),
            (dict(reverse=1), "reverse must be a bool"),
            (dict(with_extra="yes"), "with_extra must be a bool"),
            (dict(with_last_message=None), "with_last_message must be a bool"),
            (dict(limit=0), "limit"),
            (dict(limit=10001), "limit"),
            (dict(limit="5"), "limit"),
            (dict(after=5), "after must be str or bytes"),
            (dict(after="nonsense"), "cursor"),
        ]
        for kwargs, text in bad:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaises(convo.InvalidError) as cm:
                    self.store.list_threads(**kwargs)
                self.assertIn(text, str(cm.exception))
                self.assertEqual(cm.exception.code, convo.EINVAL)
                with self.assertRaises(convo.InvalidError):
                    self.store.threads(**kwargs) if "cursor" not in text else \
                        next(self.store.threads(**kwargs))
        created = self.store.list_threads(order="created", limit=1).threads[0].cursor
        for kwargs in (dict(after=created), dict(order="created", reverse=True, after=created)):
            with self.assertRaises(convo.InvalidError) as cm:
                self.store.list_threads(**kwargs)
            self.assertIn("cursor", str(cm.exception))
        for keys in ("user_id", [1], ["k", "k"], [""]):
            with self.assertRaises(convo.InvalidError):
                convo.Store(self.url, indexed_keys=keys)
        # nothing was written
        rows = self.store.list_threads(where={"suite": self.tid("")}, with_last_message=True).threads
        self.assertEqual([(r.id, r.length, r.last_message) for r in rows], [(t, 1, msg("user", "x"))])

    def test_indexed_keys(self):
        s = self.open_store(indexed_keys=["user_id", "project"])
        t, t2 = self.tid("t"), self.tid("t2")
        s.save_extra(t, {"user_id": self.tid("u"), "project": "p"})
        self.assertEqual([r.id for r in s.list_threads(where={"user_id": self.tid("u")}).threads], [t])
        if not self.shared_store:
            return  # memory: every open is a new, empty store
        same = self.open_store(indexed_keys=["project", "user_id"])
        plain = self.open_store()
        plain.save_extra(t2, {"user_id": self.tid("u")})
        rows = same.list_threads(where={"user_id": self.tid("u")}, order="id").threads
        self.assertEqual([r.id for r in rows], [t, t2])
        with self.assertRaises(convo.InvalidError):
            self.open_store(indexed_keys=["tenant"])

    def test_asyncio(self):
        self.seed()
        cp = Checkpointer(self.store)
        self.addCleanup(cp.close)
        where = {"suite": self.tag}

        async def go():
            page = await cp.list_threads(where, limit=2, with_extra=True)
            self.assertEqual(self.names(page.threads), ["a", "c"])
            self.assertEqual(page.threads[1].extra["user_id"], "u1")
            rows = [r async for r in cp.threads(where, order="id", limit=1)]
            self.assertEqual(self.names(rows), ["a", "b", "c"])
            with self.assertRaises(convo.InvalidError):
                cp.threads(order="oldest")
            ids = await cp.thread_ids(after=self.tag, limit=3)
            self.assertEqual([i[len(self.tag):] for i in ids], ["a", "b", "c"])
        asyncio.run(go())


support.per_driver(globals(), ThreadIndexTests)
