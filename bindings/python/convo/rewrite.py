"""Rewriting a thread's tail from Python: Store.replace_tail and Store.pop (a
mixin of convo.Store) over convo_replace_tail, and the (length, generation)
a ConflictError carries so that the caller can re-read and decide."""

from __future__ import annotations

import collections
import collections.abc
import ctypes
from typing import Any, Iterable, List, Optional, Tuple, Union

from . import _lib
from ._args import _text, _int, _batch
from .errors import ConflictError, NotFoundError, invalid

lib = _lib.lib

#: A message as the binding takes it: a dict (sent as compact JSON) or JSON text.
MessageIn = Union[collections.abc.Mapping, str, bytes, bytearray, memoryview]

# A pop that loses a race with another writer reads the tail again, this many
# times at most (as `convo pop` does).
POP_ATTEMPTS = 50


class RewriteResult(collections.namedtuple("RewriteResult",
                                           "first_seq count removed generation replayed")):
    """What a replace_tail did: first_seq (= keep, the seq of the first new
    message), count (new messages stored), removed (messages removed; 0 on a
    replay), generation (the thread's generation after the call) and
    replayed=True when an idempotency key matched an earlier call."""
    __slots__ = ()


class RewriteCalls:
    """replace_tail and pop of convo.Store (docs/python.md, "Rewriting the tail")."""

    def _state(self, thread_id) -> Optional[Tuple[int, int]]:
        """(length, generation) of the thread, without reading a message; None
        when it does not exist."""
        def read(h):
            return lib.convo_history_length(h), lib.convo_history_generation(h)
        return self._history(thread_id, (1 << 63) - 1, 0, 0, False, read)

    def _explain_conflict(self, e: ConflictError, thread_id) -> ConflictError:
        """Fills e.length and e.generation with the thread's state now (the C
        error carries only text); they stay None if it cannot be read."""
        try:
            state = self._state(thread_id)
        except Exception:  # the conflict is the error to report, not this read
            state = None
        if state is not None:
            e.length, e.generation = state
        return e

    def replace_tail(self, thread_id: Union[str, bytes], keep: int,
                     messages: Iterable[MessageIn] = (), *,
                     expected_length: Optional[int] = None,
                     expected_generation: Optional[int] = None,
                     expected_suffix: Optional[Iterable[Any]] = None,
                     idempotency_key: Optional[Union[str, bytes]] = None,
                     drop_checkpoints: bool = False) -> RewriteResult:
        """Keeps messages [0, keep) of the thread and stores messages after
        them (seq keep, keep + 1, ...), in one atomic step of the backend;
        no messages pops everything from keep on. Every call increments the
        thread's generation. Returns a RewriteResult.

        expected_length / expected_generation: ConflictError (nothing
        written) unless the thread has exactly that many messages / is at that
        generation. expected_suffix: the caller's view of the messages being
        replaced, [keep, length) -- Message objects (their exact bytes), JSON
        text, or dicts (compared as compact JSON, so pass what load_history
        gave when the stored bytes are not compact); ConflictError unless the
        stored tail is exactly these. idempotency_key: a retry applies once and
        returns what the first call did. drop_checkpoints: a checkpoint whose
        log_length is above keep makes the call a ConflictError naming it;
        True removes such checkpoints in the same step instead.
        NotFoundError for an unknown thread; InvalidError when keep is
        negative or past the length. A ConflictError has .length and
        .generation: the thread's state just after the conflict."""
        arr, lens, n = _batch(messages, "message", raw=True)
        opts = _lib.RewriteOpts.init()
        keep_refs = []
        if idempotency_key is not None:
            opts.idempotency_key = _text(idempotency_key, "idempotency_key")
        if expected_length is not None:
            opts.expected_length = _int(expected_length, "expected_length", 0)
        if expected_generation is not None:
            opts.expected_generation = _int(expected_generation, "expected_generation", 0)
        if expected_suffix is not None:
            sarr, slens, sn = _batch(expected_suffix, "expected_suffix message", raw=True)
            keep_refs += [sarr, slens]
            # an empty view is a non-NULL pointer with count 0
            opts.expected_suffix = sarr if sn else (ctypes.c_char_p * 1)()
            keep_refs.append(opts.expected_suffix)
            opts.expected_suffix_lengths = slens
            opts.nexpected_suffix = sn
        if not isinstance(drop_checkpoints, bool):
            raise invalid("drop_checkpoints must be a bool")
        opts.drop_checkpoints = int(drop_checkpoints)
        res = _lib.RewriteResult()
        tid = _text(thread_id, "thread_id")
        try:
            self._call(self._lib.convo_replace_tail, tid, _int(keep, "keep", 0), arr, lens, n,
                       ctypes.byref(opts), ctypes.byref(res))
        except ConflictError as e:
            self._explain_conflict(e, tid)
            raise
        return RewriteResult(res.first_seq, res.count, res.removed, res.generation,
                             bool(res.replayed))

    def pop(self, thread_id: Union[str, bytes], count: int = 1, *,
            expected_length: Optional[int] = None,
            drop_checkpoints: bool = False) -> List[dict]:
        """Removes the last count messages (fewer when the thread has fewer)
        and returns them as dicts, oldest first; [] (and nothing written)
        when the thread is empty. It reads the tail, then removes exactly
        those messages on the (length, generation) it read: a pop that loses
        a race with another writer reads again (up to 50 times) unless
        expected_length was given, which makes any change a ConflictError.
        NotFoundError for an unknown thread."""
        _int(count, "count", 1)
        if expected_length is not None:
            _int(expected_length, "expected_length", 0)
        tid = _text(thread_id, "thread_id")
        for _ in range(POP_ATTEMPTS):
            h = self.load_history(tid, tail=count, with_extra=False)
            if h is None:
                raise NotFoundError(_lib.ENOTFOUND, "thread not found")
            if expected_length is not None and h.length != expected_length:
                e = ConflictError(_lib.ECONFLICT, "thread has %d messages, not the expected %d: "
                                  "nothing removed" % (h.length, expected_length))
                e.length, e.generation = h.length, h.generation
                raise e
            if not h.messages:
                return []
            try:
                self.replace_tail(tid, h.length - len(h.messages), expected_length=h.length,
                                  expected_generation=h.generation,
                                  drop_checkpoints=drop_checkpoints)
                return [m.json() for m in h.messages]
            except ConflictError as e:
                moved = (e.length, e.generation) != (h.length, h.generation)
                if expected_length is not None or not moved or e.length is None:
                    raise
        raise ConflictError(_lib.ECONFLICT, "the thread changed under each of %d attempts to "
                            "pop: nothing removed" % POP_ATTEMPTS)


__all__ = ["RewriteCalls", "RewriteResult"]
