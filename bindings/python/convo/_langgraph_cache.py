"""The messages ConvoSaver revived from a thread's log, kept by (thread, generation,
origin, seq) so that get_tuple and list revive only the messages they have not seen,
and read only the log past what is held (Store.checkpoint_get's `known`,
convo_checkpoint_get_ex). Bounded: at most `limit` messages in all, the threads used
least recently dropped first.

Reads hand out the held message objects themselves (as the Node saver does): copying
each one per read cost more than the read of the new messages (docs/performance.md).
A held message keeps beside it a private snapshot taken when it was revived (its class,
a copy of its fields whose lists and dicts are copied down to their JSON-like leaves, and
of its pydantic extras), and a read hands out only messages still equal to it: a message
changed in place since (its content, its id, a field, a list or dict inside one) is
dropped and revived again from the log, so a node changing a message of its state in
place never changes what a later read gives. Any other object inside a field is shared
with the snapshot, so a change inside it is not seen (docs/python.md "Revived messages
are kept").

What a read of n held messages checks costs O(1) a message with a small constant, not a
comparison of each one's fields: a held pydantic message is *watched* — its
`__pydantic_fields_set__` (the set pydantic adds a field's name to whenever the field
is assigned, `msg.content = ...`) is replaced by a Watch that also marks the message's
seq changed; strings cannot change in place, so what is left to look at is its lists and
dicts: those empty when it was revived are compared, all of the thread's together, with
one shared empty of their kind (one C-level list comparison), the few that were not with
their copies. A message whose class pydantic does not call the set's add() for (found
once per class) is compared field by field, as before."""

import bisect
import collections
import itertools
import operator
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
        if t is list:
            fields[k] = _copy_json(v) if v else _EMPTY_LIST
        elif t is dict:
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
    (`thread` and `seq` set when it is held; a message built from a template gets
    one unset). A copy or a pickle of the message gets a plain set."""
    __slots__ = ("thread", "seq")

    def add(self, name):
        set.add(self, name)
        thread = getattr(self, "thread", None)     # unset: not held (yet)
        if thread is not None:
            thread.changed.add(self.seq)

    def __reduce__(self):
        return set, (list(self),)

    def __copy__(self):
        return set(self)

    def __deepcopy__(self, memo):
        return set(self)


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


def _watch(entry, seq, item, snap, empties=None):
    """The parts of an item about to be held at seq (see _Thread), its fields set
    replaced by a Watch when it is a watched message. empties: those of an item
    built from a template (its fields set already a Watch of no thread)."""
    if snap is item:
        return (), ()       # a str
    if not _watchable(item):
        return None
    w = item.__pydantic_fields_set__
    if empties is not None and type(w) is Watch and getattr(w, "thread", None) is None:
        w.thread, w.seq = entry, seq
        return empties, ()
    parts = _watch_parts(item, snap)
    w = Watch(w)
    w.thread, w.seq = entry, seq
    _object_setattr(item, "__pydantic_fields_set__", w)
    return parts


class _Probe(set):
    """What _watchable tries a class with: whether pydantic called add()."""
    __slots__ = ("added",)

    def __init__(self, *args):
        set.__init__(self, *args)
        self.added = False

    def add(self, name):
        set.add(self, name)
        self.added = True


def _watch_parts(item, snap):
    """(empties, deep) of a watched message: its list and dict fields (and pydantic
    extras) that are empty, and [(container, its snapshot copy)] of the others."""
    empties, deep = [], []
    fields = snap[1]
    for k, v in item.__dict__.items():
        t = type(v)
        if t is list or t is dict:
            if v:
                deep.append((v, fields[k]))
            else:
                empties.append(v)
    extra = item.__pydantic_extra__
    if extra is not None:
        if extra:
            deep.append((extra, snap[2]))
        else:
            empties.append(extra)
    return empties, deep


_PARTS = operator.itemgetter(3)     # of a held entry
_EMPTIES = operator.itemgetter(0)   # of parts
_DEEP = operator.itemgetter(1)
_BLANK_OF = {list: EMPTY_LIST, dict: EMPTY_DICT}

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
    """What is held of one thread's log: seq -> (text, item, snapshot, parts), valid
    at (generation, origin); parts: _watch_parts of a watched message, ((), ()) for
    a str, None for an item compared field by field. length: the seqs [0, length)
    are all held; for those, lists by seq, so that a read checks them at C speed:
    `prefix` the items (a read takes them with one slice), `classes` their classes,
    `empties` the lists and dicts empty when they were revived, in seq order, with
    `blanks` (the shared empty of each one's kind) beside them and `ends[q]` the
    number of them before seq q; `deep` the others as (seqs, containers, copies);
    `other`: how many of them are compared field by field. `changed`: the seqs of
    watched messages a field of which was assigned (Watch)."""
    __slots__ = ("generation", "origin", "held", "length", "prefix", "classes", "empties",
                 "blanks", "ends", "deep", "other", "changed")

    def __init__(self, generation, origin):
        self.generation, self.origin = generation, origin
        self.held = {}
        self.changed = set()
        self.length = 0
        self.truncate(0)

    def truncate(self, k):
        # new lists: a read under way keeps its own
        self.length = 0
        self.classes, self.empties, self.blanks, self.ends = [], [], [], [0]
        self.deep = ([], [], [])
        self.other = 0
        self.prefix = []
        self.changed.difference_update([q for q in self.changed.copy() if q >= k])
        self._add([self.held[q] for q in range(k)])

    def extend(self):
        held, k = self.held, self.length
        end = k
        while end in held:
            end += 1
        if end > k:
            self._add([held[q] for q in range(k, end)])

    def _add(self, entries):
        """Appends held entries (the seqs from length on) to the lists; the prefix
        last: a read that finds k items in it finds the rest of the lists ready."""
        seqs, objs, copies = self.deep
        empties, ends = self.empties, self.ends
        parts = list(map(_PARTS, entries))
        if None in parts or any(map(_DEEP, parts)):
            for q, p in enumerate(parts, self.length):
                if p is None:
                    self.other += 1
                else:
                    empties.extend(p[0])
                    for container, copy in p[1]:
                        seqs.append(q)
                        objs.append(container)
                        copies.append(copy)
                ends.append(len(empties))
        else:   # the usual entries (messages, strings): their empties at C speed
            lists = list(map(_EMPTIES, parts))
            ends.extend(itertools.islice(itertools.accumulate(map(len, lists),
                                                              initial=len(empties)), 1, None))
            empties.extend(itertools.chain.from_iterable(lists))
        self.blanks.extend(map(_BLANK_OF.__getitem__, map(type, empties[len(self.blanks):])))
        self.classes.extend([e[1].__class__ for e in entries])
        self.prefix.extend([e[1] for e in entries])
        self.length += len(entries)

    def first_changed(self, k):
        """The first seq of [0, k) (k <= length) whose item was changed since its
        snapshot, -1 when none was: the seqs marked changed, then one C-level
        comparison each of the items' classes, of the empty containers with the
        blanks and of the others with their copies."""
        items, classes, ends = self.prefix, self.classes, self.ends
        if len(items) < k or len(classes) < k or len(ends) <= k:
            return min(len(items), len(classes), len(ends) - 1)  # truncated meanwhile
        held = self.held
        if self.changed:
            for q in sorted(self.changed.copy()):   # a copy: another thread may add
                if q >= k:
                    break
                got = held.get(q)
                if got is None or not same(got[1], got[2]):
                    return q
                self.changed.discard(q)     # assigned an equal value: nothing changed
        if k < len(items):
            items, classes = items[:k], classes[:k]
        if not self.other:
            e = ends[k]
            empties, blanks = self.empties, self.blanks
            if e < len(empties) or len(blanks) != e:
                empties, blanks = empties[:e], blanks[:e]
            seqs, objs, copies = self.deep
            d = bisect.bisect_left(seqs, k)
            if list(map(type, items)) == classes and empties == blanks and \
                    objs[:d] == copies[:d]:
                return -1
        return next((q for q, x in enumerate(items) if not same(x, held[q][2])), -1)


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
            del entry.held[seq]
            entry.changed.discard(seq)
            self._count -= 1
            if seq < entry.length:
                entry.truncate(seq)

    def tag(self, thread_id):
        """(generation, origin) the thread's held messages are of, None if none."""
        with self._lock:
            t = self._threads.get(thread_id)
            return None if t is None else (t.generation, t.origin)

    def seq_finder(self, thread_id, generation):
        """item -> the seq of the held message of the thread it is (at `generation`,
        unchanged since it was revived), -1 for any other item."""
        with self._lock:
            t = self._threads.get(thread_id)
            held = dict(t.held) if t is not None and t.generation == generation else {}
        where = {}

        def seq_of(item):
            if not where and held:
                where.update((id(e[1]), (q, e)) for q, e in held.items())
            got = where.get(id(item))
            if got is None or got[1][1] is not item or not same(item, got[1][2]):
                return -1
            return got[0]
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
                self._count -= len(t.held)

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
                self._count -= len(t.held)
            t = self._threads[thread_id] = _Thread(generation, origin)
            return t


    def _hold(self, entry, thread_id, added):
        """Keeps [(seq, text, item, snapshot, empties)] in entry while the limit
        allows (an item revived again replaces the one held); empties: those of
        an item built from a template, else None."""
        with self._lock:
            if self._threads.get(thread_id) is not entry:
                return      # dropped or replaced meanwhile
            for seq, text, item, snapshot, empties in added:
                w = item.__pydantic_fields_set__ if empties is not None else None
                if type(w) is Watch and _WATCHABLE.get(type(item)):
                    # just built from a template by this read (its Watch of no thread yet)
                    w.thread, w.seq = entry, seq
                    parts = empties, ()
                else:
                    parts = _watch(entry, seq, item, snapshot, empties)
                if seq in entry.held:
                    entry.held[seq] = (text, item, snapshot, parts)
                    entry.changed.discard(seq)
                    if seq < entry.length:
                        entry.truncate(seq)
                    continue
                while self._count >= self.limit and self._evict(entry):
                    pass
                if self._count >= self.limit:
                    return
                entry.held[seq] = (text, item, snapshot, parts)
                self._count += 1
            entry.extend()

    def _evict(self, keep):
        """Drops the least recently used thread other than keep's; False when none."""
        for thread_id, t in self._threads.items():
            if t is not keep:
                del self._threads[thread_id]
                self._count -= len(t.held)
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
        revives texts (and sets fields[i] to (the snapshot fields, the empty lists
        and dicts) of an item it built from a template, else leaves None)."""
        texts, seqs = value.items, value.seqs
        n = len(texts)
        out = [None] * n
        missing = []
        # a dict read while another thread adds to it (_hold) is safe under the GIL
        held = self.entry.held if self.entry is not None else {}
        start = 0
        if self.entry is not None:
            # the usual list: the log's first messages, those held left out of the
            # read, checked at C speed and taken with one slice
            entry = self.entry
            prefix = entry.prefix
            k = texts.count(None)
            if k and k <= len(prefix) and texts[k - 1] is None and \
                    texts[:k].count(None) == k and seqs[:k] == seq_range(k):
                changed = entry.first_changed(k)
                if changed >= 0:
                    self.cache._drop(entry, self.thread_id, changed)
                    raise Missing(changed)
                out[:k] = prefix[:k]
                start = k
        for i in range(start, n):
            text, seq = texts[i], seqs[i]
            got = held.get(seq)
            if got is not None and (text is None or got[0] == text) and same(got[1], got[2]):
                out[i] = got[1]
            elif text is None:
                if got is not None:     # changed in place since it was revived
                    self.cache._drop(self.entry, self.thread_id, seq)
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
        # the reviver gives the snapshot of what it built from a template (fields)
        fields = [None] * len(missing)
        revived = revive(serde, texts, fields)
        added = []
        for i, item, f in zip(missing, revived, fields):
            seq = value.seqs[i]
            if seq >= 0 and _holdable(item):
                if f is None:
                    added.append((seq, value.items[i], item, snapshot(item), None))
                else:
                    added.append((seq, value.items[i], item, (item.__class__, f[0], _EMPTY_DICT),
                                  f[1]))
            out[i] = item
        if added:
            self.cache._hold(self.entry, self.thread_id, added)
        return out
