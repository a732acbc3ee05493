"""How convo.langgraph.ConvoSaver turns LangGraph channel values and pending
writes into stored values, and back: the one place that knows about message
channels. A message channel's list (`messages` by default), a write of a list to
it and a graph input holding such a list ({"messages": [...], ...} on
`__start__`) are libconvo log references (convo.Items): each message is stored
once, in the thread's log, where `convo load THREAD` shows it; every other value
is the serde's typed bytes.

An item's log text is the Node binding's layout (bindings/node/src/internal/logtext.js,
docs/checkpoints.md). A message that its class rebuilds exactly from a few plain
fields is compact: {"role": R, "content": C, "id": I, ..., "serde": "msg/1"}, revived
by constructing the class. Any other item is {"role": R, "content": C, "serde":
TYPE, "base64": BYTES} — the role and content for people and other languages to
read, the serde's own bytes to restore the item exactly (Python's
JsonPlusSerializer writes msgpack); items a JS app wrote ("serde": "json" or
"json/c") are read too."""

import base64
import collections
import itertools
import json
import operator
import threading
import time
import uuid

from ._langgraph_cache import (EMPTY_DICT, EMPTY_LIST, MessageCache, Missing, Watch,
                               WatchedDict, WatchedList)
from . import _langgraph_delta as delta
from .checkpoint import Items, seq_range

ChannelPlan = collections.namedtuple("ChannelPlan", "channels listed hinted prefixes deltas heads")
ChannelPlan.__doc__ = """What ConvoSaver.put hands to Store.checkpoint_put: channels as
(name, version text, (type, bytes) or convo.Items or None); listed: a channel is
Items (the put is then conditional on the thread's generation); hinted: an item
is passed by its seq, or a list as the log's first messages (valid only at the
generation the hint was learnt at); prefixes: {channel: k} for the lists passed
as the log's messages [0, k) and the items after them (Store.checkpoint_put's
log_prefix); deltas: {channel: (prefix, texts, seqs)} of the DeltaChannel lists
stored (convo/_langgraph_delta.py); heads: {channel: a private copy of the list's
first prefixes[channel] items} (made by the prefix check: put_done extends it into the
child's head instead of copying the list again)."""

# LangChain message types -> the role a message is stored under (as the Node binding)
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
         "developer": "developer", "function": "function", "remove": "remove"}
_DUMPS = dict(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_MAX_REMEMBERED = 64    # checkpoints whose items' seqs are remembered (put hints)
_MAX_FRESH = 256        # items a put appended, remembered for late writes (write hints)
_MAX_THREADS = 1024     # threads whose generation is remembered
ID_WAIT = 0.05          # seconds a write waits for add_messages to give its messages ids


def _valid_role(r):
    return r if isinstance(r, str) and 0 < len(r.encode("utf-8", "surrogatepass")) <= 64 else None


_MESSAGE_TYPES = {}     # type -> whether its objects are messages (asked once per type)


def _is_message(x):
    t = type(x)
    answer = _MESSAGE_TYPES.get(t)
    if answer is None:
        answer = hasattr(x, "type") and hasattr(x, "content") and hasattr(x, "id") and \
            not isinstance(x, (dict, str))
        if len(_MESSAGE_TYPES) < 256:
            _MESSAGE_TYPES[t] = answer
    return answer


def _without_id(items):
    return [x for x in items if _is_message(x) and x.id is None]


def role_of(item):
    if isinstance(item, str):
        return "user"
    if _is_message(item):
        if item.type == "chat":
            return _valid_role(getattr(item, "role", None)) or "chat"
        return ROLES.get(item.type) or _valid_role(item.type) or "value"
    if isinstance(item, dict):
        if _valid_role(item.get("role")):
            return item["role"]
        if isinstance(item.get("type"), str) and item["type"] in ROLES:
            return ROLES[item["type"]]
    return "value"


def content_of(item):
    if isinstance(item, str):
        return item
    content = item.get("content") if isinstance(item, dict) else getattr(item, "content", None)
    return content if isinstance(content, (str, list)) else None


COMPACT = "msg/1"
_COMPACT_END = b',"serde":"msg/1"}'
# role -> (class, the fields the compact form may hold after content), as
# bindings/node/src/internal/compact.js
_FORMS = {"user": ("HumanMessage", ("id", "name")),
          "assistant": ("AIMessage", ("id", "name", "tool_calls")),
          "system": ("SystemMessage", ("id", "name")),
          "tool": ("ToolMessage", ("id", "name", "tool_call_id"))}
_FIELD_TYPES = {"id": str, "name": str, "tool_calls": list, "tool_call_id": str}
_classes = {}


def _class_of(role):
    if not _classes:
        from langchain_core import messages
        _classes.update({r: getattr(messages, name) for r, (name, _) in _FORMS.items()})
    return _classes[role]


def _default_serde(serde):
    """Whether serde is LangGraph's own JsonPlusSerializer, whose revive of a
    compact message is what its class's constructor makes of it."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    return type(serde) is JsonPlusSerializer


def compact_message(m):
    """The message of a compact text's members (a dict); ValueError when they
    are not laid out as the compact form."""
    quick = _quick(m)
    if quick is not None:
        return quick
    form = _FORMS.get(m.get("role")) if isinstance(m.get("role"), str) else None
    if form is None:
        raise ValueError("convo: a \"msg/1\" log message of role %r, not user, assistant, "
                         "system or tool" % (m.get("role"),))
    fields = {}
    for k, v in m.items():
        if k in ("role", "serde"):
            continue
        ok = isinstance(v, (str, list)) if k == "content" else \
            k in form[1] and isinstance(v, _FIELD_TYPES[k])
        if not ok:
            raise ValueError("convo: a \"msg/1\" log message of role %s with a field %r it "
                             "cannot hold" % (m["role"], k))
        fields[k] = v
    if "content" not in fields:
        raise ValueError("convo: a \"msg/1\" log message without content")
    return _class_of(m["role"])(**fields)


# A compact message of plain strings only (content, id, name) is built without
# pydantic's validation, as a copy of what the class's constructor made of
# placeholder strings of the same fields (validation passes strings through and
# fills the other fields with defaults): 15-20 times faster than the constructor,
# the same object (tests/test_langgraph.py checks them equal field by field).
_QUICK_ROLES = ("user", "assistant", "system")
_QUICK_FIELDS = frozenset(("content", "id", "name"))
_templates = {}     # (role, keys) -> (class, __dict__, empty containers, fields set) or False
_STR_ONLY = frozenset((str,))
_new_object = object.__new__
_WATCHED_KIND = {list: WatchedList, dict: WatchedDict}
_set = object.__setattr__


def _template(role, keys):
    names = [k for k in keys if k != "role" and k != "serde"]
    if role not in _QUICK_ROLES or "content" not in names or \
            not _QUICK_FIELDS.issuperset(names) or len(names) + 2 != len(keys):
        return False
    cls = _class_of(role)
    made = cls(**{k: "convo-placeholder" for k in names})
    d = made.__dict__
    ok = all(d.get(k) == "convo-placeholder" for k in names) and \
        "role" not in d and "serde" not in d and \
        made.__pydantic_extra__ == {} and made.__pydantic_private__ is None and \
        all(not v for v in d.values() if isinstance(v, (list, dict)))
    if not ok:
        return False
    empty = tuple((k, type(v)) for k, v in d.items() if type(v) in (list, dict))
    # what a snapshot of such a message holds: its empty fields as the shared empties
    snap = {k: (EMPTY_LIST if type(v) is list else EMPTY_DICT) if type(v) in (list, dict)
            else v for k, v in d.items()}
    return cls, dict(d), empty, frozenset(made.__pydantic_fields_set__), snap


def _template_of(m):
    """The template of a compact text's members, None when it has none."""
    key = (m.get("role"), tuple(m))
    t = _templates.get(key)
    if t is None:
        t = _template(*key)
        if len(_templates) < 64:    # key orders a log's texts may have: bounded
            _templates[key] = t
    if t is False or not _STR_ONLY.issuperset(map(type, m.values())):
        return None
    return t


def text_snapshot(text):
    """The MessageCache snapshot of the message _quick builds from a compact log
    text (its class, its fields with the empty lists and dicts the shared empties,
    no extras): rebuilt from the text when a held message is compared, not kept."""
    m = json.loads(text)
    t = _template_of(m) if isinstance(m, dict) else None
    if t is None:
        raise ValueError("convo: a held message's text has no template")
    f = t[4].copy()
    f.update(m)
    del f["role"], f["serde"]
    return t[0], f, EMPTY_DICT


def _quick(m, fields=None, at=0):
    """The message of a compact text's members built from its template; None when
    it has no template. fields: a list whose [at] gets text_snapshot (MessageCache:
    the message watched, its snapshot rebuilt from its text when needed)."""
    t = _templates.get((m.get("role"), tuple(m)))     # _template_of inline: once a message
    if t is None:
        t = _template_of(m)
    if not t or not _STR_ONLY.issuperset(map(type, m.values())):
        return None
    cls, base, empty, fields_set, snap = t
    d = base.copy()
    d.update(m)
    del d["role"], d["serde"]
    extra = {}
    out = _new_object(cls)
    if fields is None:
        for k, kind in empty:
            d[k] = kind()
        fields_set = set(fields_set)
    else:
        # a set pydantic adds a field's name to when it is assigned, and lists and
        # dicts marking a change in place: MessageCache watches them
        fields_set = Watch(fields_set)
        extra = WatchedDict()
        extra.watch = fields_set
        for k, kind in empty:
            v = d[k] = _WATCHED_KIND[kind]()
            v.watch = fields_set
        fields[at] = text_snapshot
    _set(out, "__dict__", d)
    _set(out, "__pydantic_fields_set__", fields_set)
    _set(out, "__pydantic_extra__", extra)
    _set(out, "__pydantic_private__", None)
    return out


def _compact_text(serde, item, typed):
    """The compact text of a message when the message rebuilt from it (as a
    reader rebuilds it) serializes to exactly the serde's bytes of the item
    (`typed`); else None."""
    role = role_of(item)
    form = _FORMS.get(role)
    if form is None or not _is_message(item) or type(item) is not _class_of(role) or \
            not isinstance(item.content, (str, list)) or not _default_serde(serde):
        return None
    head = {"role": role, "content": item.content}
    for k in form[1]:
        v = getattr(item, k, None)
        if v is not None and v != []:
            head[k] = v
    head["serde"] = COMPACT
    try:
        text = json.dumps(head, **_DUMPS).encode("utf-8")
        rebuilt = compact_message(json.loads(text))
    except (UnicodeEncodeError, ValueError, TypeError):
        return None     # a field JSON cannot carry (a lone surrogate, NaN, a set)
    ok = serde.dumps_typed(rebuilt)
    return text if ok[0] == typed[0] and bytes(ok[1]) == bytes(typed[1]) else None


def log_text(serde, item):
    """The log message (JSON text) that keeps one item."""
    type_, data = serde.dumps_typed(item)
    text = _compact_text(serde, item, (type_, data))
    if text is not None:
        return text
    head = {"role": role_of(item)}
    content = content_of(item)
    if content is not None:
        head["content"] = content
    head["serde"] = type_
    head["base64"] = base64.b64encode(bytes(data)).decode("ascii")
    try:
        return json.dumps(head, **_DUMPS).encode("utf-8")
    except (UnicodeEncodeError, ValueError, TypeError):
        # a content JSON cannot carry (a lone surrogate, NaN): the serde's bytes only
        del head["content"]
        return json.dumps(head, **_DUMPS).encode("utf-8")


_TAIL = b',"serde":"'
_B64 = b'","base64":"'


def _serde_tail(text):
    """(type, bytes) of a log text as log_text writes it (its serde and base64 come
    last: base64 has no quote, so the last ',"serde":"' is ours), without parsing
    the head; None for any other text."""
    at = text.rfind(_TAIL)
    if at < 0 or not text.endswith(b'"}'):
        return None
    kind, sep, data = text[at + len(_TAIL):-2].partition(_B64)
    if not sep or b'"' in kind or b"\\" in kind:
        return None
    return kind.decode("utf-8"), base64.b64decode(data)


_CHUNK = 256


def from_log_texts(serde, texts, fields=None):
    """The items log texts keep, in order; the compact ones parsed by one JSON
    call, the msgpack ones revived by one serde call (a msgpack array of the
    items' own bytes). fields (a list as long as texts): gets the snapshot
    fields of each item built from a template (MessageCache)."""
    items = [None] * len(texts)
    packed, compact = [], []
    for i, text in enumerate(texts):
        if text.endswith(_COMPACT_END):
            compact.append(i)
            continue
        tail = _serde_tail(text)
        if tail is not None and tail[0] == "msgpack":
            packed.append((i, tail[1]))
        else:
            items[i] = from_log_text(serde, text)
    # the texts are whole JSON objects (the library checked each): one array a chunk
    # (the parsed dicts of the whole list alive at once would cost collections)
    for at in range(0, len(compact), _CHUNK):
        chunk = compact[at:at + _CHUNK]
        parsed = json.loads(b"[" + b",".join(bytes(texts[i]) for i in chunk) + b"]")
        for i, m in zip(chunk, parsed):
            x = _quick(m, fields, i)
            items[i] = compact_message(m) if x is None else x
        del parsed
    if len(packed) > 1:
        head = b"\xdd" + len(packed).to_bytes(4, "big")
        values = serde.loads_typed(("msgpack", head + b"".join(data for _, data in packed)))
        for (i, _), v in zip(packed, values):
            items[i] = v
    else:
        for i, data in packed:
            items[i] = serde.loads_typed(("msgpack", data))
    return items


def from_log_text(serde, text):
    m = json.loads(text)
    kind = m.get("serde")
    if not isinstance(kind, str):
        raise ValueError("convo: a log message without \"serde\" in a message channel")
    if kind == COMPACT:
        return compact_message(m)
    if "base64" in m:
        return serde.loads_typed((kind, base64.b64decode(m["base64"])))
    value = m.get("value")
    if kind == "json/c":
        # a JS item whose content was cut out of its value (stored once, in the head)
        kind = "json"
        if isinstance(value, dict) and isinstance(value.get("kwargs"), dict):
            value["kwargs"]["content"] = m.get("content")
    return serde.loads_typed((kind, json.dumps(value, **_DUMPS).encode("utf-8")))


_get_id = operator.attrgetter("id")


class _Known:
    """What a put or a get told us about a checkpoint's list, at one generation of
    the thread: its first `prefix` items (`head`, the objects) are the log's
    messages [0, prefix) in order; the seqs of the items after them (`tail`: the
    objects, `tail_seqs`); `idless`: the positions in the head of messages that
    had no id (add_messages gives them one in place: such a message then no
    longer is the log's text). Built and used without a step per head item in
    Python (identity and id checks at C speed), so a put passes only what is new."""
    __slots__ = ("head", "tail", "tail_seqs", "idless", "generation")

    def __init__(self, items, prefix, tail_seqs, generation, idless=None, head=None):
        """head: a private list of items' first len(head) objects (<= prefix), taken
        over and extended instead of copying items[:prefix] again."""
        if head is not None and len(head) <= prefix:
            head.extend(items[len(head):prefix])
            self.head = head
        else:
            self.head = items[:prefix]      # lists never changed: one copy, not two
        self.tail = items[prefix:]
        self.tail_seqs = tail_seqs
        self.generation = generation
        self.idless = _idless(self.head) if idless is None else idless

    @classmethod
    def read(cls, items, seqs, generation, before=None, held=0):
        """From a resolved list: its items and the seq of each (-1: inline).
        before: what a put of the same checkpoint told us (its id-less positions
        hold for the items read back); held: seqs[:held] are known to be 0, 1, ...
        (the items a read left out), so only the others are looked at."""
        n = len(seqs)
        k = min(held, n)    # seqs[:held] known to be 0..held-1 (a LeftOut read)
        if not k and seqs == seq_range(n):
            k = n
        else:
            while k < n and seqs[k] == k:
                k += 1
        idless = None
        if before is not None and before.generation == generation and len(before.head) <= k:
            h = len(before.head)
            idless = before.idless | frozenset(h + i for i in _idless(items[h:k]))
        return cls(items, k, list(seqs[k:]), generation, idless)

    def prefix_of(self, items):
        """(k, head): how many of items' first ones are, unchanged, the log's messages
        [0, k) this list started with: its head's objects at their places (or objects
        equal to them: a list comparison tells them apart by pointer, without a step
        per item in Python); head: the copy of items[:k] the comparison made (the
        child's head is made from it), None when it made none."""
        k = len(self.head)
        if not k or len(items) < k:
            return 0, None
        head = items[:k] if len(items) > k else None
        if (items if head is None else head) != self.head:
            return 0, None
        for i in self.idless:
            if i < k and items[i].id is not None:
                k = i
        return k, (head if head is not None and len(head) == k else None)

    def seq_at(self, i, item):
        """The seq of items[i] when it is the object this list had at i (-1 else)."""
        if i < len(self.head):
            x, q = self.head[i], i
            if i in self.idless and item.id is not None:
                return -1
        elif i - len(self.head) < len(self.tail):
            x, q = self.tail[i - len(self.head)], self.tail_seqs[i - len(self.head)]
        else:
            return -1
        return q if x is item and q >= 0 else -1


    def seqs_by_object(self, items):
        """The seq of each item that is one of this list's objects, wherever it is
        (-1 for any other, or a head message that got an id)."""
        where = {id(x): q for q, x in enumerate(self.head) if q not in self.idless}
        where.update((id(x), q) for x, q in zip(self.tail, self.tail_seqs) if q >= 0)
        # the objects are alive (held here): an id() found is that object
        return [where.get(id(x), -1) for x in items]


def _idless(items):
    """The positions of items without an id (messages: almost always none)."""
    try:
        ids = list(map(_get_id, items))
    except AttributeError:      # not messages (str items)
        return frozenset(i for i, x in enumerate(items) if getattr(x, "id", None) is None)
    return frozenset(i for i, x in enumerate(ids) if x is None) if None in ids else frozenset()


def _unchanged(hint, item):
    x, content, id_ = hint[:3]
    return x is item and item.content is content and item.id == id_


class MessageChannels:
    """The mapping for the channels named message channels. The serde is passed
    on each call: a saver's serde may be replaced (with_allowlist clones it).

    Seq hints: the seqs a put or a get gave the items of a list (by the item
    object, while it keeps its content and id), each with the thread's
    generation they are valid for; a put passing hints is conditional on that
    generation (ConvoSaver.put)."""

    def __init__(self, names, assign_ids=True, cache_messages=0):
        self.names = frozenset(names)
        self.assign_ids = assign_ids
        self.cache = MessageCache(cache_messages)
        self._known = collections.OrderedDict()    # (thread, ns, checkpoint id) -> {ch: _Known}
        self._fresh = collections.OrderedDict()    # id(item) -> (item, content, id, thread, seq, gen)
        self._generations = collections.OrderedDict()   # thread -> generation last seen
        self.delta = delta.DeltaLists()     # DeltaChannel lists (convo/_langgraph_delta.py)
        self._delta_names = set()   # message channels seen as DeltaChannels
        self._lock = threading.Lock()

    # ---- the thread's generation ----

    def generation(self, thread_id):
        """The generation this saver last saw the thread at, None if unknown."""
        with self._lock:
            return self._generations.get(thread_id)

    def learn_generation(self, thread_id, generation):
        if generation is None or generation < 0:
            return
        with self._lock:
            self._generations.pop(thread_id, None)
            self._generations[thread_id] = generation
            while len(self._generations) > _MAX_THREADS:
                self._generations.popitem(last=False)

    # ---- put ----

    def has_lists(self, values, new_versions):
        """Whether a put of these values stores a list of items (a message
        channel's list, or an input holding one)."""
        for name in new_versions:
            v = values.get(name)
            if name in self.names and (isinstance(v, list) or name not in values or
                                       delta.is_snapshot(v)):
                return True
            if name == "__start__" and isinstance(v, dict) and \
                    any(isinstance(v.get(k), list) for k in self.names):
                return True
        return False

    def plan_put(self, serde, values, versions, new_versions, parent_key, generation,
                 read_parent=None, thread_id=None):
        """The channels of a checkpoint: every channel of `versions`, with a value
        for those whose version is new; a message channel's list as Items: when it
        starts with the parent's list as known at `generation` (the same objects),
        as that many of the log's first messages and only the items after them,
        those known by seq not serialized again. A DeltaChannel's step (a message
        channel with a new version and no list): its delta list (read_parent() ->
        the stored parent, when this saver does not know its list)."""
        parent = {}
        if parent_key and generation is not None:
            with self._lock:
                parent = self._known.get(parent_key, {})
        channels, hinted, listed, prefixes, deltas, heads = [], False, False, {}, {}, {}
        for name, version in versions.items():
            value = None
            v = values.get(name)
            if name in new_versions and name in self.names and \
                    (name not in values or delta.is_snapshot(v)):
                d = self.delta.list_in(parent_key, name, generation, read_parent)
                if d is not None:
                    value, k, texts, seqs, objects = d
                    self._delta_names.add(name)
                    segs = None
                    if name in values:
                        segs = self._selection(serde, thread_id, generation, k, texts, seqs,
                                               v.value)
                        value = value._replace(rest=delta.selection_rest(segs))
                    if k:
                        prefixes[name] = k
                    deltas[name] = (k, texts, seqs, objects, segs)
                    hinted = hinted or bool(k) or value.seqs is not None
                    listed = True
                    channels.append((name, str(version), value))
                    continue
                if name in values:      # the parent's value is no list: the snapshot's own
                    value = Items(self._committed_texts(serde, v.value, False),
                                  key=delta.SNAPSHOT_KEY, rest=delta.snapshot_rest())
                    listed = True
            elif name in new_versions and name in values:
                if name in self.names and isinstance(v, list):
                    known = parent.get(name)
                    if known is not None and known.generation != generation:
                        known = None
                    value, k, head = self._list_value(serde, v, known)
                    if k:
                        prefixes[name] = k
                    if head is not None:
                        heads[name] = head
                    hinted = hinted or bool(k) or any(q >= 0 for q in value.seqs)
                else:
                    value = self._value(serde, name, v)
                listed = listed or isinstance(value, Items)
            channels.append((name, str(version), value))
        return ChannelPlan(channels, listed, hinted, prefixes, deltas, heads)

    def _selection(self, serde, thread_id, generation, prefix, texts, seqs, items):
        """A _DeltaSnapshot's list as a selection of the delta list stored with it:
        its first items, when they are the held log's first messages, as one range
        (no step each); the others found by the seq of the held message they are,
        else by text."""
        head = min(self.cache.held_head(thread_id, generation, items), prefix)
        held = self.cache.seq_finder(thread_id, generation, head)

        def seq_of(x):
            q = held(x)
            if q < 0:
                with self._lock:
                    h = self._fresh.get(id(x))
                if h is not None and h[3] == thread_id and h[5] == generation and \
                        _unchanged(h, x):
                    q = h[4]
            return q
        return delta.selection_of(prefix, texts, seqs, items, seq_of,
                                  lambda x: log_text(serde, x), head)

    def _list_value(self, serde, value, known):
        """(Items of what follows the log prefix, k, a private copy of value[:k] or
        None) for a message channel's list."""
        k, head = known.prefix_of(value) if known is not None else (0, None)
        rest = value[k:] if k else value
        if known is None:
            seqs = [-1] * len(rest)
        elif k < len(known.head):
            # not the parent's list followed by more (a message removed or replaced,
            # a branch): each item known by what it is, wherever it is now
            seqs = known.seqs_by_object(rest)
        else:
            seqs = [known.seq_at(i, x) for i, x in enumerate(rest, k)]
        texts = [None if q >= 0 else log_text(serde, x) for x, q in zip(rest, seqs)]
        return Items(texts, seqs, log=True), k, head

    def _value(self, serde, channel, value):
        if channel in self.names and isinstance(value, list):
            return Items(self._committed_texts(serde, value, channel not in self._delta_names))
        if channel == "__start__" and isinstance(value, dict):
            for key in sorted(self.names):
                if isinstance(value.get(key), list):
                    rest = {k: v for k, v in value.items() if k != key}
                    return Items(self._committed_texts(serde, value[key],
                                                       key not in self._delta_names),
                                 key=key, rest=serde.dumps_typed(rest) if rest else None)
        return serde.dumps_typed(value)

    def _committed_texts(self, serde, items, assign=True):
        """The log texts of an input's or a write's items as add_messages will
        commit them, so that the put committing them finds the same texts and
        turns the input and the write into references. add_messages gives a
        message without an id one (on the same object) when the step's writes are
        applied, on LangGraph's main thread, while this runs on another: so wait
        a little for it (ID_WAIT seconds at most), then give the message an id of
        our own (it then keeps ours); an id that changed meanwhile (add_messages
        checks for None, then draws its uuid) is serialized again. assign=False: a
        DeltaChannel's (its reducer keeps a message without an id as it is)."""
        if assign and self.assign_ids and _without_id(items):
            deadline = time.monotonic() + ID_WAIT
            delay = 0.0005
            while _without_id(items) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.005)
            for x in _without_id(items):
                x.id = str(uuid.uuid4())
            time.sleep(0)   # lets an add_messages holding its uuid for it finish
        ids = [getattr(x, "id", None) for x in items]
        texts = [log_text(serde, x) for x in items]
        for _ in range(3):
            changed = [i for i, x in enumerate(items) if getattr(x, "id", None) != ids[i]]
            if not changed:
                break
            for i in changed:
                ids[i] = items[i].id
                texts[i] = log_text(serde, items[i])
        return texts

    def put_done(self, key, parent_key, values, new_versions, seqs_by_channel, generation,
                 prefixes=None, deltas=None, versions=None, heads=None):
        """Remembers the seqs the library gave a put's lists (hints for its child
        and for a write of its parent stored after it); a message channel the put
        did not change keeps what its parent's list was known as (LangGraph's
        input checkpoint changes only __start__). prefixes, heads: the plan's."""
        with self._lock:
            parent = self._known.get(parent_key, {}) if parent_key else {}
        known = {ch: k for ch, k in parent.items()
                 if ch not in new_versions and k.generation == generation}
        fresh = []
        for ch, seqs in (seqs_by_channel or {}).items():
            v = values.get(ch)
            if ch not in self.names or not isinstance(v, list) or ch in (deltas or {}):
                continue
            k = (prefixes or {}).get(ch, 0)
            before = parent.get(ch)
            # the given items that continue the log's prefix extend it
            n = 0
            while n < len(seqs) and seqs[n] == k + n:
                n += 1
            idless = None
            if k and before is not None:
                idless = frozenset(i for i in before.idless if i < k) | \
                    frozenset(k + i for i in _idless(v[k:k + n]))
            known[ch] = _Known(v, k + n, seqs[n:], generation, idless,
                               (heads or {}).get(ch) if k else None)
            # the items past the parent's list: those this put may have appended
            start = (len(before.head) + len(before.tail) if before is not None
                     else len(v) - 64) - k
            for i in range(max(0, start, len(seqs) - _MAX_FRESH), len(seqs)):
                x, q = v[k + i], seqs[i]
                if q >= 0 and _is_message(x):
                    fresh.append((x, x.content, x.id, q))
        for ch, (_, _, _, (objects, _), _) in (deltas or {}).items():
            # the written messages this put appended: found by seq in a later snapshot
            out = (seqs_by_channel or {}).get(ch) or ()
            fresh.extend((x, x.content, x.id, q) for x, q in zip(objects, out)
                         if x is not None and q >= 0 and _is_message(x))
        with self._lock:
            for x, content, id_, q in fresh[-_MAX_FRESH:]:
                self._fresh.pop(id(x), None)
                self._fresh[id(x)] = (x, content, id_, key[0], q, generation)
            while len(self._fresh) > _MAX_FRESH:
                self._fresh.popitem(last=False)
        if known:
            self._remember(key, known)
        versions = versions if versions is not None else new_versions
        self.delta.learn(key, parent_key, {
            ch: d + ((seqs_by_channel or {}).get(ch),) for ch, d in (deltas or {}).items()},
            [ch for ch in self.names if ch in versions and ch not in new_versions], generation,
            {ch: delta.UNKNOWN if ch in versions else None for ch in self.names})

    def write_value(self, serde, thread_id, channel, value):
        """A pending write's stored value: a list written to a message channel (a
        node's new messages) or an input holding one is Items, kept inline until
        the put that appends those messages turns it into a reference — or, when
        that put came first (LangGraph stores a step's writes and its next
        checkpoint on different threads), given the seqs it appended them at."""
        v = self._value(serde, channel, value)
        if not isinstance(v, Items) or v.key is not None:
            return v
        seqs = self._fresh_seqs(thread_id, value)
        if seqs is None:
            return v
        return Items([None if q >= 0 else t for t, q in zip(v.items, seqs)], seqs)

    def write_stored(self, key, task_path, task_id, idx, channel, value, written):
        """A write stored on checkpoint `key` (write_value's value of `written`): a
        message list is remembered for the delta list of the checkpoint's child."""
        if channel not in self.names:
            return
        if isinstance(value, Items):
            if value.key is None:
                seqs = value.seqs if value.seqs is not None else [-1] * len(value.items)
                self.delta.record_write(key, task_path, task_id, idx, channel, value.items, seqs,
                                        self.generation(key[0]), written)
        else:
            self.delta.record_write(key, task_path, task_id, idx, channel, (), (), None,
                                    blob=value)

    def _fresh_seqs(self, thread_id, items):
        with self._lock:
            generation = self._generations.get(thread_id)
            hints = [self._fresh.get(id(x)) for x in items]
        seqs = [h[4] if h is not None and h[3] == thread_id and h[5] == generation and
                _unchanged(h, x) else -1 for h, x in zip(hints, items)]
        return seqs if any(q >= 0 for q in seqs) else None

    # ---- get ----

    def reader(self, checkpoint, hold=True):
        """What revives the item lists of a checkpoint (resolve, read_write): the
        messages held are not revived again (MessageCache); hold=False adds none."""
        return self.cache.reader(checkpoint.thread_id, checkpoint.generation,
                                 checkpoint.log_origin, hold)

    def resolve(self, serde, checkpoint, reader):
        """{channel: value} of a convo.Checkpoint: every channel with a value."""
        values, known = {}, {}
        self.learn_generation(checkpoint.thread_id, checkpoint.generation)
        key = (checkpoint.thread_id, checkpoint.ns, checkpoint.id)
        with self._lock:
            before = self._known.get(key, {})
        for c in checkpoint.channels:
            has, value = self.channel_value(serde, c, reader)
            if not has:
                continue
            values[c.name] = value
            if isinstance(c.value, Items) and c.value.key is None:
                known[c.name] = _Known.read(values[c.name], c.value.seqs, checkpoint.generation,
                                            before.get(c.name),
                                            getattr(c.value.items, "held", 0))
        if known:
            self._remember(key, known)
        self.delta.learn_read(key, checkpoint, self.names)
        return values

    def channel_value(self, serde, channel, reader):
        """(whether get_tuple shows a value of this stored channel, the value): a
        delta list alone is none; one with a selection is a _DeltaSnapshot."""
        stored = channel.value
        if stored is None:
            return False, None
        if isinstance(stored, Items) and stored.key == delta.DELTA_KEY:
            got = delta.selected(stored) if stored.rest is not None else None
            if got is None or delta._DeltaSnapshot is None:
                return False, None
            return True, delta._DeltaSnapshot(
                reader.items(serde, Items(got[0], got[1]), from_log_texts))
        return True, self._decode(serde, stored, reader)

    def hold_delta_lists(self, serde, checkpoint, channels, bare_only=False):
        """Revives and holds the messages of a checkpoint's delta lists that came with
        their texts (a saver that does not hold the thread yet): the ancestors read
        next then come without them. bare_only: not a snapshot's list (reading the
        snapshot's value revives and holds its messages). Whether it held any."""
        reader, held = None, False
        for c in checkpoint.channels:
            v = c.value
            if c.name in channels and isinstance(v, Items) and v.key == delta.DELTA_KEY and \
                    not (bare_only and v.rest is not None) and \
                    any(t is not None for t, q in zip(v.items, v.seqs) if q >= 0):
                reader = reader or self.reader(checkpoint)
                reader.items(serde, Items(v.items, v.seqs), from_log_texts)
                held = True
        return held

    def delta_history(self, serde, key, channels):
        """get_delta_channel_history from what this saver remembers of the thread
        (DeltaLists.history), its messages revived from the held ones and the texts
        of the writes it stored or read; None when something on the way is not
        known here; Missing when a message it needs is no longer held."""
        got = self.delta.history(key, channels)
        if got is None:
            return None
        chain, seeds = got
        generation, origin = self.cache.tag(key[0]) or (-1, -1)
        reader = self.cache.reader(key[0], generation, origin)

        # every list of the way revived by one reader call (a call per write costs
        # more than the few items each holds), then cut back into the writes
        # (the seeds first: a seed is the log's first messages, held, taken in one slice)
        lists = list(seeds.values()) + [(w.texts, w.seqs, w.generation) for writes in chain
                                        for w in writes if w.blob is None]
        texts, seqs = [], []
        for t, q, at in lists:
            if at != generation and None in t:
                raise Missing(None)
            texts.extend(t)
            seqs.extend(q if at == generation else [-1] * len(q))
        revived = iter(reader.items(serde, Items(texts, seqs), from_log_texts))
        out = {ch: {"writes": []} for ch in channels}
        for ch, (t, _, _) in seeds.items():
            out[ch]["seed"] = delta._DeltaSnapshot(list(itertools.islice(revived, len(t))))
        for writes in chain:
            for w in writes:
                value = serde.loads_typed(w.blob) if w.blob is not None else \
                    list(itertools.islice(revived, len(w.texts)))
                out[w.channel]["writes"].append((w.task_id, w.channel, value))
        return out

    def read_write(self, serde, write, reader):
        """The value of a stored pending write (a convo.Write)."""
        return self._decode(serde, write.value, reader)

    def _decode(self, serde, value, reader):
        if not isinstance(value, Items):
            return serde.loads_typed(value)
        delta.check_key(value.key)
        items = reader.items(serde, value, from_log_texts)
        if value.key is None:
            return items
        out = serde.loads_typed(value.rest) if value.rest is not None else {}
        out[value.key] = items
        return delta.snapshot_object(out) if value.key == delta.SNAPSHOT_KEY else out

    def forget_thread(self, thread_id):
        """Drops every hint about the thread (deleted, or found at another generation)."""
        with self._lock:
            for key in [k for k in self._known if k[0] == thread_id]:
                del self._known[key]
            for key in [k for k, h in self._fresh.items() if h[3] == thread_id]:
                del self._fresh[key]
            self._generations.pop(thread_id, None)
        self.cache.forget(thread_id)
        self.delta.forget(thread_id)

    def _remember(self, key, known):
        with self._lock:
            self._known.pop(key, None)
            self._known[key] = known
            while len(self._known) > _MAX_REMEMBERED:
                self._known.popitem(last=False)
