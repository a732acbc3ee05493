"""ctypes declarations of libconvo: finding the shared library, the public
structs of include/convo.h (field for field, version first) and the
signature of every function the binding calls."""

import ctypes
import ctypes.util
import os
import pathlib

# Error codes of include/convo.h.
OK = 0
ERROR = -1
EINVAL = -2
ENOTFOUND = -3
ECONFLICT = -4
ETOOLARGE = -5
EIO = -6
ETIMEOUT = -7
ENOMEM = -8
ENOTSUP = -9
ECORRUPT = -10

CODE_NAMES = {
    ERROR: "CONVO_ERROR", EINVAL: "CONVO_EINVAL", ENOTFOUND: "CONVO_ENOTFOUND",
    ECONFLICT: "CONVO_ECONFLICT", ETOOLARGE: "CONVO_ETOOLARGE", EIO: "CONVO_EIO",
    ETIMEOUT: "CONVO_ETIMEOUT", ENOMEM: "CONVO_ENOMEM", ENOTSUP: "CONVO_ENOTSUP",
    ECORRUPT: "CONVO_ECORRUPT",
}

STORE_OPTS_VERSION = 3
THREAD_LIST_OPTS_VERSION = 1
APPEND_OPTS_VERSION = 2
REWRITE_OPTS_VERSION = 1
LOAD_OPTS_VERSION = 1
CHECKPOINT_IN_VERSION = 5
WRITES_IN_VERSION = 1
FORK_OPTS_VERSION = 2
CHECKPOINT_LIST_OPTS_VERSION = 5
CHECKPOINT_GET_OPTS_VERSION = 1
DUMP_OPTS_VERSION = 2

SONAME = "libconvo.so.0"


class Error(ctypes.Structure):
    """convo_error"""
    _fields_ = [
        ("code", ctypes.c_int),
        ("backend_code", ctypes.c_char * 16),
        ("message", ctypes.c_char * 256),
    ]


class StoreOpts(ctypes.Structure):
    """convo_store_opts; CONVO_STORE_OPTS_INIT is StoreOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("max_message_bytes", ctypes.c_size_t),
        ("max_batch_messages", ctypes.c_size_t),
        ("max_extra_bytes", ctypes.c_size_t),
        ("max_checkpoint_bytes", ctypes.c_size_t),
        ("roles", ctypes.POINTER(ctypes.c_char_p)),
        ("indexed_keys", ctypes.POINTER(ctypes.c_char_p)),  # version 2
        ("wait_enter", ctypes.c_void_p),  # version 3: void *(*)(void)
        ("wait_leave", ctypes.c_void_p),  # void (*)(void *)
    ]

    @classmethod
    def init(cls):
        return cls(STORE_OPTS_VERSION, 0, 0, 0, 0, None, None, None, None)


class ThreadListOpts(ctypes.Structure):
    """convo_thread_list_opts; CONVO_THREAD_LIST_OPTS_INIT is ThreadListOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("where_json", ctypes.c_char_p),
        ("order", ctypes.c_int),
        ("reverse", ctypes.c_int),
        ("after", ctypes.c_char_p),
        ("limit", ctypes.c_size_t),
        ("with_extra", ctypes.c_int),
        ("with_last_message", ctypes.c_int),
    ]

    @classmethod
    def init(cls):
        return cls(THREAD_LIST_OPTS_VERSION, None, 0, 0, None, 0, 0, 0)


class AppendOpts(ctypes.Structure):
    """convo_append_opts; CONVO_APPEND_OPTS_INIT is AppendOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("idempotency_key", ctypes.c_char_p),
        ("expected_length", ctypes.c_int64),
        ("expected_generation", ctypes.c_int64),  # version 2
    ]

    @classmethod
    def init(cls):
        return cls(APPEND_OPTS_VERSION, None, -1, -1)


class AppendResult(ctypes.Structure):
    """convo_append_result"""
    _fields_ = [
        ("first_seq", ctypes.c_int64),
        ("count", ctypes.c_size_t),
        ("replayed", ctypes.c_int),
    ]


class RewriteOpts(ctypes.Structure):
    """convo_rewrite_opts; CONVO_REWRITE_OPTS_INIT is RewriteOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("idempotency_key", ctypes.c_char_p),
        ("expected_length", ctypes.c_int64),
        ("expected_generation", ctypes.c_int64),
        ("expected_suffix", ctypes.POINTER(ctypes.c_char_p)),
        ("expected_suffix_lengths", ctypes.POINTER(ctypes.c_size_t)),
        ("nexpected_suffix", ctypes.c_size_t),
        ("drop_checkpoints", ctypes.c_int),
    ]

    @classmethod
    def init(cls):
        return cls(REWRITE_OPTS_VERSION, None, -1, -1, None, None, 0, 0)


class RewriteResult(ctypes.Structure):
    """convo_rewrite_result"""
    _fields_ = [
        ("first_seq", ctypes.c_int64),
        ("count", ctypes.c_size_t),
        ("removed", ctypes.c_int64),
        ("generation", ctypes.c_int64),
        ("replayed", ctypes.c_int),
    ]


class LoadOpts(ctypes.Structure):
    """convo_load_opts; CONVO_LOAD_OPTS_INIT is LoadOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("from_seq", ctypes.c_int64),
        ("limit", ctypes.c_int64),
        ("tail", ctypes.c_int64),
        ("with_extra", ctypes.c_int),
    ]

    @classmethod
    def init(cls):
        return cls(LOAD_OPTS_VERSION, 0, 0, 0, 1)


class ForkOpts(ctypes.Structure):
    """convo_fork_opts; CONVO_FORK_OPTS_INIT is ForkOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("expected_generation", ctypes.c_int64),
        ("with_checkpoints", ctypes.c_int),  # version 2
    ]

    @classmethod
    def init(cls):
        return cls(FORK_OPTS_VERSION, -1, 0)


class Blob(ctypes.Structure):
    """convo_blob; bytes is a void pointer read with its exact length."""
    _fields_ = [
        ("type", ctypes.c_char_p),
        ("bytes", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
    ]


class ChannelIn(ctypes.Structure):
    """convo_channel_in"""
    _fields_ = [
        ("channel", ctypes.c_char_p),
        ("version", ctypes.c_char_p),
        ("value", ctypes.POINTER(Blob)),
    ]


class ItemsIn(ctypes.Structure):
    """convo_items_in: a list of message texts kept in the thread's log (log
    references); CONVO_ITEMS_IN_INIT is ItemsIn.init()."""
    _fields_ = [
        ("items", ctypes.POINTER(ctypes.c_char_p)),
        ("lengths", ctypes.POINTER(ctypes.c_size_t)),
        ("seqs", ctypes.POINTER(ctypes.c_int64)),
        ("n", ctypes.c_size_t),
        ("key", ctypes.c_char_p),
        ("rest", Blob),
        ("seqs_out", ctypes.POINTER(ctypes.c_int64)),
        ("log", ctypes.c_int),
    ]

    @classmethod
    def init(cls):
        return cls(None, None, None, 0, None, Blob(None, None, 0), None, 0)


class Items(ctypes.Structure):
    """convo_items: a resolved list of items (texts read with their lengths)."""
    _fields_ = [
        ("n", ctypes.c_size_t),
        ("items", ctypes.POINTER(ctypes.c_void_p)),
        ("lengths", ctypes.POINTER(ctypes.c_size_t)),
        ("seqs", ctypes.POINTER(ctypes.c_int64)),
        ("key", ctypes.c_char_p),
        ("rest", Blob),
    ]


class CheckpointIn(ctypes.Structure):
    """convo_checkpoint_in (version 5); CONVO_CHECKPOINT_IN_INIT is CheckpointIn.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("thread_id", ctypes.c_char_p),
        ("checkpoint_ns", ctypes.c_char_p),
        ("checkpoint_id", ctypes.c_char_p),
        ("parent_id", ctypes.c_char_p),
        ("metadata_json", ctypes.c_char_p),
        ("body", Blob),
        ("channels", ctypes.POINTER(ChannelIn)),
        ("nchannels", ctypes.c_size_t),
        ("log_length", ctypes.c_int64),
        ("messages", ctypes.POINTER(ctypes.c_char_p)),
        ("message_lengths", ctypes.POINTER(ctypes.c_size_t)),
        ("nmessages", ctypes.c_size_t),
        ("expected_length", ctypes.c_int64),
        ("expected_generation", ctypes.c_int64),  # version 3
        ("channel_items", ctypes.POINTER(ctypes.POINTER(ItemsIn))),  # version 4
        ("channel_log_prefix", ctypes.POINTER(ctypes.c_int64)),  # version 5
    ]

    @classmethod
    def init(cls):
        return cls(CHECKPOINT_IN_VERSION, None, None, None, None, None, Blob(None, None, 0),
                   None, 0, 0, None, None, 0, -1, -1, None, None)


class WriteIn(ctypes.Structure):
    """convo_write_in"""
    _fields_ = [
        ("idx", ctypes.c_int64),
        ("channel", ctypes.c_char_p),
        ("value", Blob),
    ]


class WritesIn(ctypes.Structure):
    """convo_writes_in (pending writes with log references); CONVO_WRITES_IN_INIT is
    WritesIn.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("thread_id", ctypes.c_char_p),
        ("checkpoint_ns", ctypes.c_char_p),
        ("checkpoint_id", ctypes.c_char_p),
        ("task_id", ctypes.c_char_p),
        ("task_path", ctypes.c_char_p),
        ("writes", ctypes.POINTER(WriteIn)),
        ("n", ctypes.c_size_t),
        ("items", ctypes.POINTER(ctypes.POINTER(ItemsIn))),
    ]

    @classmethod
    def init(cls):
        return cls(WRITES_IN_VERSION, None, None, None, None, None, None, 0, None)


class CheckpointListOpts(ctypes.Structure):
    """convo_checkpoint_list_opts (version 4); CONVO_CHECKPOINT_LIST_OPTS_INIT is
    CheckpointListOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("thread_id", ctypes.c_char_p),
        ("checkpoint_ns", ctypes.c_char_p),
        ("before", ctypes.c_char_p),
        ("limit", ctypes.c_size_t),
        ("filter_json", ctypes.c_char_p),
        ("before_thread_id", ctypes.c_char_p),
        ("before_ns", ctypes.c_char_p),
        ("known_generation", ctypes.c_int64),
        ("known_length", ctypes.c_int64),
        ("known_origin", ctypes.c_int64),
        ("without_channel_items", ctypes.c_int),  # version 4
        ("only_channel", ctypes.c_char_p),  # version 5
    ]

    @classmethod
    def init(cls):
        return cls(CHECKPOINT_LIST_OPTS_VERSION, None, None, None, 0, None, None, None, -1, 0, -1,
                   0, None)


class CheckpointGetOpts(ctypes.Structure):
    """convo_checkpoint_get_opts (version 1); CONVO_CHECKPOINT_GET_OPTS_INIT is
    CheckpointGetOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("thread_id", ctypes.c_char_p),
        ("checkpoint_ns", ctypes.c_char_p),
        ("checkpoint_id", ctypes.c_char_p),
        ("known_generation", ctypes.c_int64),
        ("known_length", ctypes.c_int64),
        ("known_origin", ctypes.c_int64),
    ]

    @classmethod
    def init(cls):
        return cls(CHECKPOINT_GET_OPTS_VERSION, None, None, None, -1, 0, -1)


class DumpStats(ctypes.Structure):
    """convo_dump_stats"""
    _fields_ = [
        ("threads", ctypes.c_uint64),
        ("messages", ctypes.c_uint64),
        ("checkpoints", ctypes.c_uint64),
        ("writes", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("skipped", ctypes.c_uint64),
    ]


WRITE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
READ_FN = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(DumpStats))


class DumpOpts(ctypes.Structure):
    """convo_dump_opts; CONVO_DUMP_OPTS_INIT is DumpOpts.init()."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("progress", PROGRESS_FN),
        ("progress_ctx", ctypes.c_void_p),
        ("expected_generations", ctypes.POINTER(ctypes.c_int64)),  # version 2
    ]

    @classmethod
    def init(cls):
        return cls(DUMP_OPTS_VERSION, PROGRESS_FN(), None, None)


# Opaque handles are plain void pointers.
_store_p = ctypes.c_void_p
_history_p = ctypes.c_void_p
_page_p = ctypes.c_void_p
_checkpoint_p = ctypes.c_void_p
_set_p = ctypes.c_void_p
_err_p = ctypes.POINTER(Error)
_str_p = ctypes.POINTER(ctypes.c_char_p)
_ids_p = ctypes.POINTER(ctypes.c_char_p)

_SIGNATURES = {
    "convo_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "convo_version": (ctypes.c_char_p, []),
    "convo_drivers": (ctypes.POINTER(ctypes.c_char_p), []),
    "convo_open_ex": (ctypes.c_int, [ctypes.POINTER(_store_p), ctypes.c_char_p,
                                     ctypes.POINTER(StoreOpts), _err_p]),
    "convo_close": (None, [_store_p]),
    "convo_store_driver": (ctypes.c_char_p, [_store_p]),
    "convo_append": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                                    ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
                                    ctypes.POINTER(AppendOpts), ctypes.POINTER(AppendResult),
                                    _err_p]),
    "convo_replace_tail": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_int64,
                                          ctypes.POINTER(ctypes.c_char_p),
                                          ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
                                          ctypes.POINTER(RewriteOpts),
                                          ctypes.POINTER(RewriteResult), _err_p]),
    "convo_load": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.POINTER(LoadOpts),
                                  ctypes.POINTER(_history_p), _err_p]),
    "convo_history_free": (None, [_history_p]),
    "convo_history_count": (ctypes.c_size_t, [_history_p]),
    "convo_history_length": (ctypes.c_int64, [_history_p]),
    # c_void_p, not c_char_p: the bytes are read with their exact length.
    "convo_history_message": (ctypes.c_void_p, [_history_p, ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_size_t)]),
    "convo_history_role": (ctypes.c_char_p, [_history_p, ctypes.c_size_t]),
    "convo_history_seq": (ctypes.c_int64, [_history_p, ctypes.c_size_t]),
    "convo_history_created_at": (ctypes.c_int64, [_history_p, ctypes.c_size_t]),
    "convo_history_extra": (ctypes.c_char_p, [_history_p]),
    "convo_history_generation": (ctypes.c_int64, [_history_p]),
    "convo_save_extra": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_char_p, _err_p]),
    "convo_thread_delete": (ctypes.c_int, [_store_p, ctypes.c_char_p, _err_p]),
    "convo_thread_list": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_size_t,
                                         ctypes.POINTER(_page_p), _err_p]),
    "convo_thread_page_count": (ctypes.c_size_t, [_page_p]),
    "convo_thread_page_id": (ctypes.c_char_p, [_page_p, ctypes.c_size_t]),
    "convo_thread_page_next": (ctypes.c_char_p, [_page_p]),
    "convo_thread_page_free": (None, [_page_p]),
    "convo_thread_list_ex": (ctypes.c_int, [_store_p, ctypes.POINTER(ThreadListOpts),
                                            ctypes.POINTER(_page_p), _err_p]),
    "convo_thread_page_created_at": (ctypes.c_int64, [_page_p, ctypes.c_size_t]),
    "convo_thread_page_updated_at": (ctypes.c_int64, [_page_p, ctypes.c_size_t]),
    "convo_thread_page_length": (ctypes.c_int64, [_page_p, ctypes.c_size_t]),
    "convo_thread_page_extra": (ctypes.c_char_p, [_page_p, ctypes.c_size_t]),
    "convo_thread_page_last_message": (ctypes.c_void_p, [_page_p, ctypes.c_size_t,
                                                         ctypes.POINTER(ctypes.c_size_t)]),
    "convo_thread_page_cursor": (ctypes.c_char_p, [_page_p, ctypes.c_size_t]),
    "convo_thread_fork": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_int64, _err_p]),
    "convo_thread_fork_ex": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_int64, ctypes.POINTER(ForkOpts), _err_p]),
    "convo_checkpoint_put": (ctypes.c_int, [_store_p, ctypes.POINTER(CheckpointIn), _err_p]),
    "convo_checkpoint_put_writes": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_char_p,
                                                   ctypes.c_char_p, ctypes.c_char_p,
                                                   ctypes.c_char_p, ctypes.POINTER(WriteIn),
                                                   ctypes.c_size_t, _err_p]),
    "convo_checkpoint_get": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_char_p, ctypes.POINTER(_checkpoint_p),
                                            _err_p]),
    "convo_checkpoint_get_ex": (ctypes.c_int, [_store_p, ctypes.POINTER(CheckpointGetOpts),
                                               ctypes.POINTER(_checkpoint_p),
                                               _err_p]),
    "convo_checkpoint_list": (ctypes.c_int, [_store_p, ctypes.POINTER(CheckpointListOpts),
                                             ctypes.POINTER(_set_p), _err_p]),
    "convo_checkpoint_set_count": (ctypes.c_size_t, [_set_p]),
    "convo_checkpoint_set_get": (_checkpoint_p, [_set_p, ctypes.c_size_t]),
    "convo_checkpoint_set_free": (None, [_set_p]),
    "convo_checkpoint_prune": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_size_t,
                                              _err_p]),
    "convo_checkpoint_delete": (ctypes.c_int, [_store_p, ctypes.POINTER(CheckpointListOpts),
                                               ctypes.POINTER(ctypes.c_uint64), _err_p]),
    "convo_checkpoint_free": (None, [_checkpoint_p]),
    "convo_checkpoint_thread_id": (ctypes.c_char_p, [_checkpoint_p]),
    "convo_checkpoint_ns": (ctypes.c_char_p, [_checkpoint_p]),
    "convo_checkpoint_id": (ctypes.c_char_p, [_checkpoint_p]),
    "convo_checkpoint_parent_id": (ctypes.c_char_p, [_checkpoint_p]),
    "convo_checkpoint_metadata": (ctypes.c_char_p, [_checkpoint_p]),
    "convo_checkpoint_log_length": (ctypes.c_int64, [_checkpoint_p]),
    "convo_checkpoint_generation": (ctypes.c_int64, [_checkpoint_p]),
    "convo_checkpoint_log_origin": (ctypes.c_int64, [_checkpoint_p]),
    "convo_checkpoint_created_at": (ctypes.c_int64, [_checkpoint_p]),
    "convo_checkpoint_body": (Blob, [_checkpoint_p]),
    "convo_checkpoint_channel_count": (ctypes.c_size_t, [_checkpoint_p]),
    "convo_checkpoint_channel": (ctypes.c_char_p, [_checkpoint_p, ctypes.c_size_t, _str_p,
                                                   ctypes.POINTER(Blob)]),
    "convo_checkpoint_write_count": (ctypes.c_size_t, [_checkpoint_p]),
    "convo_checkpoint_write": (ctypes.c_char_p, [_checkpoint_p, ctypes.c_size_t, _str_p,
                                                 ctypes.POINTER(ctypes.c_int64), _str_p,
                                                 ctypes.POINTER(Blob)]),
    "convo_checkpoint_channel_items": (ctypes.c_int, [_checkpoint_p, ctypes.c_size_t,
                                                      ctypes.POINTER(Items)]),
    "convo_checkpoint_write_items": (ctypes.c_int, [_checkpoint_p, ctypes.c_size_t,
                                                    ctypes.POINTER(Items)]),
    "convo_checkpoint_put_writes_ex": (ctypes.c_int, [_store_p, ctypes.POINTER(WritesIn),
                                                      _err_p]),
    "convo_export": (ctypes.c_int, [_store_p, _ids_p, ctypes.c_size_t, WRITE_FN, ctypes.c_void_p,
                                    ctypes.POINTER(DumpOpts), ctypes.POINTER(DumpStats), _err_p]),
    "convo_import": (ctypes.c_int, [_store_p, READ_FN, ctypes.c_void_p, ctypes.POINTER(DumpOpts),
                                    ctypes.POINTER(DumpStats), _err_p]),
    "convo_copy": (ctypes.c_int, [_store_p, _store_p, _ids_p, ctypes.c_size_t,
                                  ctypes.POINTER(DumpOpts), ctypes.POINTER(DumpStats), _err_p]),
    "convo_sweep": (ctypes.c_int, [_store_p, ctypes.POINTER(ctypes.c_uint64), _err_p]),
    "convo_bench_raw": (ctypes.c_int, [_store_p, ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.c_size_t, ctypes.POINTER(ctypes.c_double), _err_p]),
    "convo_store_bytes": (ctypes.c_int, [_store_p, ctypes.POINTER(ctypes.c_int64), _err_p]),
    "convo_format_time": (None, [ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]),
}


# configure's default prefix: where `make install` puts libconvo unless told otherwise
DEFAULT_LIBDIR = "/usr/local/lib"


def _pkg_config_libdir():
    """The libdir `make install` wrote into convo.pc, when pkg-config finds it
    (a prefix outside pkg-config's path needs PKG_CONFIG_PATH); else None."""
    import subprocess
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "convo"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _candidates():
    """Where to look for libconvo, in order: $CONVO_LIBRARY alone when set;
    else the libdir that `make install` recorded, the libdir or build tree
    three levels up (an installed $libdir/python3.X/site-packages/convo, or
    bindings/python/convo of an in-tree build), the libdir of convo.pc (a
    pip-installed package), configure's default libdir, then the system's
    library path. A generator: pkg-config runs only when the paths before it
    did not load."""
    env = os.environ.get("CONVO_LIBRARY")
    if env:
        yield env
        return
    try:
        from . import _installed  # written by `make install`
        yield os.path.join(_installed.LIBDIR, SONAME)
    except ImportError:
        pass
    up = pathlib.Path(__file__).resolve().parents[3]
    yield str(up / SONAME)
    yield str(up / ".libs" / SONAME)
    libdir = _pkg_config_libdir()
    if libdir and libdir != DEFAULT_LIBDIR:
        yield os.path.join(libdir, SONAME)
    yield os.path.join(DEFAULT_LIBDIR, SONAME)
    system = ctypes.util.find_library("convo")
    if system:
        yield system
    yield SONAME


def _declare(lib):
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def _load():
    tried = []
    for path in _candidates():
        if "/" in path and not os.path.exists(path):
            tried.append("%s (no such file)" % path)  # dlopen's error would not name it
            continue
        try:
            lib = ctypes.CDLL(path)  # CDLL releases the GIL during each call
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        return _declare(lib), path
    raise ImportError("convo: cannot load libconvo; set CONVO_LIBRARY to the path of "
                      "libconvo.so, or install libconvo (`make install`; a --prefix other than /usr/local "
                      "is found through its convo.pc on PKG_CONFIG_PATH). Tried: " + "; ".join(tried))


lib, path = _load()

# The same library with the GIL kept during each call (dlopen gives the same
# handle, so the same functions): for the stores whose calls wait on nothing
# but their own locks (memory:, sqlite:), opened with GIL_WAIT_HOOKS so that
# libconvo gives the GIL up around each of those waits (docs/python.md).
kept = _declare(ctypes.PyDLL(path))
GIL_WAIT_HOOKS = (ctypes.cast(ctypes.pythonapi.PyEval_SaveThread, ctypes.c_void_p).value,
                  ctypes.cast(ctypes.pythonapi.PyEval_RestoreThread, ctypes.c_void_p).value)


def strerror(code):
    return lib.convo_strerror(code).decode("utf-8", "replace")


def version():
    return lib.convo_version().decode("ascii")


def format_time(micros):
    buf = ctypes.create_string_buffer(40)
    lib.convo_format_time(micros, buf, len(buf))
    return buf.value.decode("ascii")


def drivers():
    names, arr, i = [], lib.convo_drivers(), 0
    while arr[i] is not None:
        names.append(arr[i].decode("ascii"))
        i += 1
    return names
