"""Python arguments -> what the C calls take: NUL-free UTF-8 bytes, JSON
text, integers in range. Each raises convo.InvalidError naming the argument."""

import collections.abc
import ctypes
import json

from .errors import invalid

_DUMPS = dict(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _text(value, what):
    """str or bytes -> NUL-free bytes for a char * argument."""
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise invalid("%s is not valid UTF-8: %s" % (what, e)) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise invalid("%s must be str or bytes, not %s" % (what, type(value).__name__))
    # C would silently stop at a NUL and act on a different string.
    if b"\0" in data:
        raise invalid("%s contains a NUL character" % what)
    return data


def _json_bytes(value, what):
    """A dict (serialized compactly) or JSON text (kept byte for byte) -> bytes."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        if isinstance(value, str):
            try:
                return value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise invalid("%s is not valid UTF-8: %s" % (what, e)) from None
        return bytes(value)
    if isinstance(value, collections.abc.Mapping):
        try:
            return json.dumps(dict(value), **_DUMPS).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise invalid("%s cannot be serialized as JSON: %s" % (what, e)) from None
    raise invalid("%s must be a dict, str or bytes, not %s" % (what, type(value).__name__))


def _int(value, what, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid("%s must be an int, not %s" % (what, type(value).__name__))
    if value < minimum or value >= 1 << 63:
        raise invalid("%s must be between %d and 2**63-1" % (what, minimum))
    return value


def _items(value, what):
    """An iterable (list, tuple, generator) -> a list; anything else is refused."""
    if isinstance(value, (str, bytes, bytearray, memoryview, collections.abc.Mapping)) \
            or not isinstance(value, collections.abc.Iterable):
        raise invalid("%s must be a list, not %s" % (what, type(value).__name__))
    return list(value)


def _batch(messages, what, raw=False):
    """Messages (or one) -> (array, lengths, n) for a const char *const * argument;
    raw: an item with a .raw (a loaded Message) is taken as those bytes."""
    if isinstance(messages, (collections.abc.Mapping, str, bytes, bytearray, memoryview)):
        messages = [messages]
    datas = [_json_bytes(getattr(m, "raw", m) if raw else m, "%s %d" % (what, i))
             for i, m in enumerate(_items(messages, what + "s"))]
    n = len(datas)
    arr = (ctypes.c_char_p * n)(*datas) if n else None
    lens = (ctypes.c_size_t * n)(*map(len, datas)) if n else None
    return arr, lens, n
