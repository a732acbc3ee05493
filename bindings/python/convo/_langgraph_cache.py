"""The messages ConvoSaver revived from a thread's log, kept by (thread, generation,
origin, seq) so that get_tuple and list revive only the messages they have not seen,
and read only the log past what is held (Store.checkpoint_get's `known`,
convo_checkpoint_get_ex). Bounded: at most `limit` messages in all, the threads used
least recently dropped first.

Reads hand out the held message objects themselves (as the Node saver does): copying
each one per read cost more than the read of the new messages (docs/performance.md).
A held message keeps beside it a private snapshot taken when it was revived (its class,
a copy of its fields whose lists and dicts are copied down to their JSON-like leaves, and
of its pydantic extras; for a message built from a template, rebuilt from its log text
when it is compared instead of kept, so a held message costs the garbage collector what
its class's constructor would), and a read hands out only messages still equal to it:
a message changed in place since (its content, its id, a field, a list or dict inside
one) is dropped and revived again from the log, so a node changing a message of its state in
place never changes what a later read gives. Any other object inside a field is shared
with the snapshot, so a change inside it is not seen (docs/python.md "Revived messages
are kept").

What a read of n held messages checks costs O(the messages changed since), not O(n): a
held pydantic message is *watched* — its `__pydantic_fields_set__` (the set pydantic
adds a field's name to whenever the field is assigned, `msg.content = ...`) is replaced
by a Watch that also marks the message's seq changed, and each list and dict in it (its
fields, its pydantic extras, and the lists and dicts inside those down to the leaves) by
a WatchedList / WatchedDict that marks it on any change in place (append, update, item
assignment, ...); strings cannot change in place. A read looks at the marked seqs alone,
each compared with its snapshot (a mark is a hint, the snapshot the truth), and at the
few messages of a class pydantic does not call the set's add() for (found once per
class), compared field by field. Not seen: writes that bypass pydantic and the
containers (`msg.__dict__[k] = v`, `object.__setattr__`, `msg.__class__ = C`, a list
method called as `list.append(msg.tool_calls, x)`)."""

import bisect
import collections
import copy
import threading

from .checkpoint import seq_range


class Missing(Exception):
    """The read left out a message this cache no longer holds (dropped meanwhile
    by another reader): read again without `known`."""


def snapshot(item):
    """What a held item is compared with before it is handed out again: its class,
    a copy of its fields (lists and dicts copied down to their JSON-like leaves)
    and of its pydantic extras; a str is its own."""
    if isinstance(item, str):
        return item
    fields = item.__dict__.copy()
    for k, v in fields.items():
        t = type(v)
        if t in _LISTS:
            fields[k] = _copy_json(v) if v else _EMPTY_LIST
        elif t in _DICTS:
            fields[k] = _copy_json(v) if v else _EMPTY_DICT
    extra = getattr(item, "__pydantic_extra__", _NONE)
    if extra is not _NONE and extra is not None:
        extra = _copy_json(extra) if extra else _EMPTY_DICT
    return item.__class__, fields, extra


# what an empty list or dict field of a snapshot is: shared by every snapshot, never
# handed out, so never changed (fewer objects for the garbage collector to track)
EMPTY_LIST = _EMPTY_LIST = []
EMPTY_DICT = _EMPTY_DICT = {}


def _copy_json(v):
    if isinstance(v, list):
        return [_copy_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _copy_json(x) for k, x in v.items()}
    return v


def same(item, snap):
    """Whether a held item is still what its snapshot says (nothing changed in place)."""
    if item is snap:
        return True     # a str
    return item.__class__ is snap[0] and item.__dict__ == snap[1] and \
        getattr(item, "__pydantic_extra__", _NONE) == snap[2]


class Watch(set):
    """A held pydantic message's __pydantic_fields_set__: the set of its fields given
    when it was built, to which pydantic's __setattr__ adds the name of every field
    assigned since: add() also marks the message's seq in its thread's `changed`
    (`thread` and `seq` set when it is held, `thread` None again when it is no
    longer held; a message built from a template gets one unset). A copy or a
    pickle of the message gets a plain set."""
    __slots__ = ("thread", "seq")

    def add(self, name):
        set.add(self, name)
        _mark(self)

    def __reduce__(self):
        return set, (list(self),)

    def __copy__(self):
        return set(self)

    def __deepcopy__(self, memo):
        return set(self)


def _mark(watch):
    thread = getattr(watch, "thread", None)     # unset: not held (yet)
    if thread is not None:
        thread.changed.add(watch.seq)


def _marking(base, name):
    """base's method `name` that first marks the container's message changed (a
    read that sees the change in place sees the mark too)."""
    method = getattr(base, name)

    def marking(self, *args, **kwargs):
        w = getattr(self, "watch", None)
        if w is not None:
            _mark(w)
        return method(self, *args, **kwargs)
    marking.__name__ = marking.__qualname__ = name
    return marking


def _plain(v, memo):
    """copy.deepcopy of v with its watched lists and dicts plain ones."""
    if type(v) not in _WATCHED:
        return copy.deepcopy(v, memo)
    got = memo.get(id(v))
    if got is not None:
        return got
    if type(v) is WatchedList:
        out = memo[id(v)] = []
        out.extend(_plain(x, memo) for x in v)
    else:
        out = memo[id(v)] = {}
        out.update((k, _plain(x, memo)) for k, x in v.items())
    return out


class WatchedList(list):
    """A list inside a held message: equal to the list; any change in place marks
    the message (`watch`: its Watch) changed. A copy (copy.copy, copy.deepcopy,
    pickle) is a plain list."""
    __slots__ = ("watch",)

    def __copy__(self):
        return list(self)

    def __deepcopy__(self, memo):
        return _plain(self, memo)

    def __reduce__(self):
        return list, (list(self),)


class WatchedDict(dict):
    """A dict inside a held message, as WatchedList."""
    __slots__ = ("watch",)

    def __copy__(self):
        return dict(self)

    def __deepcopy__(self, memo):
        return _plain(self, memo)

    def __reduce__(self):
        return dict, (dict(self),)


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend",
              "insert", "pop", "remove", "clear", "sort", "reverse"):
    setattr(WatchedList, _name, _marking(list, _name))
for _name in ("__setitem__", "__delitem__", "__ior__", "update", "setdefault", "pop",
              "popitem", "clear"):
    setattr(WatchedDict, _name, _marking(dict, _name))

_LISTS = frozenset((list, WatchedList))
_DICTS = frozenset((dict, WatchedDict))
_CONTAINERS = _LISTS | _DICTS
_WATCHED = frozenset((WatchedList, WatchedDict))


def watched(v, watch):
    """v with every list and dict in it (v itself, and down to the leaves) a
    watched one marking `watch`; other values as they are (shared)."""
    t = type(v)
    if t in _DICTS:
        out = WatchedDict(v)
        for k, x in v.items():
            if type(x) in _CONTAINERS:
                dict.__setitem__(out, k, watched(x, watch))
    elif t in _LISTS:
        out = WatchedList(v)
        for i, x in enumerate(v):
            if type(x) in _CONTAINERS:
                list.__setitem__(out, i, watched(x, watch))
    else:
        return v
    out.watch = watch
    return out


def _all_watched(v, watch):
    t = type(v)
    if t in _WATCHED:
        return v.watch is watch and all(_all_watched(x, watch) for x in
                                        (v.values() if t is WatchedDict else v))
    return t is not list and t is not dict


def fully_watched(item, thread):
    """Whether a held message's fields set and every list and dict in it still mark
    it in `thread` (an assignment may have put a plain list in: such a message is
    compared at each read until it is revived again)."""
    w = item.__pydantic_fields_set__
    return type(w) is Watch and getattr(w, "thread", None) is thread and \
        all(_all_watched(v, w) for v in item.__dict__.values()) and \
        _all_watched(item.__pydantic_extra__, w)


_WATCHABLE = {}     # type -> whether an assignment to a field of its objects reaches Watch.add


def _watchable(item):
    """Whether item is a pydantic model whose field assignments go through its
    __pydantic_fields_set__'s add() (tried once per class, on a copy of the item)."""
    t = type(item)
    answer = _WATCHABLE.get(t)
    if answer is None:
        answer = False
        try:
            if isinstance(getattr(item, "__pydantic_fields_set__", None), set) and \
                    "id" in item.__dict__:
                probe = item.__copy__()
                _object_setattr(probe, "__pydantic_fields_set__",
                                _Probe(probe.__pydantic_fields_set__))
                probe.id = "convo-probe"
                answer = probe.__pydantic_fields_set__.added and \
                    probe.__dict__.get("id") == "convo-probe"
        except Exception:   # noqa: BLE001 - a class we cannot try is compared field by field
            answer = False
        if len(_WATCHABLE) < 256:
            _WATCHABLE[t] = answer
    return answer


def _watch(entry, seq, item, snap, from_template=False):
    """Whether an item about to be held at seq is watched (a str needs nothing): its
    fields set replaced by a Watch of (entry, seq), its lists and dicts by watched
    ones; False for an item to compare field by field at each read. from_template:
    built from a template by this read (its Watch and containers made already, of no
    thread yet)."""
    if snap is item:
        return True         # a str
    if not _watchable(item):
        return False
    w = item.__pydantic_fields_set__
    if from_template and type(w) is Watch and getattr(w, "thread", None) is None:
        w.thread, w.seq = entry, seq
        return True
    w = Watch(w)
    d = item.__dict__
    for k, v in d.items():
        if type(v) in _CONTAINERS:
            d[k] = watched(v, w)    # an existing key: no change of size while iterating
    extra = item.__pydantic_extra__
    if extra is not None:
        _object_setattr(item, "__pydantic_extra__", watched(extra, w))
    w.thread, w.seq = entry, seq
    _object_setattr(item, "__pydantic_fields_set__", w)
    return True


def _unwatch(item):
    """A message no longer held: its changes mark nothing."""
    w = getattr(item, "__pydantic_fields_set__", None)
    if type(w) is Watch:
        w.thread = None


class _Probe(set):
    """What _watchable tries a class with: whether pydantic called add()."""
    __slots__ = ("added",)

    def __init__(self, *args):
        set.__init__(self, *args)
        self.added = False

    def add(self, name):
        set.add(self, name)
        self.added = True


_HOLDABLE = {}      # type -> whether its objects are held (asked once per type)


def _holdable(item):
    """Messages (LangChain's, and any pydantic model with type/content/id) and
    strings; other items are revived on every read."""
    t = type(item)
    answer = _HOLDABLE.get(t)
    if answer is None:
        answer = isinstance(item, str) or (
            hasattr(item, "type") and hasattr(item, "content") and hasattr(item, "id") and
            hasattr(item, "__dict__") and not isinstance(item, dict))
        if len(_HOLDABLE) < 256:
            _HOLDABLE[t] = answer
    return answer


_NONE = object()
_object_setattr = object.__setattr__


class _Thread:
    """What is held of one thread's log, valid at (generation, origin): `held` seq ->
    item, `texts` seq -> its log text, `snaps` seq -> its snapshot, or for an item
    built from a template the function rebuilding it from its text when needed; and
    `fieldwise` the seqs of items compared field by field at each read (a class
    pydantic does not report assignments of). Parallel dicts, not a tuple a message:
    fewer objects for the garbage collector (docs/performance.md, py28k). length: the
    seqs [0, length) are all held; `prefix` their items by seq (a read takes them
    with one slice), `others` the seqs among them in fieldwise. `changed`: the seqs
    of watched messages changed since they were checked (Watch, WatchedList,
    WatchedDict)."""
    __slots__ = ("generation", "origin", "held", "texts", "snaps", "fieldwise",
                 "length", "prefix", "others", "changed")

    def __init__(self, generation, origin):
        self.generation, self.origin = generation, origin
        self.held, self.texts, self.snaps = {}, {}, {}
        self.fieldwise = set()
        self.changed = set()
        self.length = 0
        self.truncate(0)

    def snapshot(self, seq):
        """The snapshot of held item seq (KeyError when it is not held)."""
        snap = self.snaps[seq]
        t = type(snap)
        return snap if t is tuple or t is str else snap(self.texts[seq])

    def same(self, seq, item):
        """Whether item (held at seq) is still what its snapshot says."""
        try:
            snap = self.snapshot(seq)
        except KeyError:    # dropped meanwhile
            return False
        return same(item, snap)

    def truncate(self, k):
        # new lists: a read under way keeps its own (the marks stay: the messages
        # held past k are still handed out by seq, their marks checked then)
        self.length = 0
        self.prefix, self.others = [], []
        self._add(k)

    def extend(self):
        held, k = self.held, self.length
        end = k
        while end in held:
            end += 1
        if end > k:
            self._add(end)

    def _add(self, end):
        """Appends the held seqs [length, end) to the lists; the prefix last: a read
        that finds k items in it finds the rest of the lists ready."""
        k, held = self.length, self.held
        if self.fieldwise:
            self.others.extend([q for q in range(k, end) if q in self.fieldwise])
        self.prefix.extend([held[q] for q in range(k, end)])
        self.length = end

    def first_changed(self, k):
        """The first seq of [0, k) (k <= length) whose item was changed since its
        snapshot, -1 when none was: the seqs marked changed and those compared field
        by field, each compared with its snapshot."""
        items = self.prefix
        if len(items) < k:
            return len(items)   # truncated meanwhile
        held = self.held
        suspects = sorted(self.changed.copy())  # a copy: another thread may add
        others = self.others
        if others:
            suspects = sorted(set(suspects).union(others[:bisect.bisect_left(others, k)]))
        changed = self.changed
        for q in suspects:
            if q >= k:
                break
            item = held.get(q)
            if item is None:
                return q
            marked = q in changed
            # unmarked before the comparison: a change made after it marks again
            changed.discard(q)
            if not self.same(q, item):
                changed.add(q)
                return q
            # an equal value assigned: unmarked only while the message is watched whole
            if marked and not (q not in self.fieldwise and (isinstance(item, str) or
                                                             fully_watched(item, self))):
                changed.add(q)
        return -1


class MessageCache:
    def __init__(self, limit):
        self.limit = limit
        self._threads = collections.OrderedDict()   # thread id -> _Thread
        self._count = 0
        self._lock = threading.Lock()

    def known(self, thread_id):
        """Store.checkpoint_get's `known` for the thread: (generation, length,
        origin), or None when nothing is held. Nothing is checked here: a read
        checks the held messages it hands out (_Reader.items), so a read that
        hands out few of them (a DeltaChannel's checkpoint, a write) costs O(new),
        not O(held); one changed in place is dropped there and the read made again
        (Missing)."""
        with self._lock:
            t = self._threads.get(thread_id)
            if t is None or t.length == 0 or t.origin < 0:
                return None
            self._threads.move_to_end(thread_id)
            return (t.generation, t.length, t.origin)

    def _drop(self, entry, thread_id, seq):
        """Drops held message seq, found changed in place: the next read gives its
        text (and those after it) again."""
        with self._lock:
            if self._threads.get(thread_id) is not entry or seq not in entry.held:
                return
            _unwatch(entry.held.pop(seq))
            entry.texts.pop(seq, None)
            entry.snaps.pop(seq, None)
            entry.fieldwise.discard(seq)
            entry.changed.discard(seq)
            self._count -= 1
            if seq < entry.length:
                entry.truncate(seq)

    def tag(self, thread_id):
        """(generation, origin) the thread's held messages are of, None if none."""
        with self._lock:
            t = self._threads.get(thread_id)
            return None if t is None else (t.generation, t.origin)

    def held_head(self, thread_id, generation, items):
        """How many of items' first ones are the thread's held messages [0, h) at
        `generation`, in order and unchanged since they were held: the objects (or
        equal ones) by one C-level list comparison, then their marks."""
        with self._lock:
            t = self._threads.get(thread_id)
            if t is None or t.generation != generation:
                return 0
            prefix = t.prefix
        h = min(len(items), len(prefix))
        if not h or (items if len(items) == h else items[:h]) != \
                (prefix if len(prefix) == h else prefix[:h]):
            return 0
        c = t.first_changed(h)
        return h if c < 0 else c

    def seq_finder(self, thread_id, generation, start=0):
        """item -> the seq (>= start) of the held message of the thread it is (at
        `generation`, unchanged since it was revived), -1 for any other item."""
        with self._lock:
            t = self._threads.get(thread_id)
            if t is None or t.generation != generation:
                return lambda item: -1
            held, prefix, length = t.held, t.prefix, t.length
        where = {}
        built = []

        def seq_of(item):
            if not built:
                built.append(True)
                where.update((id(x), q) for q, x in enumerate(prefix[start:length], start))
                if len(held) > length:      # held past a gap (rare): look at them all
                    where.update((id(x), q) for q, x in list(held.items())
                                 if q >= max(length, start))
            q = where.get(id(item), -1)
            if q < 0 or held.get(q) is not item:
                return -1
            # a watched message not marked is unchanged; any other is compared
            if (q in t.fieldwise or q in t.changed) and not t.same(q, item):
                return -1
            return q
        return seq_of

    def reader(self, thread_id, generation, origin, hold=True):
        """A reader of the items of one checkpoint read at (generation, origin).
        hold=False (a list across threads): it uses what is held but adds no
        thread and no message (it would push out the threads being read)."""
        return _Reader(self, thread_id, generation, origin, hold)

    def forget(self, thread_id):
        with self._lock:
            t = self._threads.pop(thread_id, None)
            if t is not None:
                self._release(t)

    def _release(self, t):
        """A thread's entry no longer kept: its messages mark nothing (nor keep it)."""
        self._count -= len(t.held)
        for item in t.held.values():
            _unwatch(item)

    def _entry(self, thread_id, generation, origin, create=True):
        """The thread's entry for items read at (generation, origin): the held one,
        a new one when the thread was found at another generation or origin (what
        was held is dropped; not with create=False), None when new items cannot
        be tagged (origin unknown)."""
        if self.limit <= 0 or generation < 0:
            return None
        with self._lock:
            t = self._threads.get(thread_id)
            if t is not None and (t.generation, t.origin) == (generation, origin):
                return t
            if origin < 0 or not create:
                return None
            if t is not None:
                self._release(t)
            t = self._threads[thread_id] = _Thread(generation, origin)
            return t


    def _hold(self, entry, thread_id, seqs, texts, items, snaps):
        """Keeps items (at seqs, of log texts) in entry while the limit allows (an
        item revived again replaces the one held); snaps: each one's snapshot, or for
        an item this read built from a template (its Watch made, of no thread) the
        function rebuilding its snapshot from its text when needed."""
        with self._lock:
            if self._threads.get(thread_id) is not entry:
                return      # dropped or replaced meanwhile
            held, kept_texts, kept_snaps = entry.held, entry.texts, entry.snaps
            for seq, text, item, snap in zip(seqs, texts, items, snaps):
                from_template = type(snap) is not tuple and type(snap) is not str
                w = item.__pydantic_fields_set__ if from_template else None
                if type(w) is Watch and _WATCHABLE.get(type(item)):
                    w.thread, w.seq = entry, seq
                    watching = True
                else:
                    watching = _watch(entry, seq, item, snap, from_template)
                if from_template and not watching:
                    snap = snap(text)   # compared at each read: kept
                if seq in held:
                    if held[seq] is not item:
                        _unwatch(held[seq])
                    self._keep(entry, seq, text, item, snap, watching)
                    entry.changed.discard(seq)
                    if seq < entry.length:
                        entry.truncate(seq)
                    continue
                while self._count >= self.limit and self._evict(entry):
                    pass
                if self._count >= self.limit:
                    return
                # _keep inline (a seq not held is in no other table): a call a message less
                kept_texts[seq] = text
                kept_snaps[seq] = snap
                if not watching:
                    entry.fieldwise.add(seq)
                held[seq] = item
                self._count += 1
            entry.extend()

    @staticmethod
    def _keep(entry, seq, text, item, snap, watching):
        entry.texts[seq] = text
        entry.snaps[seq] = snap
        if watching:
            entry.fieldwise.discard(seq)
        else:
            entry.fieldwise.add(seq)
        entry.held[seq] = item      # last: a reader that finds the item finds the rest

    def _evict(self, keep):
        """Drops the least recently used thread other than keep's; False when none."""
        for thread_id, t in self._threads.items():
            if t is not keep:
                del self._threads[thread_id]
                self._release(t)
                return True
        return False


class _Reader:
    """Revives the item lists of one checkpoint: held items handed out again after
    checking that none was changed in place (one that was is dropped and Missing
    raised: the caller reads again), the others revived with one serde call per
    list and kept for the next read when they are in the log."""

    def __init__(self, cache, thread_id, generation, origin, hold):
        self.cache, self.thread_id, self.hold = cache, thread_id, hold
        self.entry = cache._entry(thread_id, generation, origin, create=hold)

    def items(self, serde, value, revive):
        """The items of a resolved convo.Items; revive(serde, texts[, fields])
        revives texts (and sets fields[i], for an item it built from a template, its
        fields set a Watch and its lists and dicts watched ones of that Watch, to a
        function of its text giving its snapshot; else leaves None)."""
        texts, seqs = value.items, value.seqs
        n = len(texts)
        out = None
        missing = []
        # a dict read while another thread adds to it (_hold) is safe under the GIL
        entry = self.entry
        held = entry.held if entry is not None else {}
        start = 0
        if entry is not None:
            # the usual list: the log's first messages, those held left out of the
            # read, found at C speed, checked by their marks and taken with one slice
            prefix = entry.prefix
            k = getattr(texts, "held", None)    # a LeftOut: its first k known as read
            if k is None:
                k = texts.count(None)
                if not (k and texts[k - 1] is None and texts[:k].count(None) == k and
                        seqs[:k] == seq_range(k)):
                    k = 0
            if k and k <= len(prefix):
                changed = entry.first_changed(k)
                if changed >= 0:
                    self.cache._drop(entry, self.thread_id, changed)
                    raise Missing(changed)
                out = prefix[:k]    # the caller's own list: one pass over n pointers
                out += [None] * (n - k)
                start = k
        if out is None:
            out = [None] * n
        for i in range(start, n):
            text, seq = texts[i], seqs[i]
            got = held.get(seq)
            if got is not None and (text is None or entry.texts.get(seq) == text) and (
                    (seq not in entry.fieldwise and seq not in entry.changed) or
                    entry.same(seq, got)):
                out[i] = got    # watched and not marked, or equal to its snapshot
            elif text is None:
                if got is not None:     # changed in place since it was revived
                    self.cache._drop(entry, self.thread_id, seq)
                raise Missing(seq)
            else:
                missing.append(i)
        if not missing:
            return out
        texts = [value.items[i] for i in missing]
        if not (self.hold and self.entry is not None):
            for i, item in zip(missing, revive(serde, texts)):
                out[i] = item
            return out
        # the reviver says which items it built from a template (fields): their
        # snapshots are rebuilt from their texts when needed (rare), not kept: two
        # objects a message fewer for the garbage collector
        fields = [None] * len(missing)
        revived = revive(serde, texts, fields)
        seqs = value.seqs
        added = [j for j, i in enumerate(missing) if seqs[i] >= 0 and _holdable(revived[j])]
        for i, item in zip(missing, revived):
            out[i] = item
        if added:
            if len(added) < len(missing):
                texts = [texts[j] for j in added]
                revived = [revived[j] for j in added]
                fields = [fields[j] for j in added]
            self.cache._hold(entry, self.thread_id, [seqs[missing[j]] for j in added], texts,
                             revived, [snapshot(x) if f is None else f
                                       for x, f in zip(revived, fields)])
        return out
