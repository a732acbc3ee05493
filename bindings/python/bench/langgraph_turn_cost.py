"""Instructions of a turn as the conversation grows (issue 28), independent of the
machine's load: `build` runs the chatbot of langgraph_runtime.py on ConvoSaver (or on
LangGraph's own saver of the same backend) to --turns turns in a SQLite file; `probe`,
run under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`, opens a
saver on a copy of that file (--saver reference: langgraph_runtime.py's control saver,
the --turns turns played in the process first, not counted), plays --warm turns (the
first reads the conversation fresh), then --measure turns with callgrind collecting
only inside the saver's calls (--collect saver: get_tuple, put, put_writes,
get_delta_channel_history, each outermost call) or inside the whole graph.invoke
(--collect turn). Divide callgrind's total by --measure: the instructions a turn at
that length. Built at 100 and 1,000 turns, the two probes say whether a turn's cost
grows with the history; a whole turn of ConvoSaver less one of the control is what the
saver adds to a turn.

    B=bindings/python/bench; PY=VENV/bin/python
    $PY $B/langgraph_turn_cost.py build --turns 1000 --kind full --file /tmp/t1000.db
    valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \\
        --callgrind-out-file=/tmp/cg.%p $PY $B/langgraph_turn_cost.py probe \\
        --file /tmp/t1000.db --turns 1000 --kind full --collect saver
    callgrind_annotate /tmp/cg.PID | head   # PROGRAM TOTALS / --measure

The probe's messages continue the built conversation (the same seeded words), so turn
t's messages are those of langgraph_runtime.py's turn t. Durability "sync" (the graph
waits for its puts at each step's end). Callgrind's collection is the process's, not a
thread's: --collect saver also counts what LangGraph's main thread runs while a put is
under way on its executor (runs of one build differed by up to half); --collect turn
counts everything, the figure to compare. Outside valgrind the client requests are
no-ops (the probe then just prints the wall ms of its measured turns)."""

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langchain_core.messages import HumanMessage  # noqa: E402

import langgraph_runtime as bench  # noqa: E402

METHODS = ("get_tuple", "put", "put_writes", "get_delta_channel_history")

_HELPER = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
"""


def helper():
    """The client requests, built once into a temporary shared object."""
    folder = tempfile.mkdtemp(prefix="turncost.")
    src, so = os.path.join(folder, "cg.c"), os.path.join(folder, "cg.so")
    with open(src, "w") as f:
        f.write(_HELPER)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
    lib = ctypes.CDLL(so)
    shutil.rmtree(folder)
    return lib


class Collecting:
    """Toggles callgrind's collection on when the first of overlapping calls starts
    and off when the last ends."""

    def __init__(self, lib):
        self.lib, self.depth, self.lock, self.on = lib, 0, threading.Lock(), False

    def enter(self):
        with self.lock:
            self.depth += 1
            if self.depth == 1 and self.on:
                self.lib.cg_toggle()

    def leave(self):
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and self.on:
                self.lib.cg_toggle()

    def wrap(self, obj, name):
        original = getattr(obj, name, None)
        if original is None:
            return

        def wrapped(*a, _f=original, **k):
            self.enter()
            try:
                return _f(*a, **k)
            finally:
                self.leave()
        setattr(obj, name, wrapped)


def backend(saver):
    if saver == "reference":
        store = bench.ReferenceMemory(None, None)
        store.create()
        return store
    return (bench.ConvoSqlite if saver == "convo" else bench.LangGraphSqlite)(None, None)


def build(o):
    convo = bench.Conversation(o.turns, 200)
    store = backend(o.saver)
    store.path = o.file
    saver = store.open()
    try:
        graph = bench.chatbot(o.kind, saver, convo)
        for t in range(o.turns):
            graph.invoke({"messages": [HumanMessage(**convo.turns[t][0])]}, bench.THREAD,
                         durability="sync")
    finally:
        store.close(saver)


def probe(o):
    lib = helper()
    total = o.turns + o.warm + o.measure
    convo = bench.Conversation(total, 200)
    folder = tempfile.mkdtemp(prefix="turncost.")
    try:
        store = backend(o.saver)
        if o.saver == "reference":
            saver = store.open()
            # held in memory: built here, before any instruction is counted
            graph = bench.chatbot(o.kind, saver, convo)
            for t in range(o.turns):
                graph.invoke({"messages": [HumanMessage(**convo.turns[t][0])]}, bench.THREAD,
                             durability="sync")
        else:
            store.path = os.path.join(folder, "copy.db")
            shutil.copyfile(o.file, store.path)
            saver = store.open()
        collecting = Collecting(lib)
        if o.collect == "saver":
            for name in METHODS:
                collecting.wrap(saver, name)
        graph = bench.chatbot(o.kind, saver, convo)

        def turn(t):
            graph.invoke({"messages": [HumanMessage(**convo.turns[t][0])]}, bench.THREAD,
                         durability="sync")
        t = o.turns
        for _ in range(o.warm):
            turn(t)
            t += 1
        lib.cg_start()
        collecting.on = True
        start = time.perf_counter()
        for _ in range(o.measure):
            if o.collect == "turn":
                lib.cg_toggle()
            turn(t)
            if o.collect == "turn":
                lib.cg_toggle()
            t += 1
        wall = (time.perf_counter() - start) * 1000 / o.measure
        collecting.on = False
        state = graph.get_state(bench.THREAD)
        convo.check(o.saver, state.values.get("messages"), t)
        store.close(saver)
        print("turns %d..%d measured, %s %s, %.2f ms a turn (wall)"
              % (o.turns + o.warm + 1, t, o.saver, o.kind, wall))
    finally:
        shutil.rmtree(folder)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("build", "probe"))
    p.add_argument("--file", help="the SQLite file built (not for --saver reference)")
    p.add_argument("--turns", type=int, default=1000, help="the turns built")
    p.add_argument("--kind", default="full", choices=tuple(bench.KINDS))
    p.add_argument("--saver", default="convo", choices=("convo", "langgraph", "reference"),
                   help="reference: langgraph_runtime.py's control saver (keeps LangGraph's "
                   "objects, serializes nothing), its --turns played in the probe first")
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--measure", type=int, default=10)
    p.add_argument("--collect", default="saver", choices=("saver", "turn"))
    o = p.parse_args()
    {"build": build, "probe": probe}[o.mode](o)


if __name__ == "__main__":
    main()
