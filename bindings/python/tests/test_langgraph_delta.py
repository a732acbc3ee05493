"""ConvoSaver with LangGraph's DeltaChannel (a messages channel whose checkpoints hold no
list): the runtime's state after every step equal to InMemorySaver's (turns, snapshots,
interrupt and resume, get_state_history, RemoveMessage, update_state on an old
checkpoint); each message once, in the thread's log, in the Node saver's stored layout
(docs/checkpoints.md, the delta list, version 1), read back from that documented form;
get_delta_channel_history answered with a window read instead of a get per ancestor.

Skipped without a langgraph that has DeltaChannel, failed under CONVO_REQUIRE_LANGGRAPH=1."""

import asyncio
import json
import os
import unittest

import convo

try:
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
    from langgraph.types import Command
    from convo.langgraph import ConvoSaver
    from convo import _langgraph_delta as delta
    import langgraph_app as app
    MISSING = None if app.DeltaChannel is not None else "this langgraph has no DeltaChannel"
except ImportError as e:  # pragma: no cover - depends on what is installed
    MISSING = str(e)

from support import DRIVERS
from test_langgraph import LangGraphCase
from test_langgraph_runtime import stored

TURNS = int(os.environ.get("CONVO_LANGGRAPH_TURNS", "40")) // 2
HERE = os.path.dirname(os.path.abspath(__file__))


def contents(messages):
    return [(m.type, m.content, m.id) for m in messages]


class DeltaRuntime:
    def setUp(self):
        super().setUp()
        if MISSING:
            if os.environ.get("CONVO_REQUIRE_LANGGRAPH") == "1":
                raise AssertionError(MISSING)
            self.skipTest(MISSING)

    def graphs(self, make=None, saver=None):
        make = make or app.chat_graph
        return make(saver or self.saver(), "delta"), make(InMemorySaver(), "delta")

    def same_state(self, ours, theirs, t, what):
        self.assertEqual(app.snapshot(ours.get_state(app.config(t))),
                         app.snapshot(theirs.get_state(app.config(t))), what)

    def same_history(self, ours, theirs, t):
        a, b = app.history(ours, t), app.history(theirs, t)
        self.assertEqual(a, b)
        # what the savers return themselves: no channel value but the snapshots
        # (a _DeltaSnapshot of the same messages), the same pending writes
        self.assertEqual(stored(ours, t), stored(theirs, t))
        return a

    def log_of(self, t):
        return [(m.json()["role"], m.json()["content"])
                for m in self.store.load_history(t, with_extra=False).messages]

    def test_turns_equal_in_memory_saver_each_message_once_in_the_log(self):
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(TURNS):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(ours, theirs, t, "after turn %d" % i)
        h = self.same_history(ours, theirs, t)
        messages = h[0]["messages"]
        self.assertEqual(len(messages), 2 * TURNS)
        # snapshots were taken (every SNAPSHOT_EVERY updates of the channel)
        snaps = [x for x, _ in stored(ours, t) if isinstance(x.get("messages"), _DeltaSnapshot)]
        self.assertGreaterEqual(len(snaps), TURNS // 2 - 1)
        # each message once, in order, in the log
        self.assertEqual(self.log_of(t), [("user" if m[0] == "human" else "assistant", m[1])
                                          for m in messages])
        # the latest checkpoint's stored value: the delta list, all of it references
        latest = self.store.checkpoint_get(t)
        value = latest.values["messages"]
        self.assertIsInstance(value, convo.Items)
        self.assertEqual(value.key, delta.DELTA_KEY)
        self.assertEqual(value.seqs, list(range(2 * TURNS)))
        # no message inline anywhere: every write and input holding messages refers to the log
        for cp in self.store.checkpoint_list(t):
            lists = [w.value for w in cp.writes if isinstance(w.value, convo.Items)]
            lists += [c.value for c in cp.channels if isinstance(c.value, convo.Items)]
            for items in lists:
                self.assertTrue(all(q >= 0 for q in items.seqs), (cp.id, items))

    def test_a_turn_passes_only_its_new_items(self):
        ours, theirs = self.graphs()
        t = self.tid()
        puts = []
        real = self.store.checkpoint_put

        def spy(*args, **kwargs):
            for name, _, value in kwargs.get("channels", ()):
                if name == "messages" and isinstance(value, convo.Items):
                    puts.append(((kwargs.get("log_prefix") or {}).get(name, 0),
                                 len(value.items), value.key))
            return real(*args, **kwargs)
        self.store.checkpoint_put = spy
        self.addCleanup(delattr, self.store, "checkpoint_put")
        for i in range(8):
            del puts[:]
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            # the loop checkpoint: the log's 2i messages by prefix and the user's; the
            # node's: 2i + 1 by prefix and the answer
            self.assertEqual(puts, [(2 * i, 1, delta.DELTA_KEY), (2 * i + 1, 1, delta.DELTA_KEY)],
                             "turn %d" % i)
        self.same_history(ours, theirs, t)

    def test_a_snapshot_selects_the_held_log_in_one_range(self):
        """A snapshot's put finds its list's first items, the held log's messages,
        as one range (no look at each: O(new) a snapshot, not O(history)); only the
        turn's new messages are looked up one by one. The selection is the one a
        look at each gives, and the state and history are InMemorySaver's."""
        ours, theirs = self.graphs()
        t = self.tid()
        saver = ours.checkpointer
        cache = saver._channels.cache
        real_select, real_finder = delta.selection_of, cache.seq_finder
        seen = []

        def select(prefix, texts, seqs, items, seq_of, text_of, head=0):
            looked = []

            def counted(x):
                looked.append(x)
                return seq_of(x)
            got = real_select(prefix, texts, seqs, items, counted, text_of, head)
            # the same selection, each item looked up (the held ones by seq)
            gen, _ = cache.tag(t)
            every = real_finder(t, gen, 0)
            self.assertEqual(got, real_select(prefix, texts, seqs, items,
                                              lambda x: every(x) if every(x) >= 0 else
                                              seq_of(x), text_of, 0))
            seen.append((len(items), head, len(looked)))
            return got
        delta.selection_of = select
        self.addCleanup(setattr, delta, "selection_of", real_select)
        for i in range(12):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(ours, theirs, t, "turn %d" % i)
        self.same_history(ours, theirs, t)
        late = [x for x in seen if x[0] > 8]
        self.assertGreaterEqual(len(late), 3, seen)
        for n, head, looked in late:
            self.assertGreaterEqual(head, n - 2, seen)
            self.assertLessEqual(looked, 2, seen)

    def test_a_new_saver_goes_on_from_the_stored_lists(self):
        """A saver that did not write the thread (a restart) reads the parent's delta
        list once and goes on by prefix; a snapshot taken there selects log ranges."""
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(3):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        again = app.chat_graph(self.saver(), "delta")
        for i in range(3, 8):
            for g in (again, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(again, theirs, t, "turn %d" % i)
        self.same_history(again, theirs, t)
        self.assertEqual(len(self.log_of(t)), 16)
        for cp in self.store.checkpoint_list(t):
            v = cp.values.get("messages")
            if isinstance(v, convo.Items) and v.rest is not None:
                sel = json.loads(v.rest.bytes)
                self.assertEqual(sel["lg_name"], "DeltaSnapshot")
                self.assertTrue(all(isinstance(s, list) for s in sel["convo_select"]), sel)

    def test_delta_history_in_a_window_equal_to_the_walk(self):
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(7):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        saver = ours.checkpointer
        calls = []
        for name in ("checkpoint_get", "checkpoint_list"):
            real = getattr(self.store, name)

            def counting(*a, _real=real, _name=name, **k):
                calls.append(_name)
                return _real(*a, **k)
            setattr(self.store, name, counting)
            self.addCleanup(delattr, self.store, name)
        tuples = list(saver.list(app.config(t)))[:12]
        # the saver that put them: from what it remembers, without a store call; a
        # saver that did not (a restart): the target, one window of the ancestors
        # without their lists, and the seed's checkpoint with its list
        fresh = self.saver()
        for tup in tuples:
            for s, most in ((saver, 0), (fresh, 3)):
                del calls[:]
                got = s.get_delta_channel_history(config=tup.config, channels=["messages"])
                self.assertLessEqual(len(calls), most, calls)
                # the way read once is remembered: the next call makes none
                del calls[:]
                self.assertEqual(s.get_delta_channel_history(config=tup.config,
                                                             channels=["messages"]), got)
                self.assertEqual(calls, [])
                self.assertEqual(got, BaseCheckpointSaver.get_delta_channel_history(
                    s, config=tup.config, channels=["messages"]))
                fresh = self.saver()
        self.assertEqual(saver.get_delta_channel_history(config=app.config(t), channels=[]), {})
        self.assertEqual(saver.get_delta_channel_history(config=app.config(self.tid("none")),
                                                         channels=["messages"]),
                         {"messages": {"writes": []}})
        got = asyncio.run(saver.aget_delta_channel_history(config=app.config(t),
                                                           channels=["messages"]))
        self.assertEqual(got, BaseCheckpointSaver.get_delta_channel_history(
            saver, config=app.config(t), channels=["messages"]))

    def test_a_fresh_get_state_reads_its_checkpoint_once(self):
        """A fresh saver's get_tuple reads the checkpoint with its delta list whole; the
        get_delta_channel_history LangGraph asks next in that thread walks from it
        without reading it again (the ancestors' window and the seed's checkpoint);
        one whose checkpoint was deleted meanwhile is what a reading saver finds."""
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(7):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        calls = []
        for name in ("checkpoint_get", "checkpoint_list"):
            real = getattr(self.store, name)

            def counting(*a, _real=real, _name=name, **k):
                calls.append((_name, a[1] if len(a) > 1 else k.get("before")))
                return _real(*a, **k)
            setattr(self.store, name, counting)
            self.addCleanup(delattr, self.store, name)
        fresh = app.chat_graph(self.saver(), "delta")
        state = fresh.get_state(app.config(t))
        self.assertEqual(app.snapshot(state), app.snapshot(theirs.get_state(app.config(t))))
        target = state.config["configurable"]["checkpoint_id"]
        self.assertEqual(calls[0], ("checkpoint_get", None), calls)
        self.assertNotIn(("checkpoint_get", target), calls)
        self.assertLessEqual(len(calls), 3, calls)
        saver = self.saver()
        tup = saver.get_tuple(app.config(t))
        got = saver.get_delta_channel_history(config=tup.config, channels=["messages"])
        self.assertEqual(got, BaseCheckpointSaver.get_delta_channel_history(
            self.saver(), config=tup.config, channels=["messages"]))
        # deleted by another saver between the two calls: the walk's listing finds no
        # checkpoint; the history is then read as without the get_tuple before it
        saver = self.saver()
        tup = saver.get_tuple(app.config(t))
        self.saver().delete_thread(t)
        self.assertEqual(saver.get_delta_channel_history(config=tup.config,
                                                         channels=["messages"]),
                         {"messages": {"writes": []}})

    def test_history_after_prune_and_delete_for_runs_is_the_stored_one(self):
        """What the saver remembers of a chain goes with the checkpoints: after a prune or
        a delete_for_runs its history is what a saver reading the store finds."""
        saver = self.saver()
        graph = app.chat_graph(saver, "delta")
        t, u = self.tid(), self.tid("u")
        for i in range(3):
            graph.invoke(app.user(i), {"configurable": {"thread_id": u},
                                       "metadata": {"run_id": "run-%d" % i}})
            graph.invoke(app.user(i), app.config(t))
        for thread, drop in ((t, lambda: saver.prune([t])),
                             (u, lambda: saver.delete_for_runs(["run-2"]))):
            config = saver.get_tuple(app.config(thread)).config
            before = saver.get_delta_channel_history(config=config, channels=["messages"])
            self.assertTrue(before["messages"]["writes"])
            drop()
            config = saver.get_tuple(app.config(thread)).config
            got = saver.get_delta_channel_history(config=config, channels=["messages"])
            self.assertEqual(got, BaseCheckpointSaver.get_delta_channel_history(
                self.saver(), config=config, channels=["messages"]))
            self.assertNotEqual(got, before)

    def test_interrupt_and_resume(self):
        ours, theirs = self.graphs(app.approval_graph)
        t = self.tid()
        for g in (ours, theirs):
            g.invoke(app.user(0, "draft this"), app.config(t))
        self.same_state(ours, theirs, t, "at the interrupt")
        self.assertEqual(ours.get_state(app.config(t)).next, ("approve",))
        for g in (ours, theirs):
            g.invoke(Command(resume="yes"), app.config(t))
        self.same_state(ours, theirs, t, "after the resume")
        # resumed by another saver (a restart)
        for g in (ours, theirs):
            g.invoke(app.user(1, "again"), app.config(t))
        fresh = app.approval_graph(self.saver(), "delta")
        for g in (fresh, theirs):
            g.invoke(Command(resume="no"), app.config(t))
        self.same_state(fresh, theirs, t, "resumed after a restart")
        self.same_history(fresh, theirs, t)

    def test_update_state_on_an_old_checkpoint_and_remove_message(self):
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(5):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        for g in (ours, theirs):
            old = list(g.get_state_history(app.config(t)))[-6]
            self.assertEqual(len(old.values["messages"]), 4)
            branch = g.update_state(old.config, {"messages": [
                HumanMessage(content="instead", id="user-edit")]})
            g.invoke(None, branch)
            g.invoke(app.user(99), app.config(t))
        self.same_state(ours, theirs, t, "after the branch")
        for g in (ours, theirs):
            g.update_state(app.config(t), {"messages": [RemoveMessage(id="user-1"),
                                                        RemoveMessage(id="ai-1-user-0")]})
            g.invoke(app.user(100), app.config(t))
            g.invoke(app.user(101), app.config(t))
        self.same_state(ours, theirs, t, "after RemoveMessage")
        h = self.same_history(ours, theirs, t)
        self.assertNotIn("user-1", [m[2] for m in h[0]["messages"]])
        # a fresh saver (nothing remembered) reads the same
        fresh = app.chat_graph(self.saver(cache_messages=0), "delta")
        self.assertEqual(app.history(fresh, t), h)

    def test_a_message_replaced_by_id(self):
        def editing(state):
            n = len(state["messages"])
            out = [AIMessage("re %d" % n, id="ai-%d" % n)]
            if n == 5:
                out.append(AIMessage("edited", id="ai-1"))
            return {"messages": out}
        ours, theirs = (app.make_graph(s, editing, "delta") for s in (self.saver(), InMemorySaver()))
        t = self.tid()
        for i in range(6):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(ours, theirs, t, "turn %d" % i)
        self.same_history(ours, theirs, t)

    def test_a_node_changing_a_message_in_place(self):
        """Reads check the held messages they hand out, not every held one (a
        DeltaChannel's checkpoint hands out few): a message a node changed in place
        (content, a dict inside it) is never given back, neither in the seed nor in
        a write, at any turn (a snapshot every few turns): the state and the
        history are what a saver without a cache reads from the same store."""
        def meddling(state):
            state["messages"][0].content = "meddled"
            for m in state["messages"][1:-1]:
                m.additional_kwargs["seen"] = True
            state["messages"][-1].content += " (meddled)"
            return app.chatbot(state)
        ours = app.make_graph(self.saver(), meddling, "delta")
        t = self.tid()
        for i in range(10):
            ours.invoke(app.user(i), app.config(t))
            uncached = app.make_graph(self.saver(cache_messages=0), meddling, "delta")
            self.same_state(ours, uncached, t, "turn %d" % i)
        self.assertEqual(app.history(ours, t), app.history(uncached, t))
        self.assertEqual(stored(ours, t), stored(uncached, t))

    def test_async_turns(self):
        ours, theirs = self.graphs()
        t = self.tid()

        async def run():
            for i in range(6):
                for g in (ours, theirs):
                    await g.ainvoke(app.user(i), app.config(t))
                self.assertEqual(app.snapshot(await ours.aget_state(app.config(t))),
                                 app.snapshot(await theirs.aget_state(app.config(t))))
        asyncio.run(run())
        self.same_history(ours, theirs, t)

    # ---- the stored layout, as docs/checkpoints.md writes it down ----

    def test_reads_the_documented_layout(self):
        """A thread laid out as the Node saver writes it (by hand, from the documented
        form: compact messages in the log, a delta list under __convo_delta__, a
        snapshot as its selection in JSON) reads back as LangGraph's values."""
        t = self.tid()
        texts = [json.dumps({"role": r, "content": c, "id": i, "serde": "msg/1"}).encode()
                 for r, c, i in (("user", "hi", "h1"), ("assistant", "hello", "a1"),
                                 ("user", "bye", "h2"))]
        s = self.store
        body = ("json", json.dumps({"v": 4, "id": "c1", "ts": "2026-01-01T00:00:00+00:00",
                                    "channel_versions": {"messages": "1"},
                                    "versions_seen": {}}).encode())
        s.checkpoint_put(t, "c1", metadata={"step": 1}, body=body, channels=[
            ("messages", "1", convo.Items(texts[:2], key=delta.DELTA_KEY, log=True))])
        sel = {"lg_name": "DeltaSnapshot", "convo_select": [[1, 3], "{\"role\":\"user\","
               "\"content\":\"inline\",\"id\":\"x\",\"serde\":\"msg/1\"}"]}
        s.checkpoint_put(t, "c2", parent_id="c1", metadata={"step": 2}, body=body, channels=[
            ("messages", "2", convo.Items(texts, key=delta.DELTA_KEY, log=True,
                                          rest=("json", json.dumps(sel).encode())))])
        self.assertEqual(self.log_of(t), [("user", "hi"), ("assistant", "hello"),
                                          ("user", "bye")])
        saver = self.saver()
        first = saver.get_tuple(app.config(t, "c1"))
        self.assertNotIn("messages", first.checkpoint["channel_values"])
        second = saver.get_tuple(app.config(t, "c2"))
        snap = second.checkpoint["channel_values"]["messages"]
        self.assertIsInstance(snap, _DeltaSnapshot)
        self.assertEqual(contents(snap.value), [("ai", "hello", "a1"), ("human", "bye", "h2"),
                                                ("human", "inline", "x")])
        # the seed LangGraph takes for the channel
        got = saver.get_delta_channel_history(config=app.config(t, "c2"), channels=["messages"])
        self.assertEqual(got, {"messages": {"writes": []}})
        # a snapshot stored as its own list (the parent's value was no list)
        s.checkpoint_put(t, "c3", parent_id="c2", metadata={"step": 3}, body=body, channels=[
            ("messages", "3", convo.Items(texts[:1], key="value",
                                          rest=("json", b'{"lg_name":"DeltaSnapshot"}')))])
        third = saver.get_tuple(app.config(t, "c3"))
        self.assertEqual(contents(third.checkpoint["channel_values"]["messages"].value),
                         [("human", "hi", "h1")])
        # a reserved name of a later layout: refused, never shown to LangGraph
        s.checkpoint_put(t, "c4", parent_id="c3", metadata={"step": 4}, body=body, channels=[
            ("messages", "4", convo.Items(texts, key="__convo_delta_2__", log=True))])
        with self.assertRaises(convo.CorruptError):
            saver.get_tuple(app.config(t, "c4"))
        # a selection out of its list's range: refused too
        bad = {"lg_name": "DeltaSnapshot", "convo_select": [[0, 9]]}
        s.checkpoint_put(t, "c5", parent_id="c3", metadata={"step": 4}, body=body, channels=[
            ("messages", "5", convo.Items(texts, key=delta.DELTA_KEY, log=True,
                                          rest=("json", json.dumps(bad).encode())))])
        with self.assertRaises(convo.CorruptError):
            saver.get_tuple(app.config(t, "c5"))

    def test_writes_the_documented_layout(self):
        """What a Python app stores is that form: the selection in JSON (readable by the
        Node saver's serde), ranges of the delta list."""
        graph = app.chat_graph(self.saver(), "delta")
        t = self.tid()
        for i in range(app.SNAPSHOT_EVERY):
            graph.invoke(app.user(i), app.config(t))
        rests = [cp.values["messages"].rest for cp in self.store.checkpoint_list(t)
                 if isinstance(cp.values.get("messages"), convo.Items)
                 and cp.values["messages"].rest is not None]
        self.assertTrue(rests)
        for rest in rests:
            self.assertEqual(rest.type, "json")
            sel = json.loads(rest.bytes)
            self.assertEqual(set(sel), {"lg_name", "convo_select"})
            n = sum(b - a for a, b in sel["convo_select"])
            self.assertEqual(sel["convo_select"], [[0, n]])


@unittest.skipIf(MISSING is not None and os.environ.get("CONVO_REQUIRE_LANGGRAPH") != "1",
                 "no DeltaChannel: %s" % MISSING)
class Selection(unittest.TestCase):
    """delta.selection_of with a known head gives what a look at each item gives;
    _segments gives the items a selection names, the log's as one slice."""

    def test_a_head_selects_as_a_look_at_each(self):
        prefix, texts, seqs = 6, [b"g", b"h", b"x"], [6, 7, -1]
        objects = ["m%d" % i for i in range(8)] + ["x", "new"]
        where = {x: i for i, x in enumerate(objects[:8])}
        cases = [objects[:8], objects[:8] + ["new"], objects[:5] + ["m7", "m5", "new", "x"],
                 objects[:6] + ["m2", "m6"], ["new"], []]
        for items in cases:
            every = delta.selection_of(prefix, texts, seqs, items, lambda x: where.get(x, -1),
                                       lambda x: x.encode())
            head = 0
            while head < min(len(items), prefix) and items[head] == objects[head]:
                head += 1
            for h in range(head + 1):
                self.assertEqual(delta.selection_of(prefix, texts, seqs, items,
                                                    lambda x: where.get(x, -1),
                                                    lambda x: x.encode(), h), every, (items, h))

    def test_segments_of_a_selection(self):
        prefix, texts, seqs = 4, [b"e", b"f", b"g"], [4, -1, 9]

        def each(segs):
            out_t, out_q = [], []
            for seg in segs:
                if isinstance(seg, str):
                    out_t.append(seg.encode())
                    out_q.append(-1)
                    continue
                for j in range(*seg):
                    out_t.append(None if j < prefix else texts[j - prefix])
                    out_q.append(j if j < prefix else seqs[j - prefix])
            return out_t, out_q
        for segs in ([[0, 4]], [[0, 7]], [[2, 6], "x", [0, 1]], [[5, 7], [1, 3]], [], ["y"]):
            self.assertEqual(delta._segments(segs, prefix, texts, seqs), each(segs), segs)


for _driver in DRIVERS + (["redis_cluster"] if os.environ.get(
        "CONVO_LANGGRAPH_DRIVERS") == "all" else []):
    _name = "DeltaRuntime_%s" % _driver
    globals()[_name] = type(_name, (DeltaRuntime, LangGraphCase),
                            {"driver": _driver, "__module__": __name__})
