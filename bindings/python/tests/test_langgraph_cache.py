"""ConvoSaver's cache of revived messages (convo/_langgraph_cache.py) under LangGraph's
real runtime: a read revives only the messages it has not seen and is told to leave
out of the read the ones it holds; it hands out copies; a tail rewrite between two
invokes and a thread deleted and written again by another process are seen (the
generation and the origin of the log), and the state stays the one a saver without
a cache reads.

Skipped without LangGraph, failed under CONVO_REQUIRE_LANGGRAPH=1."""

import convo

try:
    from langchain_core.messages import AIMessage
    from convo import _langgraph_channels as channels
    from convo.langgraph import ConvoSaver  # noqa: F401 - skips the tests without it
    import langgraph_app as app
    MISSING = None
except ImportError as e:  # pragma: no cover - depends on what is installed
    MISSING = str(e)

from support import DRIVERS
from test_langgraph import LangGraphCase
from test_langgraph_runtime import Runtime


class Counting:
    """Counts the items revived from their log texts, and the texts a read left out."""

    def __init__(self, case, store):
        self.revived = 0
        self.left_out = 0
        real_revive, real_get = channels.from_log_texts, store.checkpoint_get

        def revive(serde, texts, *fields):
            self.revived += len(texts)
            return real_revive(serde, texts, *fields)

        def get(*args, **kwargs):
            cp = real_get(*args, **kwargs)
            if cp is not None:
                self.left_out += sum(x is None for c in cp.channels
                                     if isinstance(c.value, convo.Items) for x in c.value.items)
            return cp
        channels.from_log_texts = revive
        store.checkpoint_get = get
        case.addCleanup(setattr, channels, "from_log_texts", real_revive)
        case.addCleanup(delattr, store, "checkpoint_get")

    def take(self):
        out = (self.revived, self.left_out)
        self.revived = self.left_out = 0
        return out


class Cache:
    def state(self, graph, t):
        return app.snapshot(graph.get_state(app.config(t)))

    def test_a_read_revives_and_loads_only_new_messages(self):
        graph = app.chat_graph(self.saver())
        t = self.tid()
        count = Counting(self, self.store)
        for i in range(12):
            graph.invoke(app.user(i), app.config(t))
            revived, left_out = count.take()
            # the invoke's get_tuple: the two messages the last turn appended
            self.assertLessEqual(revived, 2, "turn %d revived %d" % (i, revived))
            if i >= 2:
                self.assertGreaterEqual(left_out, 2 * i - 2, "turn %d" % i)
        graph.get_state(app.config(t))
        self.assertEqual(count.take(), (2, 22))
        graph.get_state(app.config(t))
        self.assertEqual(count.take(), (0, 24))
        history = app.history(graph, t)      # every checkpoint, nothing revived again
        self.assertEqual(count.take()[0], 0)
        self.assertEqual(history, app.history(app.chat_graph(self.saver(cache_messages=0)), t))

    def test_without_a_cache(self):
        graph = app.chat_graph(self.saver(cache_messages=0))
        t = self.tid()
        count = Counting(self, self.store)
        for i in range(4):
            graph.invoke(app.user(i), app.config(t))
        count.take()
        graph.get_state(app.config(t))
        self.assertEqual(count.take(), (8, 0))

    def test_reads_hand_out_the_held_messages_and_see_changes(self):
        saver = self.saver()
        graph = app.chat_graph(saver)
        t = self.tid()
        for i in range(3):
            graph.invoke(app.user(i), app.config(t))
        a = saver.get_tuple(app.config(t)).checkpoint["channel_values"]["messages"]
        b = saver.get_tuple(app.config(t)).checkpoint["channel_values"]["messages"]
        self.assertEqual(a, b)
        self.assertTrue(all(x is y for x, y in zip(a, b)))
        count = Counting(self, self.store)
        a[0].content = "changed"
        a[1].additional_kwargs["changed"] = [1]
        a[3].tool_calls.append({"name": "x", "args": {}, "id": "c1", "type": "tool_call"})
        a[4].id = "another"
        a[5].response_metadata["x"] = {"y": 1}
        a[2].__pydantic_extra__["note"] = "x"   # an extra field (BaseMessage allows them)
        c = saver.get_tuple(app.config(t)).checkpoint["channel_values"]["messages"]
        # the six changed ones revived again: the read leaving the six held texts out
        # finds message 0 changed as it hands them out, drops it and reads again, and
        # the log gives the texts from message 0 on
        self.assertEqual(count.take(), (6, 6))
        self.assertEqual([m.content for m in c], ["turn %d" % (i // 2) if i % 2 == 0 else
                                                  c[i].content for i in range(6)])
        self.assertEqual(c[1].additional_kwargs, {})
        self.assertEqual(c[3].tool_calls, [])
        self.assertNotEqual(c[4].id, "another")
        self.assertEqual(c[5].response_metadata, {})
        self.assertEqual(c[2].__pydantic_extra__, {})
        self.assertTrue(all(x is not y for x, y in zip(c, a)))
        fresh = app.chat_graph(self.saver(cache_messages=0))
        self.assertEqual(self.state(graph, t), self.state(fresh, t))
        # what was revived again is held again: the next read revives nothing
        count.take()
        d = saver.get_tuple(app.config(t)).checkpoint["channel_values"]["messages"]
        self.assertTrue(all(x is y for x, y in zip(c, d)))
        self.assertEqual(count.take(), (0, 6))

    def test_a_node_changing_a_message_in_place(self):
        """A node that changes a message of its state in place (LangGraph hands
        the read's objects to the nodes) changes no later read: the saver gives
        what is stored, as a saver without a cache reads it."""
        def meddling(state):
            state["messages"][0].content = "meddled"
            for m in state["messages"][1:-1]:   # the messages read from the saver
                m.additional_kwargs["seen"] = True
            return app.chatbot(state)
        saver = self.saver()
        graph = app.make_graph(saver, meddling)
        t = self.tid()
        for i in range(4):
            graph.invoke(app.user(i), app.config(t))
            fresh = app.make_graph(self.saver(cache_messages=0), meddling)
            self.assertEqual(self.state(graph, t), self.state(fresh, t), "turn %d" % i)
            self.assertEqual(graph.get_state(app.config(t)).values["messages"],
                             fresh.get_state(app.config(t)).values["messages"], "turn %d" % i)
        self.assertEqual(app.history(graph, t),
                         app.history(app.make_graph(self.saver(cache_messages=0), meddling), t))

    def test_an_id_given_in_place_to_a_message_stored_without_one(self):
        """A list reducer that keeps messages without ids (assign_ids=False), and a
        node that gives an old one an id in place, as add_messages does: the put
        sees it (the message is no longer the log's text) and the state stays
        InMemorySaver's after every turn."""
        import operator
        from typing import Annotated, TypedDict
        from langchain_core.messages import HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, StateGraph

        class State(TypedDict):
            messages: Annotated[list, operator.add]

        def node(state):
            n = len(state["messages"])
            if n >= 5 and state["messages"][1].id is None:
                state["messages"][1].id = "given-%d" % n
            return {"messages": [AIMessage("re %d" % n)]}

        def graph(saver):
            b = StateGraph(State)
            b.add_node("n", node)
            b.add_edge(START, "n")
            b.add_edge("n", END)
            return b.compile(checkpointer=saver)
        ours, theirs = graph(self.saver(assign_ids=False)), graph(InMemorySaver())
        t = self.tid()

        def state(g):
            return [(m.type, m.content, m.id) for m in g.get_state(app.config(t)).values["messages"]]
        for i in range(5):
            for g in (ours, theirs):
                g.invoke({"messages": [HumanMessage("turn %d" % i)]}, app.config(t))
            self.assertEqual(state(ours), state(theirs), "turn %d" % i)
        self.assertEqual(state(ours)[1][2], "given-5")
        fresh = graph(self.saver(cache_messages=0, assign_ids=False))
        self.assertEqual(state(fresh), state(theirs))

    def test_bounded(self):
        saver = self.saver(cache_messages=5)
        graph = app.chat_graph(saver)
        t, u = self.tid("a"), self.tid("b")
        for i in range(4):
            for thread in (t, u):
                graph.invoke(app.user(i), app.config(thread))
        self.assertLessEqual(saver._channels.cache._count, 5)
        fresh = app.chat_graph(self.saver(cache_messages=0))
        for thread in (t, u):
            self.assertEqual(app.history(graph, thread), app.history(fresh, thread))
        self.assertRaises(convo.InvalidError, self.saver, cache_messages=-1)

    def test_a_list_across_threads_holds_no_thread(self):
        """list(None) reads every thread's checkpoints: it adds none of them to the
        cache, which would push out the thread being read."""
        graph = app.chat_graph(self.saver())
        t = self.tid("held")
        others = [self.tid("other%d" % k) for k in range(3)]
        for thread in others + [t]:
            for i in range(2):
                graph.invoke(app.user(i), app.config(thread))
        saver = self.saver(cache_messages=8)
        app.chat_graph(saver).get_state(app.config(t))
        held = saver._channels.cache.known(t)
        self.assertEqual(held[1], 4)
        listed = {x.config["configurable"]["thread_id"] for x in saver.list(None)}
        self.assertTrue(set(others + [t]) <= listed)
        self.assertEqual(saver._channels.cache.known(t), held)
        for thread in others:
            self.assertIsNone(saver._channels.cache.known(thread))

    def test_tail_rewrite_between_two_invokes(self):
        """A pop of the last turn (drop_checkpoints) then a new turn: seqs 4 and 5
        hold other messages at the next generation; what the saver held of them
        is not handed out."""
        graph = app.chat_graph(self.saver())
        plain = app.chat_graph(self.saver(cache_messages=0))
        t = self.tid()
        for i in range(3):
            graph.invoke(app.user(i), app.config(t))
        self.assertEqual(len(self.state(graph, t)["messages"]), 6)     # held: 0..5
        before = self.store.load_history(t, with_extra=False).generation
        self.store.replace_tail(t, 4, drop_checkpoints=True)
        self.assertEqual(self.store.load_history(t, with_extra=False).generation, before + 1)
        self.assertEqual(len(self.state(graph, t)["messages"]), 4)
        graph.invoke(app.user(7), app.config(t))
        got = self.state(graph, t)
        self.assertEqual([m[1] for m in got["messages"][4:]], ["turn 7", "re: turn 7 (5)"])
        self.assertEqual(got, self.state(plain, t))
        self.assertEqual(self.store.checkpoint_get(t).values["messages"].seqs, list(range(6)))
        self.assertEqual(app.history(graph, t), app.history(plain, t))

    def test_thread_written_again_by_another_process(self):
        """Another process deletes the thread and runs other turns under its id:
        the generation is 0 again, the log's origin is not; the saver reads the new
        messages, not the ones it held."""
        if self.driver == "memory":
            self.skipTest("memory: is not shared between processes")
        graph = app.chat_graph(self.saver())
        t = self.tid()
        for i in range(3):
            graph.invoke(app.user(i), app.config(t))
        self.assertEqual(len(self.state(graph, t)["messages"]), 6)
        other = convo.Store(self.url)
        other.delete(t)
        other.close()
        runner = Runtime.run_app.__get__(self)
        result = Runtime.finish.__get__(self)(runner(t, "turns", 3, 100))
        self.assertEqual(self.state(graph, t), result["state"])
        self.assertEqual(self.state(graph, t)["messages"][0][1], "turn 100")
        graph.invoke(app.user(103), app.config(t))
        self.assertEqual(app.history(graph, t),
                         app.history(app.chat_graph(self.saver(cache_messages=0)), t))

    def test_a_put_after_a_rewrite_it_did_not_see(self):
        """A put whose seq hints were learnt before another writer rewrote the
        thread is conditional on that generation: it conflicts, and the saver puts
        again with the texts, so the checkpoint holds the messages it was given,
        not the ones now at those seqs."""
        saver = self.saver()
        graph = app.chat_graph(saver)
        t = self.tid()
        for i in range(2):
            graph.invoke(app.user(i), app.config(t))
        tup = saver.get_tuple(app.config(t))
        mine = tup.checkpoint["channel_values"]["messages"]
        self.assertEqual(len(mine), 4)
        self.store.replace_tail(t, 2, [{"role": "user", "content": "other %d" % i}
                                       for i in range(2)], drop_checkpoints=True)
        calls = []
        real = self.store.checkpoint_put

        def put(*args, **kwargs):
            calls.append(kwargs.get("expected_generation"))
            return real(*args, **kwargs)
        self.store.checkpoint_put = put
        self.addCleanup(delattr, self.store, "checkpoint_put")
        checkpoint = dict(tup.checkpoint, id="1f0000aa-0000-6000-8000-000000000001")
        new = AIMessage(content="after the rewrite", id="after")
        version = saver.get_next_version(checkpoint["channel_versions"]["messages"])
        checkpoint["channel_values"] = dict(checkpoint["channel_values"],
                                            messages=mine + [new])
        checkpoint["channel_versions"] = dict(checkpoint["channel_versions"], messages=version)
        saver.put(tup.config, checkpoint, {"source": "update", "step": 9},
                  {"messages": version})
        generation = self.store.load_history(t, with_extra=False).generation
        self.assertEqual(calls, [generation - 1, generation])   # conflict, then again
        got = saver.get_tuple(app.config(t, checkpoint["id"]))
        self.assertEqual([(m.content, m.id) for m in got.checkpoint["channel_values"]["messages"]],
                         [(m.content, m.id) for m in mine + [new]])
        plain = self.saver(cache_messages=0).get_tuple(app.config(t, checkpoint["id"]))
        self.assertEqual(plain.checkpoint["channel_values"], got.checkpoint["channel_values"])

    def test_a_write_read_back_from_the_cache(self):
        """Pending writes and inputs that refer to held messages come from the cache
        too (copies)."""
        saver = self.saver()
        graph = app.chat_graph(saver)
        t = self.tid()
        for i in range(3):
            graph.invoke(app.user(i), app.config(t))
        graph.get_state(app.config(t))
        tuples = list(saver.list(app.config(t)))
        plain = list(self.saver(cache_messages=0).list(app.config(t)))
        self.assertEqual([x.pending_writes for x in tuples], [x.pending_writes for x in plain])
        self.assertEqual([x.checkpoint["channel_values"] for x in tuples],
                         [x.checkpoint["channel_values"] for x in plain])
        writes = [w[2] for x in tuples for w in x.pending_writes if w[1] == "messages"]
        self.assertEqual(len(writes), 6)     # the user's message and the answer, each turn
        self.assertTrue(all(isinstance(m, AIMessage) for w in writes[::2] for m in w))


for _driver in DRIVERS:
    _name = "Cache_%s" % _driver
    globals()[_name] = type(_name, (Cache, LangGraphCase),
                            {"driver": _driver, "__module__": __name__})
