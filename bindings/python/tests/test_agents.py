"""convo.agents.ConvoSession with the OpenAI Agents SDK's real Runner and a scripted
model (no network): every step's history equal to the same script on the SDK's own
SQLiteSession (in memory). Needs `openai-agents` (the convo-store[openai-agents]
extra; tests/python-pip.sh installs it in a venv): skipped without it, unless
CONVO_REQUIRE_AGENTS=1 (python-pip.sh), which makes its absence a failure."""

import asyncio
import copy
import datetime
import json
import math
import os
import pickle
import subprocess
import sys
import time
import unittest

import support

try:
    import agents
    from agents import Agent, Runner, SQLiteSession, Usage, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from openai.types.responses import (ResponseFunctionToolCall, ResponseOutputMessage,
                                        ResponseOutputText)
    import convo.agents
    from convo.agents import ConvoSession, encode_item, decode_item
except ImportError as e:
    if os.environ.get("CONVO_REQUIRE_AGENTS") == "1":
        raise
    raise unittest.SkipTest("openai-agents is not installed (%s)" % e)

import convo

agents.set_tracing_disabled(True)


class Failure(Exception):
    """What the scripted model raises when told to fail (a provider error)."""


def _text_of(item):
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class ScriptedModel(Model):
    """A model whose answer depends only on its input, so that two sessions with
    the same history get the same responses: asked about the weather, it calls the
    get_weather tool (call id from the history's length), given a tool's output it
    reports it, otherwise it answers naming the user's words and how many items it
    was given (what the session returned). fail_on: user texts it raises on, once."""

    def __init__(self, fail_on=()):
        self.fail_on = set(fail_on)

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, *, previous_response_id=None,
                           conversation_id=None, prompt=None, **kwargs):
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = items[-1]
        n = len(items)
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            out = [self._message(n, "tool said: %s" % last.get("output"))]
        else:
            said = _text_of(last) if isinstance(last, dict) else str(last)
            if said in self.fail_on:
                self.fail_on.discard(said)
                raise Failure("scripted failure on %r" % said)
            if said.startswith("weather in "):
                out = [ResponseFunctionToolCall(
                    id="fc_%d" % n, call_id="call_%d" % n, type="function_call",
                    name="get_weather", arguments=json.dumps({"city": said[11:]}),
                    status="completed")]
            else:
                out = [self._message(n, "heard %r with %d items" % (said, n))]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    @staticmethod
    def _message(n, text):
        return ResponseOutputMessage(
            id="msg_%d" % n, type="message", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])])

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests do not stream")


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny in %s" % city


def make_agent(model=None):
    return Agent(name="assistant", instructions="Answer briefly.", model=model or ScriptedModel(),
                 tools=[get_weather])


def turns(count, tag=""):
    """A script: user inputs, every third one asking for the weather (a tool call)."""
    return [("weather in City%s%d" % (tag, i)) if i % 3 == 1 else ("hello %s%d" % (tag, i))
            for i in range(count)]


async def run_turn(agent, text, session):
    return (await Runner.run(agent, text, session=session)).final_output


class AgentsTests:
    def session(self, name="t", store=None, **options):
        s = ConvoSession(self.tid(name), store=store or self.store, **options)
        self.addCleanup(s.close)
        return s

    def reference(self, name="ref"):
        s = SQLiteSession(name)  # the SDK's own, in memory
        self.addCleanup(s.close)
        return s

    def assertSame(self, ours, theirs, limits=(None, 1, 3)):
        async def both(limit):
            return await ours.get_items(limit), await theirs.get_items(limit)
        for limit in limits:
            got, want = asyncio.run(both(limit))
            self.assertEqual(got, want, "get_items(%r)" % limit)

    def test_many_turns_with_tools(self):
        ours, theirs, agent = self.session(), self.reference(), make_agent()
        script = turns(12)
        for text in script:
            a = asyncio.run(run_turn(agent, text, ours))
            b = asyncio.run(run_turn(agent, text, theirs))
            self.assertEqual(a, b)
            self.assertSame(ours, theirs)
        items = asyncio.run(ours.get_items())
        # 12 user messages and answers, and 4 tool calls with their outputs
        self.assertEqual(len(items), 12 * 2 + 4 * 2)
        self.assertIn("with %d items" % (len(items) - 1), _text_of(items[-1]))
        # the log: role-tagged JSON (an item without a role under its type), read back equal
        h = self.store.load_history(ours.session_id)
        roles = [m.role for m in h.messages]
        self.assertEqual(roles[:4], ["user", "assistant", "user", "function_call"])
        self.assertEqual(roles.count("function_call_output"), 4)
        raw = json.loads(h.messages[3].raw)
        self.assertEqual((raw["role"], raw["type"], raw["name"]),
                         ("function_call", "function_call", "get_weather"))
        self.assertEqual([decode_item(m.raw) for m in h.messages], items)

    def test_restart_in_the_middle(self):
        if not self.shared_store:
            self.skipTest("memory: lives in one Store: there is nothing to restart on")
        theirs, agent = self.reference(), make_agent()
        script = turns(10)
        first = ConvoSession(self.tid(), url=self.url)
        for text in script[:5]:
            asyncio.run(run_turn(agent, text, first))
            asyncio.run(run_turn(agent, text, theirs))
        first.close()  # its own Store, closed
        self.assertTrue(first.store.closed)
        with self.assertRaises(convo.InvalidError):
            asyncio.run(first.get_items())
        again = self.session(store=convo.Store(self.url))  # a new Store on the same data
        self.addCleanup(again.store.close)
        self.assertSame(again, theirs)
        for text in script[5:]:
            a = asyncio.run(run_turn(make_agent(), text, again))
            b = asyncio.run(run_turn(agent, text, theirs))
            self.assertEqual(a, b)
            self.assertSame(again, theirs)

    def test_two_processes_on_one_session(self):
        if not self.shared_store:
            self.skipTest("memory: is not shared between processes")
        sid, n = self.tid(), 6
        child = ("import asyncio, sys; sys.path.insert(0, %r); import test_agents as t; "
                 "asyncio.run(t.child_turns(sys.argv[1], sys.argv[2], sys.argv[3], %d))"
                 % (os.path.dirname(os.path.abspath(__file__)), n))
        procs = [subprocess.Popen([sys.executable, "-c", child, self.url, sid, tag],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for tag in ("A", "B")]
        for p in procs:
            out = p.communicate(timeout=300)[0]
            self.assertEqual(p.returncode, 0, out.decode("utf-8", "replace"))
        items = asyncio.run(self.session().get_items())
        users = [_text_of(i) for i in items if i.get("role") == "user"]
        for tag in ("A", "B"):  # every turn of each process kept, in its order
            self.assertEqual([u for u in users if tag in u], turns(n, tag))
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        self.assertEqual(len(outputs), 2 * len([t for t in turns(n) if t.startswith("weather")]))
        self.assertEqual(self.store.load_history(sid).length, len(items))

    def test_retried_run(self):
        ours, theirs = self.session(), self.reference()
        fail = "weather in Rome"
        models = [ScriptedModel(fail_on=[fail]), ScriptedModel(fail_on=[fail])]
        for i, session in enumerate((ours, theirs)):
            agent = make_agent(models[i])
            asyncio.run(run_turn(agent, "hello", session))
            with self.assertRaises(Failure):
                asyncio.run(run_turn(agent, fail, session))
        self.assertSame(ours, theirs)
        for i, session in enumerate((ours, theirs)):  # the retry, then one more turn
            agent = make_agent(models[i])
            asyncio.run(run_turn(agent, fail, session))
            self.assertIn("sunny in Rome", _text_of(asyncio.run(session.get_items(1))[0]))
            asyncio.run(run_turn(agent, "thanks", session))
        self.assertSame(ours, theirs)

    def test_pop_item_and_clear_session(self):
        ours, theirs, agent = self.session(), self.reference(), make_agent()
        for text in turns(3):
            asyncio.run(run_turn(agent, text, ours))
            asyncio.run(run_turn(agent, text, theirs))
        async def pop(s):
            return await s.pop_item()
        for _ in range(2):
            self.assertEqual(asyncio.run(pop(ours)), asyncio.run(pop(theirs)))
            self.assertSame(ours, theirs)
        sid = ours.session_id
        self.store.save_extra(sid, {"title": "weather"})
        before = self.store.load_history(sid)
        asyncio.run(ours.clear_session())
        asyncio.run(theirs.clear_session())
        self.assertSame(ours, theirs)
        after = self.store.load_history(sid)  # still there, with its extra
        self.assertEqual((after.length, after.extra), (0, {"title": "weather"}))
        self.assertEqual(after.generation, before.generation + 1)
        self.assertIsNone(asyncio.run(pop(ours)))
        asyncio.run(ours.clear_session())  # an empty session stays as it is
        for text in turns(2):  # and goes on as the SDK's
            asyncio.run(run_turn(agent, text, ours))
            asyncio.run(run_turn(agent, text, theirs))
        self.assertSame(ours, theirs)
        # an unknown session: nothing to read, pop or clear, and nothing created
        other = self.session("unknown")
        self.assertEqual(asyncio.run(other.get_items()), [])
        self.assertIsNone(asyncio.run(pop(other)))
        asyncio.run(other.clear_session())
        self.assertIsNone(self.store.load(other.session_id))

    def test_pop_loses_no_concurrent_append(self):
        ours = self.session()
        asyncio.run(ours.add_items([{"role": "user", "content": str(i)} for i in range(50)]))
        other = self.session(store=self.open_store() if self.shared_store else self.store)
        async def race():
            pops = [ours.pop_item() for _ in range(20)]
            adds = [other.add_items([{"role": "user", "content": "n%d" % i}]) for i in range(20)]
            return await asyncio.gather(*pops, *adds)
        popped = [p for p in asyncio.run(race())[:20]]
        self.assertTrue(all(p is not None for p in popped))
        left = [i["content"] for i in asyncio.run(ours.get_items())]
        self.assertEqual(len(left), 50)  # 50 + 20 - 20: each pop removed exactly one item
        self.assertEqual(sorted(left + [p["content"] for p in popped]),
                         sorted([str(i) for i in range(50)] + ["n%d" % i for i in range(20)]))

    def test_get_items_sees_every_other_writer(self):
        """get_items() reads only messages past what it read before, and everything
        again when another writer rewrote the tail (the generation moved)."""
        ours = self.session()
        other = self.session(store=self.open_store() if self.shared_store else self.store)
        ref = self.reference()
        loads = []
        real = self.store._history
        def spy(tid, from_seq, limit, tail, *args):
            if tail == 0:  # not the tail reads of pop_item (the same Store on memory:)
                loads.append(from_seq)
            return real(tid, from_seq, limit, tail, *args)
        self.store._history = spy
        def step(*ops):
            for what, *args in ops:
                for s in (other, ref):
                    asyncio.run(getattr(s, what)(*args))
            self.assertEqual(asyncio.run(ours.get_items()), asyncio.run(ref.get_items()), ops)
        item = lambda i: {"role": "user", "content": "m%d" % i}
        step(("add_items", [item(0), item(1)]))          # all: from 0
        step(("add_items", [item(2)]))                   # only the new one: from 2
        step(("pop_item",))                              # shorter: from 3, then all again
        step(("pop_item",), ("add_items", [item(3)]))    # same length, another generation
        step(("add_items", [item(4)]))                   # from 2
        step(("clear_session",))                         # from 3, then all again
        step(("add_items", [item(5), item(6)]))          # from 0 (nothing was there)
        step(("add_items", []))                          # from 2, nothing new
        self.assertEqual(loads, [0, 2, 3, 0, 2, 0, 2, 3, 0, 0, 2])
        del self.store._history

    def test_get_items_at_once_keeps_each_item_once(self):
        """get_items() calls running at once (each in the executor) each give the whole
        history once: the kept items grow in place, under a lock."""
        ours = self.session()
        other = self.session(store=self.open_store() if self.shared_store else self.store)
        item = lambda i: {"role": "user", "content": "m%d" % i}
        real = self.store._history
        def slow(*args):  # every read overlaps the others' (sleep lets them run)
            time.sleep(0.01)
            return real(*args)
        self.store._history = slow
        self.addCleanup(self.store.__dict__.pop, "_history", None)
        async def burst():
            return await asyncio.gather(*[ours.get_items() for _ in range(8)])
        want = []
        for n in range(1, 6):
            batch = [item(len(want) + i) for i in range(n)]
            asyncio.run(other.add_items(batch))
            want.extend(batch)
            for got in asyncio.run(burst()):
                self.assertEqual(got, want)
        self.assertEqual(asyncio.run(ours.get_items()), want)

    def test_items_come_back_equal(self):
        ours = self.session()
        odd = [
            {"type": "message", "role": "user", "content": "plain"},          # A
            {"type": "function_call", "call_id": "c", "arguments": "{}"},      # B
            {"type": "reasoning", "role": "reasoning", "summary": []},         # role == type
            {"role": "user", "content": "x", "$item": 1, "$op": "y"},          # reserved keys
            {"type": "message", "role": "user", "content": "\ud800 lone"},     # lone surrogate
            {"role": "user", "data": b"\x00\xff", "n": float("inf")},          # bytes, inf
            {"role": "user", "nested": {"$tag": 1}, "k": {"\udc00": 2}},       # a "$" key
            {"no": "role or type"},
            {"role": "", "type": ""},
            {"role": "user", "content": "caf\u00e9 \u2603 \U0001F600", "f": -0.0, "i": 2 ** 62},
        ]
        asyncio.run(ours.add_items(odd))
        self.assertEqual(asyncio.run(ours.get_items()), odd)
        self.assertEqual(asyncio.run(ours.get_items(4)), odd[-4:])
        nan = {"role": "user", "v": float("nan")}
        asyncio.run(ours.add_items([nan]))
        self.assertTrue(math.isnan(asyncio.run(ours.get_items(1))[0]["v"]))
        # what `convo load` shows: the role, and the item's own JSON where JSON keeps it
        h = self.store.load_history(ours.session_id)
        self.assertEqual([m.role for m in h.messages][:4],
                         ["user", "function_call", "reasoning", "user"])
        self.assertEqual(h.messages[0].raw, json.dumps(odd[0], separators=(",", ":")).encode())
        self.assertEqual(json.loads(h.messages[1].raw),
                         {"role": "function_call", **odd[1]})
        self.assertIn(b'"$item"', h.messages[2].raw)
        self.assertEqual([m.role for m in h.messages][7:9], ["item", "item"])
        # what the Node binding's ConvoSession writes (its transaction digest, its tags)
        self.assertEqual(decode_item('{"type":"message","role":"user","content":"x","$op":"d"}'),
                         {"type": "message", "role": "user", "content": "x"})
        node = decode_item('{"role":"user","$item":{"role":"user","u":{"$undefined":1},'
                           '"z":{"$number":"-0"},"b":{"$bigint":"12345678901234567890"},'
                           '"d":{"$date":1000},"o":{"$object":[["$k",1]]}}}')
        self.assertEqual(node, {"role": "user", "u": None, "z": -0.0, "b": 12345678901234567890,
                                "d": datetime.datetime(1970, 1, 1, 0, 0, 1,
                                                       tzinfo=datetime.timezone.utc),
                                "o": {"$k": 1}})
        self.assertEqual(math.copysign(1, node["z"]), -1)
        # a tuple comes back a list, as from json (and from SQLiteSession)
        self.assertEqual(decode_item(encode_item({"role": "user", "t": (1, 2)})),
                         {"role": "user", "t": [1, 2]})

    def test_items_are_read_only_and_shared(self):
        """get_items() hands out read-only items, the same objects at every call: a
        change raises TypeError and changes nothing; a deep copy is a plain dict."""
        ours, other = self.session(), self.session()
        items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
                 {"type": "function_call", "call_id": "c", "arguments": "{}", "meta": {"k": [1]}},
                 {"role": "user", "data": b"\x00", "n": float("inf"), "list": [[1], {"x": 2}]}]
        asyncio.run(ours.add_items(items))
        tail = asyncio.run(ours.get_items(2))  # (a tail read: nothing kept before)
        first = asyncio.run(ours.get_items())
        self.assertEqual(first, items)
        changes = [lambda: first[0].__setitem__("role", "x"), lambda: first[0].pop("role"),
                   lambda: first[0]["content"].append({}), lambda: first[0]["content"][0].update(text="b"),
                   lambda: first[1]["meta"]["k"].extend([2]), lambda: first[1].setdefault("new", 1),
                   lambda: first[2]["list"][0].__setitem__(0, 9), lambda: first[2]["list"].sort(),
                   lambda: first[1].clear(), lambda: first[0]["content"].__delitem__(0),
                   lambda: tail[0].__setitem__("x", 1), lambda: tail[1]["list"][1].popitem()]
        for i, change in enumerate(changes):
            with self.assertRaises(TypeError, msg="change %d" % i):
                change()
        with self.assertRaises(TypeError):
            first[1]["meta"] |= {"x": 1}
        first.append({"role": "user", "content": "mine"})  # the list is the caller's
        again = asyncio.run(ours.get_items())
        self.assertEqual(again, items)
        self.assertIs(again[0], first[0])
        self.assertEqual(asyncio.run(other.get_items()), items)
        self.assertEqual(json.loads(json.dumps(again[:2])), items[:2])
        mine = copy.deepcopy(again[0])
        mine["content"][0]["text"] = "b"
        self.assertIs(type(mine), dict)
        self.assertEqual(asyncio.run(ours.get_items()), items)
        self.assertIs(type(copy.copy(again[1])), dict)
        self.assertIs(type(pickle.loads(pickle.dumps(again[1]))["meta"]["k"]), list)

    def test_mutable_items(self):
        """mutable_items=True: new dicts at every call; changing them changes neither the
        next call's nor another session's."""
        ours, other = self.session(mutable_items=True), self.session(mutable_items=True)
        items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
                 {"type": "function_call", "call_id": "c", "arguments": "{}", "meta": {"k": [1]}}]
        asyncio.run(ours.add_items(items))
        for got in (asyncio.run(ours.get_items(1)), asyncio.run(ours.get_items())):
            got[-1]["meta"]["k"].append(2)
            got[-1]["new"] = 1
            got[0].pop("type")
        first = asyncio.run(ours.get_items())
        self.assertEqual(first, items)
        self.assertIsNot(asyncio.run(ours.get_items())[0], first[0])
        self.assertEqual(asyncio.run(other.get_items()), items)
        self.assertEqual(asyncio.run(self.session().get_items()), items)
        with self.assertRaises(convo.InvalidError):
            ConvoSession(self.tid(), store=self.store, mutable_items=1)

    def test_runner_with_a_callback_changing_history(self):
        """A session_input_callback that changes the history it is given in place: the
        Runner gives it deep copies (plain dicts), so it works on the default read-only
        items, as on SQLiteSession, and the stored history stays as it was."""
        def redact(history, new_input):
            for item in history:
                if item.get("role") == "user":
                    item["content"] = "[redacted]"
            return history + new_input
        ours, theirs, agent = self.session(), self.reference(), make_agent()
        script = turns(6)
        for text in script:
            a = asyncio.run(Runner.run(agent, text, session=ours,
                                       run_config=agents.RunConfig(session_input_callback=redact)))
            b = asyncio.run(Runner.run(agent, text, session=theirs,
                                       run_config=agents.RunConfig(session_input_callback=redact)))
            self.assertEqual(a.final_output, b.final_output)
            self.assertSame(ours, theirs)
        users = [i["content"] for i in asyncio.run(ours.get_items()) if i.get("role") == "user"]
        self.assertEqual(users, script)

    def test_bad_input_writes_nothing(self):
        ours = self.session()
        for bad in ([object()], [{"role": "user", "x": object()}], [{1: "a"}],
                    [{"role": "user", "k": {1: "a"}}], {"role": "user"}, "text", [None]):
            with self.assertRaises(convo.InvalidError, msg=repr(bad)):
                asyncio.run(ours.add_items(bad))
        asyncio.run(ours.add_items([]))
        self.assertIsNone(self.store.load(ours.session_id))
        with self.assertRaises(convo.InvalidError):
            asyncio.run(ours.get_items("3"))
        with self.assertRaises(convo.CorruptError):
            decode_item({"role": "user", "$item": {"$nope": 1}})
        with self.assertRaises(convo.InvalidError):
            ConvoSession("s")  # neither url nor store
        with self.assertRaises(convo.InvalidError):
            ConvoSession("s", url="memory:", store=self.store)
        with self.assertRaises(convo.InvalidError):
            ConvoSession("", store=self.store)
        with self.assertRaises(convo.InvalidError):
            ConvoSession("s", store=self.store, roles=["user"])

    def test_limits_and_settings(self):
        ours = ConvoSession(self.tid(), store=self.store,
                            session_settings=agents.SessionSettings(limit=2))
        self.addCleanup(ours.close)
        theirs = SQLiteSession("ref", session_settings=agents.SessionSettings(limit=2))
        self.addCleanup(theirs.close)
        items = [{"role": "user", "content": str(i)} for i in range(5)]
        for s in (ours, theirs):
            asyncio.run(s.add_items(items))
        self.assertSame(ours, theirs, limits=(None, 0, 1, 4, 9, -1))
        self.assertEqual(len(asyncio.run(ours.get_items())), 2)

    def test_url_session_owns_its_store(self):
        if not self.shared_store:
            self.skipTest("memory: is one Store per open")
        async def go():
            async with ConvoSession(self.tid(), url=self.url) as s:
                await s.add_items([{"role": "user", "content": "hi"}])
                return s
        s = asyncio.run(go())
        self.assertTrue(s.store.closed)
        self.assertEqual(self.store.load(self.tid())[0], [{"role": "user", "content": "hi"}])
        given = self.session()
        given.close()
        self.assertFalse(self.store.closed)  # a Store it was given stays open

    def test_list_sessions(self):
        """A user's sessions newest activity first (the thread index), each with its
        extra and last item; the same from list and alist, on a Store or a Checkpointer."""
        user = "user:" + self.tid()
        agent = make_agent()
        def session(name, **extra):
            s = ConvoSession(self.tid(name), store=self.store, extra={"user_id": user, **extra})
            self.addCleanup(s.close)
            return s
        a, b, c = session("a", title="A"), session("b", title="B"), session("c")
        other = ConvoSession(self.tid("other"), store=self.store, extra={"user_id": "someone"})
        self.addCleanup(other.close)
        self.assertIsNone(asyncio.run(a.get_extra()))  # nothing written before the first turn
        for s in (a, b, other, c):
            asyncio.run(run_turn(agent, "hello", s))
        asyncio.run(run_turn(agent, "weather in Oslo", a))  # a is now the most recent
        self.assertEqual(asyncio.run(a.get_extra()), {"user_id": user, "title": "A"})
        page = ConvoSession.list(self.store, where={"user_id": user}, with_last_item=True)
        self.assertIsNone(page.next)
        self.assertEqual([i.session_id for i in page.sessions], [a.session_id, c.session_id,
                                                                  b.session_id])
        self.assertEqual([i.extra.get("title") for i in page.sessions], ["A", None, "B"])
        for info, s in zip(page.sessions, (a, c, b)):
            items = asyncio.run(s.get_items())
            self.assertEqual((info.length, info.last_item), (len(items), items[-1]))
            self.assertLessEqual(info.created_at, info.updated_at)
        self.assertEqual(page.sessions[0].last_item["content"][0]["text"],
                         "tool said: sunny in Oslo")
        # one per page, by the cursor; without with_last_item, no item is read
        seen, after = [], None
        while True:
            p = ConvoSession.list(self.store, where={"user_id": user}, limit=1, after=after)
            seen += [(i.session_id, i.last_item) for i in p.sessions]
            if p.next is None:
                break
            after = p.next
        self.assertEqual(seen, [(i.session_id, None) for i in page.sessions])
        # alist, on the Store and on a Checkpointer: the same page
        cp = convo.asyncio.Checkpointer(self.store)
        self.addCleanup(cp.close)
        for store in (self.store, cp):
            got = asyncio.run(ConvoSession.alist(store, where={"user_id": user},
                                                 with_last_item=True))
            self.assertEqual(got, page)
        self.assertEqual(ConvoSession.list(cp, where={"user_id": user}, with_last_item=True), page)
        # other orders; a cleared session stays listed (its extra kept), without items
        created = ConvoSession.list(self.store, where={"user_id": user}, order="created")
        self.assertEqual([i.session_id for i in created.sessions],
                         [c.session_id, b.session_id, a.session_id])
        asyncio.run(b.clear_session())
        first = ConvoSession.list(self.store, where={"user_id": user}, limit=1,
                                  with_last_item=True).sessions[0]
        self.assertEqual((first.session_id, first.length, first.last_item, first.extra["title"]),
                         (b.session_id, 0, None, "B"))
        asyncio.run(b.save_extra({"title": "renamed"}))
        self.assertEqual(asyncio.run(b.get_extra()), {"user_id": user, "title": "renamed"})
        # the extra is merged once per instance, before its first add_items
        asyncio.run(b.add_items([{"role": "user", "content": "again"}]))
        self.assertEqual(asyncio.run(b.get_extra())["title"], "renamed")
        asyncio.run(self.session("d").save_extra({"user_id": user}))  # listed without items
        self.assertEqual(len(ConvoSession.list(self.store, where={"user_id": user}).sessions), 4)
        self.assertEqual(ConvoSession.list(self.store, where={"user_id": "nobody"}),
                         convo.agents.SessionPage([], None))

    def test_list_sessions_bad_arguments(self):
        for bad in (dict(where=["user_id"]), dict(limit=0), dict(limit=10001),
                    dict(order="newest"), dict(reverse=1), dict(with_last_item="yes"),
                    dict(after="not a cursor")):
            with self.assertRaises(convo.InvalidError, msg=repr(bad)):
                ConvoSession.list(self.store, **bad)
            with self.assertRaises(convo.InvalidError, msg=repr(bad)):
                asyncio.run(ConvoSession.alist(self.store, **bad))
        for bad in (None, self.url, {"store": self.store}):
            with self.assertRaises(convo.InvalidError):
                ConvoSession.list(bad)
            with self.assertRaises(convo.InvalidError):
                asyncio.run(ConvoSession.alist(bad))
        with self.assertRaises(convo.InvalidError):
            ConvoSession("s", store=self.store, extra=[("user_id", "u")])
        s = self.session()
        with self.assertRaises(convo.InvalidError):
            asyncio.run(s.save_extra("title"))
        self.assertIsNone(self.store.load(s.session_id))  # nothing written


async def child_turns(url, sid, tag, n):
    """A process's part of test_two_processes_on_one_session."""
    session = ConvoSession(sid, url=url)
    agent = make_agent()
    for text in turns(n, tag):
        await run_turn(agent, text, session)
        await asyncio.sleep(0)
    await session.aclose()


support.per_driver(globals(), AgentsTests)
