"""The exceptions of the convo binding: one subclass of ConvoError per
CONVO_E* code, each carrying the code, the backend's own code and the
library's one line of text."""

import builtins

from . import _lib


class ConvoError(Exception):
    """Base class of every error raised by convo. Attributes: code (a
    negative CONVO_E* value, e.g. convo.EINVAL), backend_code (SQLSTATE,
    SQLite result code, ... or "") and message."""

    def __init__(self, code, message, backend_code=""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.backend_code = backend_code

    @property
    def code_name(self):
        return _lib.CODE_NAMES.get(self.code, str(self.code))

    def __str__(self):
        if self.backend_code:
            return "%s [%s]" % (self.message, self.backend_code)
        return self.message

    def __repr__(self):
        return "%s(%s, %r, %r)" % (type(self).__name__, self.code_name, self.message,
                                   self.backend_code)

    def __reduce__(self):
        # The default pickling passes self.args, which is only the message;
        # attributes set after construction (ConflictError.length) go as state.
        return (type(self), (self.code, self.message, self.backend_code), self.__dict__ or None)


class InvalidError(ConvoError, ValueError):
    """CONVO_EINVAL: a bad thread id, JSON, role, URL or option."""


class NotFoundError(ConvoError, LookupError):
    """CONVO_ENOTFOUND: an unknown thread."""


class ConflictError(ConvoError):
    """CONVO_ECONFLICT: a condition did not hold (expected length, generation
    or tail), an idempotency key was reused for another call, a fork target
    exists, or a rewrite would remove messages a checkpoint refers to.

    After a failed append, replace_tail or pop, length and generation are the
    thread's state read just after the conflict (None when it could not be
    read, and on other calls): re-read from there and decide again."""
    length = None
    generation = None


class TooLargeError(ConvoError):
    """CONVO_ETOOLARGE: over a limit of the store; nothing was written."""


class BackendError(ConvoError, OSError):
    """CONVO_EIO: the backend failed or went away."""


class TimeoutError(ConvoError, builtins.TimeoutError):
    """CONVO_ETIMEOUT: the backend did not answer in time."""


class OutOfMemoryError(ConvoError, MemoryError):
    """CONVO_ENOMEM"""


class NotSupportedError(ConvoError):
    """CONVO_ENOTSUP: the driver or this build cannot do it (e.g. a driver not built)."""


class CorruptError(ConvoError):
    """CONVO_ECORRUPT: stored data could not be decoded."""


_BY_CODE = {
    _lib.EINVAL: InvalidError,
    _lib.ENOTFOUND: NotFoundError,
    _lib.ECONFLICT: ConflictError,
    _lib.ETOOLARGE: TooLargeError,
    _lib.EIO: BackendError,
    _lib.ETIMEOUT: TimeoutError,
    _lib.ENOMEM: OutOfMemoryError,
    _lib.ENOTSUP: NotSupportedError,
    _lib.ECORRUPT: CorruptError,
}


def error_for(code, message, backend_code=""):
    """The exception for a CONVO_E* code (ConvoError itself for CONVO_ERROR
    and codes this binding does not know)."""
    if not message:
        message = _lib.strerror(code)
    return _BY_CODE.get(code, ConvoError)(code, message, backend_code)


def from_struct(code, err):
    """The exception for a failed call, from its filled convo_error."""
    msg = err.message.decode("utf-8", "replace")
    backend = err.backend_code.decode("utf-8", "replace")
    return error_for(code, msg, backend)


def invalid(message):
    return InvalidError(_lib.EINVAL, message, "")
