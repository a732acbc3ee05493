"""ConvoSaver keeps each message once, in the thread's log, under LangGraph's real
runtime: after many turns no channel value, pending write or graph input holds
inline a message that is in the log — also when the node's message has no id
(add_messages gives it one when the write is applied, after it was stored) and
whichever of a step's write and its next checkpoint LangGraph stores first (it
stores them on different threads). Every step equals the same script on
InMemorySaver.

Skipped without LangGraph, failed under CONVO_REQUIRE_LANGGRAPH=1."""

import time

import convo

try:
    from langchain_core.messages import BaseMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from convo.langgraph import ConvoSaver  # noqa: F401 - skips the tests without it
    import langgraph_app as app
    MISSING = None
except ImportError as e:  # pragma: no cover - depends on what is installed
    MISSING = str(e)

from support import DRIVERS
from test_langgraph import LangGraphCase
from test_langgraph_runtime import stored

TURNS = 8
DELAY = 0.05    # seconds a write is held back, so that its order with the put is known


def inline_items(store, thread_id):
    """Where a checkpoint of the thread holds a message list other than as Items,
    or an item of one inline (seq -1): [(checkpoint id, what, index)]."""
    found = []
    for cp in store.checkpoint_list(thread_id):
        values = [("channel " + c.name, c.value) for c in cp.channels
                  if c.name in ("messages", "__start__") and c.value is not None]
        values += [("write %s of %s" % (w.channel, w.task_id), w.value) for w in cp.writes
                   if w.channel == "messages"]
        for what, value in values:
            if not isinstance(value, convo.Items):
                found.append((cp.id, what, None))
                continue
            found.extend((cp.id, what, i) for i, q in enumerate(value.seqs) if q < 0)
    return found


class Ids:
    """Message ids renamed in order of first appearance (two savers' random ids
    compare); None for a message stored before add_messages gave it one."""

    def __init__(self):
        self.names = {}

    def __call__(self, value, keep_ids=True):
        if isinstance(value, BaseMessage):
            return [value.type, value.content, self.name(value.id) if keep_ids else None]
        if isinstance(value, (list, tuple)):
            if len(value) == 3 and isinstance(value[0], str) and value[0] in ("human", "ai"):
                return [value[0], value[1], self.name(value[2]) if keep_ids else None]
            return [self(v, keep_ids) for v in value]
        if isinstance(value, dict):
            return {k: self(v, keep_ids) for k, v in value.items()}
        return value

    def name(self, id_):
        if id_ is None:
            return None
        return self.names.setdefault(id_, "id-%d" % len(self.names))


class StoredOnce:
    def run_turns(self, make, user, saver):
        ours, theirs = make(saver), make(InMemorySaver())
        t = self.tid()
        for i in range(TURNS):
            for g in (ours, theirs):
                g.invoke(user(i), app.config(t))
            self.assertEqual(Ids()(app.snapshot(ours.get_state(app.config(t)))),
                             Ids()(app.snapshot(theirs.get_state(app.config(t)))),
                             "after turn %d" % i)
        self.assertEqual(Ids()(app.history(ours, t)), Ids()(app.history(theirs, t)))
        # InMemorySaver serializes a write as the message then is: with or without
        # the id add_messages gives it, depending on which thread ran first
        keep_ids = make is not app.anonymous_chat_graph
        self.assertEqual(Ids()(stored(ours, t), keep_ids), Ids()(stored(theirs, t), keep_ids))
        return t

    def assert_stored_once(self, t):
        log = self.store.load_history(t, with_extra=False).messages
        self.assertEqual(len(log), 2 * TURNS)
        self.assertEqual(inline_items(self.store, t), [])

    def test_messages_with_ids(self):
        self.assert_stored_once(self.run_turns(app.chat_graph, app.user, self.saver()))

    def test_messages_without_ids(self):
        t = self.run_turns(app.anonymous_chat_graph, app.anonymous_user, self.saver())
        self.assert_stored_once(t)

    def test_write_stored_after_the_next_checkpoint(self):
        """put_writes entered after LangGraph's put of the next checkpoint: the
        write is given the seqs that put appended its messages at."""
        saver = self.saver()
        put_writes = saver.put_writes

        def late(*args, **kwargs):
            time.sleep(DELAY)
            return put_writes(*args, **kwargs)
        saver.put_writes = late
        self.assert_stored_once(self.run_turns(app.chat_graph, app.user, saver))

    def test_write_under_way_when_the_next_checkpoint_is_put(self):
        """The store call of a write still under way when the next checkpoint's put
        comes: the put waits for it, then turns it into a reference."""
        saver = self.saver()
        store_call = self.store.checkpoint_put_writes

        def slow(*args, **kwargs):
            time.sleep(DELAY)
            return store_call(*args, **kwargs)
        self.store.checkpoint_put_writes = slow
        self.addCleanup(delattr, self.store, "checkpoint_put_writes")
        t = self.run_turns(app.anonymous_chat_graph, app.anonymous_user, saver)
        self.assert_stored_once(t)


for _driver in DRIVERS:
    _name = "StoredOnce_%s" % _driver
    globals()[_name] = type(_name, (StoredOnce, LangGraphCase),
                            {"driver": _driver, "__module__": __name__})
