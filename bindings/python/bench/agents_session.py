"""get_items cost of convo.agents.ConvoSession against the SDK's SQLiteSession (both
on a SQLite file), at 100 and 10,000 items: get_items(5) (a tail read) and get_items()
(the whole history, what the Runner reads each turn). Needs openai-agents:

    CONVO_LIBRARY=$BUILD/.libs/libconvo.so PYTHONPATH=bindings/python \\
        VENV/bin/python bindings/python/bench/agents_session.py"""

import asyncio
import shutil
import tempfile
import time

from agents import SQLiteSession

from convo.agents import ConvoSession


async def measure(session, n):
    for i in range(0, n, 1000):
        await session.add_items([{"role": "user" if j % 2 == 0 else "assistant",
                                  "content": "message %d" % (i + j)}
                                 for j in range(min(1000, n - i))])
    for limit, repeat in ((5, 200), (None, 5)):
        await session.get_items(limit)
        start = time.perf_counter()
        for _ in range(repeat):
            await session.get_items(limit)
        yield limit, (time.perf_counter() - start) / repeat * 1000


async def main():
    d = tempfile.mkdtemp(prefix="convo-agents-bench-")
    try:
        for n in (100, 10000):
            for name, make in (
                    ("ConvoSession sqlite", lambda: ConvoSession("s%d" % n, url="sqlite:%s/c.db" % d)),
                    ("SQLiteSession file", lambda: SQLiteSession("s%d" % n, "%s/s.db" % d))):
                session = make()
                async for limit, ms in measure(session, n):
                    print("%-20s items=%6d get_items(%s): %8.3f ms" % (name, n, limit, ms))
                session.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
