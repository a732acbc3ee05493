"""A chat of TURNS turns through the OpenAI Agents SDK's real Runner (a scripted model, no
network) on convo.agents.ConvoSession (memory:, a SQLite file, Redis, PostgreSQL) and on the
SDK's own SQLiteSession (a file) and RedisSession (the same redis-server, when the `redis`
package is installed). Every 10th turn the model calls a tool first (a turn adds 4 items:
user, function_call, function_call_output, assistant; else 2), 200-byte texts of random
words. The Runner reads the whole history each turn (get_items() with no limit: the SDK's
default SessionSettings) and adds the turn's items.

Per turn it records the Runner's whole turn and the time spent inside the session's own
methods (get_items, add_items, pop_item, clear_session: each timed from its call to its
return, the adapter's share of the turn), and reports both at turn 100 and at the last turn
(medians of the 50 turns ending there) and their ratio, then get_items() from a new session
object (a new Store on the same URL for convo) and the bytes stored. Every session must give
back the same conversation. "convo SQLite copies": ConvoSession(mutable_items=True), whose
get_items() decodes every item again at each call instead of handing out the read-only
items it keeps. A bench, not a test.

    CONVO_LIBRARY=$BUILD/.libs/libconvo.so PYTHONPATH=bindings/python \\
        VENV/bin/python bindings/python/bench/agents_runner.py [--turns 1000] [--only NAME,...]

VENV: a venv with `pip install 'convo-store[openai-agents]' redis` (or PYTHONPATH as above
with openai-agents installed). Redis and PostgreSQL come from CONVO_TEST_REDIS_URL and
CONVO_TEST_POSTGRES_URL (skipped when unset)."""

import argparse
import asyncio
import functools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid

import agents
from agents import Agent, Runner, SQLiteSession, Usage, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import (ResponseFunctionToolCall, ResponseOutputMessage,
                                    ResponseOutputText)

import convo
import convo.asyncio
from convo.agents import ConvoSession

agents.set_tracing_disabled(True)
METHODS = ("get_items", "add_items", "pop_item", "clear_session")
PAYLOAD = 200
WINDOW = 50
EARLY = 100

_rand = random.Random(42)


def words(n):
    out = []
    size = 0
    while size < n:
        w = "".join(chr(97 + _rand.randrange(26)) for _ in range(_rand.randrange(2, 10)))
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


class Script:
    """What the user says each turn and what the model answers."""

    def __init__(self, turns):
        self.said = ["lookup %d" % t if t % 10 == 9 else words(PAYLOAD) for t in range(turns)]
        self.answers = [words(PAYLOAD) for _ in range(turns)]


class ScriptedModel(Model):
    """Answers turn t with script.answers[t]; on a "lookup" turn calls the tool first."""

    def __init__(self, script):
        self.script, self.turn = script, 0

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **kwargs):
        n = len(input) if isinstance(input, list) else 1
        last = input[-1] if isinstance(input, list) else {}
        said = self.script.said[self.turn]
        if said.startswith("lookup") and last.get("type") != "function_call_output":
            out = [ResponseFunctionToolCall(id="fc_%d" % n, call_id="call_%d" % n,
                                            type="function_call", name="lookup",
                                            arguments=json.dumps({"q": said}),
                                            status="completed")]
        else:
            out = [ResponseOutputMessage(
                id="msg_%d" % n, type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", annotations=[],
                                            text=self.script.answers[self.turn])])]
            self.turn += 1
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


@function_tool
def lookup(q: str) -> str:
    """Looks a thing up."""
    return "found %s: %s" % (q, "x" * (PAYLOAD // 2))


def timed(session, spent):
    """Times the session's own methods: spent["s"] adds up their seconds."""
    for name in METHODS:
        method = getattr(session, name)

        @functools.wraps(method)
        async def call(*args, __method=method, **kwargs):
            start = time.perf_counter()
            try:
                return await __method(*args, **kwargs)
            finally:
                spent["s"] += time.perf_counter() - start
        setattr(session, name, call)
    return session


def convo_spec(name, url, mutable_items=False):
    def make():
        return ConvoSession("chat", url=url, mutable_items=mutable_items)

    def reopen():  # its Store opened (connected) before the clock starts, as the SDK's are
        cp = convo.asyncio.Checkpointer(url)
        return ConvoSession("chat", store=cp, mutable_items=mutable_items), cp.aclose
    return name, make, (None if url == "memory:" else reopen)


def sessions(d, redis_url, postgres_url, tag):
    def sdk(make):
        return lambda: (lambda s: (s, functools.partial(close, s)))(make())
    sqlite = lambda: SQLiteSession("chat", os.path.join(d, "sdk.db"))
    out = [("SQLiteSession file", sqlite, sdk(sqlite)),
           convo_spec("convo memory:", "memory:"),
           convo_spec("convo SQLite", "sqlite:" + os.path.join(d, "convo.db")),
           convo_spec("convo SQLite copies", "sqlite:" + os.path.join(d, "copies.db"), True)]
    if redis_url:
        try:
            from agents.extensions.memory import RedisSession
            make = lambda: RedisSession.from_url("chat", url=redis_url,
                                                 key_prefix="agb%s:sdk" % tag)
            out.append(("RedisSession", make, sdk(make)))
        except ImportError as e:
            print("RedisSession skipped: %s" % e, file=sys.stderr)
        sep = "&" if "?" in redis_url else "?"
        out.append(convo_spec("convo Redis", "%s%sprefix=agb%s" % (redis_url, sep, tag)))
    if postgres_url:
        sep = "&" if "?" in postgres_url else "?"
        out.append(convo_spec("convo PostgreSQL", "%s%sschema=agb%s" % (postgres_url, sep, tag)))
    return out


async def close(session):
    done = session.aclose() if isinstance(session, ConvoSession) else session.close()
    if done is not None:
        await done


async def run_one(script, turns, make, reopen):
    session = make()
    spent = {"s": 0.0}
    timed(session, spent)
    agent = Agent(name="bench", instructions="Answer.", model=ScriptedModel(script),
                  tools=[lookup])
    turn_ms, session_ms = [], []
    try:
        for t in range(turns):
            spent["s"] = 0.0
            start = time.perf_counter()
            await Runner.run(agent, script.said[t], session=session)
            turn_ms.append((time.perf_counter() - start) * 1000)
            session_ms.append(spent["s"] * 1000)
        items = await session.get_items()
    finally:
        await close(session)
    cold = None
    if reopen is not None:
        again, done = reopen()
        try:
            start = time.perf_counter()
            cold_items = await again.get_items()
            cold = (time.perf_counter() - start) * 1000
            if cold_items != items:
                raise SystemExit("a new session read another conversation")
        finally:
            await done()
    return turn_ms, session_ms, items, cold


def at(ms, turn):
    return statistics.median(ms[max(0, turn - WINDOW):turn])


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    script = Script(args.turns)
    d = tempfile.mkdtemp(prefix="convo-agents-runner-")
    tag = uuid.uuid4().hex[:8]
    early = min(EARLY, args.turns)
    reference = None
    only = set(args.only.split(",")) if args.only else None
    try:
        print("%d turns through the Runner, %d-byte texts; ms: medians of the %d turns ending "
              "at the turn" % (args.turns, PAYLOAD, WINDOW))
        print("session\titems\tturn ms @%d\tturn ms @%d\tturn ratio\tsession ms @%d\t"
              "session ms @%d\tsession ratio\tnew session get_items() ms" % (
                  early, args.turns, early, args.turns))
        for name, make, reopen in sessions(d, os.environ.get("CONVO_TEST_REDIS_URL"),
                                           os.environ.get("CONVO_TEST_POSTGRES_URL"), tag):
            if only and name not in only:
                continue
            print("agents_runner: %s..." % name, file=sys.stderr)
            turn_ms, session_ms, items, cold = await run_one(script, args.turns, make, reopen)
            if reference is None:
                reference = items
            elif items != reference:
                raise SystemExit("%s: not the conversation the first session kept" % name)
            t0, t1 = at(turn_ms, early), at(turn_ms, args.turns)
            s0, s1 = at(session_ms, early), at(session_ms, args.turns)
            print("%s\t%d\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%.2f\t%s" % (
                name, len(items), t0, t1, t1 / t0, s0, s1, s1 / s0,
                "-" if cold is None else "%.2f" % cold), flush=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
        url = os.environ.get("CONVO_TEST_REDIS_URL")
        if url and (not only or "RedisSession" in only):
            try:
                import redis
                r = redis.Redis.from_url(url)
                for k in r.scan_iter("agb%s:*" % tag):
                    r.delete(k)
            except ImportError:
                pass
        for var, param in (("CONVO_TEST_REDIS_URL", "prefix"), ("CONVO_TEST_POSTGRES_URL", "schema")):
            base = os.environ.get(var)
            if base:
                sep = "&" if "?" in base else "?"
                with convo.Store("%s%s%s=agb%s" % (base, sep, param, tag)) as s:
                    for t in s.thread_ids():
                        s.delete(t)


if __name__ == "__main__":
    asyncio.run(main())
