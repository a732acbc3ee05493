#!/usr/bin/env python3
"""chat_agent.py — a small chat agent on convo.asyncio.Checkpointer that picks
its conversation up again after a restart. Usage: chat_agent.py [URL] [THREAD]
(URL defaults to $CONVO_URL, else sqlite:chat_agent.db; THREAD to "chat").
Reads user lines on stdin and answers each with a canned reply."""

import asyncio
import os
import sys

import convo
from convo.asyncio import Checkpointer

CANNED = {
    "hello": "Hello! Tell me anything; I will remember it.",
    "bye": "Goodbye. Start me again and we carry on from here.",
}


def reply_to(line, turn):
    return CANNED.get(line.lower(), "You said: %s (turn %d)" % (line, turn))


async def restore(cp, thread):
    """Loads the thread, prints it, and returns (message count, turns)."""
    data = await cp.load(thread)
    if data is None:  # a new conversation
        print("restored 0 messages")
        return 0, 0
    print("restored %d messages" % len(data.messages))
    for m in data.messages:
        print("  %s: %s" % (m["role"], m.get("content", "")))
    return len(data.messages), data.extra.get("turns", 0)


async def exchange(cp, thread, line, length, turns):
    """Stores the user's line and the reply as one batch, only if nobody else
    wrote since we last looked (expected_length); on a conflict, catches up
    and tries again. Returns the new (length, turns)."""
    for _ in range(3):
        reply = reply_to(line, turns + 1)
        batch = [{"role": "user", "content": line}, {"role": "assistant", "content": reply}]
        try:
            res = await cp.append(thread, batch, expected_length=length)
        except convo.ConflictError as e:
            print("chat_agent: %s; reloading" % e, file=sys.stderr)
            length, turns = await restore(cp, thread)
            continue
        await cp.save_extra(thread, {"turns": turns + 1, "last_user_line": line})
        print("assistant: %s" % reply)
        return res.first_seq + res.count, turns + 1
    raise convo.ConflictError(convo.ECONFLICT, "the thread kept changing; gave up")


async def main(argv):
    url = argv[1] if len(argv) > 1 else os.environ.get("CONVO_URL", "sqlite:chat_agent.db")
    thread = argv[2] if len(argv) > 2 else "chat"
    loop = asyncio.get_running_loop()
    async with await Checkpointer.open(url) as cp:
        length, turns = await restore(cp, thread)
        while True:
            # stdin is read off the event loop too
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return 0
            line = line.strip()
            if line:
                length, turns = await exchange(cp, thread, line, length, turns)


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv)))
    except convo.ConvoError as e:
        print("chat_agent: %s" % e, file=sys.stderr)
        sys.exit(1)
