"""ConvoSaver's mapping of LangGraph's DeltaChannel (a message channel whose checkpoints
hold no list: LangGraph rebuilds it from the ancestors' pending writes and a
_DeltaSnapshot now and then) onto the thread's log, in the stored layout of the Node
saver (bindings/node/src/langgraph/delta.js; docs/checkpoints.md, "Stored layout of the
delta list, version 1"): a put that changes such a channel stores the channel's *delta
list* (the parent's delta list, then the parent's writes to the channel in LangGraph's
replay order) under the reserved key __convo_delta__, so libconvo appends the step's new
messages to the log with that put and turns the parent's writes into references. A
_DeltaSnapshot is that list plus which of its items it holds (`rest`, JSON:
{"lg_name":"DeltaSnapshot","convo_select":[[from, to] | "inline item text", ...]}).
get_tuple never shows a delta list alone.

A delta list is kept here as the log's first `prefix` messages and what follows them, so
a put passes only the step's new items (Store.checkpoint_put's log_prefix): O(new)."""

import collections
import json
import threading

from .checkpoint import Items, seq_range
from .errors import CorruptError
from . import _lib

try:    # langgraph-checkpoint with DeltaChannel support
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:     # pragma: no cover - depends on what is installed
    _DeltaSnapshot = None

DELTA_KEY = "__convo_delta__"
SNAPSHOT_KEY = "value"
SELECT = "convo_select"
RESERVED = "__convo_"
LG_NAME = "DeltaSnapshot"
_REMOVE_HEAD = b'{"role":"remove"'     # a RemoveMessage's log text: kept inline, not listed
_SNAPSHOT_REST = ("json", b'{"lg_name":"DeltaSnapshot"}')
_MAX_ENTRIES = 2048     # checkpoints whose delta lists, writes and parents are remembered
UNKNOWN = object()      # a seed this saver does not know (the history is then read)
_DUMPS = dict(separators=(",", ":"), ensure_ascii=False)

Recorded = collections.namedtuple("Recorded", "sort_key idx channel texts seqs generation "
                                               "objects blob task_id")
Recorded.__doc__ = """A pending write to a message channel of a checkpoint: a list's items'
texts (None for one known only by seq) and seqs (-1: not in the log), valid at
`generation`; objects: the items written by this process (None: read back); blob: the
(type, bytes) of any other value (texts then empty)."""


def _recorded(w, generation):
    """A Recorded of a stored convo.Write (None for a value no saver of ours writes)."""
    v = w.value
    if isinstance(v, Items):
        if v.key is not None:
            return None
        return Recorded((w.task_path or "", w.task_id, w.idx), w.idx, w.channel,
                        tuple(v.items), tuple(v.seqs), generation, None, None, w.task_id)
    return Recorded((w.task_path or "", w.task_id, w.idx), w.idx, w.channel, (), (),
                    generation, None, v, w.task_id)


def is_snapshot(value):
    """Whether a channel value is a _DeltaSnapshot of a list (a message channel's)."""
    return _DeltaSnapshot is not None and isinstance(value, _DeltaSnapshot) and \
        isinstance(value.value, list)


def check_key(key):
    """Refuses a list stored under a reserved name of a later layout."""
    if isinstance(key, str) and key.startswith(RESERVED) and key != DELTA_KEY:
        raise CorruptError(_lib.ECORRUPT, "convo: a list stored under %r, a layout this "
                           "version of convo does not know" % (key,), "")


class DeltaList:
    """A delta list as known at one generation of the thread: the log's messages
    [0, prefix), then items: texts (bytes; None for one known only by its seq) and
    seqs (-1: not known to be in the log)."""
    __slots__ = ("prefix", "texts", "seqs", "generation")

    def __init__(self, prefix, texts, seqs, generation):
        m = len(seqs)
        if m and seqs[-1] == prefix + m - 1 and seqs == seq_range(prefix + m)[prefix:]:
            n = m   # the usual list: all in the log, in order (compared at C speed, a read's
            # seqs sharing seq_range's ints: by pointer)
        else:
            n = 0
            while n < m and seqs[n] == prefix + n:
                n += 1
        self.prefix = prefix + n
        self.texts = list(texts[n:])
        self.seqs = list(seqs[n:])
        self.generation = generation

    def at(self, generation):
        """(prefix, texts, seqs) for a put at `generation`, or None when this list
        cannot be passed then (its seqs are of another generation and a text is
        missing)."""
        if generation is not None and generation == self.generation:
            return self.prefix, list(self.texts), list(self.seqs)
        if self.prefix or None in self.texts:
            return None
        return 0, list(self.texts), [-1] * len(self.texts)


def _usable(writes, generation):
    return all(w.generation == generation or None not in w.texts for w in writes)


def selection_of(prefix, texts, seqs, items, seq_of, text_of, head=0):
    """Which items of a delta list (the log's [0, prefix), then texts/seqs) a
    snapshot's list holds, in its order: [from, to) ranges of the delta list's
    indexes, or an item's own log text (one not found in it). head (<= prefix):
    items[:head] are known to be the log's messages [0, head), in order (no look
    at each)."""
    by_seq = {q: prefix + i for i, q in enumerate(seqs) if q >= 0}
    by_text = None
    used = set()
    segs = [[0, head]] if head else []
    for item in items[head:] if head else items:
        q = seq_of(item)
        j = -1
        if q >= 0:
            j = q if q < prefix else by_seq.get(q, -1)
            if j < head or j in used:
                j = -1
        text = None
        if j < 0:
            text = text_of(item)
            if by_text is None:
                by_text = {}
                for i in range(len(texts) - 1, -1, -1):
                    if texts[i] is not None:
                        by_text.setdefault(texts[i], []).append(prefix + i)
            at = by_text.get(text)
            while at and (at[-1] in used or at[-1] < head):
                at.pop()
            if at:
                j = at.pop()
        if j < 0:
            segs.append(text.decode("utf-8"))
            continue
        used.add(j)
        if segs and isinstance(segs[-1], list) and segs[-1][1] == j:
            segs[-1][1] = j + 1
        else:
            segs.append([j, j + 1])
    return segs


def _segments(segs, prefix, texts, seqs):
    """(texts, seqs) a selection of a delta list (the log's [0, prefix), then
    texts/seqs) holds."""
    out_texts, out_seqs = [], []
    for seg in segs:
        if isinstance(seg, str):
            out_texts.append(seg.encode("utf-8"))
            out_seqs.append(-1)
            continue
        lo, hi = seg
        if lo < prefix:     # the log's messages: one slice, not a step each
            top = min(hi, prefix)
            out_texts += [None] * (top - lo)
            out_seqs += seq_range(top)[lo:]
            lo = top
        if lo < hi:
            out_texts += texts[lo - prefix:hi - prefix]
            out_seqs += seqs[lo - prefix:hi - prefix]
    return out_texts, out_seqs


def selected(stored):
    """(texts, seqs) of the items a stored delta list's selection (its `rest`)
    holds, or None when its rest is not a selection."""
    rest = stored.rest
    try:
        obj = json.loads(bytes(rest.bytes)) if rest.type == "json" else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return None
    segs = obj.get(SELECT)
    if obj.get("lg_name") != LG_NAME or not isinstance(segs, list):
        return None
    texts, seqs = [], []
    n = len(stored.items)
    for seg in segs:
        if isinstance(seg, str):
            texts.append(seg.encode("utf-8"))
            seqs.append(-1)
        elif isinstance(seg, list) and len(seg) == 2 and all(type(x) is int for x in seg) \
                and 0 <= seg[0] < seg[1] <= n:
            texts.extend(stored.items[seg[0]:seg[1]])
            seqs.extend(stored.seqs[seg[0]:seg[1]])
        else:
            raise CorruptError(_lib.ECORRUPT, "convo: a DeltaSnapshot selection with a "
                               "segment %r outside its delta list of %d items" % (seg, n), "")
    return texts, seqs


def snapshot_object(obj):
    """The value of a list stored under SNAPSHOT_KEY: a _DeltaSnapshot when its
    other members say it is one."""
    if _DeltaSnapshot is not None and isinstance(obj, dict) and \
            obj.get("lg_name") == LG_NAME and set(obj) == {"lg_name", SNAPSHOT_KEY}:
        return _DeltaSnapshot(obj[SNAPSHOT_KEY])
    return obj


def selection_rest(segs):
    return ("json", json.dumps({"lg_name": LG_NAME, SELECT: segs}, **_DUMPS).encode("utf-8"))


def snapshot_rest():
    return _SNAPSHOT_REST


class DeltaLists:
    """What a saver remembers to put a delta list in O(new items): per checkpoint
    (thread, ns, id) the delta list of each channel it put or read, and the writes
    of message lists stored on it (complete: recorded from its put or its read)."""

    def __init__(self):
        self._lists = collections.OrderedDict()     # key -> {channel: DeltaList}
        self._writes = collections.OrderedDict()    # key -> [Recorded]
        # key -> (parent id, {channel: seed}): a seed is None (no value), UNKNOWN, or
        # (texts, seqs, generation) of a _DeltaSnapshot's items
        self._chain = collections.OrderedDict()
        self._lock = threading.Lock()

    def _remember(self, table, key, value):
        table.pop(key, None)
        table[key] = value
        while len(table) > _MAX_ENTRIES:
            table.popitem(last=False)

    def record_write(self, key, task_path, task_id, idx, channel, texts, seqs, generation,
                     objects=None, blob=None):
        """A write of a message list stored on checkpoint `key`. LangGraph writes only
        to a checkpoint it put or read (whose writes learn() / learn_read() recorded);
        a write stored before this saver's put of its checkpoint returned is kept for
        it too. (A write another process stored on it meanwhile is not known here: the
        child's delta list then lacks its items, which stay inline in the write; what
        LangGraph reads back never depends on the delta list.)"""
        w = Recorded((task_path or "", task_id, idx), idx, channel, tuple(texts), tuple(seqs),
                     generation, None if objects is None else tuple(objects), blob, task_id)
        with self._lock:
            l = self._writes.get(key)
            if l is None:
                l = []
                self._remember(self._writes, key, l)
            at = next((i for i, x in enumerate(l) if x.sort_key[1:] == w.sort_key[1:]), -1)
            if at >= 0:
                l[at] = w
            else:
                l.append(w)

    def list_in(self, parent_key, channel, generation, read_parent):
        """(Items, prefix, texts, seqs, (objects, sources)) of the delta list of
        `channel` for a put on `parent_key` at `generation` (texts/seqs: the items
        after the prefix, for learn(); objects: the written item each stands for, None
        if unknown; sources: the (Recorded write, index) it comes from, None for the
        parent's list); None when the parent's value is not a list. read_parent() -> the
        stored parent (convo.Checkpoint, texts all given) or None."""
        with self._lock:
            base = self._lists.get(parent_key, {}).get(channel) if parent_key else None
            writes = self._writes.get(parent_key) if parent_key else None
        start = base.at(generation) if base is not None else None
        if parent_key and (start is None or writes is None or not _usable(writes, generation)):
            got = self._from_parent(read_parent(), channel, generation)
            if got is None:
                return None
            if writes is None or not _usable(writes, generation):
                writes = got[1]     # else the ones recorded here (learn() gives them seqs)
            start = got[0]
        if start is None:
            start, writes = (0, [], []), ()
        prefix, texts, seqs = start
        objects = [None] * len(texts)
        sources = [None] * len(texts)
        for w in sorted((w for w in writes if w.channel == channel and w.idx >= 0 and
                         w.blob is None), key=lambda w: w.sort_key):
            hinted = w.generation == generation
            for i, (t, q) in enumerate(zip(w.texts, w.seqs)):
                if t is not None and t.startswith(_REMOVE_HEAD):
                    continue
                texts.append(t if q < 0 or not hinted else None)
                seqs.append(q if hinted else -1)
                objects.append(None if w.objects is None else w.objects[i])
                sources.append((w, i))
        given = [None if q >= 0 else t for t, q in zip(texts, seqs)]
        hints = seqs if any(q >= 0 for q in seqs) else None
        return Items(given, hints, key=DELTA_KEY, log=True), prefix, texts, seqs, \
            (objects, sources)

    def _from_parent(self, cp, channel, generation):
        """(start, writes) from the stored parent; None when its value of the
        channel is a plain value (not a list)."""
        if cp is None:
            return (0, [], []), ()
        start = (0, [], [])
        value = next((c.value for c in cp.channels if c.name == channel), None)
        if isinstance(value, Items):
            base = DeltaList(0, value.items, value.seqs, cp.generation).at(generation)
            start = base if base is not None else start
        elif value is not None:
            return None
        writes = [r for r in (_recorded(w, cp.generation) for w in cp.writes
                              if w.channel == channel) if r is not None]
        return start, writes

    def learn(self, key, parent_key, stored, kept, generation, seeds):
        """After a put of `key`: stored {channel: (prefix, texts, seqs, (_, sources),
        segs, seqs_out)}: the delta lists it stored (segs: a snapshot's selection, or
        None; the parent's writes it appended then have their seqs);
        kept: the channels whose version it did not change (their lists and seeds are
        the parent's); seeds {channel: None (no value) or UNKNOWN} for the others."""
        with self._lock:
            parent = self._lists.get(parent_key, {}) if parent_key else {}
            lists = {ch: parent[ch] for ch in kept if ch in parent}
            up = self._chain.get(parent_key) if parent_key else None
            seeds = dict(seeds)
            for ch in kept:
                if ch in seeds:
                    seeds[ch] = UNKNOWN if up is None else up[1].get(ch, UNKNOWN)
            appended = {}
            for ch, seed in seeds.items():
                if seed is None and ch not in kept:
                    lists[ch] = DeltaList(0, (), (), generation)   # not in this checkpoint
            for ch, (prefix, texts, seqs, (_, sources), segs, out) in stored.items():
                if out is not None and len(out) == len(texts):
                    seqs = [o if o >= 0 else q for o, q in zip(out, seqs)]
                    for src, q in zip(sources, seqs):
                        if src is not None and q >= 0:
                            appended.setdefault(id(src[0]), (src[0], {}))[1][src[1]] = q
                lists[ch] = DeltaList(prefix, texts, seqs, generation)
                seeds[ch] = None if segs is None else \
                    _segments(segs, prefix, texts, seqs) + (generation,)
            if lists:
                self._remember(self._lists, key, lists)
            self._remember(self._chain, key, (parent_key[2] if parent_key else None, seeds))
            if key not in self._writes:     # a write may have come before this put returned
                self._remember(self._writes, key, [])
            writes = self._writes.get(parent_key) if appended else None
            for i, w in enumerate(writes or ()):
                got = appended.get(id(w))
                if got is not None and (w.generation == generation or -1 not in got[1]):
                    writes[i] = w._replace(generation=generation, seqs=tuple(
                        got[1].get(j, q if w.generation == generation else -1)
                        for j, q in enumerate(w.seqs)))

    def learn_read(self, key, cp, names, items=True):
        """After a read of checkpoint `key`: its delta lists, its writes to message
        channels, its parent and seeds. items=False: cp was listed without its lists'
        items (Store.checkpoint_list channel_items=False): its delta lists are not
        known, nor the seed of a snapshot (its selection indexes the items)."""
        lists, seeds = {}, dict.fromkeys(names)
        for ch in names.difference(c.name for c in cp.channels):
            lists[ch] = DeltaList(0, (), (), cp.generation)     # not in this checkpoint
        for c in cp.channels:
            if c.name not in names or c.value is None:
                continue
            v = c.value
            if isinstance(v, Items) and v.key == DELTA_KEY and not items:
                seeds[c.name] = None if v.rest is None else UNKNOWN
            elif isinstance(v, Items) and v.key == DELTA_KEY:
                lists[c.name] = DeltaList(0, v.items, v.seqs, cp.generation)
                got = selected(v) if v.rest is not None else None
                seeds[c.name] = None if got is None else got + (cp.generation,)
            else:
                seeds[c.name] = UNKNOWN
        writes = [r for r in (_recorded(w, cp.generation) for w in cp.writes
                              if w.channel in names) if r is not None]
        if len(writes) < sum(1 for w in cp.writes if w.channel in names):
            seeds = dict.fromkeys(names, UNKNOWN)   # a write of another kind: read them
        with self._lock:
            if lists:
                old = self._lists.get(key)
                self._remember(self._lists, key, dict(old or {}, **lists))
            self._remember(self._writes, key, writes)
            self._remember(self._chain, key, (cp.parent_id, seeds))

    def history(self, key, channels):
        """get_delta_channel_history from what this saver remembers: ([(checkpoint's
        writes to the channels, oldest checkpoint first)], {channel: seed}), or None
        when an ancestor on the way, its writes or a seed is not known here."""
        remaining = set(channels)
        chain, seeds = [], {}
        with self._lock:
            entry = self._chain.get(key)
            if entry is None:
                return None
            cursor = entry[0]
            while cursor is not None and remaining:
                k = (key[0], key[1], cursor)
                entry, writes = self._chain.get(k), self._writes.get(k)
                if entry is None or writes is None:
                    return None
                chain.append(sorted((w for w in writes if w.channel in remaining),
                                    key=lambda w: w.sort_key))
                for ch in list(remaining):
                    seed = entry[1].get(ch, UNKNOWN)
                    if seed is UNKNOWN:
                        return None
                    if seed is not None:
                        seeds[ch] = seed
                        remaining.discard(ch)
                cursor = entry[0]
        chain.reverse()
        return chain, seeds

    def forget(self, thread_id=None):
        """Drops what is remembered of a thread (of every thread: None), whose
        checkpoints were deleted or pruned."""
        with self._lock:
            for table in (self._lists, self._writes, self._chain):
                for key in [k for k in table if thread_id is None or k[0] == thread_id]:
                    del table[key]
