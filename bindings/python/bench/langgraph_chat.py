#!/usr/bin/env python3
"""langgraph_chat.py — LangGraph's real runtime on a checkpointer: a StateGraph
chatbot over MessagesState (graph.invoke per turn, a node answering with a
200-byte AIMessage to a 200-byte user message), N turns, on ConvoSaver (SQLite)
and, when langgraph-checkpoint-sqlite is installed, LangGraph's SqliteSaver, in
one run. Prints per saver: turns/s, saver time per turn (put + put_writes) around
turn 100 and around the last turn, get_state ms at the end, bytes on disk / raw
message content.

    pip install 'convo-store[langgraph]' langgraph langgraph-checkpoint-sqlite
    python3 bindings/python/bench/langgraph_chat.py --turns 1000"""

import argparse
import os
import sqlite3
import tempfile
import time

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from convo.langgraph import ConvoSaver

TEXT = ("convo keeps conversation threads safe and fast; this sentence pads a message "
        "of the benchmark to two hundred bytes of content so that sizes compare to the "
        "Node bench and the issue's figures: abcdefghijklmnopqrstuvwxyz0123")[:200]


def answer(state):
    return {"messages": [AIMessage(TEXT)]}


class Timed:
    """Wraps a saver's put and put_writes to sum their time per turn."""

    def __init__(self, saver):
        self.saver, self.spent = saver, 0.0
        for name in ("put", "put_writes"):
            setattr(saver, name, self._wrap(getattr(saver, name)))

    def _wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - t0
        return timed


def disk_bytes(path):
    """The database's size once its WAL is folded in (the saver closed)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def run(name, saver, path, turns, window):
    b = StateGraph(MessagesState)
    b.add_node("answer", answer)
    b.add_edge(START, "answer")
    graph = b.compile(checkpointer=saver)
    timed = Timed(saver)
    config = {"configurable": {"thread_id": "bench"}}
    per_turn, raw = [], 0
    start = time.perf_counter()
    for i in range(turns):
        before = timed.spent
        graph.invoke({"messages": [HumanMessage(TEXT)]}, config, durability="sync")
        per_turn.append(timed.spent - before)
        raw += 2 * len(TEXT)
    elapsed = time.perf_counter() - start
    t0 = time.perf_counter()
    state = graph.get_state(config)
    get_ms = (time.perf_counter() - t0) * 1000
    assert len(state.values["messages"]) == 2 * turns
    around = lambda k: 1000 * sum(per_turn[max(0, k - window):k]) / len(per_turn[max(0, k - window):k])
    return "%-20s %6.1f turns/s  saver ms/turn @%d %.2f  @%d %.2f  get_state %.1f ms" % (
        name, turns / elapsed, min(100, turns), around(min(100, turns)), turns,
        around(turns), get_ms), raw


def report(line, raw, path):
    size = disk_bytes(path)
    print("%s  %d bytes = %.1fx raw content (%d)" % (line, size, size / raw, raw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--window", type=int, default=20, help="turns averaged around a turn")
    ap.add_argument("--savers", default="convo,sqlite", help="which savers: convo, sqlite")
    args = ap.parse_args()
    savers = args.savers.split(",")
    with tempfile.TemporaryDirectory() as d:
        if "convo" in savers:
            path = os.path.join(d, "convo.db")
            with ConvoSaver.from_conn_string("sqlite:" + path) as saver:
                line, raw = run("ConvoSaver (SQLite)", saver, path, args.turns, args.window)
            report(line, raw, path)
        if "sqlite" in savers:
            try:
                from langgraph.checkpoint.sqlite import SqliteSaver
            except ImportError:
                print("langgraph-checkpoint-sqlite is not installed: SqliteSaver not measured")
                return
            path = os.path.join(d, "langgraph.db")
            conn = sqlite3.connect(path, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            line, raw = run("SqliteSaver", SqliteSaver(conn), path, args.turns, args.window)
            conn.close()
            report(line, raw, path)


if __name__ == "__main__":
    main()
