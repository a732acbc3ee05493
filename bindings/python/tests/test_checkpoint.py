"""Store's checkpoint calls against every driver: put and get (latest, by id,
values of ancestors, pending writes), list (one thread, every thread,
namespaces, before, limit, filter, paging), prune, the put that appends
messages under an expected length, and bad input / unknown ids / limits."""

import unittest

import json

import convo
import support

J = "json"



def put(store, t, cid, parent=None, step=0, ns="", **kw):
    kw.setdefault("metadata", {"source": "loop", "step": step})
    store.checkpoint_put(t, cid, ns=ns, parent_id=parent, **kw)


class CheckpointTests:
    def test_put_and_get_every_field(self):
        t = self.tid()
        self.store.append(t, [{"role": "user", "content": "hi"}])
        self.store.checkpoint_put(t, "c1", metadata={"source": "input", "step": -1},
                                  body=("msgpack", b"\x81\xa1v\x01"),
                                  channels={"a": ("1", (J, b'"x"')), "b": ("1", ("bytes", b"\0\xff")),
                                            "empty": "1"},
                                  log_length=1)
        cp = self.store.checkpoint_get(t, "c1")
        self.assertIsInstance(cp, convo.Checkpoint)
        self.assertEqual((cp.thread_id, cp.ns, cp.id, cp.parent_id), (t, "", "c1", None))
        self.assertEqual(cp.metadata, {"source": "input", "step": -1})
        self.assertEqual(cp.body, ("msgpack", b"\x81\xa1v\x01"))
        self.assertIsInstance(cp.body, convo.Blob)
        self.assertEqual(cp.log_length, 1)
        self.assertGreater(cp.created_at, 1_600_000_000_000_000)
        self.assertEqual(cp.channels, (("a", "1", (J, b'"x"')), ("b", "1", ("bytes", b"\0\xff")),
                                       ("empty", "1", None)))
        self.assertEqual(cp.values, {"a": (J, b'"x"'), "b": ("bytes", b"\0\xff")})
        self.assertEqual(cp.writes, ())
        with self.assertRaises(AttributeError):
            cp.id = "other"

    def test_latest_values_of_ancestors_and_writes(self):
        t = self.tid()
        put(self.store, t, "c1", channels={"a": ("1", (J, b"1")), "b": ("1", (J, b"2"))})
        put(self.store, t, "c2", "c1", 1, channels={"a": ("2", (J, b"3")), "b": "1"})
        self.store.checkpoint_put_writes(t, "c2", "task-b", [(0, "a", (J, b"9")),
                                                              (1, "b", ("bytes", b"\x01"))],
                                         task_path="p/1")
        self.store.checkpoint_put_writes(t, "c2", "task-a", [(-1, "__error__", (J, b'"x"'))])
        self.store.checkpoint_put_writes(t, "c2", "task-a", [(-1, "__error__", (J, b'"y"'))])
        self.store.checkpoint_put_writes(t, "c2", "task-b", [(0, "a", (J, b"ignored"))])
        cp = self.store.checkpoint_get(t)
        self.assertEqual((cp.id, cp.parent_id), ("c2", "c1"))
        self.assertEqual(cp.values, {"a": (J, b"3"), "b": (J, b"2")})
        self.assertEqual(cp.writes, (("task-a", "", -1, "__error__", (J, b'"y"')),
                                     ("task-b", "p/1", 0, "a", (J, b"9")),
                                     ("task-b", "p/1", 1, "b", ("bytes", b"\x01"))))
        self.assertIsInstance(cp.writes[0], convo.Write)
        self.assertEqual(self.store.checkpoint_get(t, "c1").values, {"a": (J, b"1"), "b": (J, b"2")})

    def test_namespaces(self):
        t = self.tid()
        put(self.store, t, "root")
        put(self.store, t, "sub1", ns="child:1")
        self.assertEqual(self.store.checkpoint_get(t).id, "root")
        self.assertEqual(self.store.checkpoint_get(t, ns="child:1").id, "sub1")
        self.assertIsNone(self.store.checkpoint_get(t, "sub1"))
        self.assertEqual([c.id for c in self.store.checkpoint_list(t)], ["sub1", "root"])
        self.assertEqual([c.id for c in self.store.checkpoint_list(t, ns="")], ["root"])

    def test_unknown_ids(self):
        t = self.tid()
        self.assertIsNone(self.store.checkpoint_get(t))
        self.assertIsNone(self.store.checkpoint_get(t, "nope"))
        put(self.store, t, "c1")
        self.assertIsNone(self.store.checkpoint_get(t, "nope"))
        with self.assertRaises(convo.NotFoundError):
            self.store.checkpoint_put_writes(t, "nope", "task", [(0, "a", (J, b"1"))])
        with self.assertRaises(convo.NotFoundError):
            list(self.store.checkpoint_list(t, before="nope"))
        self.store.delete(t)
        with self.assertRaises(convo.NotFoundError):
            self.store.checkpoint_put_writes(t, "c1", "task", [(0, "a", (J, b"1"))])
        self.assertEqual(list(self.store.checkpoint_list(t)), [])

    def test_list_before_limit_filter_and_paging(self):
        t = self.tid()
        for i in range(7):
            put(self.store, t, "c%d" % i, "c%d" % (i - 1) if i else None, i,
                metadata={"source": "loop" if i % 2 else "input", "step": i, "tags": ["a", "b"]})
        ids = lambda **kw: [c.id for c in self.store.checkpoint_list(t, **kw)]
        self.assertEqual(ids(), ["c6", "c5", "c4", "c3", "c2", "c1", "c0"])
        self.assertEqual(ids(page_size=2), ids())
        self.assertEqual(ids(limit=3), ["c6", "c5", "c4"])
        self.assertEqual(ids(limit=3, page_size=2), ["c6", "c5", "c4"])
        self.assertEqual(ids(limit=0), [])
        self.assertEqual(ids(before="c4"), ["c3", "c2", "c1", "c0"])
        self.assertEqual(ids(before="c4", limit=2, page_size=1), ["c3", "c2"])
        self.assertEqual(ids(filter={"source": "loop"}), ["c5", "c3", "c1"])
        self.assertEqual(ids(filter={"source": "loop"}, page_size=1), ["c5", "c3", "c1"])
        self.assertEqual(ids(filter='{"step":3}'), ["c3"])
        self.assertEqual(ids(filter={"tags": ["b"]}), ids())
        self.assertEqual(ids(filter={"step": 99}), [])
        cps = list(self.store.checkpoint_list(t, limit=1))
        self.assertEqual(cps[0].metadata["step"], 6)

    def test_list_every_thread(self):
        a, b = self.tid("a"), self.tid("b")
        put(self.store, a, "a1")
        put(self.store, b, "b1")
        put(self.store, a, "a2", ns="sub")
        put(self.store, b, "b2")
        got = [(c.thread_id, c.id) for c in self.store.checkpoint_list() if c.thread_id in (a, b)]
        # each thread's checkpoints newest first; the order between threads is the driver's
        self.assertEqual(sorted(got), [(a, "a1"), (a, "a2"), (b, "b1"), (b, "b2")])
        self.assertEqual([i for t, i in got if t == a], ["a2", "a1"])
        self.assertEqual([i for t, i in got if t == b], ["b2", "b1"])
        self.assertEqual(len(list(self.store.checkpoint_list(limit=2))), 2)
        self.assertEqual([c.id for c in self.store.checkpoint_list(a, page_size=1)], ["a2", "a1"])
        self.assertEqual([c.id for c in self.store.checkpoint_list(ns="sub")
                          if c.thread_id in (a, b)], ["a2"])

    def test_list_before_across_threads(self):
        a = self.tid("a")
        put(self.store, a, "a1")
        put(self.store, a, "a2")
        b = self.tid("b")
        put(self.store, b, "b1")
        put(self.store, a, "a3", ns="sub")
        run = {"source": "loop", "step": 0}
        # every thread: what was put before a3 (of thread a, ns sub) -- this test's only
        mine = lambda cps: [c.id for c in cps if c.thread_id in (a, b)]
        self.assertEqual(sorted(mine(self.store.checkpoint_list(
            before="a3", before_thread_id=a, before_ns="sub", filter=run))), ["a1", "a2", "b1"])
        self.assertEqual(mine(self.store.checkpoint_list(
            before="a2", before_thread_id=a, before_ns="")), ["a1"])
        # thread b before a checkpoint of thread a
        self.assertEqual([c.id for c in self.store.checkpoint_list(b, before="a2",
                                                                   before_thread_id=a)], [])
        self.assertEqual([c.id for c in self.store.checkpoint_list(b, before="a3",
                                                                   before_thread_id=a,
                                                                   before_ns="sub")], ["b1"])
        # paging by `before` continues in the listed thread, not in before's
        self.assertEqual([c.id for c in self.store.checkpoint_list(a, ns="", before="a3",
                                                                   before_thread_id=a,
                                                                   before_ns="sub",
                                                                   page_size=1)], ["a2", "a1"])
        with self.assertRaises(convo.InvalidError):  # nothing names before's thread
            list(self.store.checkpoint_list(before="a2"))
        with self.assertRaises(convo.NotFoundError):  # a2 is not in thread b
            list(self.store.checkpoint_list(before="a2", before_thread_id=b))
        self.assertEqual([c.id for c in self.store.checkpoint_list(a, before="a2",
                                                                   before_thread_id=a)], ["a1"])

    def test_prune(self):
        t = self.tid()
        for i in range(5):
            put(self.store, t, "c%d" % i, channels={"a": (str(i), (J, str(i).encode()))})
        put(self.store, t, "s0", ns="sub")
        self.store.checkpoint_prune(t, 2)
        self.assertEqual([c.id for c in self.store.checkpoint_list(t)], ["s0", "c4", "c3"])
        self.assertEqual(self.store.checkpoint_get(t, "c3").values, {"a": (J, b"3")})
        self.assertIsNone(self.store.checkpoint_get(t, "c1"))
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_prune(t, -1)

    def test_fork_with_checkpoints(self):
        src, dst = self.tid("src"), self.tid("dst")
        self.store.append(src, [{"role": "user", "content": "hi"}])
        put(self.store, src, "c1", channels={"a": ("1", (J, b"1"))}, log_length=1)
        put(self.store, src, "s1", ns="sub", channels={"a": ("1", (J, b"7"))})
        put(self.store, src, "c2", "c1", 1, channels={"a": "1", "b": ("1", ("bytes", b"\0"))},
            log_length=1)
        self.store.checkpoint_put_writes(src, "c2", "task", [(0, "x", (J, b"9"))], task_path="p")
        self.store.fork(src, dst, with_checkpoints=True)
        self.assertEqual([(c.ns, c.id) for c in self.store.checkpoint_list(dst)],
                         [(c.ns, c.id) for c in self.store.checkpoint_list(src)])
        got, want = self.store.checkpoint_get(dst, "c2"), self.store.checkpoint_get(src, "c2")
        self.assertEqual((got.thread_id, got.parent_id, got.metadata, got.log_length),
                         (dst, "c1", want.metadata, 1))
        self.assertEqual((got.values, got.writes), (want.values, want.writes))
        self.assertEqual(self.store.load(dst)[0], self.store.load(src)[0])
        with self.assertRaises(convo.ConflictError):
            self.store.fork(src, dst, with_checkpoints=True)
        missing, other = self.tid("missing"), self.tid("other")
        with self.assertRaises(convo.NotFoundError):
            self.store.fork(missing, other, with_checkpoints=True)
        self.assertEqual(list(self.store.checkpoint_list(other)), [])
        with self.assertRaises(convo.InvalidError):
            self.store.fork(src, other, with_checkpoints="yes")
        self.store.fork(src, other)  # messages and extra only
        self.assertEqual(list(self.store.checkpoint_list(other)), [])

    def test_checkpoint_delete(self):
        t1, t2, run = self.tid("t1"), self.tid("t2"), "run-" + self.tid("run")
        put(self.store, t1, "c1", metadata={"run_id": run}, channels={"a": ("1", (J, b"1"))})
        put(self.store, t1, "c2", "c1", metadata={"run_id": "other"}, channels={"a": "1"})
        put(self.store, t2, "d1", ns="sub", metadata={"run_id": run, "step": 1})
        self.store.checkpoint_put_writes(t1, "c1", "task", [(0, "x", (J, b"9"))])
        self.assertEqual(self.store.checkpoint_delete(filter={"run_id": run}), 2)
        self.assertIsNone(self.store.checkpoint_get(t1, "c1"))
        self.assertIsNone(self.store.checkpoint_get(t2, "d1", ns="sub"))
        self.assertEqual(self.store.checkpoint_get(t1, "c2").values, {"a": (J, b"1")})
        self.assertEqual(self.store.checkpoint_delete(filter={"run_id": run}), 0)
        self.assertEqual(self.store.checkpoint_delete(t1), 1)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_delete(t1, limit=0)
        with self.assertRaises(convo.NotFoundError):
            self.store.checkpoint_delete(t1, before="nope")

    def test_put_with_messages(self):
        t = self.tid()
        self.store.append(t, [{"role": "user", "content": "hi"}])
        msgs = [{"role": "assistant", "content": "hello"}, '{"role":"user","content":"again"}']
        self.store.checkpoint_put(t, "c1", channels={"messages": "1"}, log_length=3,
                                  messages=msgs, expected_length=1)
        loaded, _ = self.store.load(t)
        self.assertEqual([m["content"] for m in loaded], ["hi", "hello", "again"])
        self.assertEqual(self.store.checkpoint_get(t).log_length, 3)
        with self.assertRaises(convo.ConflictError):
            self.store.checkpoint_put(t, "c2", log_length=2, messages=[{"role": "user"}],
                                      expected_length=1)
        self.assertIsNone(self.store.checkpoint_get(t, "c2"))
        self.assertEqual(len(self.store.load(t)[0]), 3)
        with self.assertRaises(convo.InvalidError):  # log_length past the new end
            self.store.checkpoint_put(t, "c3", log_length=9, messages=[{"role": "user"}],
                                      expected_length=3)
        with self.assertRaises(convo.InvalidError):  # not a message: no role
            self.store.checkpoint_put(t, "c3", log_length=4, messages=[{"content": "x"}],
                                      expected_length=3)
        self.assertIsNone(self.store.checkpoint_get(t, "c3"))
        self.assertEqual(len(self.store.load(t)[0]), 3)

    def test_put_with_messages_bad_arguments(self):
        t = self.tid()
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put(t, "c1", messages=[{"role": "user"}])
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put(t, "c1", expected_length=0)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put(t, "c1", messages=[{"role": "user"}], expected_length=-1)
        self.assertIsNone(self.store.checkpoint_get(t))

    def test_bad_input(self):
        t = self.tid()
        bad = [
            dict(thread_id="", checkpoint_id="c"),
            dict(thread_id="x" * 513, checkpoint_id="c"),
            dict(thread_id="a\0b", checkpoint_id="c"),
            dict(thread_id=t, checkpoint_id=""),
            dict(thread_id=t, checkpoint_id=5),
            dict(thread_id=t, checkpoint_id="c", metadata="[1]"),
            dict(thread_id=t, checkpoint_id="c", metadata="{not json"),
            dict(thread_id=t, checkpoint_id="c", metadata={"x": object()}),
            dict(thread_id=t, checkpoint_id="c", body=b"raw"),
            dict(thread_id=t, checkpoint_id="c", body=("json", "text")),
            dict(thread_id=t, checkpoint_id="c", channels={"a": 1}),
            dict(thread_id=t, checkpoint_id="c", channels=[("a", "1")]),
            dict(thread_id=t, checkpoint_id="c", channels={"a": ("1", "notablob")}),
            dict(thread_id=t, checkpoint_id="c", log_length=-1),
            dict(thread_id=t, checkpoint_id="c", channels=5),  # was a TypeError
            dict(thread_id=t, checkpoint_id="c", messages=5, expected_length=0),
        ]
        for kw in bad:
            with self.subTest(kw=kw), self.assertRaises(convo.InvalidError):
                self.store.checkpoint_put(**kw)
        self.assertIsNone(self.store.checkpoint_get(t))
        put(self.store, t, "c1")
        for writes in ([(0, "a")], [("0", "a", (J, b"1"))], [(0, "a", b"1")], ["x"], None, 5):
            with self.subTest(writes=writes), self.assertRaises(convo.InvalidError):
                self.store.checkpoint_put_writes(t, "c1", "task", writes)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put_writes(t, "c1", "", [(0, "a", (J, b"1"))])
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_list(t, filter="[]").__next__()
        with self.assertRaisesRegex(convo.InvalidError, "^filter must be"):  # not "metadata"
            self.store.checkpoint_list(t, filter=5)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_list(t, limit=-1)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_list(t, page_size=0)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_get("")

    def test_checkpoint_limit(self):
        s = self.open_store(max_checkpoint_bytes=4096)
        t = self.tid()
        with self.assertRaises(convo.TooLargeError):
            s.checkpoint_put(t, "big", channels={"a": ("1", ("bytes", b"x" * 8192))})
        self.assertIsNone(s.checkpoint_get(t, "big"))
        s.checkpoint_put(t, "small", channels={"a": ("1", ("bytes", b"x" * 100))})
        self.assertEqual(s.checkpoint_get(t).values["a"].bytes, b"x" * 100)

    def test_closed_store(self):
        s = convo.Store(self.url)
        s.close()
        with self.assertRaises(convo.InvalidError):
            s.checkpoint_get("t")


class ItemsTests:
    """Log references through the binding: convo.Items as a channel value and a
    write value (convo_checkpoint_put v4 channel_items, convo_checkpoint_put_writes_ex),
    read back resolved with their seqs (convo_checkpoint_channel_items / write_items)."""

    M = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]

    def test_items_channel_enters_the_log_once(self):
        t = self.tid()
        seqs = self.store.checkpoint_put(t, "c1", channels={
            "messages": ("1", convo.Items(self.M, log=True)), "n": ("1", ("json", b"1"))})
        self.assertEqual(seqs, {"messages": [0, 1]})
        more = self.M + [{"role": "user", "content": "next"}]
        seqs = self.store.checkpoint_put(t, "c2", parent_id="c1", channels={
            "messages": ("2", convo.Items(more, seqs=seqs["messages"] + [-1], log=True)),
            "n": "1"})
        self.assertEqual(seqs, {"messages": [0, 1, 2]})
        self.assertEqual(self.store.load(t)[0], more)
        cp = self.store.checkpoint_get(t, "c2")
        value = cp.values["messages"]
        self.assertIsInstance(value, convo.Items)
        self.assertEqual((value.json(), value.seqs, value.key, value.rest),
                         (more, [0, 1, 2], None, None))
        self.assertEqual(cp.values["n"], convo.Blob("json", b"1"))
        self.assertEqual(cp.log_length, 3)

    def test_items_of_a_branch_and_of_writes_stay_inline(self):
        t = self.tid()
        self.store.checkpoint_put(t, "c1", channels={"messages": ("1", convo.Items(self.M, log=True))})
        other = [self.M[0], {"role": "assistant", "content": "other"}]
        seqs = self.store.checkpoint_put(t, "c2", channels={
            "messages": ("2", convo.Items(other, log=True))})
        self.assertEqual(seqs, {"messages": [0, -1]})        # not a parent's extension
        self.assertEqual(len(self.store.load(t)[0]), 2)
        self.assertEqual(self.store.checkpoint_get(t, "c2").values["messages"].json(), other)
        self.store.checkpoint_put_writes(t, "c2", "task", [
            (0, "messages", convo.Items([{"role": "user", "content": "w"}])),
            (1, "other", ("json", b"2")),
            (2, "__start__", convo.Items([{"role": "user", "content": "in"}], key="messages",
                                         rest=("json", b'{"x":1}')))])
        writes = self.store.checkpoint_get(t, "c2").writes
        self.assertEqual([w.channel for w in writes], ["messages", "other", "__start__"])
        self.assertEqual(writes[0].value.json(), [{"role": "user", "content": "w"}])
        self.assertEqual(writes[1].value, convo.Blob("json", b"2"))
        self.assertEqual((writes[2].value.key, writes[2].value.rest),
                         ("messages", convo.Blob("json", b'{"x":1}')))
        self.assertEqual(len(self.store.load(t)[0]), 2)      # writes never append

    def test_get_and_list_with_what_the_caller_holds(self):
        """known=(generation, length, origin) of an earlier read: the items below
        length come back without their text, until the thread is rewritten."""
        t = self.tid()
        self.store.checkpoint_put(t, "c1", channels={"messages": ("1", convo.Items(self.M, log=True))})
        first = self.store.checkpoint_get(t)
        self.assertGreaterEqual(first.generation, 0)
        self.assertGreater(first.log_origin, 0)
        known = (first.generation, 2, first.log_origin)
        value = self.store.checkpoint_get(t, known=known).values["messages"]
        self.assertEqual((value.items, value.seqs), ([None, None], [0, 1]))
        value = self.store.checkpoint_get(t, known=(first.generation, 1, first.log_origin)
                                          ).values["messages"]
        self.assertEqual(value.items[0], None)
        self.assertEqual(json.loads(value.items[1]), self.M[1])
        listed = list(self.store.checkpoint_list(t, known=known))
        self.assertEqual(listed[0].values["messages"].items, [None, None])
        for other in ((first.generation + 1, 2, first.log_origin),
                      (first.generation, 2, first.log_origin + 1)):
            value = self.store.checkpoint_get(t, known=other).values["messages"]
            self.assertEqual(value.json(), self.M)
        for bad in ((0, 1), (0, -1, 5), (0, 1, -1), "x", (0, 1, 1.5)):
            with self.assertRaises(convo.InvalidError):
                self.store.checkpoint_get(t, known=bad)
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_list(known=known)    # known needs the thread

    def test_the_items_a_read_left_out_in_front_are_counted_once(self):
        """A read with `known` tells how many items it left out in front (texts a
        LeftOut with `held`): all of a list within what is held, the first ones of a
        longer one, none when the thread is no longer what the caller holds."""
        from convo.checkpoint import LeftOut
        t = self.tid()
        m = [{"role": "user", "content": "m%d" % i} for i in range(5)]
        self.store.checkpoint_put(t, "c1", channels={"messages": ("1", convo.Items(m, log=True))})
        first = self.store.checkpoint_get(t)
        for length, held in ((5, 5), (9, 5), (3, 3), (1, 1)):
            value = self.store.checkpoint_get(
                t, known=(first.generation, length, first.log_origin)).values["messages"]
            self.assertIsInstance(value.items, LeftOut)
            self.assertEqual((value.items.held, value.seqs), (held, list(range(5))))
            self.assertEqual(value.items[:held], [None] * held)
            self.assertEqual([json.loads(x) for x in value.items[held:]], m[held:])
        value = self.store.checkpoint_get(
            t, known=(first.generation + 1, 5, first.log_origin)).values["messages"]
        self.assertNotIsInstance(value.items, LeftOut)
        self.assertEqual(value.json(), m)
        # a write: two of the log's messages, then one kept inline (seq -1)
        self.store.checkpoint_put_writes(t, "c1", "task", [
            (0, "messages", convo.Items([None, None, {"role": "user", "content": "w"}],
                                        seqs=[0, 1, -1]))])
        got = self.store.checkpoint_get(t, known=(first.generation, 5, first.log_origin))
        w = got.writes[0].value
        self.assertIsInstance(w.items, LeftOut)
        self.assertEqual((w.items.held, w.seqs), (2, [0, 1, -1]))
        self.assertEqual(w.items[:2], [None, None])
        self.assertEqual(json.loads(w.items[2]), {"role": "user", "content": "w"})

    def test_list_without_channel_items(self):
        """channel_items=False: a list comes back without its items, with its key and
        rest as stored; a value that is no list, the writes and the metadata as
        without it."""
        t = self.tid()
        self.store.checkpoint_put(t, "c1", metadata={"step": 1}, channels=[
            ("messages", "1", convo.Items(self.M, key="__convo_delta__", rest=("json", b'{"a":1}'),
                                          log=True)),
            ("other", "1", ("json", b"7"))])
        self.store.checkpoint_put_writes(t, "c1", "task", [
            (0, "messages", convo.Items([{"role": "user", "content": "w"}]))])
        bare, = self.store.checkpoint_list(t, channel_items=False)
        whole, = self.store.checkpoint_list(t)
        value = bare.values["messages"]
        self.assertEqual((value.items, value.key, value.rest),
                         ([], "__convo_delta__", convo.Blob("json", b'{"a":1}')))
        self.assertEqual(len(whole.values["messages"].items), 2)
        self.assertEqual(bare.values["other"], whole.values["other"])
        self.assertEqual(bare.writes, whole.writes)
        self.assertEqual(bare.writes[0].value.json(), [{"role": "user", "content": "w"}])
        self.assertEqual(bare.metadata, whole.metadata)

    def test_list_only_channel(self):
        """only_channel=NAME: each checkpoint with that channel alone (a list without
        its items) and its writes to it; no body, metadata {}; the filter still
        applies to the stored metadata."""
        t = self.tid()
        self.store.checkpoint_put(t, "c1", metadata={"step": 1}, body=("json", b"{}"), channels=[
            ("messages", "1", convo.Items(self.M, key="__convo_delta__", rest=("json", b'{"a":1}'),
                                          log=True)),
            ("other", "1", ("json", b"7"))])
        self.store.checkpoint_put(t, "c2", parent_id="c1", metadata={"step": 2},
                                  body=("json", b"{}"), channels=[("other", "2", ("json", b"8"))])
        self.store.checkpoint_put_writes(t, "c1", "task", [
            (0, "messages", convo.Items([{"role": "user", "content": "w"}])),
            (1, "other", ("json", b"9"))])
        c2, c1 = self.store.checkpoint_list(t, only_channel="messages")
        whole = list(self.store.checkpoint_list(t))[1]
        self.assertEqual((c2.id, c2.parent_id, c1.id, c1.parent_id), ("c2", "c1", "c1", None))
        self.assertEqual((c1.body, c1.metadata, c2.channels, c2.writes), (None, {}, (), ()))
        self.assertEqual([c.name for c in c1.channels], ["messages"])
        value = c1.values["messages"]
        self.assertEqual((value.items, value.key, value.rest),
                         ([], "__convo_delta__", convo.Blob("json", b'{"a":1}')))
        self.assertEqual(c1.writes, tuple(w for w in whole.writes if w.channel == "messages"))
        self.assertEqual(len(whole.writes), 2)
        # one thread and namespace (its page's thread and ns given to each checkpoint)
        self.assertEqual(list(self.store.checkpoint_list(t, ns="", only_channel="messages")),
                         [c2, c1])
        self.assertEqual((c1.thread_id, c1.ns), (t, ""))
        got = list(self.store.checkpoint_list(t, only_channel="other", filter={"step": 2}))
        self.assertEqual([(c.id, c.values) for c in got], [("c2", {"other": convo.Blob("json", b"8")})])
        with self.assertRaises(convo.InvalidError):
            list(self.store.checkpoint_list(t, only_channel=""))

    def test_a_list_given_as_a_log_prefix(self):
        """log_prefix={channel: k} (convo_checkpoint_in v5): the list is the log's
        first k messages and the given items; seqs come back for the given ones."""
        t = self.tid()
        self.store.checkpoint_put(t, "c1", channels={"messages": ("1", convo.Items(self.M, log=True))})
        nxt = {"role": "user", "content": "next"}
        seqs = self.store.checkpoint_put(t, "c2", parent_id="c1", channels={
            "messages": ("2", convo.Items([nxt], log=True))}, log_prefix={"messages": 2})
        self.assertEqual(seqs, {"messages": [2]})
        self.assertEqual(self.store.load(t)[0], self.M + [nxt])
        value = self.store.checkpoint_get(t, "c2").values["messages"]
        self.assertEqual((value.json(), value.seqs), (self.M + [nxt], [0, 1, 2]))
        # only a prefix, then a message not in the log: kept inline, nothing appended
        seqs = self.store.checkpoint_put(t, "c3", parent_id="c2", channels={
            "messages": ("3", convo.Items([{"role": "assistant", "content": "x"}], log=True))},
            log_prefix={"messages": 1})
        self.assertEqual(seqs, {"messages": [-1]})
        self.assertEqual(len(self.store.load(t)[0]), 3)
        self.assertEqual(self.store.checkpoint_get(t, "c3").values["messages"].json(),
                         [self.M[0], {"role": "assistant", "content": "x"}])
        # past the log: a conflict, nothing written
        with self.assertRaises(convo.ConflictError):
            self.store.checkpoint_put(t, "c4", parent_id="c3", channels={
                "messages": ("4", convo.Items([nxt], log=True))}, log_prefix={"messages": 9})
        self.assertIsNone(self.store.checkpoint_get(t, "c4"))
        for bad in ({"other": 1}, {"messages": -1}, {"messages": 1.5}, [("messages", 1)]):
            with self.assertRaises(convo.InvalidError, msg=bad):
                self.store.checkpoint_put(t, "c5", channels={
                    "messages": ("5", convo.Items([nxt], log=True)), "other": ("1", ("json", b"1"))},
                    log_prefix=bad)
        self.assertIsNone(self.store.checkpoint_get(t, "c5"))

    def test_items_argument_errors(self):
        t = self.tid()
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put(t, "c", channels={"m": ("1", convo.Items(self.M, seqs=[0]))})
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put(t, "c", channels={"m": ("1", convo.Items([{"no": "role"}]))})
        with self.assertRaises(convo.InvalidError):
            self.store.checkpoint_put(t, "c", channels={"m": ("1", convo.Items(self.M))},
                                      expected_length=0)
        for seqs in (None, [-1], [1.5]):    # no text and no seq; a seq that is no int
            with self.assertRaises(convo.InvalidError):
                self.store.checkpoint_put(t, "c", channels={
                    "m": ("1", convo.Items([None], seqs=seqs, log=True))})
        self.assertIsNone(self.store.checkpoint_get(t))


support.per_driver(globals(), CheckpointTests)
support.per_driver(globals(), ItemsTests)

if __name__ == "__main__":
    unittest.main()
