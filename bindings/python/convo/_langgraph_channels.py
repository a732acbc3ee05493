"""How convo.langgraph.ConvoSaver turns LangGraph channel values and pending
writes into stored values, and back: the one place that knows about message
channels. A message channel's list (`messages` by default), a write of a list to
it and a graph input holding such a list ({"messages": [...], ...} on
`__start__`) are libconvo log references (convo.Items): each message is stored
once, in the thread's log, where `convo load THREAD` shows it; every other value
is the serde's typed bytes.

An item's log text is the Node binding's layout (bindings/node/src/internal/logtext.js):
{"role": R, "content": C, "serde": TYPE, "base64": BYTES} — the role and content
for people and other languages to read, the serde's own bytes to restore the
item exactly. Python's JsonPlusSerializer writes msgpack, so a Python item
carries base64; items a JS app wrote ("serde": "json" or "json/c") are read too."""

import base64
import collections
import json
import threading

from .checkpoint import Items

ChannelPlan = collections.namedtuple("ChannelPlan", "channels messages log_length")
ChannelPlan.__doc__ = """What ConvoSaver.put hands to Store.checkpoint_put: channels as
(name, version text, (type, bytes) or convo.Items or None); messages and
log_length are left to the library when a channel is Items."""

# LangChain message types -> the role a message is stored under (as the Node binding)
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
         "developer": "developer", "function": "function", "remove": "remove"}
_DUMPS = dict(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_MAX_REMEMBERED = 64    # checkpoints whose items' seqs are remembered (put hints)


def _valid_role(r):
    return r if isinstance(r, str) and 0 < len(r.encode("utf-8", "surrogatepass")) <= 64 else None


def _is_message(x):
    return hasattr(x, "type") and hasattr(x, "content") and hasattr(x, "id") and \
        not isinstance(x, (dict, str))


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


def log_text(serde, item):
    """The log message (JSON text) that keeps one item."""
    type_, data = serde.dumps_typed(item)
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


def from_log_texts(serde, texts):
    """The items log texts keep, in order; the msgpack ones revived by one serde
    call (a msgpack array of the items' own bytes)."""
    items = [None] * len(texts)
    packed = []
    for i, text in enumerate(texts):
        tail = _serde_tail(text)
        if tail is not None and tail[0] == "msgpack":
            packed.append((i, tail[1]))
        else:
            items[i] = from_log_text(serde, text)
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
    if "base64" in m:
        return serde.loads_typed((kind, base64.b64decode(m["base64"])))
    value = m.get("value")
    if kind == "json/c":
        # a JS item whose content was cut out of its value (stored once, in the head)
        kind = "json"
        if isinstance(value, dict) and isinstance(value.get("kwargs"), dict):
            value["kwargs"]["content"] = m.get("content")
    return serde.loads_typed((kind, json.dumps(value, **_DUMPS).encode("utf-8")))


class _Known:
    """What a put or a get told us about a checkpoint's list: the item objects,
    each with the content and id it had then, and their log seqs."""
    __slots__ = ("entries",)

    def __init__(self, items, seqs):
        self.entries = [(x, getattr(x, "content", None), getattr(x, "id", None), q)
                        for x, q in zip(items, seqs)]

    def seq_of(self, i, item):
        """The seq of the i-th item when it is the object we know there, unchanged."""
        if i >= len(self.entries):
            return -1
        x, content, id_, q = self.entries[i]
        if x is item and q >= 0 and _is_message(item) and \
                item.content is content and item.id == id_:
            return q
        return -1


class MessageChannels:
    """The mapping for the channels named message channels. The serde is passed
    on each call: a saver's serde may be replaced (with_allowlist clones it)."""

    def __init__(self, names):
        self.names = frozenset(names)
        self._known = collections.OrderedDict()   # (thread, ns, checkpoint id) -> {ch: _Known}
        self._lock = threading.Lock()

    # ---- put ----

    def plan_put(self, serde, values, versions, new_versions, parent_key=None):
        """The channels of a checkpoint: every channel of `versions`, with a value
        for those whose version is new; a message channel's list as Items (the
        items known from the parent checkpoint by seq, not serialized again)."""
        with self._lock:
            parent = self._known.get(parent_key, {}) if parent_key else {}
        channels = []
        for name, version in versions.items():
            value = None
            if name in new_versions and name in values:
                value = self._value(serde, name, values[name], parent.get(name), log=True)
            channels.append((name, str(version), value))
        return ChannelPlan(channels, (), 0)

    def _value(self, serde, channel, value, known=None, log=False):
        if channel in self.names and isinstance(value, list):
            seqs = [known.seq_of(i, x) if known else -1 for i, x in enumerate(value)]
            texts = [None if q >= 0 else log_text(serde, x) for x, q in zip(value, seqs)]
            return Items(texts, seqs, log=log)
        if channel == "__start__" and isinstance(value, dict):
            for key in sorted(self.names):
                if isinstance(value.get(key), list):
                    rest = {k: v for k, v in value.items() if k != key}
                    return Items([log_text(serde, x) for x in value[key]], key=key,
                                 rest=serde.dumps_typed(rest) if rest else None)
        return serde.dumps_typed(value)

    def put_done(self, key, parent_key, values, new_versions, seqs_by_channel):
        """Remembers the seqs the library gave a put's lists (hints for its child);
        a message channel the put did not change keeps what its parent's list was
        known as (LangGraph's input checkpoint changes only __start__)."""
        with self._lock:
            parent = self._known.get(parent_key, {}) if parent_key else {}
        known = {ch: k for ch, k in parent.items() if ch not in new_versions}
        for ch, seqs in (seqs_by_channel or {}).items():
            if ch in values:
                known[ch] = _Known(values[ch], seqs)
        if known:
            self._remember(key, known)

    def write_value(self, serde, channel, value):
        """A pending write's stored value: a list written to a message channel (a
        node's new messages) or an input holding one is Items, kept inline until
        the put that appends those messages turns it into a reference."""
        return self._value(serde, channel, value)

    # ---- get ----

    def resolve(self, serde, checkpoint):
        """{channel: value} of a convo.Checkpoint: every channel with a value."""
        values, known = {}, {}
        for c in checkpoint.channels:
            if c.value is None:
                continue
            values[c.name] = self._decode(serde, c.value)
            if isinstance(c.value, Items) and c.value.key is None:
                known[c.name] = _Known(values[c.name], c.value.seqs)
        if known:
            self._remember((checkpoint.thread_id, checkpoint.ns, checkpoint.id), known)
        return values

    def read_write(self, serde, write):
        """The value of a stored pending write (a convo.Write)."""
        return self._decode(serde, write.value)

    def _decode(self, serde, value):
        if not isinstance(value, Items):
            return serde.loads_typed(value)
        items = from_log_texts(serde, value.items)
        if value.key is None:
            return items
        out = serde.loads_typed(value.rest) if value.rest is not None else {}
        out[value.key] = items
        return out

    def forget_thread(self, thread_id):
        with self._lock:
            for key in [k for k in self._known if k[0] == thread_id]:
                del self._known[key]

    def _remember(self, key, known):
        with self._lock:
            self._known.pop(key, None)
            self._known[key] = known
            while len(self._known) > _MAX_REMEMBERED:
                self._known.popitem(last=False)
