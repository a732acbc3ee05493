#!/usr/bin/env python3
"""An agent that snapshots its state after every step as a convo checkpoint and,
after a restart (a crash, a deploy), resumes from the latest one.

    python3 step_agent.py URL THREAD [--crash-after N]

Each step appends its messages to the thread's log and puts a checkpoint whose
body is the agent's state and whose log_length says which messages belong to
it, so a resumed run sees exactly the conversation of the step it resumes.
--crash-after N exits abruptly after N steps of this run (to try a restart)."""

import argparse
import asyncio
import json
import os
import sys

import convo
from convo.asyncio import Checkpointer

PLAN = ["read the task", "list the sources", "read source 1", "read source 2",
        "compare the sources", "write the answer"]


def work(step, state):
    """One deterministic step: its messages and the new state."""
    done = state["done"] + [PLAN[step]]
    note = "%s (%d words so far)" % (PLAN[step], sum(len(d.split()) for d in done))
    messages = [{"role": "assistant", "content": "step %d: %s" % (step + 1, note)}]
    return messages, {"step": step + 1, "done": done}


async def snapshot(cp, thread, step, parent, state, messages, length):
    """Appends the step's messages and puts its checkpoint in one atomic write
    (one round trip on Redis, PostgreSQL and MongoDB): a crash leaves both or
    neither, and a second process on the same thread gets ConflictError."""
    await cp.checkpoint_put(thread, "step-%04d" % step, parent_id=parent,
                            metadata={"source": "loop", "step": step},
                            body=("json", json.dumps(state).encode()),
                            log_length=length + len(messages),
                            messages=messages, expected_length=length)


async def run(url, thread, crash_after):
    async with await Checkpointer.open(url) as cp:
        latest = await cp.checkpoint_get(thread)
        if latest is None:
            state, parent, length = {"step": 0, "done": []}, None, 0
            print("starting a new run")
        else:
            state = json.loads(latest.body.bytes)
            parent, length = latest.id, latest.log_length
            print("restored step %d from checkpoint %s" % (state["step"], latest.id))
        ran = 0
        while state["step"] < len(PLAN):
            if crash_after is not None and ran == crash_after:
                sys.stdout.flush()
                os._exit(3)  # no cleanup at all, as a killed process
            messages, state = work(state["step"], state)
            await snapshot(cp, thread, state["step"], parent, state, messages, length)
            parent, length = "step-%04d" % state["step"], length + len(messages)
            print(messages[0]["content"])
            ran += 1
        data = await cp.load(thread, limit=length)
        print("finished: %d steps, %d messages" % (state["step"], len(data.messages)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("thread")
    ap.add_argument("--crash-after", type=int)
    args = ap.parse_args()
    asyncio.run(run(args.url, args.thread, args.crash_after))


if __name__ == "__main__":
    main()
