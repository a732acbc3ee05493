"""convo.asyncio: the agent-framework front end. Checkpointer runs each
blocking libconvo call on a thread pool, off the event loop; the C store is
thread-safe and ctypes releases the GIL during the call, so many concurrent
calls proceed in parallel."""

import asyncio
import concurrent.futures
import functools
import itertools
import os

from .errors import invalid
from .store import Store
from .threads import _list_opts

__all__ = ["Checkpointer", "CheckpointData"]


class CheckpointData:
    """A restored thread: messages (a list of dicts, in seq order) and extra
    (a dict). Both are fresh objects: changing them changes nothing stored."""

    __slots__ = ("messages", "extra")

    def __init__(self, messages, extra):
        self.messages = messages
        self.extra = extra

    def __eq__(self, other):
        if not isinstance(other, CheckpointData):
            return NotImplemented
        return self.messages == other.messages and self.extra == other.extra

    def __repr__(self):
        return "CheckpointData(messages=<%d>, extra=%r)" % (len(self.messages), self.extra)


class Checkpointer:
    """Async access to a convo store, for agents that restore their thread
    after a restart:

        async with Checkpointer("sqlite:agent.db") as cp:
            data = await cp.load("job-1")          # CheckpointData or None
            await cp.append("job-1", [{"role": "user", "content": "hi"}])
            await cp.save_extra("job-1", {"step": 1})

    url_or_store is a URL (the store is opened here, and closed by close())
    or an open convo.Store (shared, left open). options are Store's keyword
    options; keep_gil defaults to False here, so that the event loop runs
    while libconvo works (docs/python.md, threads and the GIL). max_workers bounds the calls running at once (default: Python's
    ThreadPoolExecutor default). A cancelled call may still complete in its
    thread: give appends an idempotency key when retrying after a cancel."""

    def __init__(self, url_or_store, *, max_workers=None, **options):
        if isinstance(url_or_store, Store):
            if options:
                raise TypeError("store options apply only when a URL is given")
            self._store, self._owns_store = url_or_store, False
        else:
            options.setdefault("keep_gil", False)
            self._store, self._owns_store = Store(url_or_store, **options), True
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="convo")

    @classmethod
    async def open(cls, url, **options):
        """Opens the store (which may connect to a server) off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(cls, url, **options))

    @property
    def store(self):
        """The underlying blocking convo.Store."""
        return self._store

    async def _run(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            raise invalid("the checkpointer is closed") from None
        return await future

    async def load(self, thread_id, from_seq=0, limit=0, tail=0):
        """The thread as CheckpointData(messages, extra), or None when unknown."""
        found = await self._run(self._store.load, thread_id, from_seq, limit, tail)
        return None if found is None else CheckpointData(*found)

    async def append(self, thread_id, messages, idempotency_key=None, expected_length=None, *,
                     expected_generation=None):
        """Appends a batch (all or nothing); returns convo.AppendResult."""
        return await self._run(self._store.append, thread_id, messages,
                               idempotency_key, expected_length,
                               expected_generation=expected_generation)

    async def replace_tail(self, thread_id, keep, messages=(), **options):
        """Keeps messages [0, keep) and stores messages after them, atomically
        (convo.Store.replace_tail, same options); returns convo.RewriteResult."""
        return await self._run(self._store.replace_tail, thread_id, keep, messages, **options)

    async def pop(self, thread_id, count=1, **options):
        """Removes and returns the last count messages (convo.Store.pop)."""
        return await self._run(self._store.pop, thread_id, count, **options)

    async def save_extra(self, thread_id, extra):
        """Shallow merge of extra into the thread's extra object."""
        await self._run(self._store.save_extra, thread_id, extra)

    async def delete(self, thread_id):
        await self._run(self._store.delete, thread_id)

    async def fork(self, src, dst, upto=None, **options):
        """Store.fork (expected_generation=, with_checkpoints=)."""
        await self._run(self._store.fork, src, dst, upto, **options)

    async def thread_ids(self, after=None, limit=None):
        """Store.thread_ids: thread ids in byte order, as a list."""
        return await self._run(self._store.thread_ids, after, limit)

    async def list_threads(self, where=None, order="recent", reverse=False, after=None,
                           limit=100, with_extra=False, with_last_message=False):
        """Store.list_threads off the event loop: one convo.ThreadPage."""
        return await self._run(self._store.list_threads, where, order, reverse, after, limit,
                               with_extra, with_last_message)

    def threads(self, where=None, order="recent", reverse=False, after=None, limit=100,
                with_extra=False, with_last_message=False):
        """An async iterator over every convo.ThreadInfo of Store.threads (same
        arguments, checked at the call); each page is fetched off the event loop."""
        _list_opts(where, order, reverse, after, limit, with_extra, with_last_message)
        return self._walk_threads(where, order, reverse, after, limit, with_extra,
                                  with_last_message)

    async def _walk_threads(self, where, order, reverse, after, limit, with_extra,
                            with_last_message):
        while True:
            page = await self.list_threads(where, order, reverse, after, limit, with_extra,
                                           with_last_message)
            for info in page.threads:
                yield info
            if page.next is None:
                return
            after = page.next

    # ---- graph checkpoints (convo.Store's calls, each off the event loop) ----

    async def checkpoint_put(self, thread_id, checkpoint_id, **kwargs):
        """Store.checkpoint_put: ns, parent_id, metadata, body, channels,
        log_length, and messages with expected_length (appended to the log in
        the same atomic write)."""
        await self._run(self._store.checkpoint_put, thread_id, checkpoint_id, **kwargs)

    async def checkpoint_put_writes(self, thread_id, checkpoint_id, task_id, writes, *, ns="",
                                    task_path=""):
        await self._run(self._store.checkpoint_put_writes, thread_id, checkpoint_id, task_id,
                        writes, ns=ns, task_path=task_path)

    async def checkpoint_get(self, thread_id, checkpoint_id=None, *, ns=""):
        """A convo.Checkpoint (the latest when checkpoint_id is None), or None."""
        return await self._run(self._store.checkpoint_get, thread_id, checkpoint_id, ns=ns)

    async def checkpoint_list(self, thread_id=None, *, page_size=100, **kwargs):
        """An async iterator over Store.checkpoint_list (same arguments): each
        page of page_size checkpoints is fetched off the event loop."""
        it = self._store.checkpoint_list(thread_id, page_size=page_size, **kwargs)
        take = functools.partial(lambda: list(itertools.islice(it, page_size)))
        while True:
            page = await self._run(take)
            for cp in page:
                yield cp
            if len(page) < page_size:
                return

    async def checkpoint_prune(self, thread_id, keep_last):
        await self._run(self._store.checkpoint_prune, thread_id, keep_last)

    async def checkpoint_delete(self, thread_id=None, **options):
        """Store.checkpoint_delete: how many checkpoints were removed."""
        return await self._run(self._store.checkpoint_delete, thread_id, **options)

    # ---- moving data and maintenance ----

    async def export(self, file, thread_ids=None, *, progress=None):
        """Store.export on a worker thread: file.write and progress are called
        there, not on the event loop."""
        return await self._run(self._store.export, file, thread_ids, progress=progress)

    async def import_(self, file, *, progress=None):
        """Store.import_ on a worker thread (file is read there)."""
        return await self._run(self._store.import_, file, progress=progress)

    async def copy(self, dst, thread_ids=None, *, progress=None):
        """Store.copy into dst (a convo.Store or a Checkpointer)."""
        if isinstance(dst, Checkpointer):
            dst = dst.store
        return await self._run(self._store.copy, dst, thread_ids, progress=progress)

    async def sweep(self):
        return await self._run(self._store.sweep)

    async def stored_bytes(self):
        return await self._run(self._store.stored_bytes)

    async def bench_raw(self, payload, n):
        return await self._run(self._store.bench_raw, payload, n)

    def close(self):
        """Waits for calls in progress, stops the threads, closes an owned store."""
        self._executor.shutdown(wait=True)
        if self._owns_store:
            self._store.close()

    async def aclose(self):
        """close() without blocking the event loop."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
