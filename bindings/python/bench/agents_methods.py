"""Where a Runner turn's session time goes, per method, at turn 100 and turn 1,000 of one
conversation through the OpenAI Agents SDK's real Runner (the agent and script of
agents_runner.py), with a control: right before each get_items / add_items call, a fixed
piece of libconvo work on the same store (a load of a thread that does not exist and a
200-byte append to another thread: O(1) whatever the history), so what grows because of the
Runner's own growing turn (cold caches after it) shows apart from what the session does.
Reports per method the medians of the 50 turns ending at turns 100 and 1,000: the wall time
of the call, the time inside the executor thread (the libconvo calls and the decoding),
and the control's time. A bench, not a test.

    CONVO_LIBRARY=$BUILD/.libs/libconvo.so PYTHONPATH=bindings/python:bindings/python/bench \\
        VENV/bin/python bindings/python/bench/agents_methods.py sqlite:/tmp/x.db [--turns 1000]"""

import argparse
import asyncio
import statistics
import time

from agents import Agent, Runner

import agents_runner as ar
import convo.asyncio
from convo.agents import ConvoSession

WINDOW = 50
MARKS = (100, 1000)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--turns", type=int, default=1000)
    args = ap.parse_args()
    inside = {"s": 0.0}
    real_run = convo.asyncio.Checkpointer._run

    async def timed_run(self, fn, *a, **k):
        def wrapped():
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                inside["s"] += time.perf_counter() - t0
        return await real_run(self, wrapped)
    convo.asyncio.Checkpointer._run = timed_run

    session = ConvoSession("chat", url=args.url)
    calls = {}  # method -> [(turn, wall, inside, control)]
    turn = {"n": 0}
    for name in ("get_items", "add_items"):
        method = getattr(session, name)

        async def call(*a, __method=method, __name=name, **k):
            control = None
            if session.store is not None:
                c0 = time.perf_counter()
                session.store.load_history("no-such-thread")
                session.store.append("control-thread", [{"role": "user", "content": "x" * 200}])
                control = time.perf_counter() - c0
            i0, t0 = inside["s"], time.perf_counter()
            try:
                return await __method(*a, **k)
            finally:
                calls.setdefault(__name, []).append(
                    (turn["n"], time.perf_counter() - t0, inside["s"] - i0, control))
        setattr(session, name, call)

    script = ar.Script(args.turns)
    agent = Agent(name="bench", instructions="Answer.", model=ar.ScriptedModel(script),
                  tools=[ar.lookup])
    print("turn\tmethod\tcalls/turn\twall ms\tin thread ms\tcontrol ms")
    for t in range(args.turns):
        turn["n"] = t + 1
        await Runner.run(agent, script.said[t], session=session)
        if t + 1 in MARKS or t + 1 == args.turns:
            lo = t + 1 - WINDOW
            for name, rows in calls.items():
                per = {}
                for n, wall, ins, ctl in rows:
                    if n > lo:
                        w = per.setdefault(n, [0.0, 0.0, 0.0, 0])
                        w[0] += wall
                        w[1] += ins
                        w[2] += ctl or 0.0
                        w[3] += 1
                vals = list(per.values())
                med = lambda k: statistics.median(v[k] for v in vals) * 1e3
                print("%d\t%s\t%.1f\t%.3f\t%.3f\t%.3f" % (
                    t + 1, name, statistics.mean(v[3] for v in vals), med(0), med(1), med(2)),
                    flush=True)
    session.close()


asyncio.run(main())
