"""convo.langgraph.ConvoSaver: LangGraph's own checkpoint conformance suite
(langgraph-checkpoint-conformance, unmodified) with every capability the saver
implements required to be detected and to pass, per driver; and the saver's own
behaviour (context managers, closing, thread ids, writes before their put, the
async calls off the event loop, errors).

Needs langgraph-checkpoint and langgraph-checkpoint-conformance: skipped without
them, failed under CONVO_REQUIRE_LANGGRAPH=1 (tests/python-pip.sh installs them).
CONVO_LANGGRAPH_DRIVERS (default "memory sqlite postgres", or "all": every driver
and the Redis Cluster) names the drivers of the conformance suite."""

import asyncio
import json
import os
import threading
import unittest
import uuid

import convo
import convo.asyncio

try:
    from langgraph.checkpoint.conformance import checkpointer_test, validate
    from langgraph.checkpoint.conformance.capabilities import Capability
    from langgraph.checkpoint.base import empty_checkpoint
    from convo.langgraph import ConvoSaver
    MISSING = None
except ImportError as e:  # pragma: no cover - depends on what is installed
    MISSING = str(e)

from support import DRIVERS, DriverCase, unavailable, namespace, with_param

# Every capability ConvoSaver implements: each must be detected, run and pass.
REQUIRED = ["put", "put_writes", "get_tuple", "list", "delete_thread", "delete_for_runs",
            "copy_thread", "prune"]


def _drivers():
    names = os.environ.get("CONVO_LANGGRAPH_DRIVERS", "memory sqlite postgres").split()
    return DRIVERS + ["redis_cluster"] if names == ["all"] else names


def _need_langgraph():
    if MISSING:
        if os.environ.get("CONVO_REQUIRE_LANGGRAPH") == "1":
            raise AssertionError("LangGraph is not installed (CONVO_REQUIRE_LANGGRAPH=1): "
                                 + MISSING)
        raise unittest.SkipTest("LangGraph is not installed: " + MISSING)


class LangGraphCase(DriverCase):
    @classmethod
    def setUpClass(cls):
        _need_langgraph()
        if cls.driver == "redis_cluster":
            base = os.environ.get("CONVO_TEST_REDIS_CLUSTER_URL")
            if not base:
                unavailable("CONVO_TEST_REDIS_CLUSTER_URL is not set")
            cls.url = with_param(base, "prefix", namespace())
            return
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        if cls.driver == "redis_cluster":
            cls._empty_namespace()
            return
        super().tearDownClass()

    def saver(self, **options):
        s = ConvoSaver(self.store, **options)
        self.addCleanup(s.close)
        return s


class Conformance(LangGraphCase):
    def test_conformance(self):
        """langgraph-checkpoint-conformance on this driver: every capability of
        REQUIRED detected and passed, no test failed, nothing else skipped."""
        url = self.url

        @checkpointer_test(name="ConvoSaver-%s" % self.driver)
        async def factory():
            async with ConvoSaver.from_conn_string(url) as saver:
                yield saver

        report = asyncio.run(validate(factory))
        failures = []
        for name in REQUIRED:
            r = report.results[name]
            if not r.detected or not r.passed or r.tests_failed or not r.tests_passed:
                failures.append("%s: detected=%s passed=%s %s" % (name, r.detected, r.passed,
                                                                  r.failures))
        detected = {c.value for c in Capability if report.results[c.value].detected}
        self.assertEqual(sorted(detected), sorted(REQUIRED), "capabilities detected")
        self.assertEqual(failures, [])
        total = sum(report.results[n].tests_passed for n in REQUIRED)
        print("\n  %s: %d conformance tests passed (%s)" % (self.driver, total, ", ".join(
            "%s %d" % (n, report.results[n].tests_passed) for n in REQUIRED)), flush=True)


for _driver in _drivers():
    _name = "Conformance_%s" % _driver
    globals()[_name] = type(_name, (Conformance,), {"driver": _driver, "__module__": __name__})
del Conformance


def _config(thread_id, checkpoint_id=None, ns=""):
    c = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def _checkpoint(values=None, versions=None):
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values or {})
    cp["channel_versions"] = dict(versions or {k: 1 for k in cp["channel_values"]})
    return cp


class SaverTests:
    """The saver's behaviour beyond the conformance suite, on every driver."""

    def test_put_get_roundtrip_keeps_values_and_versions(self):
        s = self.saver()
        t = self.tid()
        cp = _checkpoint({"messages": ["a", {"b": b"\x00\xff"}], "n": None})
        stored = s.put(_config(t), cp, {"source": "input", "step": -1}, cp["channel_versions"])
        got = s.get_tuple(stored)
        self.assertEqual(got.checkpoint["channel_values"], cp["channel_values"])
        self.assertEqual(got.checkpoint["channel_versions"], cp["channel_versions"])
        self.assertEqual(got.metadata, {"source": "input", "step": -1})
        self.assertIsNone(got.parent_config)
        self.assertIsNone(s.get_tuple(_config(t, "no-such-checkpoint")))
        self.assertIsNone(s.get_tuple(_config(self.tid("unknown"))))

    def test_numeric_thread_id_is_its_text(self):
        s = self.saver()
        n = int(uuid.uuid4().int % 10 ** 12)
        stored = s.put(_config(n), _checkpoint(), {}, {})
        self.assertEqual(stored["configurable"]["thread_id"], str(n))
        self.assertIsNotNone(s.get_tuple(_config(str(n))))
        s.delete_thread(n)
        self.assertIsNone(s.get_tuple(_config(n)))

    def test_missing_thread_id_is_invalid(self):
        s = self.saver()
        with self.assertRaises(convo.InvalidError):
            s.get_tuple({"configurable": {}})
        with self.assertRaises(convo.InvalidError):
            s.put({"configurable": {"thread_id": ""}}, _checkpoint(), {}, {})
        with self.assertRaises(convo.InvalidError):
            list(s.list(_config(self.tid()), filter="step"))

    def test_get_next_version_never_repeats_across_branches(self):
        s = self.saver()
        a, b = s.get_next_version(None), s.get_next_version(None)
        self.assertNotEqual(a, b)
        self.assertTrue(a.startswith("%032d." % 1))
        self.assertTrue(s.get_next_version(a).startswith("%032d." % 2))
        self.assertTrue(s.get_next_version(7).startswith("%032d." % 8))
        self.assertGreater(s.get_next_version(a), a)

    def test_writes_before_their_put_wait_for_it(self):
        """LangGraph's loop may save a task's writes before the put of their
        checkpoint has stored it: put_writes waits for that put."""
        s = self.saver()
        t = self.tid()
        cp = _checkpoint()
        done = []
        writer = threading.Thread(target=lambda: done.append(
            s.put_writes(_config(t, cp["id"]), [("x", 1)], "task-1")))
        writer.start()
        threading.Event().wait(0.3)
        self.assertEqual(done, [])      # waiting
        s.put(_config(t), cp, {}, {})
        writer.join(10)
        self.assertEqual(done, [None])
        self.assertEqual(s.get_tuple(_config(t)).pending_writes, [("task-1", "x", 1)])

    def test_writes_of_a_checkpoint_never_put_fail(self):
        s = self.saver(writes_wait=0.2)
        with self.assertRaises(convo.NotFoundError):
            s.put_writes(_config(self.tid(), "never-put"), [("x", 1)], "task-1")

    def test_prune_strategies(self):
        s = self.saver()
        t = self.tid()
        parent = None
        for i in range(3):
            parent = s.put(_config(t, parent and parent["configurable"]["checkpoint_id"]),
                           _checkpoint({"v": i}, {"v": i + 1}), {"step": i}, {"v": i + 1})
        s.prune([t])
        listed = list(s.list(_config(t)))
        self.assertEqual([x.config for x in listed], [parent])
        self.assertEqual(listed[0].checkpoint["channel_values"], {"v": 2})
        s.prune([t], strategy="delete")
        self.assertEqual(list(s.list(_config(t))), [])
        with self.assertRaises(convo.InvalidError):
            s.prune([t], strategy="keep_some")

    def test_copy_thread_copies_checkpoints_writes_and_messages(self):
        s = self.saver()
        src, dst = self.tid("src"), self.tid("dst")
        a = s.put(_config(src), _checkpoint({"v": 1}), {"step": 0}, {"v": 1})
        b = s.put(_config(src, a["configurable"]["checkpoint_id"]),
                  _checkpoint({"v": 2}, {"v": 2}), {"step": 1}, {"v": 2})
        s.put_writes(b, [("v", 3), ("__interrupt__", "stop")], "task-1", "path")
        s.put(_config(src, ns="child"), _checkpoint({"c": 1}), {"step": 0}, {"c": 1})
        self.store.append(src, [{"role": "user", "content": "hi"}])
        s.copy_thread(src, dst)
        for ns in ("", "child"):
            want = list(s.list(_config(src, ns=ns)))
            got = list(s.list(_config(dst, ns=ns)))
            self.assertEqual([g.checkpoint for g in got], [w.checkpoint for w in want])
            self.assertEqual([g.metadata for g in got], [w.metadata for w in want])
            self.assertEqual([g.pending_writes for g in got], [w.pending_writes for w in want])
            self.assertEqual([g.config["configurable"]["thread_id"] for g in got], [dst] * len(want))
        self.assertEqual(s.get_tuple(_config(dst)).parent_config,
                         _config(dst, a["configurable"]["checkpoint_id"]))
        self.assertEqual(self.store.load(dst)[0], [{"role": "user", "content": "hi"}])
        # the target exists now: refused, nothing written; an unknown source: nothing
        with self.assertRaises(convo.ConflictError):
            s.copy_thread(src, dst)
        s.copy_thread(self.tid("unknown"), self.tid("nothing"))
        self.assertIsNone(s.get_tuple(_config(self.tid("nothing"))))

    def test_delete_for_runs_across_threads(self):
        s = self.saver()
        t1, t2 = self.tid("one"), self.tid("two")
        run, other = str(uuid.uuid4()), str(uuid.uuid4())
        a = s.put(_config(t1), _checkpoint({"v": 1}), {"run_id": run}, {"v": 1})
        s.put_writes(a, [("v", 2)], "task")
        b = s.put(_config(t1, a["configurable"]["checkpoint_id"]), _checkpoint({"v": 1}),
                  {"run_id": other}, {})
        s.put(_config(t2, ns="sub"), _checkpoint(), {"run_id": run}, {})
        s.delete_for_runs([run, str(uuid.uuid4())])
        self.assertEqual([x.config for x in s.list(_config(t1))], [b])
        self.assertEqual(s.get_tuple(b).checkpoint["channel_values"], {"v": 1})
        self.assertEqual(list(s.list(_config(t2, ns="sub"))), [])
        s.delete_for_runs([])

    def test_list_before_an_unknown_id_compares_ids(self):
        s = self.saver()
        t = self.tid()
        ids = []
        for _ in range(3):
            cp = _checkpoint()
            ids.append(s.put(_config(t), cp, {}, {})["configurable"]["checkpoint_id"])
        before = _config(t, ids[1][:-1] + "0")     # not stored, between ids[0] and ids[1]
        got = [x.config["configurable"]["checkpoint_id"] for x in s.list(_config(t), before=before)]
        self.assertEqual(got, [i for i in ids if i < before["configurable"]["checkpoint_id"]])

    def test_list_of_one_checkpoint_id_and_filter(self):
        s = self.saver()
        t = self.tid()
        a = s.put(_config(t), _checkpoint(), {"source": "loop", "tags": ["x", "y"]}, {})
        s.put(_config(t), _checkpoint(), {"source": "input"}, {})
        self.assertEqual([x.config for x in s.list(a)], [a])
        self.assertEqual([x.config for x in s.list(a, filter={"tags": ["y"]})], [a])
        self.assertEqual(list(s.list(a, filter={"source": "input"})), [])
        self.assertEqual(len(list(s.list(_config(t), filter={"source": "input"}))), 1)
        self.assertEqual(list(s.list(_config(t), limit=0)), [])

    def test_async_calls_run_off_the_event_loop(self):
        s = self.saver()
        t = self.tid()
        seen = []
        real = s._store.checkpoint_get

        def spy(*args, **kwargs):
            seen.append(threading.current_thread())
            return real(*args, **kwargs)

        s._store.checkpoint_get = spy

        async def main():
            loop_thread = threading.current_thread()
            stored = await s.aput(_config(t), _checkpoint({"a": 1}), {}, {"a": 1})
            await s.aput_writes(stored, [("a", 2)], "task")
            got = await s.aget_tuple(stored)
            listed = [x async for x in s.alist(_config(t))]
            await s.acopy_thread(t, t + "/copy")
            copied = await s.aget_tuple(_config(t + "/copy"))
            await s.adelete_for_runs(["no-such-run"])
            await s.aprune([t])
            await s.adelete_thread(t)
            await s.adelete_thread(t + "/copy")
            self.assertEqual(copied.checkpoint, got.checkpoint)
            return loop_thread, got, listed

        loop_thread, got, listed = asyncio.run(main())
        self.assertEqual(got.checkpoint["channel_values"], {"a": 1})
        self.assertEqual(got.pending_writes, [("task", "a", 2)])
        self.assertEqual(len(listed), 1)
        self.assertTrue(seen)
        self.assertNotIn(loop_thread, seen)
        self.assertIsNone(s.get_tuple(_config(t)))

    def test_shared_store_is_left_open_and_close_is_idempotent(self):
        s = ConvoSaver(self.store)
        s.close()
        s.close()
        self.assertFalse(self.store.closed)
        with ConvoSaver(convo.asyncio.Checkpointer(self.store)) as s2:
            self.assertIs(s2.store, self.store)
        self.assertFalse(self.store.closed)
        with self.assertRaises(TypeError):
            ConvoSaver(self.store, max_message_bytes=10)

        async def closed_call():
            await s.aget_tuple(_config(self.tid()))
        with self.assertRaises(convo.InvalidError):
            asyncio.run(closed_call())

    def test_from_conn_string_sync_and_async(self):
        if self.driver == "memory":
            self.skipTest("every memory: store is a new one")
        t = self.tid()
        with ConvoSaver.from_conn_string(self.url) as s:
            stored = s.put(_config(t), _checkpoint({"k": "v"}), {}, {"k": 1})
            owned = s.store
        self.assertTrue(owned.closed)

        async def main():
            async with ConvoSaver.from_conn_string(self.url) as s:
                got = await s.aget_tuple(stored)
                return s.store, got
        store, got = asyncio.run(main())
        self.assertTrue(store.closed)
        self.assertEqual(got.checkpoint["channel_values"], {"k": "v"})

    def test_setup_is_a_no_op(self):
        s = self.saver()
        s.setup()
        asyncio.run(s.asetup())


for _driver in DRIVERS:
    _name = "SaverTests_%s" % _driver
    globals()[_name] = type(_name, (SaverTests, LangGraphCase),
                            {"driver": _driver, "__module__": __name__})


class LogTextTests(unittest.TestCase):
    """The log layout of a message channel's items (convo/_langgraph_channels.py):
    readable role and content, the serde's bytes restoring the item exactly, and
    the items a JS saver writes read back."""

    def setUp(self):
        _need_langgraph()
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        from convo import _langgraph_channels as channels
        self.serde, self.ch = JsonPlusSerializer(), channels

    def test_round_trip_and_readable_head(self):
        from langchain_core.messages import (AIMessage, HumanMessage, SystemMessage, ToolMessage,
                                             ChatMessage, RemoveMessage)
        items = [HumanMessage("hi", id="1"), AIMessage("", id="2", tool_calls=[
                     {"name": "f", "args": {"x": 1}, "id": "c1"}]),
                 SystemMessage([{"type": "text", "text": "be brief"}]), ToolMessage("42", tool_call_id="c1"),
                 ChatMessage("x", role="critic"), RemoveMessage(id="1"),
                 {"role": "user", "content": "a dict"}, {"type": "ai", "content": "typed"}, "text", 7]
        texts = [self.ch.log_text(self.serde, x) for x in items]
        heads = [json.loads(t) for t in texts]
        self.assertEqual([h["role"] for h in heads], ["user", "assistant", "system", "tool", "critic",
                                                       "remove", "user", "assistant", "user", "value"])
        self.assertEqual(heads[0]["content"], "hi")
        self.assertEqual(heads[2]["content"], [{"type": "text", "text": "be brief"}])
        self.assertNotIn("content", heads[9])
        self.assertEqual(self.ch.from_log_texts(self.serde, texts), items)
        self.assertEqual(self.ch.from_log_texts(self.serde, texts[:1]), items[:1])

    def test_items_a_js_saver_wrote(self):
        js = [b'{"role":"user","content":"hello there from javascript","serde":"json/c","at":94,'
              b'"value":{"lc":1,"type":"constructor","id":["langchain_core","messages",'
              b'"HumanMessage"],"kwargs":{"content":0,"id":"m1"}}}',
              b'{"role":"assistant","content":"hi","serde":"json","value":{"lc":1,"type":'
              b'"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":'
              b'{"content":"hi","id":"m2"}}}']
        got = self.ch.from_log_texts(self.serde, js)
        self.assertEqual([(m.type, m.content, m.id) for m in got],
                         [("human", "hello there from javascript", "m1"), ("ai", "hi", "m2")])
        with self.assertRaises(ValueError):
            self.ch.from_log_texts(self.serde, [b'{"role":"user","content":"no serde"}'])

    def by_serde(self, item):
        return self.serde.loads_typed(self.serde.dumps_typed(item))

    def test_compact_plain_message_is_its_fields(self):
        from langchain_core.messages import AIMessage
        content = "x" * 200
        text = self.ch.log_text(self.serde, AIMessage(content, id="a1"))
        fields = json.dumps({"content": content, "id": "a1"}, separators=(",", ":"))
        self.assertLessEqual(len(text), len(fields) + 40, text)
        self.assertEqual(json.loads(text), {"role": "assistant", "content": content, "id": "a1",
                                            "serde": "msg/1"})
        [back] = self.ch.from_log_texts(self.serde, [text])
        self.assertIs(type(back), AIMessage)
        self.assertEqual(back, AIMessage(content, id="a1"))

    def test_compact_only_when_rebuilt_exactly(self):
        from langchain_core.messages import (AIMessage, AIMessageChunk, ChatMessage, HumanMessage,
                                             RemoveMessage, SystemMessage, ToolMessage)
        call = {"name": "f", "args": {"q": 'é ✓ "x"', "t": (1, 2)}, "id": "c1"}
        cases = [
            (True, HumanMessage("hi", id="h1", name="ann")),
            (True, HumanMessage([{"type": "text", "text": "a"}, {"type": "image_url",
                                                                 "image_url": {"url": "x"}}])),
            (True, AIMessage("", id="a1", tool_calls=[call])),
            (True, ToolMessage("r", tool_call_id="c1", name="f", id="t1")),
            (True, SystemMessage("be brief", id="s1")),
            (False, AIMessage("x", additional_kwargs={"refusal": None})),
            (False, AIMessage("x", response_metadata={"model": "m", "finish_reason": "stop"})),
            (False, AIMessage("x", usage_metadata={"input_tokens": 1, "output_tokens": 2,
                                                   "total_tokens": 3})),
            (False, AIMessage("", invalid_tool_calls=[{"id": "c2", "name": "g", "args": "{",
                                                       "error": "bad"}])),
            (False, ToolMessage("r", tool_call_id="c1", artifact={"rows": [1]})),
            (False, ToolMessage("r", tool_call_id="c1", status="error")),
            (False, AIMessageChunk("a chunk", id="k1")),
            (False, ChatMessage("generic", role="user")),
            (False, RemoveMessage(id="h1")),
            (False, AIMessage("half an emoji \ud83d", id="a2")),
            (False, AIMessage("", tool_calls=[{"name": "f", "args": {"at": float("nan")}, "id": "c"}])),
        ]
        texts = [self.ch.log_text(self.serde, m) for _, m in cases]
        self.assertEqual([json.loads(t)["serde"] == "msg/1" for t in texts], [c for c, _ in cases])
        got = self.ch.from_log_texts(self.serde, texts)
        for i, ((_, m), g, t) in enumerate(zip(cases, got, texts)):
            want = self.by_serde(m)
            self.assertIs(type(g), type(want), t)
            self.assertEqual(self.serde.dumps_typed(g), self.serde.dumps_typed(want), t)
            if i != len(cases) - 1:     # (not the NaN one: NaN != NaN)
                self.assertEqual(g, want, t)
        self.assertEqual(got[2].tool_calls[0]["args"]["t"], [1, 2])   # as the serde gives it

    def test_compact_strings_built_without_validation_as_the_constructor_builds(self):
        """A compact message of strings only is built from a template of what its
        class's constructor made (no pydantic validation): the same object, field
        by field, independent of the other messages built from that template."""
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        made = [HumanMessage("hi", id="h1", name="ann"), HumanMessage("hi"),
                AIMessage("answer", id="a1"), AIMessage("", id="a2", name="bot"),
                SystemMessage("be brief", id="s1"), AIMessage("other", id="a3")]
        texts = [self.ch.log_text(self.serde, m) for m in made]
        self.assertTrue(all(t.endswith(b'"serde":"msg/1"}') for t in texts))
        got = self.ch.from_log_texts(self.serde, texts)
        for m, g in zip(made, got):
            self.assertIsNotNone(self.ch._quick(json.loads(self.ch.log_text(self.serde, m))))
            self.assertIs(type(g), type(m))
            self.assertEqual(g.__dict__, m.__dict__)
            self.assertEqual(g.__pydantic_fields_set__, m.__pydantic_fields_set__)
            self.assertEqual(g.__pydantic_extra__, m.__pydantic_extra__)
            self.assertEqual(g.__pydantic_private__, m.__pydantic_private__)
            self.assertEqual(self.serde.dumps_typed(g), self.serde.dumps_typed(m))
            self.assertEqual(g.model_dump(), m.model_dump())
        # no container shared between two messages, nor with the template
        got[2].additional_kwargs["x"] = 1
        got[2].tool_calls.append({"name": "f", "args": {}, "id": "c", "type": "tool_call"})
        again = self.ch.from_log_texts(self.serde, texts)
        self.assertEqual(got[5].additional_kwargs, {})
        self.assertEqual(again[2], made[2])
        got[2].__pydantic_fields_set__.add("name")
        self.assertEqual(self.ch.from_log_texts(self.serde, texts[2:3])[0].__pydantic_fields_set__,
                         {"content", "id"})
        # anything but strings goes through the constructor
        self.assertIsNone(self.ch._quick({"role": "assistant", "content": [], "serde": "msg/1"}))
        self.assertIsNone(self.ch._quick({"role": "tool", "content": "r", "tool_call_id": "c",
                                          "serde": "msg/1"}))
        self.assertIsNone(self.ch._quick({"role": "assistant", "content": "x", "tool_calls": [],
                                          "serde": "msg/1"}))

    def test_a_snapshot_sees_every_change_in_place(self):
        """convo/_langgraph_cache.py: what a held message is compared with before it
        is handed out again; built by snapshot() or, for a message built from a
        template, rebuilt from its text by the function from_log_texts gives (the
        message's lists and dicts then watched ones of its Watch, which a change in
        place marks)."""
        from langchain_core.messages import AIMessage, HumanMessage
        from convo import _langgraph_cache as cache

        def changes():
            yield lambda m: setattr(m, "content", "other")
            yield lambda m: setattr(m, "id", "other")
            yield lambda m: m.additional_kwargs.update(x=1)
            yield lambda m: m.response_metadata.setdefault("k", []).append(1)
            yield lambda m: m.tool_calls.append({"name": "f", "args": {}, "id": "c"})
            yield lambda m: m.__pydantic_extra__.update(note=1)
            yield lambda m: setattr(m, "name", "n")

        def made():
            return AIMessage("x", id="a", response_metadata={"k": [0]})
        texts = [self.ch.log_text(self.serde, HumanMessage("hi", id="h")),
                 self.ch.log_text(self.serde, AIMessage("yo", id="a"))]
        for change in changes():
            m = made()
            snap = cache.snapshot(m)
            self.assertTrue(cache.same(m, snap))
            change(m)
            self.assertFalse(cache.same(m, snap))
            fields = [None, None]
            for i, m in enumerate(self.ch.from_log_texts(self.serde, texts, fields)):
                # not kept: rebuilt from the text, the same each time
                self.assertIs(fields[i], self.ch.text_snapshot)
                snap = fields[i](texts[i])
                self.assertEqual(snap, cache.snapshot(m))
                self.assertEqual(snap, fields[i](texts[i]))
                self.assertIsNot(snap[1], fields[i](texts[i])[1])
                w = m.__pydantic_fields_set__
                self.assertIs(type(w), cache.Watch)
                containers = [v for v in list(m.__dict__.values()) + [m.__pydantic_extra__]
                              if isinstance(v, (list, dict))]
                self.assertTrue(containers)
                self.assertTrue(all(type(v) in (cache.WatchedList, cache.WatchedDict) and
                                    v.watch is w for v in containers))
                self.assertTrue(cache.same(m, snap))
                try:
                    change(m)
                except AttributeError:  # a HumanMessage has no tool_calls
                    continue
                self.assertFalse(cache.same(m, snap))
        self.assertEqual((cache.EMPTY_LIST, cache.EMPTY_DICT), ([], {}))

    def test_other_serde_writes_the_full_form(self):
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        from langchain_core.messages import HumanMessage

        class Other(JsonPlusSerializer):
            pass
        m = HumanMessage("hi", id="h1")
        self.assertEqual(json.loads(self.ch.log_text(Other(), m))["serde"], "msgpack")
        self.assertEqual(self.ch.from_log_texts(Other(), [self.ch.log_text(self.serde, m)]), [m])

    def test_a_text_not_laid_out_as_msg1_is_refused(self):
        for t in [b'{"role":"critic","content":"x","serde":"msg/1"}',
                  b'{"role":"user","content":"x","tool_calls":[],"serde":"msg/1"}',
                  b'{"role":"assistant","content":"x","additional_kwargs":{},"serde":"msg/1"}',
                  b'{"role":"user","content":7,"serde":"msg/1"}',
                  b'{"role":"tool","content":"x","tool_call_id":3,"serde":"msg/1"}',
                  b'{"role":"user","id":"x","serde":"msg/1"}']:
            with self.assertRaisesRegex(ValueError, "msg/1", msg=t):
                self.ch.from_log_texts(self.serde, [t])
            with self.assertRaisesRegex(ValueError, "msg/1", msg=t):
                self.ch.from_log_text(self.serde, t)

    def test_compact_texts_shared_with_js(self):
        """tests/compact-messages.json: the texts the Node saver writes for these
        messages (its test checks the same file), written here byte for byte and
        revived as the same class with the same fields."""
        from langchain_core import messages
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                            "tests", "compact-messages.json")
        with open(path, encoding="utf-8") as f:
            fixture = json.load(f)["messages"]
        self.assertGreaterEqual(len(fixture), 5)
        for case in fixture:
            cls = getattr(messages, case["class"])
            made = cls(**case["fields"])
            self.assertEqual(self.ch.log_text(self.serde, made).decode("utf-8"), case["text"])
            [back] = self.ch.from_log_texts(self.serde, [case["text"].encode("utf-8")])
            self.assertIs(type(back), cls)
            self.assertEqual(back, made)
            for k, v in case["fields"].items():
                self.assertEqual(getattr(back, k), v, (case["class"], k))
