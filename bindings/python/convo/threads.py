"""The thread index from Python: Store.list_threads (one page of a user's
conversations, newest activity first, with their times, length and on request
extra and last message) and Store.threads (every page), a mixin of
convo.Store, over convo_thread_list_ex."""

import collections.abc
import ctypes
import json
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional

from . import _lib
from ._args import _text, _int, _DUMPS
from .errors import CorruptError, invalid

lib = _lib.lib

ORDERS = {"recent": 0, "created": 1, "id": 2}
MAX_LIMIT = 10000  # rows per page (lib/threads.c)


class ThreadInfo(NamedTuple):
    """One thread of a page: created_at (its first write) and updated_at (its
    last append, save_extra, tail rewrite or checkpoint put) in microseconds
    since the epoch, as Message.created_at; length (messages); extra (a dict,
    with with_extra, else None); last_message (a dict, with with_last_message,
    None for an empty thread or when not asked); cursor (the `after` that
    continues after this row)."""
    id: str
    created_at: int
    updated_at: int
    length: int
    extra: Optional[Dict[str, Any]]
    last_message: Optional[Dict[str, Any]]
    cursor: str


class ThreadPage(NamedTuple):
    """A page of Store.list_threads: threads, and next (the `after` of the
    next page; None on the last page)."""
    threads: List[ThreadInfo]
    next: Optional[str]


def _decode(raw, what):
    try:
        return json.loads(raw)
    except ValueError as e:
        raise CorruptError(_lib.ECORRUPT, "%s is not valid JSON: %s" % (what, e)) from None


def _list_opts(where, order, reverse, after, limit, with_extra, with_last_message):
    """The arguments of list_threads, checked, as a ThreadListOpts."""
    opts = _lib.ThreadListOpts.init()
    if where is not None:
        if not isinstance(where, collections.abc.Mapping):
            raise invalid("where must be a dict (what the extra contains), not %s"
                          % type(where).__name__)
        try:
            opts.where_json = json.dumps(dict(where), **_DUMPS).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise invalid("where cannot be serialized as JSON: %s" % e) from None
    if not isinstance(order, str) or order not in ORDERS:
        raise invalid("order must be 'recent', 'created' or 'id', not %r" % (order,))
    opts.order = ORDERS[order]
    for name, value in (("reverse", reverse), ("with_extra", with_extra),
                        ("with_last_message", with_last_message)):
        if not isinstance(value, bool):
            raise invalid("%s must be a bool, not %s" % (name, type(value).__name__))
    opts.reverse, opts.with_extra, opts.with_last_message = \
        int(reverse), int(with_extra), int(with_last_message)
    if after is not None:
        opts.after = _text(after, "after")
    opts.limit = _int(limit, "limit", 1)
    if limit > MAX_LIMIT:
        raise invalid("limit must be at most %d" % MAX_LIMIT)
    return opts


def _rows(page, with_extra, with_last_message):
    size = ctypes.c_size_t()
    out = []
    for i in range(lib.convo_thread_page_count(page)):
        extra = last = None
        if with_extra:
            extra = _decode(lib.convo_thread_page_extra(page, i), "a stored extra")
        if with_last_message:
            ptr = lib.convo_thread_page_last_message(page, i, ctypes.byref(size))
            if ptr:
                last = _decode(ctypes.string_at(ptr, size.value), "a stored message")
        out.append(ThreadInfo(lib.convo_thread_page_id(page, i).decode("utf-8"),
                              lib.convo_thread_page_created_at(page, i),
                              lib.convo_thread_page_updated_at(page, i),
                              lib.convo_thread_page_length(page, i), extra, last,
                              lib.convo_thread_page_cursor(page, i).decode("utf-8")))
    return out


class ThreadCalls:
    """convo.Store's thread index calls (needs Store._call)."""

    def list_threads(self, where: Optional[Mapping[str, Any]] = None, order: str = "recent",
                     reverse: bool = False, after: Optional[str] = None, limit: int = 100,
                     with_extra: bool = False, with_last_message: bool = False) -> ThreadPage:
        """One page of the threads whose extra contains `where` (a dict:
        objects by key, lists by element, scalars equal; None or {} = every
        thread), in `order`: "recent" (last activity, newest first), "created"
        (newest first) or "id" (byte order); reverse=True is the other
        direction. after: a cursor (a row's .cursor or a page's .next) of the
        same order and direction. limit: 1..10,000 rows. Returns
        ThreadPage(threads=[ThreadInfo], next). InvalidError for a bad
        argument or cursor; NotSupportedError on a driver without the index."""
        opts = _list_opts(where, order, reverse, after, limit, with_extra, with_last_message)
        page = ctypes.c_void_p()
        self._call(self._lib.convo_thread_list_ex, ctypes.byref(opts), ctypes.byref(page))
        try:
            nxt = lib.convo_thread_page_next(page)
            return ThreadPage(_rows(page, with_extra, with_last_message),
                              None if nxt is None else nxt.decode("utf-8"))
        finally:
            lib.convo_thread_page_free(page)

    def threads(self, where: Optional[Mapping[str, Any]] = None, order: str = "recent",
                reverse: bool = False, after: Optional[str] = None, limit: int = 100,
                with_extra: bool = False,
                with_last_message: bool = False) -> Iterator[ThreadInfo]:
        """Every ThreadInfo list_threads gives with these arguments, page after
        page (limit is the page size), from `after` when given. Arguments are
        checked at the call, before the first page is read."""
        _list_opts(where, order, reverse, after, limit, with_extra, with_last_message)
        return self._walk(where, order, reverse, after, limit, with_extra, with_last_message)

    def _walk(self, where, order, reverse, after, limit, with_extra, with_last_message):
        while True:
            page = self.list_threads(where, order, reverse, after, limit, with_extra,
                                     with_last_message)
            yield from page.threads
            if page.next is None:
                return
            after = page.next


__all__ = ["ThreadInfo", "ThreadPage", "ThreadCalls"]
