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
        held[3].tool_calls = [{"name": "f", "args": {"a": 1}}]
        again = self.read(c, revive)
        self.assertTrue(all(x is y for x, y in zip(held, again)))
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


if __name__ == "__main__":
    unittest.main()
