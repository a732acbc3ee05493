"""convo.Store against every driver: round trips, errors and their codes,
idempotent and conditional appends, extra merges, delete, listing, fork,
and many Python threads sharing one store."""

import collections
import json
import pickle
import threading
import time
import unittest

import convo
import support

MIB = 1 << 20


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


UNICODE = [
    {"role": "user", "content": "héllo wörld ✓ 😀 日本語"},
    {"role": "assistant", "content": "line\nbreak\ttab \"quote\" \\ back \u2028 \u0001",
     "nested": {"list": [1, 2.5, True, False, None], "é": {"deep": ["x"]}}},
    {"role": "tool_result", "tool_call_id": "call_1", "content": "", "n": -17,
     "big": 9223372036854775807, "small": -9223372036854775808},
    {"role": "système", "content": "rôle non ASCII"},
]


class StoreTests:
    # ---- round trips ----

    def test_round_trip_dicts_with_unicode(self):
        t = self.tid()
        res = self.store.append(t, UNICODE)
        self.assertEqual(res, (0, len(UNICODE), False))
        self.assertIsInstance(res, convo.AppendResult)
        self.assertFalse(res.replayed)
        messages, extra = self.store.load(t)
        self.assertEqual(messages, UNICODE)
        self.assertEqual(extra, {})
        h = self.store.load_history(t)
        self.assertEqual([m.seq for m in h.messages], list(range(len(UNICODE))))
        # dicts are sent as compact JSON, UTF-8 and not \u-escaped
        self.assertEqual([m.raw for m in h.messages], [compact(m) for m in UNICODE])
        self.assertEqual([m.role for m in h.messages], [m["role"] for m in UNICODE])
        self.assertEqual(h.length, len(UNICODE))
        now = time.time() * 1e6
        for m in h.messages:
            self.assertLess(abs(m.created_at - now), 600e6)
            self.assertEqual(m.json(), json.loads(m.raw))

    def test_text_is_stored_byte_for_byte(self):
        t = self.tid()
        odd = '{"role" : "user",  "content":"h\\u00e9", "k": 1.0e0}'
        pretty = '{\n  "role": "system",\n  "content": "multi\\nline"\n}'
        raw = '{"content":"é","role":"assistant"}'.encode("utf-8")
        self.store.append(t, [odd, pretty, raw, bytearray(b'{"role":"x"}')])
        self.store.append(t, memoryview(b'{"role":"y"}'))
        got = [m.raw for m in self.store.load_history(t).messages]
        self.assertEqual(got, [odd.encode(), pretty.encode(), raw, b'{"role":"x"}',
                               b'{"role":"y"}'])
        self.assertEqual(self.store.load(t)[0][0], {"role": "user", "content": "hé", "k": 1.0})

    def test_single_message_and_mappings(self):
        t = self.tid()
        self.assertEqual(self.store.append(t, {"role": "user", "i": 0}).first_seq, 0)
        od = collections.OrderedDict([("role", "user"), ("i", 1)])
        self.assertEqual(self.store.append(t, (m for m in [od])).first_seq, 1)
        self.assertEqual(self.store.load(t)[0], [{"role": "user", "i": 0}, {"role": "user", "i": 1}])

    def test_load_of_unknown_thread_is_none(self):
        self.assertIsNone(self.store.load(self.tid("nope")))
        self.assertIsNone(self.store.load_history(self.tid("nope")))
        # an existing, empty thread is not None
        self.store.save_extra(self.tid("empty"), {})
        self.assertEqual(self.store.load(self.tid("empty")), ([], {}))

    def test_load_options(self):
        t = self.tid()
        self.store.append(t, [{"role": "user", "i": i} for i in range(10)])
        def idx(**kw):
            return [m["i"] for m in self.store.load(t, **kw)[0]]
        self.assertEqual(idx(from_seq=7), [7, 8, 9])
        self.assertEqual(idx(limit=2), [0, 1])
        self.assertEqual(idx(from_seq=3, limit=2), [3, 4])
        self.assertEqual(idx(tail=3), [7, 8, 9])
        self.assertEqual(idx(from_seq=20), [])
        h = self.store.load_history(t, tail=2)
        self.assertEqual([m.seq for m in h.messages], [8, 9])
        self.assertEqual(h.length, 10)
        with self.assertRaises(convo.InvalidError):
            self.store.load(t, from_seq=-1)
        with self.assertRaises(convo.InvalidError):
            self.store.load(t, limit="3")

    def test_returned_data_belongs_to_the_caller(self):
        t = self.tid()
        self.store.append(t, [{"role": "user", "content": "a", "list": [1]}])
        self.store.save_extra(t, {"k": {"v": 1}})
        messages, extra = self.store.load(t)
        messages[0]["content"] = "changed"
        messages[0]["list"].append(2)
        messages.append({"role": "ghost"})
        extra["k"]["v"] = 2
        extra["new"] = True
        self.assertEqual(self.store.load(t), ([{"role": "user", "content": "a", "list": [1]}],
                                              {"k": {"v": 1}}))

    # ---- errors ----

    def assertConvoError(self, cls, code, fn, *args, **kwargs):
        with self.assertRaises(cls) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertIsInstance(e, convo.ConvoError)
        self.assertEqual(e.code, code)
        self.assertIsInstance(e.backend_code, str)
        self.assertTrue(e.message)
        self.assertEqual(type(e)(e.code, e.message, e.backend_code).code, code)
        return e

    def test_bad_json_is_invalid(self):
        t = self.tid()
        e = self.assertConvoError(convo.InvalidError, convo.EINVAL,
                                  self.store.append, t, '{"role":"user"')
        self.assertIsInstance(e, ValueError)
        self.assertIn("JSON", e.message)
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t, "[1]")
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t, b"\xff")
        self.assertIsNone(self.store.load(t))

    def test_missing_role_is_invalid(self):
        t = self.tid()
        for bad in ({"content": "x"}, {"role": 5}, {"role": ""}, {"role": "r" * 65}):
            self.assertConvoError(convo.InvalidError, convo.EINVAL,
                                  self.store.append, t, [{"role": "user"}, bad])
        self.assertIsNone(self.store.load(t))  # the good message of each batch was not stored

    def test_unserializable_input_is_invalid(self):
        t = self.tid()
        for bad in ({"role": "user", "x": object()}, {"role": "user", "x": float("nan")}, 5,
                    None, ["nested list"]):
            self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t, [bad])
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t, [])
        for messages in (None, 5, object()):  # were a TypeError, not a ConvoError
            self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t, messages)
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t,
                              "\ud800")  # a lone surrogate is not UTF-8
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t,
                              {"role": "user"}, expected_length=-1)
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.append, t,
                              {"role": "user"}, idempotency_key="")
        self.assertIsNone(self.store.load(t))

    def test_bad_thread_ids_are_invalid(self):
        for bad in ("", "a\tb", "a\0b", "x" * 513, b"\xff", 42, None):
            self.assertConvoError(convo.InvalidError, convo.EINVAL,
                                  self.store.append, bad, {"role": "user"})
        self.assertEqual(self.store.append("é" * 256, {"role": "user"}).count, 1)  # 512 bytes
        self.store.delete("é" * 256)

    def test_oversized_message_is_too_large(self):
        t = self.tid()
        big = {"role": "user", "content": "x" * (2 * MIB)}
        e = self.assertConvoError(convo.TooLargeError, convo.ETOOLARGE,
                                  self.store.append, t, [{"role": "user"}, big])
        self.assertEqual(e.code_name, "CONVO_ETOOLARGE")
        self.assertIsNone(self.store.load(t))
        self.store.append(t, {"role": "user", "content": "x" * (MIB - 100)})  # under the limit
        self.assertEqual(len(self.store.load(t)[0][0]["content"]), MIB - 100)

    def test_store_limits_and_roles(self):
        s = self.open_store(max_message_bytes=100, max_batch_messages=3, roles=["user", "tool"])
        t = self.tid()
        self.assertConvoError(convo.TooLargeError, convo.ETOOLARGE,
                              s.append, t, {"role": "user", "content": "y" * 100})
        self.assertConvoError(convo.TooLargeError, convo.ETOOLARGE,
                              s.append, t, [{"role": "user"}] * 4)
        self.assertConvoError(convo.InvalidError, convo.EINVAL, s.append, t, {"role": "assistant"})
        self.assertEqual(s.append(t, [{"role": "user"}, {"role": "tool"}]).count, 2)
        self.assertConvoError(convo.InvalidError, convo.EINVAL, convo.Store, self.url,
                              max_message_bytes=-1)

    def test_oversized_extra_is_too_large(self):
        t = self.tid()
        self.store.save_extra(t, {"a": 1})
        self.assertConvoError(convo.TooLargeError, convo.ETOOLARGE,
                              self.store.save_extra, t, {"b": "z" * (2 * MIB)})
        self.assertEqual(self.store.load(t)[1], {"a": 1})

    def test_conflict_on_expected_length(self):
        t = self.tid()
        self.assertEqual(self.store.append(t, [{"role": "user"}] * 2, expected_length=0).first_seq, 0)
        e = self.assertConvoError(convo.ConflictError, convo.ECONFLICT, self.store.append, t,
                                  {"role": "user", "late": True}, expected_length=1)
        self.assertNotIsInstance(e, ValueError)
        self.assertEqual(len(self.store.load(t)[0]), 2)
        self.assertEqual(self.store.append(t, {"role": "user"}, expected_length=2).first_seq, 2)

    def test_idempotency_key(self):
        t = self.tid()
        self.store.append(t, {"role": "system"})
        batch = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        first = self.store.append(t, batch, idempotency_key="turn-1")
        self.assertEqual(first, (1, 2, False))
        again = self.store.append(t, batch, idempotency_key="turn-1")
        self.assertEqual(again, (1, 2, True))
        self.assertIs(again.replayed, True)
        # a replay is recognized before the expected length is checked
        self.assertEqual(self.store.append(t, batch, idempotency_key="turn-1", expected_length=0),
                         (1, 2, True))
        self.assertEqual(self.store.append(t, batch, idempotency_key=b"turn-2"), (3, 2, False))
        self.assertEqual(len(self.store.load(t)[0]), 5)

    def test_errors_print_and_pickle(self):
        e = convo.ConflictError(convo.ECONFLICT, "thread has 2 messages", "40001")
        self.assertEqual(str(e), "thread has 2 messages [40001]")
        self.assertIn("CONVO_ECONFLICT", repr(e))
        back = pickle.loads(pickle.dumps(e))
        self.assertIs(type(back), convo.ConflictError)
        self.assertEqual((back.code, back.message, back.backend_code),
                         (e.code, e.message, e.backend_code))

    # ---- extra ----

    def test_save_extra_is_a_shallow_merge_that_keeps_null(self):
        t = self.tid()
        self.store.save_extra(t, {"a": 1, "b": {"x": 1}, "keep": "me"})
        self.store.save_extra(t, {"b": {"y": 2}, "c": None, "$d.e": "k", "": "empty", "ü": [1]})
        self.store.save_extra(t, '{"a" : 2}')
        want = {"a": 2, "b": {"y": 2}, "keep": "me", "c": None, "$d.e": "k", "": "empty",
                "ü": [1]}
        self.assertEqual(self.store.load(t), ([], want))
        self.store.append(t, {"role": "user"})
        self.assertEqual(self.store.load(t)[1], want)
        for bad in ("[1]", '{"a":', "null", 7, {"x": object()}, '{"a":"\0"}'):
            self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.save_extra, t, bad)
        self.assertEqual(self.store.load(t)[1], want)

    # ---- delete, threads, fork ----

    def test_delete(self):
        t = self.tid()
        self.store.append(t, {"role": "user"}, idempotency_key="k")
        self.store.save_extra(t, {"a": 1})
        self.store.delete(t)
        self.assertIsNone(self.store.load(t))
        self.assertConvoError(convo.NotFoundError, convo.ENOTFOUND, self.store.delete, t)
        # the idempotency key went with the thread
        self.assertEqual(self.store.append(t, {"role": "user"}, idempotency_key="k"),
                         (0, 1, False))
        self.assertEqual(self.store.load(t)[1], {})

    def test_threads(self):
        p = self.tid("")
        names = ["%s%03d" % (p, i) for i in range(23)]
        for i, n in enumerate(reversed(names)):
            if i % 2:
                self.store.append(n, {"role": "user"})
            else:
                self.store.save_extra(n, {})
        def mine(ids):
            return [i for i in ids if i.startswith(p)]
        self.assertEqual(mine(self.store.thread_ids()), names)
        self.assertEqual(mine(self.store.thread_ids(after=p)), names)
        self.assertEqual(self.store.thread_ids(after=p, limit=5), names[:5])
        self.assertEqual(mine(self.store.thread_ids(after=names[19])), names[20:])
        self.assertEqual(mine(self.store.iter_threads(after=p, page_size=4)), names)
        self.assertEqual(self.store.thread_ids(after=p, limit=0), [])
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.threads, limit=-1)
        it = self.store.iter_threads(page_size=2)
        self.assertEqual(len(mine(it)), 23)

    def test_threads_pages_beyond_one_call(self):
        p = self.tid("")
        names = ["%s%04d" % (p, i) for i in range(230)]
        for n in names:
            self.store.save_extra(n, {})
        listed = [i for i in self.store.thread_ids(after=p) if i.startswith(p)]
        self.assertEqual(listed, names)  # more than one page of 100 and of the C default

    def test_fork(self):
        src = self.tid("src")
        self.store.append(src, [{"role": "user", "i": i} for i in range(5)])
        self.store.save_extra(src, {"title": "t", "n": None})
        self.store.fork(src, self.tid("part"), upto=2)
        self.store.fork(src, self.tid("all"))
        self.store.fork(src, self.tid("none"), upto=0)
        orig = self.store.load_history(src)
        part = self.store.load_history(self.tid("part"))
        self.assertEqual(part.messages, orig.messages[:2])  # seq, created_at, role, bytes
        self.assertEqual(part.extra, {"title": "t", "n": None})
        self.assertEqual(self.store.load(self.tid("all")), self.store.load(src))
        self.assertEqual(self.store.load(self.tid("none")), ([], {"title": "t", "n": None}))
        self.assertConvoError(convo.ConflictError, convo.ECONFLICT,
                              self.store.fork, src, self.tid("part"))
        self.assertConvoError(convo.NotFoundError, convo.ENOTFOUND,
                              self.store.fork, self.tid("nope"), self.tid("x"))
        self.assertConvoError(convo.InvalidError, convo.EINVAL,
                              self.store.fork, src, self.tid("y"), upto=6)
        self.assertConvoError(convo.InvalidError, convo.EINVAL, self.store.fork, src, src)
        self.assertIsNone(self.store.load(self.tid("y")))
        # the fork is independent of its source
        self.store.append(self.tid("part"), {"role": "user", "i": 99})
        self.assertEqual(len(self.store.load(src)[0]), 5)

    # ---- lifetime and threads ----

    def test_close_and_context_manager(self):
        with convo.Store(self.url) as s:
            self.assertFalse(s.closed)
            self.assertEqual(s.driver, self.driver)
            self.assertIn(self.driver, repr(s))
        self.assertTrue(s.closed)
        s.close()  # twice is fine
        self.assertConvoError(convo.InvalidError, convo.EINVAL, s.load, "t")

    def test_open_errors(self):
        self.assertConvoError(convo.InvalidError, convo.EINVAL, convo.Store, "nosuch://x")
        self.assertConvoError(convo.InvalidError, convo.EINVAL, convo.Store,
                              self.url + ("&" if "?" in self.url else "?") + "bogus=1")

    def test_many_python_threads_share_one_store(self):
        t, nthreads, per = self.tid(), 8, 25
        errors = []
        def work(k):
            try:
                for i in range(per):
                    self.store.append(t, [{"role": "user", "k": k, "i": i},
                                          {"role": "assistant", "k": k, "i": i}])
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(errors, [])
        h = self.store.load_history(t)
        self.assertEqual([m.seq for m in h.messages], list(range(2 * nthreads * per)))
        msgs = [m.json() for m in h.messages]
        for a, b in zip(msgs[0::2], msgs[1::2]):  # batches never interleave
            self.assertEqual((a["role"], b["role"]), ("user", "assistant"))
            self.assertEqual((a["k"], a["i"]), (b["k"], b["i"]))
        self.assertEqual(sorted((m["k"], m["i"]) for m in msgs[0::2]),
                         [(k, i) for k in range(nthreads) for i in range(per)])

    def test_close_waits_for_calls_in_progress(self):
        s = convo.Store(self.url)
        t = self.tid()
        stop = threading.Event()
        errors = []
        def work():
            while not stop.is_set():
                try:
                    s.append(t, {"role": "user"})
                except convo.InvalidError as e:
                    if "closed" not in e.message:
                        errors.append(e)
                    return
                except Exception as e:
                    errors.append(e)
                    return
        threads = [threading.Thread(target=work) for _ in range(4)]
        for th in threads:
            th.start()
        time.sleep(0.05)
        s.close()
        stop.set()
        for th in threads:
            th.join()
        self.assertEqual(errors, [])

    def test_data_is_shared_between_handles(self):
        if not self.shared_store:
            self.skipTest("every memory: store is a new one")
        t = self.tid()
        self.store.append(t, {"role": "user", "content": "from one handle"})
        other = self.open_store()
        self.assertEqual(other.load(t)[0], [{"role": "user", "content": "from one handle"}])


support.per_driver(globals(), StoreTests)

if __name__ == "__main__":
    unittest.main()
