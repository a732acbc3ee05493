"""A fresh get_state at the end of a long conversation, alternated between processes (issue
28): `build` runs the chatbot of langgraph_runtime.py for --turns turns once on
ConvoSaver and on LangGraph's own saver of the same backend, in a schema (PostgreSQL) or
a file (SQLite) each; `probe` opens a new saver and graph for each of --calls calls and
times graph.get_state (wall, and CPU of the process: the server's CPU is only in the
wall time), after an untimed gc.collect() as langgraph_runtime.py does. A probe is its
own process, so builds of libconvo and versions of the binding can be alternated on the
same stored conversation (CONVO_LIBRARY and PYTHONPATH per probe); `drop` removes what
build made.

    B=bindings/python/bench; PY=VENV/bin/python
    $PY $B/langgraph_fresh.py build --kind delta --url URL [--turns 1000] > built.json
    $PY $B/langgraph_fresh.py probe --saver convo --built built.json [--calls 5]
    $PY $B/langgraph_fresh.py probe --saver langgraph --built built.json
    $PY $B/langgraph_fresh.py drop --built built.json
    valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \\
        $PY $B/langgraph_fresh.py probe --saver convo --built built.json --calls 3 --callgrind

URL: a PostgreSQL URL, or sqlite:FOLDER (the two files are made there)."""

import argparse
import gc
import json
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langchain_core.messages import HumanMessage  # noqa: E402

import langgraph_runtime as bench  # noqa: E402


def backends(built):
    """(convo backend, langgraph backend) of a build description."""
    if built["url"].startswith("sqlite:"):
        convo, lg = bench.ConvoSqlite(None, None), bench.LangGraphSqlite(None, None)
        convo.path, lg.path = built["convo"], built["langgraph"]
    else:
        convo = bench.ConvoPostgres(None, built["url"])
        lg = bench.LangGraphPostgres(None, built["url"])
        convo.schema, lg.schema = built["convo"], built["langgraph"]
    return convo, lg


def build(o):
    if o.url.startswith("sqlite:"):
        folder = o.url[len("sqlite:"):]
        tag = uuid.uuid4().hex[:8]
        built = {"url": o.url, "convo": os.path.join(folder, "convo-%s.db" % tag),
                 "langgraph": os.path.join(folder, "langgraph-%s.db" % tag)}
    else:
        tag = "fresh%d_%s" % (os.getpid(), uuid.uuid4().hex[:8])
        built = {"url": o.url, "convo": "r_convo_" + tag, "langgraph": "r_langgraph_" + tag}
        import psycopg
        with psycopg.connect(o.url, autocommit=True) as c:
            c.execute('CREATE SCHEMA IF NOT EXISTS "%s"' % built["langgraph"])
    built.update(kind=o.kind, turns=o.turns)
    convo = bench.Conversation(o.turns, 200)
    for store in backends(built):
        saver = store.open()
        try:
            graph = bench.chatbot(o.kind, saver, convo)
            for t in range(o.turns):
                graph.invoke({"messages": [HumanMessage(**convo.turns[t][0])]}, bench.THREAD)
        finally:
            store.close(saver)
    print(json.dumps(built))


def probe(o):
    built = json.load(open(o.built))
    store = backends(built)[0 if o.saver == "convo" else 1]
    convo = bench.Conversation(built["turns"], 200)
    walls, cpus, collections, gc_ms, tracked = [], [], [], [], []
    cg = None
    if o.callgrind:
        import langgraph_turn_cost
        cg = langgraph_turn_cost.helper()
        cg.cg_start()
    for call in range(o.calls):
        saver = store.open()
        try:
            graph = bench.chatbot(built["kind"], saver, convo)
            gc.collect()
            got = []
            watch = GcWatch()
            before = len(gc.get_objects())
            gc.callbacks.append(watch)
            counted = cg is not None and call > 0  # the first warms the process up
            if counted:
                cg.cg_toggle()
            try:
                wall, cpu = bench.timed_cpu(lambda: got.append(graph.get_state(bench.THREAD)))
            finally:
                if counted:
                    cg.cg_toggle()
                gc.callbacks.remove(watch)
            tracked.append(len(gc.get_objects()) - before)
            collections.append(watch.counts)
            gc_ms.append(watch.ms)
            convo.check(o.saver, got[0].values.get("messages"), built["turns"])
            walls.append(wall)
            cpus.append(cpu)
        finally:
            store.close(saver)
    print(json.dumps({"saver": o.saver, "label": o.label, "turns": built["turns"],
                      "kind": built["kind"], "wall_ms": statistics.median(walls),
                      "cpu_ms": statistics.median(cpus), "walls": [round(w, 2) for w in walls],
                      "cpus": [round(c, 2) for c in cpus],
                      # collections by generation, their ms, the tracked objects it left
                      "gc": collections, "gc_ms": [round(m, 2) for m in gc_ms],
                      "tracked": tracked}))


class GcWatch:
    """A gc.callbacks entry counting the collections of a call by generation and
    the wall time they took."""

    def __init__(self):
        self.counts, self.ms, self._start = [0, 0, 0], 0.0, 0.0

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.ms += (time.perf_counter() - self._start) * 1000


def drop(o):
    built = json.load(open(o.built))
    if built["url"].startswith("sqlite:"):
        for path in (built["convo"], built["langgraph"]):
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
    else:
        for schema in (built["convo"], built["langgraph"]):
            bench.pg_drop(built["url"], schema)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("build", "probe", "drop"))
    p.add_argument("--url")
    p.add_argument("--kind", default="delta", choices=tuple(bench.KINDS))
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--built", help="the JSON build printed")
    p.add_argument("--saver", default="convo", choices=("convo", "langgraph"))
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--label", default="", help="a name for this probe in its output")
    p.add_argument("--callgrind", action="store_true",
                   help="under valgrind --tool=callgrind --instr-atstart=no "
                   "--collect-atstart=no: count the instructions of every get_state but "
                   "the first (callgrind's total / (calls - 1) is one fresh get_state)")
    o = p.parse_args()
    if o.mode == "build" and not o.url:
        p.error("build needs --url")
    if o.mode != "build" and not o.built:
        p.error("%s needs --built" % o.mode)
    {"build": build, "probe": probe, "drop": drop}[o.mode](o)


if __name__ == "__main__":
    main()
