"""The binding itself, whatever the driver: the ctypes structs match
include/convo.h as the C compiler lays it out, every code maps to its
exception, and libconvo is found (or not) as documented."""

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import convo
from convo import _lib

TOP_SRCDIR = pathlib.Path(os.environ.get("top_srcdir") or pathlib.Path(__file__).resolve().parents[3])

STRUCTS = {
    "convo_error": (_lib.Error, ["code", "backend_code", "message"]),
    "convo_store_opts": (_lib.StoreOpts, ["version", "max_message_bytes", "max_batch_messages",
                                          "max_extra_bytes", "max_checkpoint_bytes", "roles",
                                          "indexed_keys", "wait_enter", "wait_leave"]),
    "convo_thread_list_opts": (_lib.ThreadListOpts, [
        "version", "where_json", "order", "reverse", "after", "limit", "with_extra",
        "with_last_message"]),
    "convo_append_opts": (_lib.AppendOpts, ["version", "idempotency_key", "expected_length",
                                            "expected_generation"]),
    "convo_rewrite_opts": (_lib.RewriteOpts, [
        "version", "idempotency_key", "expected_length", "expected_generation",
        "expected_suffix", "expected_suffix_lengths", "nexpected_suffix", "drop_checkpoints"]),
    "convo_rewrite_result": (_lib.RewriteResult, ["first_seq", "count", "removed", "generation",
                                                  "replayed"]),
    "convo_fork_opts": (_lib.ForkOpts, ["version", "expected_generation", "with_checkpoints"]),
    "convo_append_result": (_lib.AppendResult, ["first_seq", "count", "replayed"]),
    "convo_load_opts": (_lib.LoadOpts, ["version", "from_seq", "limit", "tail", "with_extra"]),
    "convo_blob": (_lib.Blob, ["type", "bytes", "len"]),
    "convo_channel_in": (_lib.ChannelIn, ["channel", "version", "value"]),
    "convo_checkpoint_in": (_lib.CheckpointIn, [
        "version", "thread_id", "checkpoint_ns", "checkpoint_id", "parent_id", "metadata_json",
        "body", "channels", "nchannels", "log_length", "messages", "message_lengths",
        "nmessages", "expected_length", "expected_generation", "channel_items",
        "channel_log_prefix"]),
    "convo_write_in": (_lib.WriteIn, ["idx", "channel", "value"]),
    "convo_items_in": (_lib.ItemsIn, ["items", "lengths", "seqs", "n", "key", "rest", "seqs_out",
                                      "log"]),
    "convo_items": (_lib.Items, ["n", "items", "lengths", "seqs", "key", "rest"]),
    "convo_writes_in": (_lib.WritesIn, ["version", "thread_id", "checkpoint_ns", "checkpoint_id",
                                        "task_id", "task_path", "writes", "n", "items"]),
    "convo_checkpoint_list_opts": (_lib.CheckpointListOpts, [
        "version", "thread_id", "checkpoint_ns", "before", "limit", "filter_json",
        "before_thread_id", "before_ns", "known_generation", "known_length", "known_origin",
        "without_channel_items", "only_channel"]),
    "convo_checkpoint_get_opts": (_lib.CheckpointGetOpts, [
        "version", "thread_id", "checkpoint_ns", "checkpoint_id", "known_generation",
        "known_length", "known_origin"]),
    "convo_dump_stats": (_lib.DumpStats, ["threads", "messages", "checkpoints", "writes", "bytes",
                                          "skipped"]),
    "convo_dump_opts": (_lib.DumpOpts, ["version", "progress", "progress_ctx",
                                        "expected_generations"]),
}

# The version macros of include/convo.h, and the binding's.
VERSIONS = {
    "CONVO_STORE_OPTS_VERSION": _lib.STORE_OPTS_VERSION,
    "CONVO_THREAD_LIST_OPTS_VERSION": _lib.THREAD_LIST_OPTS_VERSION,
    "CONVO_APPEND_OPTS_VERSION": _lib.APPEND_OPTS_VERSION,
    "CONVO_REWRITE_OPTS_VERSION": _lib.REWRITE_OPTS_VERSION,
    "CONVO_LOAD_OPTS_VERSION": _lib.LOAD_OPTS_VERSION,
    "CONVO_CHECKPOINT_IN_VERSION": _lib.CHECKPOINT_IN_VERSION,
    "CONVO_WRITES_IN_VERSION": _lib.WRITES_IN_VERSION,
    "CONVO_FORK_OPTS_VERSION": _lib.FORK_OPTS_VERSION,
    "CONVO_CHECKPOINT_LIST_OPTS_VERSION": _lib.CHECKPOINT_LIST_OPTS_VERSION,
    "CONVO_CHECKPOINT_GET_OPTS_VERSION": _lib.CHECKPOINT_GET_OPTS_VERSION,
    "CONVO_DUMP_OPTS_VERSION": _lib.DUMP_OPTS_VERSION,
}


class LayoutTests(unittest.TestCase):
    def c_layout(self):
        """sizeof and offsetof of each struct and field, from the C compiler."""
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        header = TOP_SRCDIR / "include" / "convo.h"
        if not cc or not header.exists():
            self.skipTest("no C compiler or no include/convo.h")
        lines = ["#include <convo.h>", "#include <stddef.h>", "#include <stdio.h>",
                 "int main(void) {"]
        for name, (_, fields) in STRUCTS.items():
            lines.append('printf("%s %%zu\\n", sizeof(%s));' % (name, name))
            for f in fields:
                lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, f, name, f))
        for macro in VERSIONS:
            lines.append('printf("%s %%u\\n", (unsigned)%s);' % (macro, macro))
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines))
            subprocess.run([cc, "-I", str(TOP_SRCDIR / "include"), src, "-o", exe], check=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        return dict((k, int(v)) for k, v in (line.split() for line in out.splitlines()))

    def test_structs_match_the_header(self):
        c = self.c_layout()
        for name, (cls, fields) in STRUCTS.items():
            self.assertEqual(ctypes.sizeof(cls), c[name], name)
            self.assertEqual([f[0] for f in cls._fields_], fields, name)
            for f in fields:
                self.assertEqual(getattr(cls, f).offset, c["%s.%s" % (name, f)], name + "." + f)

    def test_versions_match_the_header(self):
        c = self.c_layout()
        for macro, ours in VERSIONS.items():
            self.assertEqual(ours, c[macro], macro)

    def test_every_public_function_is_declared(self):
        """Each CONVO_EXTERN function of convo.h has a ctypes signature (the
        binding calls convo_open_ex for convo_open)."""
        import re
        header = (TOP_SRCDIR / "include" / "convo.h").read_text()
        names = set(re.findall(r"CONVO_EXTERN[^;(]*?\b(convo_\w+)\s*\(", header))
        self.assertGreater(len(names), 40)
        self.assertEqual(sorted(names - set(_lib._SIGNATURES) - {"convo_open"}), [])

    def test_init_values(self):
        o = _lib.CheckpointIn.init()
        self.assertEqual((o.version, o.nmessages, o.expected_length, o.log_length,
                          o.expected_generation, bool(o.channel_items), bool(o.channel_log_prefix)),
                         (5, 0, -1, 0, -1, False, False))
        o = _lib.ItemsIn.init()
        self.assertEqual((o.n, bool(o.items), bool(o.seqs), o.key, o.rest.type, bool(o.seqs_out),
                          o.log), (0, False, False, None, None, False, 0))
        o = _lib.WritesIn.init()
        self.assertEqual((o.version, o.n, bool(o.items)), (1, 0, False))
        o = _lib.CheckpointListOpts.init()
        self.assertEqual((o.version, o.limit, o.before_thread_id, o.known_generation,
                          o.known_length, o.known_origin, o.without_channel_items,
                          o.only_channel), (5, 0, None, -1, 0, -1, 0, None))
        o = _lib.CheckpointGetOpts.init()
        self.assertEqual((o.version, o.checkpoint_id, o.known_generation, o.known_length,
                          o.known_origin), (1, None, -1, 0, -1))
        o = _lib.DumpOpts.init()
        self.assertEqual((o.version, bool(o.progress), bool(o.expected_generations)), (2, False, False))
        o = _lib.AppendOpts.init()
        self.assertEqual((o.version, o.idempotency_key, o.expected_length, o.expected_generation),
                         (2, None, -1, -1))
        o = _lib.RewriteOpts.init()
        self.assertEqual((o.version, o.idempotency_key, o.expected_length, o.expected_generation,
                          bool(o.expected_suffix), o.nexpected_suffix, o.drop_checkpoints),
                         (1, None, -1, -1, False, 0, 0))
        o = _lib.ForkOpts.init()
        self.assertEqual((o.version, o.expected_generation, o.with_checkpoints), (2, -1, 0))
        o = _lib.LoadOpts.init()
        self.assertEqual((o.version, o.from_seq, o.limit, o.tail, o.with_extra), (1, 0, 0, 0, 1))
        o = _lib.StoreOpts.init()
        self.assertEqual((o.version, o.max_message_bytes, bool(o.roles), bool(o.indexed_keys),
                          o.wait_enter, o.wait_leave), (3, 0, False, False, None, None))
        o = _lib.ThreadListOpts.init()
        self.assertEqual((o.version, o.where_json, o.order, o.reverse, o.after, o.limit),
                         (1, None, 0, 0, None, 0))


class ErrorTests(unittest.TestCase):
    def test_codes_map_to_classes(self):
        want = {
            convo.EINVAL: convo.InvalidError, convo.ENOTFOUND: convo.NotFoundError,
            convo.ECONFLICT: convo.ConflictError, convo.ETOOLARGE: convo.TooLargeError,
            convo.EIO: convo.BackendError, convo.ETIMEOUT: convo.TimeoutError,
            convo.ENOMEM: convo.OutOfMemoryError, convo.ENOTSUP: convo.NotSupportedError,
            convo.ECORRUPT: convo.CorruptError, convo.ERROR: convo.ConvoError, -99: convo.ConvoError,
        }
        for code, cls in want.items():
            e = convo.errors.error_for(code, "", "XX")
            self.assertIs(type(e), cls)
            self.assertIsInstance(e, convo.ConvoError)
            self.assertEqual((e.code, e.backend_code), (code, "XX"))
            self.assertEqual(e.message, convo.strerror(code))  # an empty message gets the code's text

    def test_builtin_bases(self):
        self.assertTrue(issubclass(convo.InvalidError, ValueError))
        self.assertTrue(issubclass(convo.NotFoundError, LookupError))
        self.assertTrue(issubclass(convo.TimeoutError, TimeoutError))
        self.assertTrue(issubclass(convo.BackendError, OSError))
        self.assertFalse(issubclass(convo.ConflictError, ValueError))
        e = convo.TimeoutError(convo.ETIMEOUT, "slow", "")
        self.assertEqual((str(e), e.errno), ("slow", None))

    def test_module_surface(self):
        self.assertEqual(convo.__version__, _lib.version())
        self.assertIn("memory", convo.drivers())
        self.assertEqual(convo.strerror(convo.ENOTFOUND), "not found")
        self.assertEqual(convo.format_time(1_795_000_000_000_123), "2026-11-18T11:06:40.000123Z")
        self.assertEqual(convo.format_time(0), "1970-01-01T00:00:00.000000Z")
        with self.assertRaises(convo.InvalidError):
            convo.format_time("now")
        self.assertTrue(os.path.exists(convo.library_path) or "/" not in convo.library_path)
        ns = {}
        exec("from convo import *", ns)
        self.assertNotIn("TimeoutError", ns)  # the built-in is not shadowed
        self.assertIn("Store", ns)


class LoadingTests(unittest.TestCase):
    def run_python(self, code, **env):
        full = dict(os.environ, **env)
        return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                              text=True)

    def test_convo_library_names_the_library(self):
        r = self.run_python("import convo; print(convo.library_path)",
                            CONVO_LIBRARY=convo.library_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), convo.library_path)

    def test_a_wrong_convo_library_is_a_clear_import_error(self):
        r = self.run_python("import convo", CONVO_LIBRARY="/nonexistent/libconvo.so")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError", r.stderr)
        self.assertIn("CONVO_LIBRARY", r.stderr)
        self.assertIn("/nonexistent/libconvo.so", r.stderr)

    def test_installed_layout_finds_the_library_beside_the_package(self):
        # $libdir/libconvo.so.0 and $libdir/python3/dist-packages/convo, as `make install` lays them out
        pkg_src = pathlib.Path(convo.__file__).parent
        with tempfile.TemporaryDirectory() as libdir:
            shutil.copy(convo.library_path, os.path.join(libdir, "libconvo.so.0"))
            site = os.path.join(libdir, "python3", "dist-packages")
            shutil.copytree(pkg_src, os.path.join(site, "convo"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            env = {k: v for k, v in os.environ.items() if k != "CONVO_LIBRARY"}
            env["PYTHONPATH"] = site
            r = subprocess.run([sys.executable, "-c", "import convo; print(convo.library_path)"],
                               env=env, capture_output=True, text=True, cwd=libdir)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.path.realpath(r.stdout.strip()),
                             os.path.realpath(os.path.join(libdir, "libconvo.so.0")))


if __name__ == "__main__":
    unittest.main()
