"""convo: conversation threads kept safe and fast — the Python binding of
libconvo (standard library only, through ctypes).

    import convo
    with convo.Store("sqlite:chat.db") as store:
        store.append("t1", [{"role": "user", "content": "hi"}])
        messages, extra = store.load("t1")

libconvo is found through $CONVO_LIBRARY, else beside this package when
installed by `make install`, else on the system's library path. The asyncio
front end is convo.asyncio.Checkpointer."""

from . import _lib
from .errors import (ConvoError, InvalidError, NotFoundError, ConflictError, TooLargeError,
                     BackendError, TimeoutError, OutOfMemoryError, NotSupportedError,
                     CorruptError)
from .store import Store, AppendResult, Message, History, RewriteResult
from .threads import ThreadInfo, ThreadPage
from .checkpoint import Blob, Items, Channel, Write, Checkpoint
from .dump import DumpStats

from ._lib import (ERROR, EINVAL, ENOTFOUND, ECONFLICT, ETOOLARGE, EIO, ETIMEOUT, ENOMEM,
                   ENOTSUP, ECORRUPT, strerror)

__version__ = _lib.version()
#: The path libconvo was loaded from.
library_path = _lib.path


def format_time(micros):
    """Microseconds since the epoch as UTC RFC 3339 with microseconds
    ("2026-11-21T10:00:00.000123Z"), as convo_format_time writes it."""
    from ._args import _int
    return _lib.format_time(_int(micros, "micros", -(1 << 63)))


def drivers():
    """Names of the drivers built into the loaded libconvo ("memory", "sqlite", ...)."""
    return _lib.drivers()


# convo.TimeoutError is left out of __all__ so that `from convo import *` does not
# shadow the built-in (which it subclasses).
__all__ = [
    "Store", "AppendResult", "Message", "History", "RewriteResult", "drivers", "strerror", "format_time",
    "Blob", "Items", "Channel", "Write", "Checkpoint", "DumpStats", "ThreadInfo", "ThreadPage",
    "ConvoError", "InvalidError", "NotFoundError", "ConflictError", "TooLargeError",
    "BackendError", "OutOfMemoryError", "NotSupportedError", "CorruptError",
    "ERROR", "EINVAL", "ENOTFOUND", "ECONFLICT", "ETOOLARGE", "EIO", "ETIMEOUT", "ENOMEM",
    "ENOTSUP", "ECORRUPT",
]
