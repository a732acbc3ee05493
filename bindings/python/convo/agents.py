"""convo.agents: ConvoSession, a session of the OpenAI Agents SDK (`openai-agents`,
the package's `openai-agents` extra) whose items are the messages of one convo
thread. get_items reads only the tail it returns, add_items is one atomic append,
pop_item and clear_session are tail rewrites; every call runs off the event loop.

Items are stored in the layout of the Node binding's ConvoSession
(bindings/node/src/openai-agents/items.js), so a session written from one
language reads back in the other:
  A. an item with a role ({"type": "message", "role": "user", ...}): its JSON as is;
  B. an item without a "role" key ({"type": "function_call", ...}): its JSON with
     "role": its type put first (read back: a role equal to the type is taken off);
  C. anything JSON would not give back (bytes, NaN, a lone surrogate, a role equal to
     its type, no usable role or type, a key "$item" or "$op"):
     {"role": R, "$item": V}, V the item in a tagged encoding (an object whose only
     key starts with "$" is a tag: $bytes, $number, $utf16, $object, ...).

get_items() returns read-only items (dict and list subclasses whose changes raise
TypeError), each decoded once and shared by every later call of the session, so a
call costs what was appended since the last one, not the whole history;
ConvoSession(..., mutable_items=True) returns new dicts at each call instead."""

from __future__ import annotations

import asyncio
import base64
import datetime
import functools
import json
import math
import threading
from typing import Any, Awaitable, Dict, List, Mapping, NamedTuple, Optional, TypeVar, Union

try:
    from agents.memory.session import SessionABC
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError("convo.agents needs the OpenAI Agents SDK: pip install "
                      "'convo-store[openai-agents]' (%s)" % e) from e

from .asyncio import Checkpointer
from .errors import CorruptError, NotFoundError, invalid
from .store import Store, _decode_all
from .threads import ThreadPage, _list_opts
from . import _lib

__all__ = ["ConvoSession", "SessionInfo", "SessionPage", "encode_item", "decode_item"]

_T = TypeVar("_T")
_DUMPS = dict(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
ITEM, OP = "$item", "$op"


# ---- items <-> log messages ----

def _valid_role(r: Any) -> Optional[str]:
    return r if isinstance(r, str) and 0 < len(r.encode("utf-8", "surrogatepass")) <= 64 else None


def _has_lone_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _plain(v: Any) -> bool:
    """Whether JSON gives v back equal (lists for tuples, as json.dumps does)."""
    if v is None or isinstance(v, (bool, int)):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, str):
        return not _has_lone_surrogate(v)
    if isinstance(v, (list, tuple)):
        return all(_plain(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and not _has_lone_surrogate(k) and _plain(x)
                   for k, x in v.items())
    return False


def _encode_value(v: Any, where: str) -> Any:
    """The tagged encoding of v (JSON, with tags for what JSON would not give back)."""
    if v is None or isinstance(v, (bool, int)):
        return v
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return {"$number": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
    if isinstance(v, str):
        if not _has_lone_surrogate(v):
            return v
        data = v.encode("utf-16-le", "surrogatepass")
        return {"$utf16": [int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)]}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, (list, tuple)):
        return [_encode_value(x, where) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise invalid("ConvoSession: %s has a key that is not a str" % where)
        if (len(v) == 1 and next(iter(v)).startswith("$")) or any(map(_has_lone_surrogate, v)):
            return {"$object": [[_encode_value(k, where), _encode_value(x, where)]
                                for k, x in v.items()]}
        return {k: _encode_value(x, where) for k, x in v.items()}
    raise invalid("ConvoSession: %s holds a %s, which a session cannot store (dicts, lists, "
                  "str, int, float, bool, None and bytes can be stored)" % (where, type(v).__name__))


def encode_item(item: Any, where: str = "an item") -> bytes:
    """The log message (JSON bytes) of one item of a session."""
    if not isinstance(item, dict):
        raise invalid("ConvoSession: %s must be a dict, not %s" % (where, type(item).__name__))
    if ITEM not in item and OP not in item and _plain(item):
        role, kind = _valid_role(item.get("role")), item.get("type")
        if role and role != kind:
            return json.dumps(item, **_DUMPS).encode("utf-8")
        if "role" not in item and _valid_role(kind):
            return json.dumps({"role": kind, **item}, **_DUMPS).encode("utf-8")
    role = next((r for r in map(_valid_role, (item.get("role"), item.get("type")))
                 if r and not _has_lone_surrogate(r)), "item")
    return json.dumps({"role": role, ITEM: _encode_value(item, where)}, **_DUMPS).encode("utf-8")


def _corrupt(message: str) -> CorruptError:
    return CorruptError(_lib.ECORRUPT, "ConvoSession: a stored item " + message, "")


def _decode_value(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode_value(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) == 1:
        tag, x = next(iter(v.items()))
        if tag.startswith("$"):
            if tag == "$undefined":
                return None
            if tag == "$number":
                return float(x)  # "NaN", "Infinity", "-Infinity", "-0"
            if tag == "$bigint":
                return int(x)
            if tag == "$utf16":
                return b"".join(c.to_bytes(2, "little") for c in x).decode("utf-16-le",
                                                                          "surrogatepass")
            if tag == "$bytes":
                return base64.b64decode(x)
            if tag == "$date":
                return datetime.datetime.fromtimestamp(_decode_value(x) / 1000,
                                                       datetime.timezone.utc)
            if tag == "$object":
                return {_decode_value(k): _decode_value(val) for k, val in x}
            raise _corrupt("has an unknown tag %s" % tag)
    return {k: _decode_value(x) for k, x in v.items()}


def decode_item(message: Any) -> Dict[str, Any]:
    """The item a log message (a dict, or JSON text) stores."""
    if isinstance(message, (str, bytes, bytearray)):
        try:
            message = json.loads(message)
        except ValueError as e:
            raise _corrupt("is not JSON: %s" % e) from None
    if not isinstance(message, dict):
        raise _corrupt("is not an object")
    if ITEM in message:
        return _decode_value(message[ITEM])
    message = dict(message)
    message.pop(OP, None)  # a Node session's transaction digest
    if "role" in message and message["role"] == message.get("type"):
        del message["role"]
    return message


# ---- read-only items ----

def _read_only(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError("ConvoSession: the items get_items() returns are read-only, shared with "
                    "its later calls: change a copy (copy.deepcopy(item) gives one), or "
                    "make the session with mutable_items=True")


class _ItemDict(dict):
    """A dict of an item get_items() returned: equal to the dict, read-only; a copy
    (copy.copy, copy.deepcopy, pickle) is a plain dict."""
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> Dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> Dict[str, Any]:
        return _thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class _ItemList(list):
    """A list inside an item get_items() returned: read-only, as _ItemDict."""
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = clear = extend = insert = pop = remove = reverse = sort = _read_only

    def __copy__(self) -> List[Any]:
        return list(self)

    def __deepcopy__(self, memo: Any) -> List[Any]:
        return _thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


def _freeze(v: Any) -> Any:
    """v (a decoded item) with its dicts and lists read-only (the rest of what
    decode_item gives is immutable: str, numbers, bytes, datetime)."""
    if isinstance(v, dict):
        return _ItemDict({k: _freeze(x) for k, x in v.items()})
    if isinstance(v, list):
        return _ItemList([_freeze(x) for x in v])
    return v


def _thaw(v: Any) -> Any:
    """A plain, changeable deep copy of a read-only item."""
    if isinstance(v, dict):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_thaw(x) for x in v]
    return v


# ---- the session ----

class SessionInfo(NamedTuple):
    """One session of a SessionPage: session_id (the thread's id); created_at and
    updated_at (its first and last write) in microseconds since the epoch; length
    (items); extra (the thread's extra object, a dict: the user it belongs to, a
    title, ...); last_item (its last item, with with_last_item=True; None for an
    empty session or when not asked); cursor (the `after` that continues after it)."""
    session_id: str
    created_at: int
    updated_at: int
    length: int
    extra: Dict[str, Any]
    last_item: Optional[Dict[str, Any]]
    cursor: str


class SessionPage(NamedTuple):
    """A page of ConvoSession.list / alist: sessions, and next (the `after` of the
    next page; None on the last page)."""
    sessions: List[SessionInfo]
    next: Optional[str]


def _session_page(page: ThreadPage) -> SessionPage:
    return SessionPage([SessionInfo(t.id, t.created_at, t.updated_at, t.length, t.extra,
                                    None if t.last_message is None else decode_item(t.last_message),
                                    t.cursor)
                        for t in page.threads], page.next)


async def _settle(awaitable: Awaitable[_T]) -> _T:
    """Waits for a write to finish even when the caller is cancelled (it runs in a
    thread and completes anyway), then re-raises the cancellation: the caller never
    sees a cancelled write whose outcome is unknown (as the SDK's own sessions do)."""
    task = asyncio.ensure_future(awaitable)
    cancelled = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result


# a from_seq past any thread's end: a load of the extra without messages
_NO_ITEMS = (1 << 53) - 1


def _blocking(store: Union[Store, Checkpointer]) -> Store:
    return store.store if isinstance(store, Checkpointer) else store


def _list_args(store: Any, where: Any, order: Any, reverse: Any, after: Any, limit: Any,
               with_last_item: Any) -> tuple:
    """list_threads' positional arguments for ConvoSession.list, checked."""
    if not isinstance(store, (Store, Checkpointer)):
        raise invalid("ConvoSession.list: store must be a convo.Store or "
                      "convo.asyncio.Checkpointer, not %s" % type(store).__name__)
    if not isinstance(with_last_item, bool):
        raise invalid("ConvoSession.list: with_last_item must be a bool, not %s"
                      % type(with_last_item).__name__)
    args = (where, order, reverse, after, limit, True, with_last_item)
    _list_opts(*args)
    return args


class ConvoSession(SessionABC):
    """An OpenAI Agents SDK session kept in one convo thread (named session_id):

        session = ConvoSession("user-42", url="sqlite:agents.db")
        result = await Runner.run(agent, "hi", session=session)
        session.close()

    Give url= (a Store is opened on first use, off the event loop, and closed by
    close()) or store= (a convo.Store or convo.asyncio.Checkpointer, shared and left
    open). store_options are Store's keyword options (with url only). extra: a dict
    merged into the thread's extra object before this instance's first add_items
    (e.g. {"user_id": ..., "title": ...}: what ConvoSession.list filters on).
    session_settings: the SDK's SessionSettings (its limit is get_items' default).
    get_items() returns read-only items shared between its calls (a change raises
    TypeError; its cost grows with what was appended since the last call, not with
    the history); mutable_items=True makes it return new dicts at each call (decoding
    every item again: a cost that grows with the history)."""

    session_settings: Optional[SessionSettings] = None

    def __init__(self, session_id: str, *, url: Optional[str] = None, store: Any = None,
                 extra: Optional[Mapping[str, Any]] = None,
                 session_settings: Optional[SessionSettings] = None,
                 mutable_items: bool = False, **store_options: Any):
        if not isinstance(session_id, str) or not session_id:
            raise invalid("ConvoSession: session_id must be a non-empty str")
        if not isinstance(mutable_items, bool):
            raise invalid("ConvoSession: mutable_items must be a bool")
        self._mutable = mutable_items
        if extra is not None and not isinstance(extra, Mapping):
            raise invalid("ConvoSession: extra must be a dict, not %s" % type(extra).__name__)
        # merged into the thread's extra before this instance's first add_items
        self._extra: Optional[Dict[str, Any]] = dict(extra) if extra else None
        if (url is None) == (store is None):
            raise invalid("ConvoSession: give either url or store")
        if store is not None and store_options:
            raise invalid("ConvoSession: store options apply only when a url is given")
        self.session_id = session_id
        self.session_settings = (session_settings if session_settings is not None
                                 else SessionSettings())
        self._url, self._options = url, store_options
        self._closed = False
        self._opening: Optional[asyncio.Future] = None
        if store is None:
            self._cp: Optional[Checkpointer] = None
        elif isinstance(store, Checkpointer):
            self._cp = store
        elif isinstance(store, Store):
            self._cp = Checkpointer(store, max_workers=4)
        else:
            raise invalid("ConvoSession: store must be a convo.Store or convo.asyncio.Checkpointer")
        self._owns_cp = not isinstance(store, Checkpointer)
        # what get_items() read last: (its items, read-only, or with mutable_items its
        # message bytes; generation); the next reads only messages past it while the
        # thread's generation stays (nothing below changed)
        self._seen: Optional[tuple] = None
        self._seen_lock = threading.Lock()

    async def _checkpointer(self) -> Checkpointer:
        if self._closed:
            raise invalid("ConvoSession: the session is closed")
        if self._cp is None:
            if self._opening is None or self._opening.get_loop() is not asyncio.get_running_loop():
                self._opening = asyncio.ensure_future(Checkpointer.open(self._url, **self._options))
            opening = self._opening
            try:
                cp = await asyncio.shield(opening)
            except BaseException:
                if opening.done() and self._opening is opening:
                    self._opening = None
                raise
            if self._cp is None:
                self._cp = cp
            elif cp is not self._cp:  # opened twice, from two event loops
                await cp.aclose()
        return self._cp

    @property
    def store(self) -> Optional[Store]:
        """The convo.Store (None before the first call of a session given a url)."""
        return None if self._cp is None else self._cp.store

    async def get_items(self, limit: Optional[int] = None) -> List[Any]:
        """The latest `limit` items oldest first (all when limit is None and the
        session settings set none), reading only those from the store: read-only,
        shared with later calls (new dicts with mutable_items)."""
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
            raise invalid("ConvoSession: limit must be an int or None")
        if n == 0:
            return []
        cp = await self._checkpointer()
        if n is not None and n > 0:
            data = await cp.load(self.session_id, tail=n)
            if data is None:
                return []
            items = [decode_item(m) for m in data.messages]
            return items if self._mutable else [_freeze(item) for item in items]
        # (a negative limit reads everything, as SQLiteSession's LIMIT does)
        kept = await cp._run(self._read_all, cp.store)
        if self._mutable:
            return [decode_item(m) for m in _decode_all(kept)] if kept else []
        return list(kept)

    def _read_all(self, store: Store) -> List[Any]:
        """Every item of the thread as this session keeps them (see _keep): those read
        before, and the ones past them when the thread's generation is the same as
        then (else all again). The kept list grows in place (a copy per call would
        touch every item: O(history) at each turn); the lock keeps two calls running
        at once in the executor from extending it twice."""
        def read(h):
            return (store._raws(h), _lib.lib.convo_history_length(h),
                    _lib.lib.convo_history_generation(h))
        with self._seen_lock:
            seen = self._seen
            got = store._history(self.session_id, len(seen[0]) if seen else 0, 0, 0, False,
                                 read)
            if got is not None and seen is not None:
                new, length, generation = got
                if generation == seen[1] and length == len(seen[0]) + len(new):
                    seen[0].extend(self._keep(new))
                    return seen[0]
                got = store._history(self.session_id, 0, 0, 0, False, read)
            if got is None:
                self._seen = None
                return []
            kept = self._keep(got[0])
            self._seen = (kept, got[2])
            return kept

    def _keep(self, raws: List[bytes]) -> List[Any]:
        """What the session keeps of messages it read: each item, decoded once and
        read-only; with mutable_items the message bytes (decoded at each call)."""
        if self._mutable or not raws:
            return raws
        return [_freeze(decode_item(m)) for m in _decode_all(raws)]

    async def add_items(self, items: List[Any]) -> None:
        """Appends the items in one atomic write."""
        if self._closed:
            raise invalid("ConvoSession: the session is closed")
        if isinstance(items, dict) or not isinstance(items, (list, tuple)):
            raise invalid("ConvoSession: items must be a list")
        texts = [encode_item(item, "items[%d]" % i) for i, item in enumerate(items)]
        if not texts:
            return
        cp = await self._checkpointer()
        if self._extra is not None:
            await _settle(cp.save_extra(self.session_id, self._extra))
            self._extra = None
        await _settle(cp.append(self.session_id, texts))

    async def pop_item(self) -> Optional[Any]:
        """Removes the last item and returns it (None when there is none): a tail
        rewrite conditional on the tail it read, retried if another writer moved it."""
        cp = await self._checkpointer()
        try:
            popped = await _settle(cp.pop(self.session_id))
        except NotFoundError:
            return None
        return decode_item(popped[0]) if popped else None

    async def clear_session(self) -> None:
        """Removes every item: a tail rewrite to no messages, so the thread keeps its
        extra, its creation time and its place in the thread index."""
        cp = await self._checkpointer()
        try:
            await _settle(cp.replace_tail(self.session_id, 0))
        except NotFoundError:
            pass

    async def save_extra(self, patch: Mapping[str, Any]) -> None:
        """Merges patch into the thread's extra object (each top-level key replaces
        that key): a title, the user the session belongs to, ... Creates the thread
        when it does not exist."""
        if not isinstance(patch, Mapping):
            raise invalid("ConvoSession: patch must be a dict, not %s" % type(patch).__name__)
        cp = await self._checkpointer()
        await _settle(cp.save_extra(self.session_id, dict(patch)))

    async def get_extra(self) -> Optional[Dict[str, Any]]:
        """The thread's extra object (None when the thread does not exist), read
        without its items."""
        cp = await self._checkpointer()
        data = await cp.load(self.session_id, from_seq=_NO_ITEMS)
        return None if data is None else data.extra

    @classmethod
    def list(cls, store: Union[Store, Checkpointer], *, where: Optional[Mapping[str, Any]] = None,
             limit: int = 100, after: Optional[str] = None, order: str = "recent",
             reverse: bool = False, with_last_item: bool = False) -> SessionPage:
        """One page of the sessions of a store, newest activity first: the thread
        index (Store.list_threads) with each session's extra, and with
        with_last_item=True its last item. where: what the extra must contain
        (e.g. {"user_id": "u1"}); limit: 1..10,000 per page; after: the `next` of
        the page before; order: "recent", "created" or "id"; reverse: the other
        direction. Blocks: from a coroutine, await ConvoSession.alist(...)."""
        args = _list_args(store, where, order, reverse, after, limit, with_last_item)
        return _session_page(_blocking(store).list_threads(*args))

    @classmethod
    async def alist(cls, store: Union[Store, Checkpointer], *,
                    where: Optional[Mapping[str, Any]] = None, limit: int = 100,
                    after: Optional[str] = None, order: str = "recent", reverse: bool = False,
                    with_last_item: bool = False) -> SessionPage:
        """ConvoSession.list off the event loop (on a Checkpointer's thread pool,
        or the loop's default executor for a Store)."""
        args = _list_args(store, where, order, reverse, after, limit, with_last_item)
        if isinstance(store, Checkpointer):
            page = await store.list_threads(*args)
        else:
            page = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(store.list_threads, *args))
        return _session_page(page)

    def close(self) -> None:
        """Closes the Store this session opened (not one it was given). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._cp is not None and self._owns_cp:
            self._cp.close()

    async def aclose(self) -> None:
        """close() without blocking the event loop."""
        if self._cp is not None and not self._closed and self._owns_cp:
            cp, self._closed = self._cp, True
            await cp.aclose()
        self._closed = True

    async def __aenter__(self) -> "ConvoSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
