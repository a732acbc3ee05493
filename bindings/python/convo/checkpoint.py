"""Graph checkpoints from Python: Store's checkpoint_* calls (a mixin of
convo.Store) and their read-only results. Values are typed blobs given and
returned as (type, bytes) pairs; the store never looks inside them."""

import collections
import collections.abc
import ctypes
import json
import threading

from . import _lib
from ._args import _text, _json_bytes, _int, _items
from .errors import NotFoundError, CorruptError, invalid

lib = _lib.lib


class Blob(collections.namedtuple("Blob", "type bytes")):
    """A typed value: type is the serializer's tag ("json", "msgpack", ...),
    bytes its payload, opaque to the store."""
    __slots__ = ()


class Items(collections.namedtuple("Items", "items seqs key rest log")):
    """A value kept as a list of items in the thread's log (log references,
    docs/checkpoints.md): each item a message (a dict, or JSON text as str or
    bytes, with a non-empty string "role"). Given as a channel value to
    checkpoint_put or a write value to checkpoint_put_writes; the library
    stores log seq ranges plus, inline, the items not in the log.

    seqs: None, or one entry per item: the log seq the item is known to be
    (from an earlier get or put), -1 when unknown (then compared by text); an
    item with a seq may be None (its text is not needed).
    key: the value is an object whose member `key` is the list, its other
    members the blob `rest` ((type, bytes)); None: the value is the list.
    log: True for a conversation channel (its fresh items enter the log with
    the checkpoint when they extend the parent's list), False for an input or
    a write (kept inline until a put appends them).

    Read back (Checkpoint.channels / writes), items are the exact bytes of
    each item (None for one the read was told the caller holds: `known`),
    seqs the log seq of each (-1: kept inline), rest a Blob or None, log None."""
    __slots__ = ()

    def __new__(cls, items, seqs=None, key=None, rest=None, log=False):
        return super().__new__(cls, items, seqs, key, rest, log)

    def json(self):
        """The items decoded into new dicts."""
        return [json.loads(x) for x in self.items]


class Channel(collections.namedtuple("Channel", "name version value")):
    """One channel of a checkpoint: its name, its current version, and its
    value as a Blob (None when that version has no value)."""
    __slots__ = ()


class Write(collections.namedtuple("Write", "task_id task_path idx channel value")):
    """A pending write of a task: idx >= 0 is stored once per (task_id, idx);
    a negative idx (errors, interrupts) replaces. value is a Blob."""
    __slots__ = ()


_CHECKPOINT_FIELDS = ("thread_id ns id parent_id metadata_json log_length created_at "
                      "body channels writes generation log_origin")


class Checkpoint(collections.namedtuple("Checkpoint", _CHECKPOINT_FIELDS)):
    """A stored checkpoint, every field of the C accessors: thread_id, ns,
    id, parent_id (or None), metadata_json (the stored JSON object, as text),
    log_length (messages [0, log_length) of the thread belong to it),
    created_at (microseconds since the epoch), body (a Blob, or None),
    channels (a tuple of Channel in name order, values of ancestors
    included), writes (a tuple of Write in (task_id, idx) order) and
    generation (the thread's generation its log references were resolved at:
    the seqs of its Items are valid for it, pass it as expected_generation
    with them; -1 when it has none) and log_origin (the created_at of the
    thread's message 0 as read then, -1 when it was not read): what
    checkpoint_get's `known` takes. Read-only, like every result of the binding."""
    __slots__ = ()

    @property
    def metadata(self):
        """The metadata decoded into a new dict."""
        return json.loads(self.metadata_json)

    @property
    def values(self):
        """{channel name: Blob} for the channels that have a value."""
        return {c.name: c.value for c in self.channels if c.value is not None}


def _str(ptr):
    return None if ptr is None else ptr.decode("utf-8")


class _Keep:
    """Holds the Python objects whose memory a C struct points into until the
    call has returned."""

    def __init__(self):
        self.refs = []

    def __call__(self, obj):
        self.refs.append(obj)
        return obj


def _blob_in(value, what, keep, allow_none=False):
    """(type, bytes) -> a convo_blob pointing into bytes kept alive by keep."""
    if value is None:
        if allow_none:
            return None
        raise invalid("%s must be a (type, bytes) pair, not None" % what)
    if isinstance(value, (str, bytes, bytearray, memoryview)) or \
            not isinstance(value, collections.abc.Sequence) or len(value) != 2:
        raise invalid("%s must be a (type, bytes) pair" % what)
    type_, data = value
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise invalid("%s: the payload must be bytes, not %s" % (what, type(data).__name__))
    data = keep(bytes(data))
    type_ = keep(_text(type_, "%s type" % what))
    return _lib.Blob(type_, ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), len(data))


def _blob_out(blob):
    if blob.type is None:
        return None
    return Blob(blob.type.decode("utf-8"), ctypes.string_at(blob.bytes, blob.len))


def _seqs_in(seqs, what):
    """The seqs of an Items as a list of ints >= -1 (a list of plain ints, the
    usual case, is checked without a call per element)."""
    seqs = list(_items(seqs, what + " seqs"))
    if seqs and not (all(type(q) is int for q in seqs) and min(seqs) >= -1
                     and max(seqs) < (1 << 63)):
        seqs = [_int(q, "%s seq" % what, -1) for q in seqs]
    return seqs


def _items_in(value, what, keep):
    """An Items -> a convo_items_in (kept alive by keep) and its seqs_out array."""
    seqs = None if value.seqs is None else _seqs_in(value.seqs, what)
    items = list(_items(value.items, what + " items"))
    n = len(items)
    if seqs is not None and len(seqs) != n:
        raise invalid("%s: %d seqs for %d items" % (what, len(seqs), n))
    # an item known by its seq may be None: the library does not need its text
    texts = [m if m is None else _json_bytes(m, "%s item %d" % (what, i))
             for i, m in enumerate(items)]
    it = keep(_lib.ItemsIn.init())
    it.n = n
    if n:
        it.items = keep((ctypes.c_char_p * n)(*texts))
        it.lengths = keep((ctypes.c_size_t * n)(*[0 if x is None else len(x) for x in texts]))
        if seqs is not None:
            it.seqs = keep((ctypes.c_int64 * n)(*seqs))
    if value.key is not None:
        it.key = keep(_text(value.key, "%s key" % what))
    if value.rest is not None:
        it.rest = _blob_in(value.rest, "%s rest" % what, keep)
    out = keep((ctypes.c_int64 * max(n, 1))())
    it.seqs_out = ctypes.cast(out, ctypes.POINTER(ctypes.c_int64))
    it.log = 1 if value.log else 0
    return it, out


_PTR = ctypes.sizeof(ctypes.c_void_p)
_range_list = []            # [0, 1, 2, ...]: seq_range's slices share its int objects
_range_bytes = bytearray()  # the same as int64 in the machine's order
_range_lock = threading.Lock()


def _grow_range(n):
    """_range_list and _range_bytes at least n long."""
    if len(_range_list) < n:
        with _range_lock:
            if len(_range_list) < n:
                grown = list(range(len(_range_list), max(n, 2 * len(_range_list), 1024)))
                _range_bytes.extend(bytes((ctypes.c_int64 * len(grown))(*grown)))
                _range_list.extend(grown)


def seq_range(n):
    """list(range(n)), its ints shared with every other call's (a comparison of two
    such lists is one of pointers)."""
    _grow_range(n)
    return _range_list[:n]


def _array(address, ctype, start, n):
    return (ctype * n).from_address(address + start * ctypes.sizeof(ctype))[:]


class LeftOut(list):
    """The texts of a read list whose first `held` items the read left out (a get
    with `known`: text None) at seqs 0..held-1, established when the list was read
    from the C arrays, so that a reader need not look at those n entries again."""
    __slots__ = ("held",)


def _leading_nulls(ptrs_at, n):
    """How many of the n pointers at ptrs_at are NULL in front: a read left out the
    log's first messages (and no later one, the usual read), found by a binary
    search for the first non-NULL one and one comparison of the bytes before it
    (not a step a pointer: O(log n) calls and a memcmp); any other layout by the
    bytes' lstrip."""
    at = ctypes.c_void_p.from_address
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if at(ptrs_at + mid * _PTR).value is None:
            lo = mid + 1
        else:
            hi = mid
    # lo: 0 (pointer 0 is not NULL), or n, or pointer lo is not NULL
    if not lo or ctypes.string_at(ptrs_at, lo * _PTR) == bytes(lo * _PTR):
        return lo
    raw = ctypes.string_at(ptrs_at, n * _PTR)
    return (len(raw) - len(raw.lstrip(b"\0"))) // _PTR


def _items_out(items):
    """A resolved list; an item left out because the caller holds it (a get with
    `known`) has the text None and its seq. The usual read of a conversation (its
    first k items left out, at seqs 0..k-1) is found in the C arrays' bytes and its
    k entries made without a Python object each; its texts are then a LeftOut."""
    n = items.n
    if n == 0:
        return Items([], [], _str(items.key), _blob_out(items.rest), None)
    ptrs_at = ctypes.cast(items.items, ctypes.c_void_p).value
    seqs_at = ctypes.cast(items.seqs, ctypes.c_void_p).value if items.seqs else None
    lengths_at = ctypes.cast(items.lengths, ctypes.c_void_p).value
    k = _leading_nulls(ptrs_at, n)
    every = False
    if k and seqs_at is not None:
        # the seqs of the usual read are 0..n-1: then one slice of the shared ints
        _grow_range(n)
        every = ctypes.string_at(seqs_at, 8 * n) == _range_bytes[:8 * n]
    if every or (k and seqs_at is not None and
                 ctypes.string_at(seqs_at, 8 * k) == _range_bytes[:8 * k]):
        # each list made at its full length at once (an n-list grown by += is copied)
        texts = LeftOut([None])
        texts *= n      # in place: still a LeftOut
        texts.held = k
        ptrs = _array(ptrs_at, ctypes.c_void_p, k, n - k)
        lengths = _array(lengths_at, ctypes.c_size_t, k, n - k)
        if every:
            seqs = _range_list[:n]
        else:
            seqs = _range_list[:k]
            seqs += _array(seqs_at, ctypes.c_int64, k, n - k)
    else:
        texts, k = [None] * n, 0
        ptrs = _array(ptrs_at, ctypes.c_void_p, 0, n)
        lengths = _array(lengths_at, ctypes.c_size_t, 0, n)
        seqs = _array(seqs_at, ctypes.c_int64, 0, n) if seqs_at is not None else [-1] * n
    # each array read in one call (a ctypes index per element costs more than the copy)
    texts[k:] = [None if p is None else ctypes.string_at(p, m) for p, m in zip(ptrs, lengths)]
    return Items(texts, seqs, _str(items.key), _blob_out(items.rest), None)


def _channels_in(channels, keep):
    """A mapping {name: version or (version, value)} or a sequence of
    (name, version, value) -> a convo_channel_in array."""
    if isinstance(channels, collections.abc.Mapping):
        items = []
        for name, spec in channels.items():
            if isinstance(spec, (str, bytes)):
                items.append((name, spec, None))
            elif isinstance(spec, collections.abc.Sequence) and len(spec) == 2:
                items.append((name, spec[0], spec[1]))
            else:
                raise invalid("channel %r must map to a version or (version, value)" % (name,))
    else:
        items = _items(channels, "channels")
    arr = (_lib.ChannelIn * len(items))()
    listed = {}      # channel name -> (index, seqs_out) of the channels given as Items
    for i, item in enumerate(items):
        if isinstance(item, (str, bytes)) or not isinstance(item, collections.abc.Sequence) \
                or len(item) != 3:
            raise invalid("channel %d must be (name, version, value)" % i)
        name, version, value = item
        arr[i].channel = keep(_text(name, "channel name"))
        arr[i].version = keep(_text(version, "version of channel %r" % (name,)))
        if isinstance(value, Items):
            listed[name] = (i,) + _items_in(value, "channel %r" % (name,), keep)
            continue
        blob = _blob_in(value, "value of channel %r" % (name,), keep, allow_none=True)
        arr[i].value = None if blob is None else ctypes.pointer(keep(blob))
    return arr, len(items), listed


def _log_prefix_in(log_prefix, listed, n, keep):
    """{channel: k} -> convo_checkpoint_in's channel_log_prefix (n entries)."""
    if not isinstance(log_prefix, collections.abc.Mapping):
        raise invalid("log_prefix must be a mapping {channel: k}")
    arr = keep((ctypes.c_int64 * n)())
    for name, k in log_prefix.items():
        if name not in listed:
            raise invalid("log_prefix: channel %r is not given as Items" % (name,))
        arr[listed[name][0]] = _int(k, "log_prefix of channel %r" % (name,), 0)
    return ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))


def _metadata_in(metadata, what="metadata"):
    data = _json_bytes(metadata, what)
    if b"\0" in data:
        raise invalid("%s contains a NUL character" % what)
    return data


def _known_in(opts, known):
    """known = (generation, length, origin) or None -> the opts' known_* fields."""
    if known is None:
        return
    if isinstance(known, (str, bytes)) or not isinstance(known, collections.abc.Sequence) \
            or len(known) != 3:
        raise invalid("known must be (generation, length, origin)")
    opts.known_generation = _int(known[0], "known generation", -1)
    opts.known_length = _int(known[1], "known length", 0)
    opts.known_origin = _int(known[2], "known origin", -1)


def _read_checkpoint(cp, thread_ns=None, lean=False):
    """A Checkpoint from a convo_checkpoint pointer (not freed here). thread_ns: the
    (thread_id, ns) of a listing of one thread and namespace, which every checkpoint
    of it has; lean: listed with only_channel, so without body and with metadata
    "{}" (list opts v5): neither is asked of the library."""
    version, blob = ctypes.c_char_p(), _lib.Blob()
    channels = []
    items = _lib.Items()
    for i in range(lib.convo_checkpoint_channel_count(cp)):
        name = lib.convo_checkpoint_channel(cp, i, ctypes.byref(version), ctypes.byref(blob))
        value = (_items_out(items) if lib.convo_checkpoint_channel_items(cp, i, ctypes.byref(items))
                 else _blob_out(blob))
        channels.append(Channel(name.decode("utf-8"), _str(version.value), value))
    task_path, channel, idx = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_int64()
    writes = []
    for i in range(lib.convo_checkpoint_write_count(cp)):
        task = lib.convo_checkpoint_write(cp, i, ctypes.byref(task_path), ctypes.byref(idx),
                                          ctypes.byref(channel), ctypes.byref(blob))
        value = (_items_out(items) if lib.convo_checkpoint_write_items(cp, i, ctypes.byref(items))
                 else _blob_out(blob))
        writes.append(Write(task.decode("utf-8"), _str(task_path.value) or "", idx.value,
                            channel.value.decode("utf-8"), value))
    if lean:
        metadata, body = "{}", None
    else:
        metadata = lib.convo_checkpoint_metadata(cp)
        try:
            metadata = metadata.decode("utf-8") if metadata is not None else "{}"
        except UnicodeDecodeError as e:
            raise CorruptError(_lib.ECORRUPT, "stored metadata is not UTF-8: %s" % e) from None
        body = _blob_out(lib.convo_checkpoint_body(cp))
    if thread_ns is None:
        thread_ns = (_str(lib.convo_checkpoint_thread_id(cp)), _str(lib.convo_checkpoint_ns(cp)))
    return Checkpoint(thread_ns[0], thread_ns[1],
                      _str(lib.convo_checkpoint_id(cp)), _str(lib.convo_checkpoint_parent_id(cp)),
                      metadata, lib.convo_checkpoint_log_length(cp),
                      lib.convo_checkpoint_created_at(cp), body,
                      tuple(channels), tuple(writes), lib.convo_checkpoint_generation(cp),
                      lib.convo_checkpoint_log_origin(cp))


def _list_opts(keep, thread_id, ns, before, before_thread_id, before_ns, filter):
    """convo_checkpoint_list_opts of checkpoint_list and checkpoint_delete:
    which checkpoints (each argument None: not set), its strings kept alive
    by keep."""
    opts = _lib.CheckpointListOpts.init()
    if thread_id is not None:
        opts.thread_id = keep(_text(thread_id, "thread_id"))
    if ns is not None:
        opts.checkpoint_ns = keep(_text(ns, "ns"))
    if before is not None:
        opts.before = keep(_text(before, "before"))
    if before_thread_id is not None:
        opts.before_thread_id = keep(_text(before_thread_id, "before_thread_id"))
    if before_ns is not None:
        opts.before_ns = keep(_text(before_ns, "before_ns"))
    if filter is not None:
        opts.filter_json = keep(_metadata_in(filter, "filter"))
    return opts


class CheckpointCalls:
    """The checkpoint calls of convo.Store (see docs/checkpoints.md)."""

    def checkpoint_put(self, thread_id, checkpoint_id, *, ns="", parent_id=None, metadata=None,
                       body=None, channels=(), log_length=0, messages=None,
                       expected_length=None, expected_generation=None, log_prefix=None):
        """Stores a checkpoint (replacing one with the same key) and creates
        the thread if needed.

        channels: {name: version} or {name: (version, value)}, or a sequence
        of (name, version, value); value is (type, bytes), or None when that
        version was sent before. body: (type, bytes) or None. metadata: a
        dict or a JSON object as text. log_length: messages [0, log_length)
        of the thread belong to the checkpoint.

        messages (with expected_length): appended to the thread's log in the
        same atomic write as the checkpoint, only if the thread then has
        exactly expected_length messages (else ConflictError and nothing is
        written); log_length may then be at most expected_length + len(messages).
        expected_generation (with messages): also require the thread's
        generation (History.generation) to be this, else ConflictError.
        One atomic write: a crash never leaves the messages without the
        checkpoint or the reverse.

        A channel value may be Items (log references): the library plans the
        put (the fresh items of a log=True list that extends its parent's enter
        the log in the same atomic write; expected_generation applies; messages
        and expected_length do not). log_prefix: {channel: k} for such channels
        whose list starts with the log's messages [0, k), in order, before the
        given items (convo_checkpoint_in v5 `channel_log_prefix`: a put of a grown
        conversation passes only what is new; k past the log: ConflictError).
        Returns {channel: [seq of each given item, -1 for one kept inline]} for
        those channels, else None."""
        keep = _Keep()
        cp = _lib.CheckpointIn.init()
        cp.thread_id = keep(_text(thread_id, "thread_id"))
        cp.checkpoint_ns = keep(_text(ns, "ns"))
        cp.checkpoint_id = keep(_text(checkpoint_id, "checkpoint_id"))
        if parent_id is not None:
            cp.parent_id = keep(_text(parent_id, "parent_id"))
        if metadata is not None:
            cp.metadata_json = keep(_metadata_in(metadata))
        if body is not None:
            cp.body = _blob_in(body, "body", keep)
        arr, n, listed = _channels_in(channels, keep)
        cp.channels = ctypes.cast(keep(arr), ctypes.POINTER(_lib.ChannelIn)) if n else None
        cp.nchannels = n
        if listed:
            ptrs = keep((ctypes.POINTER(_lib.ItemsIn) * n)())
            for i, it, _ in listed.values():
                ptrs[i] = ctypes.pointer(it)
            cp.channel_items = ctypes.cast(ptrs, ctypes.POINTER(ctypes.POINTER(_lib.ItemsIn)))
        if log_prefix:
            cp.channel_log_prefix = _log_prefix_in(log_prefix, listed, n, keep)
        cp.log_length = _int(log_length, "log_length", 0)
        if messages is not None:
            if isinstance(messages, (collections.abc.Mapping, str, bytes, bytearray, memoryview)):
                messages = [messages]
            datas = [_json_bytes(m, "message %d" % i)
                     for i, m in enumerate(_items(messages, "messages"))]
            if datas:
                if expected_length is None:
                    raise invalid("messages need expected_length (the thread's length before)")
                m = len(datas)
                cp.messages = keep((ctypes.c_char_p * m)(*datas))
                cp.message_lengths = keep((ctypes.c_size_t * m)(*map(len, datas)))
                cp.nmessages = m
                cp.expected_length = _int(expected_length, "expected_length", 0)
                if expected_generation is not None:
                    cp.expected_generation = _int(expected_generation, "expected_generation", 0)
        elif listed:
            if expected_generation is not None:
                cp.expected_generation = _int(expected_generation, "expected_generation", 0)
            if expected_length is not None:
                raise invalid("expected_length does not apply with Items channels (the "
                              "library reads the thread's length)")
        elif expected_length is not None or expected_generation is not None:
            raise invalid("expected_length and expected_generation apply only with messages")
        if listed and messages:
            raise invalid("messages cannot be given with Items channels")
        self._call(self._lib.convo_checkpoint_put, ctypes.byref(cp))
        if not listed:
            return None
        return {name: [out[k] for k in range(it.n)] for name, (_, it, out) in listed.items()}

    def checkpoint_put_writes(self, thread_id, checkpoint_id, task_id, writes, *, ns="",
                              task_path=""):
        """Records pending writes of a task on a checkpoint: writes is a
        sequence of (idx, channel, value), value (type, bytes) or Items (kept
        inline until a put appends its items to the log). NotFoundError when
        the checkpoint does not exist."""
        keep = _Keep()
        writes = _items(writes, "writes")
        arr = (_lib.WriteIn * len(writes))()
        listed = {}
        for i, w in enumerate(writes):
            if isinstance(w, (str, bytes)) or not isinstance(w, collections.abc.Sequence) \
                    or len(w) != 3:
                raise invalid("write %d must be (idx, channel, (type, bytes))" % i)
            arr[i].idx = _int(w[0], "idx of write %d" % i, -(1 << 63))
            arr[i].channel = keep(_text(w[1], "channel of write %d" % i))
            if isinstance(w[2], Items):
                listed[i] = _items_in(w[2], "write %d" % i, keep)[0]
            else:
                arr[i].value = _blob_in(w[2], "value of write %d" % i, keep)
        if listed:
            w = _lib.WritesIn.init()
            w.thread_id = keep(_text(thread_id, "thread_id"))
            w.checkpoint_ns = keep(_text(ns, "ns"))
            w.checkpoint_id = keep(_text(checkpoint_id, "checkpoint_id"))
            w.task_id = keep(_text(task_id, "task_id"))
            w.task_path = keep(_text(task_path, "task_path"))
            w.writes = ctypes.cast(arr, ctypes.POINTER(_lib.WriteIn))
            w.n = len(writes)
            ptrs = keep((ctypes.POINTER(_lib.ItemsIn) * len(writes))())
            for i, it in listed.items():
                ptrs[i] = ctypes.pointer(it)
            w.items = ctypes.cast(ptrs, ctypes.POINTER(ctypes.POINTER(_lib.ItemsIn)))
            self._call(self._lib.convo_checkpoint_put_writes_ex, ctypes.byref(w))
            return
        self._call(self._lib.convo_checkpoint_put_writes, _text(thread_id, "thread_id"),
                   _text(ns, "ns"), _text(checkpoint_id, "checkpoint_id"),
                   _text(task_id, "task_id"), _text(task_path, "task_path"),
                   arr if writes else None, len(writes))

    def checkpoint_get(self, thread_id, checkpoint_id=None, *, ns="", known=None):
        """The Checkpoint (with every channel's value and its pending writes),
        the latest of the namespace when checkpoint_id is None; None when the
        thread or the checkpoint does not exist.

        known: None, or (generation, length, origin) when the caller holds the
        texts of the thread's messages [0, length) as they were at that
        generation, in the thread whose message 0 was created at origin (a
        Checkpoint's generation and log_origin): while the thread is still that
        one at that generation, its items below length come back with the text
        None (seq set) and are not read (convo_checkpoint_get_ex)."""
        keep = _Keep()
        opts = _lib.CheckpointGetOpts.init()
        opts.thread_id = keep(_text(thread_id, "thread_id"))
        opts.checkpoint_ns = keep(_text(ns, "ns"))
        if checkpoint_id is not None:
            opts.checkpoint_id = keep(_text(checkpoint_id, "checkpoint_id"))
        _known_in(opts, known)
        out = ctypes.c_void_p()
        try:
            self._call(self._lib.convo_checkpoint_get_ex, ctypes.byref(opts), ctypes.byref(out))
        except NotFoundError:
            return None
        try:
            return _read_checkpoint(out)
        finally:
            lib.convo_checkpoint_free(out)

    def _checkpoint_page(self, opts):
        out = ctypes.c_void_p()
        self._call(self._lib.convo_checkpoint_list, ctypes.byref(opts), ctypes.byref(out))
        # one thread and namespace: every checkpoint's, not asked of each
        thread_ns = None if opts.thread_id is None or opts.checkpoint_ns is None else \
            (opts.thread_id.decode("utf-8"), opts.checkpoint_ns.decode("utf-8"))
        lean = opts.only_channel is not None
        try:
            return [_read_checkpoint(lib.convo_checkpoint_set_get(out, i), thread_ns, lean)
                    for i in range(lib.convo_checkpoint_set_count(out))]
        finally:
            lib.convo_checkpoint_set_free(out)

    def checkpoint_list(self, thread_id=None, *, ns=None, before=None, before_thread_id=None,
                        before_ns=None, limit=None, filter=None, page_size=100, known=None,
                        channel_items=True, only_channel=None):
        """Yields Checkpoints newest first (the order they were put in), of
        one thread or of every thread (thread_id None), of one namespace or
        of all (ns None). before: a checkpoint id; only checkpoints put before
        it are listed; it names (before_thread_id or thread_id, before_ns or
        ns or "", before), and an unknown one raises NotFoundError. filter:
        metadata containment ({"source": "loop", "step": 3}). At most limit
        (None: all). Within one thread and namespace, fetched page_size at a
        time, so memory stays bounded; across threads or namespaces, in one call.

        known: as for checkpoint_get, what the caller holds of thread_id's log
        (needs thread_id). channel_items=False: a channel value that is a list of
        items comes back as an Items without items (its key and rest as stored)
        and the log is not read for it (convo_checkpoint_list_opts v4
        without_channel_items): for a walk that needs the ancestors' pending
        writes and metadata, not their lists. only_channel: a channel name: each
        checkpoint with only that channel (without its list's items) and its
        pending writes to it, no body (None), metadata "{}" (v5 only_channel): for
        a walk over ancestors for that channel.

        Arguments are checked at once; the first page is fetched on the first
        next()."""
        keep = _Keep()
        opts = _list_opts(keep, thread_id, ns, before, before_thread_id, before_ns, filter)
        if known is not None and thread_id is None:
            raise invalid("known applies to one thread's log: give thread_id")
        _known_in(opts, known)
        opts.without_channel_items = 0 if channel_items else 1
        if only_channel is not None:
            opts.only_channel = keep(_text(only_channel, "only_channel"))
        remaining = None if limit is None else _int(limit, "limit", 0)
        size = _int(page_size, "page_size", 1)
        return self._iter_checkpoints(opts, keep, remaining, size)

    def _iter_checkpoints(self, opts, keep, remaining, size):
        if opts.thread_id is None or opts.checkpoint_ns is None:
            # Paging by `before` needs one well-defined order: one thread and one
            # namespace. Across them, one call (the library's list is one set anyway).
            opts.limit = 0 if remaining is None else remaining
            if remaining != 0:
                yield from self._checkpoint_page(opts)
            return
        while remaining is None or remaining > 0:
            opts.limit = size if remaining is None else min(size, remaining)
            page = self._checkpoint_page(opts)
            yield from page
            if remaining is not None:
                remaining -= len(page)
            if len(page) < opts.limit:
                return
            # the next page: the checkpoints put before the last one listed,
            # which is of the listed thread and namespace
            opts.before = keep(page[-1].id.encode("utf-8"))
            opts.before_thread_id = opts.thread_id
            opts.before_ns = opts.checkpoint_ns

    def checkpoint_prune(self, thread_id, keep_last):
        """Keeps the newest keep_last checkpoints of each namespace of the
        thread (and what they need), removes the rest."""
        self._call(self._lib.convo_checkpoint_prune, _text(thread_id, "thread_id"),
                   _int(keep_last, "keep_last", 0))

    def checkpoint_delete(self, thread_id=None, *, ns=None, filter=None, before=None,
                          before_thread_id=None, before_ns=None, limit=None):
        """Removes every checkpoint checkpoint_list would yield with the same
        arguments (thread_id None: every thread; ns None: every namespace),
        with its pending writes and the channel values no remaining checkpoint
        needs; returns how many. Each thread's share goes in one step.
        LangGraph's delete_for_runs: checkpoint_delete(filter={"run_id": r})
        for each run id r."""
        keep = _Keep()
        opts = _list_opts(keep, thread_id, ns, before, before_thread_id, before_ns, filter)
        if limit is not None:
            opts.limit = _int(limit, "limit", 1)
        removed = ctypes.c_uint64()
        self._call(self._lib.convo_checkpoint_delete, ctypes.byref(opts), ctypes.byref(removed))
        return removed.value


__all__ = ["Blob", "Items", "Channel", "Write", "Checkpoint", "CheckpointCalls"]
