"""convo.langgraph: ConvoSaver, a LangGraph checkpoint saver (BaseCheckpointSaver of
langgraph-checkpoint 4.x, the package's `langgraph` extra) over a convo store. One
convo thread per LangGraph thread; a checkpoint is libconvo's checkpoint (body =
the LangGraph checkpoint without its channel values, each channel value stored
once per version, pending writes idempotent per (task, idx)); the async methods
run the blocking ones on the saver's thread pool, off the event loop.

    from convo.langgraph import ConvoSaver
    with ConvoSaver.from_conn_string("sqlite:graph.db") as checkpointer:
        graph = builder.compile(checkpointer=checkpointer)

How channel values are stored: convo/_langgraph_channels.py (docs/python.md)."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import itertools
import json
import os
import random
import threading
import time
from typing import Any, AsyncIterator, Dict, Iterator, Optional, Sequence

try:
    from langgraph.checkpoint.base import (WRITES_IDX_MAP, BaseCheckpointSaver, ChannelVersions,
                                           Checkpoint, CheckpointMetadata, CheckpointTuple,
                                           get_checkpoint_id,
                                           get_serializable_checkpoint_metadata,
                                           writes_sort_key)
    from langchain_core.runnables import RunnableConfig
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError("convo.langgraph needs langgraph-checkpoint 4.x: pip install "
                      "'convo-store[langgraph]' (%s)" % e) from e

from ._langgraph_cache import Missing
from ._langgraph_delta import DELTA_KEY
from ._langgraph_channels import MessageChannels
from .asyncio import Checkpointer
from .checkpoint import Items
from .errors import ConflictError, NotFoundError, invalid
from .store import Store
from . import _lib
from ._args import _int

__all__ = ["ConvoSaver"]

_MAX_PUT_KEYS = 4096   # checkpoints whose put this saver remembers (put_writes waits for them)
_PAGE = 100            # checkpoints listed per trip to the thread pool
_END = 1 << 62         # a seq past any log: a load from it reads only the thread's generation


def _thread_text(thread_id):
    """LangGraph's own savers store the text of a numeric thread id: 1 and "1"
    name one thread."""
    if isinstance(thread_id, bool):
        raise invalid("ConvoSaver: thread_id must be a string or an integer, not bool")
    if isinstance(thread_id, int):
        return str(thread_id)
    return thread_id


def _configurable(config, what="config"):
    c = (config or {}).get("configurable") or {}
    thread_id = c.get("thread_id")
    if thread_id is None or thread_id == "":
        raise invalid("ConvoSaver: %s['configurable']['thread_id'] is required" % what)
    return _thread_text(thread_id), c.get("checkpoint_ns") or "", c


def _metadata_json(config, metadata):
    md = get_serializable_checkpoint_metadata(config, metadata)
    return json.dumps(md, separators=(",", ":"), ensure_ascii=False, default=str)


def _contains(value, pattern):
    """jsonb @> semantics, the store's list filter: objects by key, arrays by
    element, scalars equal."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            k in value and _contains(value[k], v) for k, v in pattern.items())
    if isinstance(pattern, list):
        return isinstance(value, list) and all(
            any(_contains(x, p) for x in value) for p in pattern)
    if isinstance(pattern, bool) or isinstance(value, bool):
        return type(pattern) is type(value) and pattern == value
    return pattern == value


class ConvoSaver(BaseCheckpointSaver):
    """A LangGraph checkpoint saver kept in a convo store.

    url_or_store: a URL (the saver opens a Store and closes it in close()), or an
    open convo.Store or convo.asyncio.Checkpointer (shared, left open).
    message_channels: the channels holding the conversation (LangGraph's
    `messages` by default). writes_wait: seconds put_writes waits for the put of
    its checkpoint (LangGraph saves a task's writes without waiting for that put).
    max_workers: the thread pool of the async methods. cache_messages: how many
    revived messages the saver keeps (all threads together) so that a read
    revives and loads only the messages it has not seen (0: none kept); reads
    hand out the held objects again, after checking that none was changed in
    place (convo/_langgraph_cache.py; a put does not look inside the parent's
    messages: docs/python.md). assign_ids: a message
    without an id in an input or a write to a message channel gets one when it
    is stored (add_messages would give it one when the write is applied, after
    it was stored), so the put that commits it finds the same text and stores
    it once; False for a channel whose reducer keeps messages without ids.
    store_options: Store's keyword options, with a URL."""

    def __init__(self, url_or_store, *, serde=None, message_channels=("messages",),
                 writes_wait=60.0, max_workers=None, cache_messages=20000, assign_ids=True,
                 **store_options):
        super().__init__(serde=serde)
        if isinstance(url_or_store, Checkpointer):
            url_or_store = url_or_store.store
        if isinstance(url_or_store, Store):
            if store_options:
                raise TypeError("store options apply only when a URL is given")
            self._store, self._owns_store = url_or_store, False
        else:
            self._store, self._owns_store = Store(url_or_store, **store_options), True
        if isinstance(message_channels, str):
            message_channels = (message_channels,)
        self._channels = MessageChannels(message_channels, assign_ids=assign_ids,
                                         cache_messages=_int(cache_messages, "cache_messages", 0))
        self._writes_wait = float(writes_wait)
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="convo-langgraph")
        self._puts = collections.OrderedDict()   # (thread, ns, id) -> put succeeded
        self._writing = {}      # (thread, ns, id) -> put_writes calls under way on it
        self._committing = {}   # (thread, ns, id) -> puts of a child of it under way
        self._cond = threading.Condition()
        self._closed = False
        # per calling thread: the checkpoint a fresh get_tuple read with its delta lists
        # whole, which LangGraph's get_delta_channel_history asks for next
        self._fresh = threading.local()

    @classmethod
    def from_conn_string(cls, url, **options):
        """A context manager, sync (`with`) and async (`async with`), opening a
        saver on url and closing it on exit, as LangGraph's own savers do."""
        return _Opening(cls, url, options)

    @property
    def store(self):
        """The underlying convo.Store."""
        return self._store

    @property
    def message_channels(self):
        return self._channels.names

    def setup(self):
        """Nothing to do (convo creates and migrates its schema on open): here so
        that code written for PostgresSaver runs unchanged."""

    async def asetup(self):
        """As setup()."""

    # ---- versions ----

    def get_next_version(self, current, channel=None):
        """An increasing version with a random fraction: a branch taken from an old
        checkpoint (update_state, time travel) never reuses a version of another
        branch, whose stored value (kept once per version) would be taken for its own."""
        if current is None:
            number = 0
        elif isinstance(current, (int, float)):
            number = int(current)
        else:
            number = int(str(current).split(".")[0])
        return "%032d.%016d" % (number + 1, random.randrange(10 ** 16))

    # ---- the sync API ----

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        thread_id, ns, _ = _configurable(config)
        return self._get(thread_id, get_checkpoint_id(config), ns)

    def _get(self, thread_id, checkpoint_id, ns, keep=None):
        """The tuple of a checkpoint (the latest: checkpoint_id None), reading
        only the messages not held; None when it does not exist (or keep(cp) is
        false)."""
        known = self._channels.cache.known(thread_id)
        cp = self._store.checkpoint_get(thread_id, checkpoint_id, ns=ns, known=known)
        if cp is None or (keep is not None and not keep(cp)):
            return None
        try:
            held = False
            if known is None:
                # nothing of the thread held (a fresh saver): a DeltaChannel's list came
                # whole; held now (a snapshot's messages are held as its value is read)
                held = self._channels.hold_delta_lists(self.serde, cp, self._channels.names,
                                                       bare_only=True)
            found = self._tuple(cp)
            if held:
                # learned as the get_delta_channel_history that follows would learn it
                # right after reading it: that call walks from here without reading it
                # again (one store call less)
                self._channels.delta.learn_read((cp.thread_id, cp.ns, cp.id), cp,
                                                self._channels.names)
                self._fresh.target = cp
            return found
        except Missing:     # dropped meanwhile (another thread's read): read them all
            cp = self._store.checkpoint_get(thread_id, cp.id, ns=ns)
            return None if cp is None else self._tuple(cp)

    def list(self, config: Optional[RunnableConfig], *, filter: Optional[Dict[str, Any]] = None,
             before: Optional[RunnableConfig] = None,
             limit: Optional[int] = None) -> Iterator[CheckpointTuple]:
        if filter is not None and not isinstance(filter, dict):
            raise invalid("ConvoSaver: list filter must be a dict, not %s" % type(filter).__name__)
        if limit is not None and limit <= 0:
            return iter(())
        thread_id = ns = checkpoint_id = None
        if config is not None:
            c = config.get("configurable") or {}
            if c.get("thread_id") is not None:
                thread_id = _thread_text(c["thread_id"])
            ns = c.get("checkpoint_ns")
            checkpoint_id = c.get("checkpoint_id")
        if checkpoint_id is not None:
            return self._list_one(thread_id, ns, checkpoint_id, filter, before)
        return self._list(thread_id, ns, filter or None, before, limit)

    def _list_one(self, thread_id, ns, checkpoint_id, filter, before):
        if thread_id is None:
            raise invalid("ConvoSaver: list of a checkpoint_id needs its thread_id")
        found = self._get(thread_id, checkpoint_id, ns or "", keep=lambda cp: (
            not filter or _contains(cp.metadata, filter)) and (
            before is None or self._is_before(cp, before)))
        if found is not None:
            yield found

    def _is_before(self, cp, before):
        b_thread, b_ns, _ = _configurable(before, "before")
        b_id = get_checkpoint_id(before)
        return any(True for _ in self._store.checkpoint_list(
            cp.thread_id, ns=cp.ns, before=b_id, before_thread_id=b_thread, before_ns=b_ns,
            filter=None, limit=None) if _.id == cp.id)

    def _list(self, thread_id, ns, filter, before, limit):
        options = dict(ns=ns, filter=filter, limit=limit, page_size=_PAGE)
        if thread_id is not None:
            options["known"] = self._channels.cache.known(thread_id)
        before_id = None if before is None else get_checkpoint_id(before)
        if before_id is not None:
            b_thread, b_ns, bc = _configurable(before, "before")
            options.update(before=before_id, before_thread_id=b_thread,
                           before_ns=bc.get("checkpoint_ns", ns) or "")
        found = self._store.checkpoint_list(thread_id, **options)
        try:
            first = next(found, None)
        except NotFoundError:
            # `before` names no checkpoint here: LangGraph's SQL savers compare ids
            # (uuid6, increasing with time); so do we
            options.update(before=None, before_thread_id=None, before_ns=None, limit=None,
                           known=None)
            found = (cp for cp in self._store.checkpoint_list(thread_id, **options)
                     if cp.id < before_id)
            found = itertools.islice(found, limit) if limit is not None else found
            first = next(found, None)
        if first is None:
            return
        for cp in itertools.chain((first,), found):
            try:
                # across threads: hold nothing new (the listing would push the threads
                # being read out of the cache)
                t = self._tuple(cp, hold=thread_id is not None)
            except Missing:
                t = self._get(cp.thread_id, cp.id, cp.ns)
            if t is not None:
                yield t

    def get_delta_channel_history(self, *, config: RunnableConfig,
                                  channels: Sequence[str]) -> Dict[str, Any]:
        """BaseCheckpointSaver's walk over a DeltaChannel's ancestors (the writes of each
        ancestor back to the nearest one holding a value of the channel, oldest first,
        and that value as the seed): from what this saver remembers of the checkpoints
        it put or read (their parents, seeds and writes; the messages revived from the
        held ones) when it knows the whole way, else with one checkpoint_list of the
        ancestors (one more per time-travel branch point on the way) instead of a
        get_tuple per ancestor, read only past the log this saver holds."""
        channels = list(channels)
        if not channels:
            return {}
        thread_id, ns, _ = _configurable(config)
        checkpoint_id = get_checkpoint_id(config)
        try:
            if checkpoint_id is not None:
                # the usual call (LangGraph loads a checkpoint it has just read): the
                # chain this saver put or read, without a store call
                found = self._channels.delta_history(self.serde, (thread_id, ns, checkpoint_id),
                                                     channels)
                if found is not None:
                    return found
            return self._delta_history(config, channels, True)
        except Missing:     # a held message dropped meanwhile: read every text
            return self._delta_history(config, channels, False)

    def _delta_history(self, config, channels, use_known):
        thread_id, ns, c = _configurable(config)
        collected = {ch: [] for ch in channels}
        seeds = {}
        known = self._channels.cache.known(thread_id) if use_known else None
        checkpoint_id = get_checkpoint_id(config)
        fresh, self._fresh.target = getattr(self._fresh, "target", None), None
        if use_known and fresh is not None and checkpoint_id is not None and \
                (fresh.thread_id, fresh.ns, fresh.id) == (thread_id, ns, checkpoint_id):
            # this thread's get_tuple just read it whole, held its lists and learned it;
            # its parents do not change: the walk starts there (a checkpoint deleted
            # since is read again below and found missing, as without this)
            try:
                self._walk(fresh, set(channels), collected, seeds, known)
                return self._history(channels, collected, seeds)
            except NotFoundError:
                collected, seeds = {ch: [] for ch in channels}, {}
        target = self._store.checkpoint_get(thread_id, checkpoint_id, ns=ns, known=known)
        if target is not None:
            self._channels.delta.learn_read((target.thread_id, target.ns, target.id), target,
                                            self._channels.names)
            if use_known and self._channels.hold_delta_lists(self.serde, target, channels):
                # the ancestors' lists and writes then come without the texts held
                known = self._channels.cache.known(thread_id)
            self._walk(target, set(channels), collected, seeds, known)
        return self._history(channels, collected, seeds)

    @staticmethod
    def _history(channels, collected, seeds):
        out = {}
        for ch in channels:
            out[ch] = {"writes": collected[ch]}
            if ch in seeds:
                out[ch]["seed"] = seeds[ch]
        return out

    def _walk(self, target, remaining, collected, seeds, known):
        """From target's parent back to each channel's seed: the ancestors read one
        window (checkpoint_list before a checkpoint, as many as LangGraph's counters
        say lie since the last snapshot) at a time."""
        def depth_of(cp):
            counters = cp.metadata.get("counters_since_delta_snapshot") or {}
            return max([counters[ch][1] + 2 for ch in remaining
                        if isinstance(counters.get(ch), list) and len(counters[ch]) == 2] or [0])

        depth = max(8, depth_of(target))
        window, listed = {}, set()
        # one message channel walked for (the usual case): the ancestors listed with that
        # channel and its writes alone, no body, metadata nor other channel (list opts v5)
        only = next(iter(remaining)) if len(remaining) == 1 and \
            self._channels.names == remaining else None

        def page(before):
            # without the ancestors' lists (the library resolves none: each is O(history)),
            # their writes are what the walk needs; a seed's checkpoint is read again
            window.clear()
            listed.add(before)
            for cp in self._store.checkpoint_list(target.thread_id, ns=target.ns, before=before,
                                                  limit=depth, page_size=depth, known=known,
                                                  channel_items=False, only_channel=only):
                window[cp.id] = cp

        def needs_items(cp):
            return any(c.name in remaining and isinstance(c.value, Items) and
                       not (c.value.key == DELTA_KEY and c.value.rest is None)
                       for c in cp.channels)

        chain = []      # newest first: (checkpoint, {channel: [write, ...]})
        cursor = target.parent_id
        while cursor is not None and remaining:
            cp = window.get(cursor)
            if cp is None and target.id not in listed:
                page(target.id)
                cp = window.get(cursor)
            bare = cp is not None
            if cp is None:
                cp = self._store.checkpoint_get(target.thread_id, cursor, ns=target.ns,
                                                known=known)    # a branch point, or further
                if cp is None:
                    break
                depth = depth_of(cp) or depth * 2
                page(cursor)
            elif needs_items(cp):
                # a value of a channel walked for (the seed: a snapshot's selection)
                cp = self._store.checkpoint_get(target.thread_id, cursor, ns=target.ns,
                                                known=known)
                if cp is None:
                    break
                bare = False
            # remembered: the next call knows this part of the way (a restarted saver
            # reads the window once, not at every turn until its own puts fill it)
            self._channels.delta.learn_read((cp.thread_id, cp.ns, cp.id), cp,
                                            self._channels.names, items=not bare)
            reader = self._channels.reader(cp)
            mine = {}
            for w in sorted(cp.writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx)):
                if w.channel in remaining:
                    mine.setdefault(w.channel, []).append(w)
            chain.append((cp, reader, mine))
            for c in cp.channels:
                if c.name in remaining:
                    has, value = self._channels.channel_value(self.serde, c, reader)
                    if has:
                        seeds[c.name] = value
                        remaining.discard(c.name)
            cursor = cp.parent_id
        for cp, reader, mine in reversed(chain):
            for ch, ws in mine.items():
                collected[ch].extend((w.task_id, ch, self._channels.read_write(self.serde, w, reader))
                                     for w in ws)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        thread_id, ns, c = _configurable(config)
        key = (thread_id, ns, checkpoint["id"])
        parent_id = c.get("checkpoint_id")
        parent_key = parent_id and (thread_id, ns, parent_id)
        try:
            # LangGraph's loop stores a step's writes and puts the next checkpoint
            # on different threads without ordering them: this put waits for the
            # writes this saver is storing on its parent, so that it finds them and
            # turns those it commits into log references (put_writes waits for it)
            with self._busy(self._committing, parent_key, self._writing):
                self._put(config, thread_id, ns, key, parent_key, checkpoint, metadata,
                          new_versions)
        except BaseException:
            self._put_done(key, False)
            raise
        self._put_done(key, True)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def _put(self, config, thread_id, ns, key, parent_key, checkpoint, metadata, new_versions):
        """One conditional put: the seq hints are valid for the thread's generation
        this saver last saw; when another writer rewrote the thread since
        (ConflictError), the generation is read again and the put made with texts."""
        values, versions = checkpoint["channel_values"], checkpoint["channel_versions"]
        body = self.serde.dumps_typed({k: v for k, v in checkpoint.items()
                                       if k != "channel_values"})
        metadata = _metadata_json(config, metadata)
        # the parent as stored (every text), for a DeltaChannel's list this saver lacks
        read_parent = functools.partial(self._store.checkpoint_get, thread_id,
                                        parent_key[2], ns=ns) if parent_key else None
        generation = self._channels.generation(thread_id)
        if generation is None and self._channels.has_lists(values, new_versions):
            generation = self._read_generation(thread_id)
        for attempt in (0, 1):
            plan = self._channels.plan_put(self.serde, values, versions, new_versions,
                                           parent_key, generation, read_parent, thread_id)
            try:
                seqs = self._store.checkpoint_put(
                    thread_id, checkpoint["id"], ns=ns,
                    parent_id=parent_key[2] if parent_key else None, metadata=metadata,
                    body=body, channels=plan.channels, log_prefix=plan.prefixes or None,
                    expected_generation=generation if plan.listed else None)
                break
            except ConflictError:
                if attempt or not plan.listed:
                    raise
                self._channels.forget_thread(thread_id)
                generation = self._read_generation(thread_id)
        if plan.listed:
            self._channels.learn_generation(thread_id, generation)
        self._channels.put_done(key, parent_key, values, new_versions, seqs, generation,
                                plan.prefixes, plan.deltas, versions, plan.heads)

    def _read_generation(self, thread_id):
        """The thread's generation (0 for a thread not there yet), read without its
        messages."""
        h = self._store.load_history(thread_id, from_seq=_END, with_extra=False)
        return 0 if h is None else h.generation

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple], task_id: str,
                   task_path: str = "") -> None:
        thread_id, ns, c = _configurable(config)
        checkpoint_id = c.get("checkpoint_id")
        key = (thread_id, ns, checkpoint_id)
        # a put of a child checkpoint under way: wait for it, its appended messages
        # are then known by seq (write_value)
        with self._busy(self._writing, key, self._committing):
            stored = [(WRITES_IDX_MAP.get(channel, i), channel,
                       self._channels.write_value(self.serde, thread_id, channel, value))
                      for i, (channel, value) in enumerate(writes)]
            call = functools.partial(self._store.checkpoint_put_writes, thread_id,
                                     checkpoint_id, task_id, stored, ns=ns,
                                     task_path=task_path or "")
            try:
                call()
            except NotFoundError:
                # LangGraph's loop saves a task's writes without waiting for the put of
                # their checkpoint (both go to a background executor), and convo keeps
                # writes only for a stored checkpoint: wait for the put, then save them.
                self._after_put(key, call)
            # stored: a DeltaChannel's next put lists them (convo/_langgraph_delta.py)
            for (idx, channel, value), (_, written) in zip(stored, writes):
                self._channels.write_stored(key, task_path, task_id, idx, channel, value,
                                            written if isinstance(written, list) else None)

    def delete_thread(self, thread_id: str) -> None:
        text = _thread_text(thread_id)
        with self._cond:
            for key in [k for k in self._puts if k[0] == text]:
                del self._puts[key]
        self._channels.forget_thread(text)
        try:
            self._store.delete(text)
        except NotFoundError:
            pass

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every checkpoint of every namespace with its pending writes, the
        thread's messages and its extra into a new thread (Store.fork with
        checkpoints). Nothing when the source does not exist; ConflictError (nothing
        written) when the target does."""
        try:
            self._store.fork(_thread_text(source_thread_id), _thread_text(target_thread_id),
                             with_checkpoints=True)
        except NotFoundError:
            pass

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes the checkpoints whose metadata has one of these run_ids (LangGraph
        records the run's id there), of every thread and namespace, with their pending
        writes and the values no remaining checkpoint needs."""
        for run_id in run_ids:
            self._store.checkpoint_delete(filter={"run_id": run_id})
        # a remembered DeltaChannel history must not outlive the checkpoints it ran through
        self._channels.delta.forget()

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """keep_latest: the latest checkpoint of each namespace stays, with its
        writes and values; delete: every checkpoint goes. The thread's messages and
        extra stay either way (delete_thread removes them)."""
        keep = {"keep_latest": 1, "delete": 0}.get(strategy)
        if keep is None:
            raise invalid("ConvoSaver.prune: unknown strategy %r (keep_latest or delete)"
                          % (strategy,))
        for thread_id in thread_ids:
            try:
                self._store.checkpoint_prune(_thread_text(thread_id), keep)
            except NotFoundError:
                pass
            finally:
                self._channels.delta.forget(_thread_text(thread_id))

    # ---- the async API: the sync calls on the saver's thread pool ----

    async def _run(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            raise invalid("ConvoSaver: the saver is closed") from None
        return await future

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        return await self._run(self.get_tuple, config)

    async def alist(self, config: Optional[RunnableConfig], *,
                    filter: Optional[Dict[str, Any]] = None,
                    before: Optional[RunnableConfig] = None,
                    limit: Optional[int] = None) -> AsyncIterator[CheckpointTuple]:
        found = self.list(config, filter=filter, before=before, limit=limit)
        while True:
            page = await self._run(lambda: [t for t in itertools.islice(found, _PAGE)])
            for t in page:
                yield t
            if len(page) < _PAGE:
                return

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Dict[str, Any]:
        return await self._run(functools.partial(self.get_delta_channel_history,
                                                 config=config, channels=list(channels)))

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        return await self._run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple], task_id: str,
                          task_path: str = "") -> None:
        await self._run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._run(self.delete_for_runs, list(run_ids))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._run(self.prune, list(thread_ids), strategy=strategy)

    # ---- lifetime ----

    def close(self):
        """Waits for calls in progress, wakes put_writes calls waiting for a put,
        closes the store if the saver opened it. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._executor.shutdown(wait=True)
        if self._owns_store:
            self._store.close()

    async def aclose(self):
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    # ---- helpers ----

    def _tuple(self, cp, hold=True) -> CheckpointTuple:
        checkpoint = self.serde.loads_typed(cp.body)
        reader = self._channels.reader(cp, hold)
        checkpoint["channel_values"] = self._channels.resolve(self.serde, cp, reader)
        ordered = sorted(cp.writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
        pending = [(w.task_id, w.channel, self._channels.read_write(self.serde, w, reader))
                   for w in ordered]
        config = {"configurable": {"thread_id": cp.thread_id, "checkpoint_ns": cp.ns,
                                   "checkpoint_id": cp.id}}
        parent = None
        if cp.parent_id is not None:
            parent = {"configurable": {"thread_id": cp.thread_id, "checkpoint_ns": cp.ns,
                                       "checkpoint_id": cp.parent_id}}
        return CheckpointTuple(config, checkpoint, cp.metadata, parent, pending)

    @contextlib.contextmanager
    def _busy(self, mine, key, other):
        """Counts a call under way on key in `mine`, after waiting (at most
        writes_wait seconds) until none is under way on key in `other`."""
        if not key:
            yield
            return
        with self._cond:
            self._cond.wait_for(lambda: not other.get(key) or self._closed,
                                timeout=self._writes_wait)
            mine[key] = mine.get(key, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                if mine[key] > 1:
                    mine[key] -= 1
                else:
                    del mine[key]
                self._cond.notify_all()

    def _put_done(self, key, ok):
        with self._cond:
            self._puts.pop(key, None)
            self._puts[key] = ok
            while len(self._puts) > _MAX_PUT_KEYS:
                self._puts.popitem(last=False)
            self._cond.notify_all()

    def _after_put(self, key, call):
        """Retries call until the put of key by this saver (or, polled, by another
        process) lets it succeed; NotFoundError when that put failed or did not
        come within writes_wait seconds."""
        deadline = time.monotonic() + self._writes_wait
        while True:
            with self._cond:
                self._cond.wait_for(lambda: key in self._puts or self._closed,
                                    timeout=max(0.0, min(0.5, deadline - time.monotonic())))
                state = self._puts.get(key)
            if state is False:
                raise NotFoundError(_lib.ENOTFOUND, "ConvoSaver: the put of checkpoint %s failed: its "
                                    "writes are not stored" % (key[2],), "")
            try:
                return call()
            except NotFoundError:
                if state or self._closed or time.monotonic() >= deadline:
                    raise


class _Opening:
    """ConvoSaver.from_conn_string's context manager (sync and async)."""

    def __init__(self, cls, url, options):
        self._cls, self._url, self._options = cls, url, options
        self._saver = None

    def __enter__(self):
        self._saver = self._cls(self._url, **self._options)
        return self._saver

    def __exit__(self, *exc):
        self._saver.close()

    async def __aenter__(self):
        loop = asyncio.get_running_loop()
        self._saver = await loop.run_in_executor(
            None, functools.partial(self._cls, self._url, **self._options))
        return self._saver

    async def __aexit__(self, *exc):
        await self._saver.aclose()
