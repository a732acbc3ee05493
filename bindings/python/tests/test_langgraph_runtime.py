"""ConvoSaver under LangGraph's real runtime: a StateGraph over MessagesState
(add_messages) run for many turns, sync and async; interrupt() and a resume with
Command in another process; get_state_history; update_state on an old checkpoint;
RemoveMessage; two processes running two threads at once. After every step the
state is the one the same script gives on LangGraph's InMemorySaver.

Skipped without LangGraph, failed under CONVO_REQUIRE_LANGGRAPH=1."""

import asyncio
import json
import os
import subprocess
import sys
import unittest
import uuid

import convo

try:
    from langchain_core.messages import HumanMessage, RemoveMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, Interrupt
    from convo.langgraph import ConvoSaver
    import langgraph_app as app
    MISSING = None
except ImportError as e:  # pragma: no cover - depends on what is installed
    MISSING = str(e)

from support import DRIVERS
from test_langgraph import LangGraphCase

TURNS = int(os.environ.get("CONVO_LANGGRAPH_TURNS", "40"))
HERE = os.path.dirname(os.path.abspath(__file__))


def _plain(value):
    """An Interrupt's id depends on the checkpoint id, which differs between savers."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, Interrupt):
        return ("Interrupt", value.value)
    return value


def stored(graph, thread_id):
    """Every checkpoint's channel values and pending writes as the saver returns them."""
    return [(t.checkpoint["channel_values"], [(w[1], _plain(w[2])) for w in t.pending_writes])
            for t in graph.checkpointer.list(app.config(thread_id))]


class Runtime:
    def graphs(self, make=None):
        """The same graph on ConvoSaver and on InMemorySaver."""
        make = make or app.chat_graph
        return make(self.saver()), make(InMemorySaver())

    def same_state(self, ours, theirs, thread_id, what):
        a = app.snapshot(ours.get_state(app.config(thread_id)))
        b = app.snapshot(theirs.get_state(app.config(thread_id)))
        self.assertEqual(a, b, what)

    def same_history(self, ours, theirs, thread_id):
        a, b = app.history(ours, thread_id), app.history(theirs, thread_id)
        self.assertEqual(len(a), len(b))
        self.assertEqual(a, b)
        # what each saver returns itself, not only what LangGraph rebuilds from it (it
        # replays ancestors' writes into a channel whose value is missing)
        self.assertEqual(stored(ours, thread_id), stored(theirs, thread_id))
        return a

    def test_many_turns_equal_in_memory_saver(self):
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(TURNS):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(ours, theirs, t, "after turn %d" % i)
        h = self.same_history(ours, theirs, t)
        self.assertEqual(len(h), 3 * TURNS)       # input, loop, chatbot per turn
        self.assertEqual(len(h[0]["messages"]), 2 * TURNS)
        # each message once, in the thread's log, readable: the channel refers to it
        log = self.store.load_history(t, with_extra=False)
        self.assertEqual([(m.json()["role"], m.json()["content"]) for m in log.messages],
                         [("user" if m[0] == "human" else "assistant", m[1])
                          for m in h[0]["messages"]])
        latest = self.store.checkpoint_get(t).values["messages"]
        self.assertIsInstance(latest, convo.Items)
        self.assertEqual(latest.seqs, list(range(2 * TURNS)))

    def test_a_turn_serializes_only_its_new_messages(self):
        """A put passes the items its parent's list already had by their log seq:
        the work of a turn does not grow with the conversation."""
        from convo import _langgraph_channels as channels
        graph = app.chat_graph(self.saver())
        t = self.tid()
        calls = []
        real = channels.log_text

        def counting(serde, item):
            calls.append(item)
            return real(serde, item)

        channels.log_text = counting
        try:
            for i in range(12):
                del calls[:]
                graph.invoke(app.user(i), app.config(t))
                # the input (its write and the input checkpoint's value), the user's
                # message and the answer, each in its write and in the channel's list
                self.assertLessEqual(len(calls), 6, "turn %d serialized %d items" % (i, len(calls)))
        finally:
            channels.log_text = real
        seqs = self.store.checkpoint_get(t).values["messages"].seqs
        self.assertEqual(seqs, list(range(24)))

    def test_a_put_passes_only_the_new_items(self):
        """A put whose list starts with its parent's messages (the objects the read
        handed out) passes them as the log's first k messages (log_prefix) and
        hands the library only the items after them (a list that no longer starts
        with the log passes the messages known by seq, not as texts); the state stays
        InMemorySaver's, also across an update_state branch and a RemoveMessage."""
        ours, theirs = self.graphs()
        t = self.tid()
        puts = []
        real = self.store.checkpoint_put

        def spy(*args, **kwargs):
            for name, _, value in kwargs.get("channels", ()):
                if name == "messages" and isinstance(value, convo.Items):
                    puts.append(((kwargs.get("log_prefix") or {}).get(name, 0),
                                 len(value.items), sum(x is not None for x in value.items)))
            return real(*args, **kwargs)
        self.store.checkpoint_put = spy
        self.addCleanup(delattr, self.store, "checkpoint_put")
        for i in range(10):
            del puts[:]
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(ours, theirs, t, "turn %d" % i)
            # the checkpoint taking the input: the parent's 2i messages by prefix,
            # the user's given; the node's: 2i + 1 by prefix, the answer given
            self.assertEqual(puts, [(2 * i, 1, 1), (2 * i + 1, 1, 1)], "turn %d" % i)
        seqs = self.store.checkpoint_get(t).values["messages"].seqs
        self.assertEqual(seqs, list(range(20)))
        # a branch from an old checkpoint, then a message removed: the state still
        # InMemorySaver's, every later turn again by prefix
        for g in (ours, theirs):
            old = list(g.get_state_history(app.config(t)))[6].config
            g.update_state(old, {"messages": [HumanMessage("branch", id="b1")]})
            g.invoke(app.user(20), app.config(t))
            g.update_state(app.config(t), {"messages": [RemoveMessage(id="user-1")]})
        self.same_state(ours, theirs, t, "after the branch and the removal")
        del puts[:]
        for g in (ours, theirs):
            g.invoke(app.user(21), app.config(t))
        self.same_state(ours, theirs, t, "a turn after them")
        self.assertEqual(app.history(ours, t), app.history(theirs, t))
        # the list no longer starts with the whole log (user-1 removed): the messages
        # after the removal are passed by seq, only the new ones as texts
        self.assertEqual([texts for _, _, texts in puts], [1, 1], puts)

    def test_a_message_replaced_by_id(self):
        """A node returning a message with the id of an old one (add_messages swaps it
        in place of the old one in a new list): the checkpoint holds the new content,
        as on InMemorySaver, and later turns go on by prefix."""
        from langchain_core.messages import AIMessage

        def editing(state):
            n = len(state["messages"])
            out = [AIMessage("re %d" % n, id="ai-%d" % n)]
            if n == 5:
                out.append(AIMessage("edited", id="ai-1"))
            return {"messages": out}
        ours, theirs = (app.make_graph(s, editing) for s in (self.saver(), InMemorySaver()))
        t = self.tid()
        for i in range(5):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
            self.same_state(ours, theirs, t, "turn %d" % i)
        contents = [m.content for m in ours.get_state(app.config(t)).values["messages"]]
        self.assertEqual(contents[1], "edited")
        self.assertEqual(app.history(ours, t), app.history(theirs, t))
        fresh = app.make_graph(self.saver(cache_messages=0), editing)
        self.assertEqual(app.history(fresh, t), app.history(theirs, t))

    def test_async_turns_equal_in_memory_saver(self):
        ours, theirs = self.graphs()
        t = self.tid()

        async def run():
            for i in range(10):
                for g in (ours, theirs):
                    await g.ainvoke(app.user(i), app.config(t))
                a = app.snapshot(await ours.aget_state(app.config(t)))
                self.assertEqual(a, app.snapshot(await theirs.aget_state(app.config(t))))
            return [app.snapshot(s) async for s in ours.aget_state_history(app.config(t))]

        self.assertEqual(asyncio.run(run()), app.history(theirs, t))

    def test_update_state_on_an_old_checkpoint_branches(self):
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(5):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        for g in (ours, theirs):
            # the state after turn 1's answer: the 4th checkpoint from the oldest
            old = list(g.get_state_history(app.config(t)))[-6]
            self.assertEqual(len(old.values["messages"]), 4)
            branch = g.update_state(old.config, {"messages": [
                HumanMessage(content="instead", id="user-edit")]})
            g.invoke(None, branch)      # nothing to run: the branch is the head
            g.invoke(app.user(99), app.config(t))
        self.same_state(ours, theirs, t, "after the branch")
        h = self.same_history(ours, theirs, t)
        self.assertEqual([m[2] for m in h[0]["messages"]],
                         ["user-0", "ai-1-user-0", "user-1", "ai-3-user-1", "user-edit",
                          "user-99", "ai-6-user-99"])
        # the branch extends its parent's list: its messages enter the log after those
        # of the abandoned line, each once, and the branch refers to both ranges
        log = [m.json()["content"] for m in self.store.load_history(t, with_extra=False).messages]
        self.assertEqual(len(log), 13)
        self.assertEqual(log[10:], ["instead", "turn 99", "re: turn 99 (6)"])
        self.assertEqual(self.store.checkpoint_get(t).values["messages"].seqs,
                         [0, 1, 2, 3, 10, 11, 12])

    def test_remove_message(self):
        ours, theirs = self.graphs()
        t = self.tid()
        for i in range(3):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        for g in (ours, theirs):
            g.update_state(app.config(t), {"messages": [RemoveMessage(id="user-1"),
                                                        RemoveMessage(id="ai-1-user-0")]})
            g.invoke(app.user(3), app.config(t))
        self.same_state(ours, theirs, t, "after RemoveMessage")
        h = self.same_history(ours, theirs, t)
        self.assertNotIn("user-1", [m[2] for m in h[0]["messages"]])
        # older checkpoints still hold it
        self.assertTrue(any("user-1" in [m[2] for m in s["messages"]] for s in h[1:]))

    def test_interrupt_and_resume_in_one_process(self):
        ours, theirs = self.graphs(app.approval_graph)
        t = self.tid()
        for g in (ours, theirs):
            g.invoke(app.user(0, "draft this"), app.config(t))
        self.same_state(ours, theirs, t, "at the interrupt")
        state = ours.get_state(app.config(t))
        self.assertEqual(state.next, ("approve",))
        self.assertEqual(state.tasks[0].interrupts[0].value["question"], "send it?")
        for g in (ours, theirs):
            g.invoke(Command(resume="yes"), app.config(t))
        self.same_state(ours, theirs, t, "after the resume")
        self.same_history(ours, theirs, t)

    def test_copy_thread_then_continue_on_the_copy(self):
        ours, theirs = self.graphs()
        t, copy = self.tid(), self.tid("copy")
        for i in range(4):
            for g in (ours, theirs):
                g.invoke(app.user(i), app.config(t))
        ours.checkpointer.copy_thread(t, copy)
        self.assertEqual(app.history(ours, copy), app.history(ours, t))
        self.assertEqual(stored(ours, copy), stored(ours, t))
        ours.invoke(app.user(4), app.config(copy))
        theirs.invoke(app.user(4), app.config(t))
        self.assertEqual(app.history(ours, copy), app.history(theirs, t))
        self.assertEqual(len(app.history(ours, t)), 12)    # the source is unchanged

    def test_delete_for_runs_leaves_the_other_runs(self):
        ours = app.chat_graph(self.saver())
        t = self.tid()
        runs = [str(uuid.uuid4()) for _ in range(3)]
        for i, run in enumerate(runs):
            ours.invoke(app.user(i), {"configurable": {"thread_id": t},
                                      "metadata": {"run_id": run}})
        before = app.history(ours, t)
        ours.checkpointer.delete_for_runs([runs[2]])
        self.assertEqual(app.history(ours, t), before[3:])
        self.assertEqual(len(app.snapshot(ours.get_state(app.config(t)))["messages"]), 4)
        ours.invoke(app.user(9), app.config(t))
        self.assertEqual([m[2] for m in app.snapshot(ours.get_state(app.config(t)))["messages"]],
                         ["user-0", "ai-1-user-0", "user-1", "ai-3-user-1", "user-9",
                          "ai-5-user-9"])

    # ---- other processes (not memory:, which lives in one process) ----

    def run_app(self, *args):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [HERE] + [p for p in sys.path if p]))
        return subprocess.Popen([sys.executable, os.path.join(HERE, "langgraph_app.py"),
                                 self.url] + [str(a) for a in args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def finish(self, proc):
        out, err = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, err.decode())
        return json.loads(out.decode().strip().splitlines()[-1])

    def need_processes(self):
        if self.driver == "memory":
            self.skipTest("memory: is not shared between processes")

    def test_interrupt_then_resume_after_a_restart(self):
        self.need_processes()
        t = self.tid()
        theirs = app.approval_graph(InMemorySaver())
        theirs.invoke(app.user(0, "draft this"), app.config(t))
        asked = self.finish(self.run_app(t, "ask", "draft this"))
        self.assertEqual(asked["state"], app.snapshot(theirs.get_state(app.config(t))))
        self.assertEqual(asked["state"]["next"], ["approve"])
        self.assertEqual(asked["state"]["interrupts"][0]["draft"], "re: draft this (1)")
        theirs.invoke(Command(resume="yes"), app.config(t))
        resumed = self.finish(self.run_app(t, "resume", "yes"))
        self.assertEqual(resumed["state"], app.snapshot(theirs.get_state(app.config(t))))
        self.assertEqual(resumed["history"], app.history(theirs, t))
        self.assertEqual(resumed["state"]["messages"][-1][1], "human says yes")

    def test_two_processes_two_threads_at_once(self):
        self.need_processes()
        a, b = self.tid("a"), self.tid("b")
        procs = [self.run_app(a, "turns", 15, 0), self.run_app(b, "turns", 15, 100)]
        got = [self.finish(p) for p in procs]
        for (t, first), result in zip(((a, 0), (b, 100)), got):
            theirs = app.chat_graph(InMemorySaver())
            for i in range(first, first + 15):
                theirs.invoke(app.user(i), app.config(t))
            self.assertEqual(result["history"], app.history(theirs, t))
            ours = app.chat_graph(self.saver())
            self.assertEqual(app.history(ours, t), result["history"])


for _driver in DRIVERS + (["redis_cluster"] if os.environ.get(
        "CONVO_LANGGRAPH_DRIVERS") == "all" else []):
    _name = "Runtime_%s" % _driver
    globals()[_name] = type(_name, (Runtime, LangGraphCase),
                            {"driver": _driver, "__module__": __name__})
