"""The session's own time in a Runner turn at two history lengths measured at the same time:
sessions prefilled with the Runner's own items (the agent and script of agents_runner.py, 10
turns of it repeated) to --sizes items (default 220 and 2,200: turn 100 and turn 1,000 of that
conversation), then --turns rounds of one Runner turn on each session in turn (the order
rotating each round), so that the load of a shared machine falls on every length alike.
Redis: CONVO_TEST_REDIS_URL (convo Redis skipped when unset). Reports per session and length the median time inside the session's methods (get_items,
add_items, ...: each timed from its call to its return) and of the whole turn, and the ratio
of the longest length to the shortest. A bench, not a test.

    CONVO_LIBRARY=$BUILD/.libs/libconvo.so PYTHONPATH=bindings/python \\
        VENV/bin/python bindings/python/bench/agents_interleaved.py [--turns 30] [--sizes 220,2200]"""

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time

from agents import Agent, Runner, SQLiteSession

import agents_runner as ar
from convo.agents import ConvoSession


async def unit_items(script):
    """The items 10 Runner turns store (one of them with a tool call)."""
    scratch = SQLiteSession("unit")
    agent = Agent(name="bench", instructions="Answer.", model=ar.ScriptedModel(script),
                  tools=[ar.lookup])
    for t in range(10):
        await Runner.run(agent, script.said[t], session=scratch)
    items = await scratch.get_items()
    scratch.close()
    return items


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--sizes", default="220,2200")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    script = ar.Script(10 + args.turns)
    unit = await unit_items(script)
    d = tempfile.mkdtemp(prefix="convo-agents-interleaved-")
    kinds = [("SQLiteSession file", lambda n: SQLiteSession("chat", os.path.join(d, "sdk%d.db" % n))),
             ("convo SQLite", lambda n: ConvoSession("chat", url="sqlite:" + os.path.join(d, "c%d.db" % n))),
             ("convo SQLite copies", lambda n: ConvoSession(
                 "chat", url="sqlite:" + os.path.join(d, "m%d.db" % n), mutable_items=True))]
    redis_url = os.environ.get("CONVO_TEST_REDIS_URL")
    if redis_url:  # a prefix of its own per run and length
        tag = "agi%d" % os.getpid()
        kinds.append(("convo Redis", lambda n: ConvoSession("chat", url="%s%sprefix=%sn%d" % (
            redis_url, "&" if "?" in redis_url else "?", tag, n))))
    runs = []
    try:
        for name, make in kinds:
            for n in sizes:
                session = make(n)
                items = (unit * (n // len(unit) + 1))[:n]
                for i in range(0, n, 500):
                    await session.add_items(items[i:i + 500])
                await session.get_items()  # a first read, as after the turns before
                spent = {"s": 0.0}
                model = ar.ScriptedModel(script)
                model.turn = 10
                agent = Agent(name="bench", instructions="Answer.", model=model, tools=[ar.lookup])
                runs.append({"name": name, "n": n, "session": ar.timed(session, spent),
                             "spent": spent, "agent": agent, "turn_ms": [], "session_ms": []})
        print("uptime: %s" % os.popen("uptime").read().strip())
        for t in range(args.turns):
            for k in range(len(runs)):
                r = runs[(k + t) % len(runs)]
                r["spent"]["s"] = 0.0
                start = time.perf_counter()
                await Runner.run(r["agent"], script.said[10 + t], session=r["session"])
                r["turn_ms"].append((time.perf_counter() - start) * 1000)
                r["session_ms"].append(r["spent"]["s"] * 1000)
        print("uptime: %s" % os.popen("uptime").read().strip())
        print("session\titems at start\tturn ms\tsession ms\tsession ms / at %d" % sizes[0])
        base = {}
        for r in runs:
            s = statistics.median(r["session_ms"])
            base.setdefault(r["name"], s)
            print("%s\t%d\t%.1f\t%.3f\t%.2f" % (r["name"], r["n"], statistics.median(r["turn_ms"]),
                                                s, s / base[r["name"]]))
    finally:
        for r in runs:
            if isinstance(r["session"], ConvoSession):
                await r["session"].clear_session()
            done = r["session"].close()
            if asyncio.iscoroutine(done):
                await done
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
