"""How a read checks the held messages it hands out (convo/_langgraph_cache.py): a held
pydantic message is watched through its __pydantic_fields_set__ (a field assigned marks
it changed), its empty lists and dicts are compared with a shared empty and the others
with their copies; a class whose assignments pydantic does not report (validate_assignment)
is compared field by field. Each way must see a message changed in place, and none may
see one that was not. The MessageCache alone, with pydantic models as messages.

Skipped without pydantic, failed under CONVO_REQUIRE_LANGGRAPH=1."""

import copy
import os
import pickle
import unittest

import convo

try:
    from pydantic import BaseModel, ConfigDict
    from convo import _langgraph_cache as cache
    MISSING = None
except ImportError as e:  # pragma: no cover - depends on what is installed
    MISSING = str(e)

if MISSING is None:
    class Message(BaseModel):
        model_config = ConfigDict(extra="allow")
        type: str = "ai"
        content: object = ""
        id: object = None
        tool_calls: list = []
        additional_kwargs: dict = {}

    class Validated(Message):
        model_config = ConfigDict(extra="allow", validate_assignment=True)


def revive_with(cls):
    """A reviver (as from_log_texts) building cls from a text "content|kind"."""
    def revive(serde, texts, fields=None):
        out = []
        for t in texts:
            content, _, kind = t.decode().partition("|")
            m = cls(content=content, id="id-" + content)
            if kind == "tools":
                m.tool_calls = [{"name": "f", "args": {"a": 1}}]
                m.additional_kwargs = {"k": {"v": [1]}}
            out.append(m)
        return out
    return revive


@unittest.skipIf(MISSING is not None and os.environ.get("CONVO_REQUIRE_LANGGRAPH") != "1",
                 "pydantic is not installed: %s" % MISSING)
class Watch(unittest.TestCase):
    TEXTS = [b"a", b"b|tools", b"c", b"d|tools", b"e"]

    def read(self, c, revive, known=True):
        """A read of the five messages: those held left out (text None), as the
        library gives them with `known`."""
        held = c.known("t")
        k = held[1] if (held and known) else 0
        texts = [None] * k + self.TEXTS[k:]
        return c.reader("t", 1, 7).items(None, convo.Items(texts, list(range(5))), revive)

    def cached(self, cls):
        c = cache.MessageCache(100)
        revive = revive_with(cls)
        first = self.read(c, revive)
        self.assertEqual(c.known("t"), (1, 5, 7))
        again = self.read(c, revive)
        self.assertTrue(all(x is y for x, y in zip(first, again)))
        return c, revive, first

    def changed(self, c, revive, at):
        """The next read finds seq `at` changed: it raises Missing(at) (the caller
        reads again without `known`), and the read without it revives a new one."""
        with self.assertRaises(cache.Missing) as e:
            self.read(c, revive)
        self.assertEqual(e.exception.args[0], at)
        return self.read(c, revive, known=False)

    def test_held_messages_are_watched(self):
        c, revive, held = self.cached(Message)
        self.assertTrue(all(type(m.__pydantic_fields_set__) is cache.Watch for m in held))
        # a copy, a pickle and a deep copy of a held message are plain and equal to it
        for other in (copy.copy(held[1]), held[1].model_copy(), copy.deepcopy(held[1]),
                      pickle.loads(pickle.dumps(held[1]))):
            self.assertIs(type(other.__pydantic_fields_set__), set)
            self.assertEqual(other, held[1])
            other.content = "changed"           # not held: nothing marked
        self.assertIs(self.read(c, revive)[1], held[1])

    def check_each_change(self, cls):
        changes = [
            (2, lambda m: setattr(m, "content", "changed")),
            (0, lambda m: setattr(m, "id", "another")),
            (4, lambda m: m.additional_kwargs.update(x=1)),     # empty dict
            (2, lambda m: m.tool_calls.append({"name": "g"})),  # empty list
            (3, lambda m: m.tool_calls[0]["args"].update(a=2)),  # inside a non-empty one
            (1, lambda m: m.additional_kwargs["k"]["v"].append(2)),
            (0, lambda m: setattr(m, "note", "extra")),         # a pydantic extra
            (4, lambda m: m.__pydantic_extra__.update(note="x")),
        ]
        c, revive, held = self.cached(cls)
        for at, change in changes:
            change(held[at])
            fresh = self.changed(c, revive, at)
            self.assertIsNot(fresh[at], held[at])
            self.assertEqual(fresh, revive(None, self.TEXTS))
            held = self.read(c, revive)
            self.assertTrue(all(x is y for x, y in zip(fresh, held)))

    def test_each_change_is_seen_on_a_watched_class(self):
        self.assertTrue(cache._watchable(Message(id="x")))
        self.check_each_change(Message)

    def test_each_change_is_seen_on_a_class_compared_field_by_field(self):
        self.assertFalse(cache._watchable(Validated(id="x")))
        c, revive, held = self.cached(Validated)
        self.assertTrue(all(type(m.__pydantic_fields_set__) is set for m in held))
        self.check_each_change(Validated)

    def test_an_equal_value_assigned_is_no_change(self):
        c, revive, held = self.cached(Message)
        held[2].content = "c"       # an equal str: marked, found equal, unmarked
        mine = [{"name": "f", "args": {"a": 1}}]
        held[3].tool_calls = mine   # an equal plain list: the message stays marked
        again = self.read(c, revive)
        self.assertTrue(all(x is y for x, y in zip(held, again)))
        self.assertEqual(c._threads["t"].changed, {3})
        again = self.read(c, revive)
        self.assertTrue(all(x is y for x, y in zip(held, again)))
        # the plain list assigned is not watched, the message still compared at each read
        mine[0]["args"]["a"] = 2
        self.changed(c, revive, 3)
        self.assertEqual(c._threads["t"].changed, set())

    def test_a_change_after_a_drop_is_not_seen_twice(self):
        """A message dropped (changed) is no longer watched for its seq: a change to
        the old object after the new one is held marks nothing the read trips on."""
        c, revive, held = self.cached(Message)
        held[1].content = "changed"
        fresh = self.changed(c, revive, 1)
        self.read(c, revive)
        held[1].content = "changed again"   # the dropped object
        again = self.read(c, revive)
        self.assertTrue(all(x is y for x, y in zip(fresh, again)))

    def test_every_change_in_place_of_a_list_or_dict_is_seen(self):
        """Each mutating method of a list and of a dict, at the top of a field, deeper
        inside one, and in the pydantic extras: the read after it finds the message
        changed (a WatchedList / WatchedDict marks it)."""
        lists = [lambda l: l.__setitem__(0, "x"), lambda l: l.__delitem__(0),
                 lambda l: l.__iadd__(["x"]), lambda l: l.__imul__(2),
                 lambda l: l.append("x"), lambda l: l.extend(["x"]),
                 lambda l: l.insert(0, "x"), lambda l: l.pop(), lambda l: l.remove(l[0]),
                 lambda l: l.clear(), lambda l: l.sort(key=str, reverse=True),
                 lambda l: l.reverse()]
        dicts = [lambda d: d.__setitem__("x", 1), lambda d: d.__delitem__(next(iter(d))),
                 lambda d: d.__ior__({"x": 1}), lambda d: d.update(x=1),
                 lambda d: d.setdefault("x", 1), lambda d: d.pop(next(iter(d))),
                 lambda d: d.popitem(), lambda d: d.clear()]
        def revive(serde, texts, fields=None):
            out = []
            for t in texts:
                m = Message(content=t.decode(), id="id-" + t.decode(), note=["n", "o"])
                m.tool_calls = [{"b": 1, "a": 2},
                                {"name": "f", "args": {"v": [3, 1, 2], "w": {"a": 1, "b": 2}}}]
                m.additional_kwargs = {"k": {"v": [3, 1, 2]}, "j": 1}
                out.append(m)
            return out
        where = [
            (lambda m: m.tool_calls, lists),                      # a field's list
            (lambda m: m.tool_calls[1]["args"]["v"], lists),      # deeper inside it
            (lambda m: m.additional_kwargs, dicts),               # a field's dict
            (lambda m: m.tool_calls[1]["args"]["w"], dicts),      # deeper inside one
            (lambda m: m.__pydantic_extra__, dicts),              # the extras
            (lambda m: m.__pydantic_extra__["note"], lists),
        ]
        c = cache.MessageCache(100)
        held = self.read(c, revive)
        seen = 0
        for find, changes in where:
            for at, change in enumerate(changes):
                at %= len(self.TEXTS)
                again = self.read(c, revive)
                self.assertTrue(all(x is y for x, y in zip(held, again)))
                self.assertEqual(held, revive(None, self.TEXTS))
                change(find(held[at]))
                self.changed(c, revive, at)
                held = self.read(c, revive)
                seen += 1
        self.assertEqual(seen, 3 * len(lists) + 3 * len(dicts))

    def test_a_langchain_message_revived_from_its_log_text_is_watched(self):
        """Messages built from a template (the compact log text) and from the serde's
        bytes (a message the compact form cannot hold): both watched whole. Skipped
        without LangChain and LangGraph (pydantic alone), failed under
        CONVO_REQUIRE_LANGGRAPH=1."""
        try:
            from langchain_core.messages import AIMessage, HumanMessage
            from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
            from convo import _langgraph_channels as channels
        except ImportError as e:
            if os.environ.get("CONVO_REQUIRE_LANGGRAPH") == "1":
                raise
            self.skipTest("langgraph is not installed: %s" % e)
        serde = JsonPlusSerializer()
        made = [HumanMessage("hi", id="h"), AIMessage("yo", id="a"),
                AIMessage("call", id="t", tool_calls=[{"name": "f", "args": {"a": [1]},
                                                       "id": "c"}],
                          response_metadata={"k": {"v": [1]}})]
        texts = [channels.log_text(serde, m) for m in made]
        self.assertIn(b'"serde":"msg/1"', texts[0])
        self.assertIn(b'"serde":"msgpack"', texts[2])

        def read(c, known=True):
            held = c.known("t")
            k = held[1] if (held and known) else 0
            return c.reader("t", 1, 7).items(
                serde, convo.Items([None] * k + texts[k:], [0, 1, 2]),
                channels.from_log_texts)
        changes = [
            (0, lambda m: m.additional_kwargs.update(x=1)),
            (1, lambda m: m.response_metadata.setdefault("k", []).append(1)),
            (2, lambda m: m.tool_calls[0]["args"]["a"].append(2)),
            (2, lambda m: m.response_metadata["k"]["v"].clear()),
            (1, lambda m: m.invalid_tool_calls.append({"name": "g"})),
            (0, lambda m: m.__pydantic_extra__.update(note=1)),
        ]
        c = cache.MessageCache(100)
        held = read(c)
        self.assertEqual(held, made)
        for at, change in changes:
            again = read(c)
            self.assertTrue(all(x is y for x, y in zip(held, again)))
            change(held[at])
            with self.assertRaises(cache.Missing) as e:
                read(c)
            self.assertEqual(e.exception.args[0], at)
            held = read(c, known=False)
            self.assertEqual(held, made)
            self.assertTrue(all(type(x.__pydantic_fields_set__) is cache.Watch for x in held))

    def test_copies_of_a_held_message_are_plain(self):
        """copy, deepcopy and pickle give plain lists and dicts (no marks, no watch),
        equal to the held ones; a change to a copy changes nothing held."""
        c, revive, held = self.cached(Message)
        m = held[3]
        for other in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
            self.assertEqual(other, m)
            for v in (other.tool_calls, other.tool_calls[0], other.tool_calls[0]["args"],
                      other.additional_kwargs, other.additional_kwargs["k"]["v"],
                      other.__pydantic_extra__):
                self.assertIn(type(v), (list, dict))
            other.tool_calls[0]["args"]["a"] = 5
            other.additional_kwargs["k"]["v"].append(5)
        for v in (copy.copy(m.tool_calls), copy.deepcopy(m.additional_kwargs),
                  pickle.loads(pickle.dumps(m.additional_kwargs)), m.tool_calls.copy(),
                  copy.deepcopy([m.tool_calls, m.tool_calls])[1]):
            self.assertIn(type(v), (list, dict))
        twice = copy.deepcopy([m.tool_calls, m.tool_calls])
        self.assertIs(twice[0], twice[1])       # deepcopy's memo kept
        self.assertEqual(c._threads["t"].changed, set())
        self.assertTrue(all(x is y for x, y in zip(held, self.read(c, revive))))

    def test_a_read_does_no_work_per_held_message(self):
        """The check of n held messages a read hands out costs no Python call per
        message: the same number of calls for 20 and for 2,000 (a regression to a
        per-message look, in Python, fails here)."""
        import sys

        def calls(n):
            c = cache.MessageCache(10 ** 5)
            texts = [b"m%d" % i for i in range(n)]
            revive = revive_with(Message)

            def read():
                h = c.known("t")
                k = h[1] if h else 0
                return c.reader("t", 1, 7).items(
                    None, convo.Items([None] * k + texts[k:], list(range(n))), revive)
            first = read()
            first[n // 2].tool_calls.append("x")   # one marked: looked at, and dropped
            with self.assertRaises(cache.Missing):
                read()
            read()
            count = [0]

            def profile(frame, event, arg):
                if event in ("call", "c_call"):
                    count[0] += 1
            sys.setprofile(profile)
            try:
                read()
            finally:
                sys.setprofile(None)
            return count[0]
        self.assertEqual(calls(20), calls(2000))

    def test_a_read_told_its_held_prefix_does_not_look_at_it(self):
        """A read whose texts say how many items it left out in front (LeftOut, as
        the binding reads them from the library) hands the held ones out without
        looking at those entries (the usual check counts and slices all n texts:
        fails here), and still drops a message changed in place."""
        from convo.checkpoint import LeftOut

        class Strict(LeftOut):
            __slots__ = ()

            def count(self, x):
                raise AssertionError("counted")

            def __getitem__(self, i):
                if isinstance(i, slice) or i < self.held:
                    raise AssertionError("looked at item %r" % (i,))
                return list.__getitem__(self, i)
        c, revive, first = self.cached(Message)
        texts = Strict([None] * 3 + self.TEXTS[3:])
        texts.held = 3
        again = c.reader("t", 1, 7).items(None, convo.Items(texts, list(range(5))), revive)
        self.assertTrue(all(x is y for x, y in zip(first, again)))
        first[1].content = "changed"
        with self.assertRaises(cache.Missing) as e:
            c.reader("t", 1, 7).items(None, convo.Items(texts, list(range(5))), revive)
        self.assertEqual(e.exception.args[0], 1)

    def test_leading_nulls_of_any_layout(self):
        """The NULL texts in front of a read's C array: found by a binary search in the
        usual layout, and by a scan of the bytes when NULLs come after a text too."""
        import ctypes
        from convo.checkpoint import _leading_nulls
        p = ctypes.cast(ctypes.c_char_p(b"x"), ctypes.c_void_p).value
        for layout, want in (([None] * 5, 5), ([p] * 4, 0), ([None] * 3 + [p] * 2, 3),
                             ([None, None, p, None], 2), ([None, p, None, None], 1),
                             ([None, p, None, None, None, None, None], 1), ([None], 1)):
            arr = (ctypes.c_void_p * len(layout))(*layout)
            self.assertEqual(_leading_nulls(ctypes.addressof(arr), len(layout)), want, layout)

    def test_a_held_message_costs_the_collector_what_its_constructor_does(self):
        """A fresh read of n messages (built from a template, held, watched) leaves
        about the objects the garbage collector counts that the class's own
        constructor leaves (LangGraph's revival): no snapshot or entry kept a
        message (docs/performance.md, py28k: 11.3 a message before, 7.0 for the
        constructor). Skipped without LangChain, failed under CONVO_REQUIRE_LANGGRAPH=1."""
        import gc
        try:
            from langchain_core.messages import AIMessage, HumanMessage
            from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
            from convo import _langgraph_channels as channels
        except ImportError as e:
            if os.environ.get("CONVO_REQUIRE_LANGGRAPH") == "1":
                raise
            self.skipTest("langgraph is not installed: %s" % e)
        serde = JsonPlusSerializer()
        n = 600
        made = [HumanMessage("q%d" % i, id="h%d" % i) if i % 2 == 0 else
                AIMessage("a%d" % i, id="a%d" % i) for i in range(n)]
        texts = [channels.log_text(serde, m) for m in made]
        c = cache.MessageCache(10 ** 5)

        def allocated(make):
            """The GC objects make() leaves (allocations less frees: gc.get_count()
            with no collection between)."""
            was = gc.isenabled()
            gc.collect()
            gc.disable()
            try:
                base = gc.get_count()[0]
                kept = make()
                return (gc.get_count()[0] - base) / n, kept
            finally:
                if was:
                    gc.enable()
        ours, held = allocated(lambda: c.reader("t", 1, 7).items(
            serde, convo.Items(texts, list(range(n))), channels.from_log_texts))
        theirs, built = allocated(lambda: [type(m)(content=m.content, id=m.id) for m in made])
        self.assertEqual(held, made)
        self.assertEqual(built, made)
        self.assertEqual(c.known("t"), (1, n, 7))
        self.assertLessEqual(ours, theirs + 0.5, (ours, theirs))


if __name__ == "__main__":
    unittest.main()
