"""Moving threads between stores from Python: Store.export / import_ / copy
(a mixin of convo.Store) over binary file objects, streamed through
libconvo's callbacks so that memory does not grow with the data."""

import collections
import ctypes
import tempfile

from . import _lib
from ._args import _text, _int
from .errors import ConvoError, invalid

lib = _lib.lib


class DumpStats(collections.namedtuple("DumpStats",
                                       "threads messages checkpoints writes bytes skipped")):
    """What an export, import or copy moved: threads, messages, checkpoints,
    pending writes, stream bytes, and (import) messages already present."""
    __slots__ = ()


def _stats(c):
    return DumpStats(c.threads, c.messages, c.checkpoints, c.writes, c.bytes, c.skipped)


class _Run:
    """The callbacks of one call and the first Python exception raised in
    them, re-raised once the C call has returned."""

    def __init__(self, progress):
        self.exc = None
        self.opts = _lib.DumpOpts.init()
        if progress is not None:
            if not callable(progress):
                raise invalid("progress must be callable")

            def on_progress(_ctx, stats):
                if self.exc is None:
                    try:
                        progress(_stats(stats.contents))
                    except BaseException as e:  # raised after the call
                        self.exc = e
            self.progress = _lib.PROGRESS_FN(on_progress)
            self.opts.progress = self.progress

    def call(self, store, fn, *args):
        stats = _lib.DumpStats()
        try:
            store._call(fn, *args, ctypes.byref(self.opts), ctypes.byref(stats))
        except ConvoError as e:
            if self.exc is not None:
                raise self.exc from e
            raise
        if self.exc is not None:
            raise self.exc
        return _stats(stats)


def _thread_ids(thread_ids):
    if thread_ids is None:
        return None, 0
    if isinstance(thread_ids, (str, bytes)):
        thread_ids = [thread_ids]
    ids = [_text(t, "thread id") for t in thread_ids]
    if not ids:
        raise invalid("thread_ids is empty (None exports every thread)")
    return (ctypes.c_char_p * len(ids))(*ids), len(ids)


class DumpCalls:
    """export, import_ and copy of convo.Store (docs/dump-format.md)."""

    def export(self, file, thread_ids=None, *, progress=None, expected_generations=None):
        """Writes the threads named (None: every thread) with their messages,
        extra, checkpoints, values and pending writes to file (anything with
        a write(bytes) method) as convo's msgpack dump; returns DumpStats.
        progress(stats) is called after each thread and every few thousand
        messages. An exception raised by file.write or progress stops the
        export and is raised again here. expected_generations: one
        generation per thread named (None = any), ConflictError before
        anything of a thread at another generation is written."""
        if not callable(getattr(file, "write", None)):
            raise invalid("file must have a write() method")
        run = _Run(progress)
        arr, n = _thread_ids(thread_ids)
        if expected_generations is not None:
            gens = list(expected_generations)
            if len(gens) != n:
                raise invalid("expected_generations needs one entry per thread named")
            run.generations = (ctypes.c_int64 * n)(
                *[-1 if g is None else _int(g, "expected generation", 0) for g in gens])
            run.opts.expected_generations = run.generations

        def write(_ctx, buf, size):
            if run.exc is not None:
                return -1
            try:
                file.write(ctypes.string_at(buf, size))
                return 0
            except BaseException as e:
                run.exc = e
                return -1
        callback = _lib.WRITE_FN(write)
        return run.call(self, self._lib.convo_export, arr, n, callback, None)

    def import_(self, file, *, progress=None):
        """Reads a dump from file (anything with readinto() or read(n)) and
        stores it; importing the same dump twice changes nothing. Returns
        DumpStats (skipped: messages already present). A truncated or corrupt
        dump raises CorruptError with the byte offset."""
        readinto = getattr(file, "readinto", None)
        read = getattr(file, "read", None)
        if not callable(readinto) and not callable(read):
            raise invalid("file must have a readinto() or read() method")
        run = _Run(progress)

        def on_read(_ctx, buf, size):
            if run.exc is not None:
                return -1
            try:
                if callable(readinto):
                    got = readinto((ctypes.c_char * size).from_address(buf))
                    return 0 if got is None else got
                data = read(size)
                if len(data) > size:
                    raise ValueError("read(%d) returned %d bytes" % (size, len(data)))
                ctypes.memmove(buf, data, len(data))
                return len(data)
            except BaseException as e:
                run.exc = e
                return -1
        callback = _lib.READ_FN(on_read)
        return run.call(self, self._lib.convo_import, callback, None)

    def copy(self, dst, thread_ids=None, *, progress=None):
        """Copies the threads named (None: all) with everything they hold
        from this store into dst (another open convo.Store), streamed in
        bounded memory; returns DumpStats."""
        if not hasattr(dst, "_using"):
            raise invalid("dst must be an open convo.Store")
        if dst._lib is not self._lib:
            return self._copy_through_file(dst, thread_ids, progress)
        run = _Run(progress)
        arr, n = _thread_ids(thread_ids)
        with dst._using() as dst_handle:
            return run.call(self, self._lib.convo_copy, dst_handle, arr, n)

    def _copy_through_file(self, dst, thread_ids, progress):
        """copy between a store that keeps the GIL and one that does not: one
        libconvo call for both would either run the hooks of the first in a
        thread without the GIL (a fatal error) or wait on the second's server
        holding it (a deadlock when its pool is full), so the dump goes
        through a temporary file (in memory up to 16 MiB)."""
        with tempfile.SpooledTemporaryFile(max_size=16 << 20) as f:
            self.export(f, thread_ids)
            f.seek(0)
            return dst.import_(f, progress=progress)


__all__ = ["DumpStats", "DumpCalls"]
