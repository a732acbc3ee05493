"""examples/python/chat_agent.py on a SQLite file: the conversation survives a
restart, and a write by someone else between two lines is caught up with."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import convo
import support

EXAMPLE = pathlib.Path(os.environ.get("top_srcdir") or pathlib.Path(__file__).resolve().parents[3]
                       ) / "examples" / "python" / "chat_agent.py"


class ChatAgentExample(unittest.TestCase):
    def setUp(self):
        if "sqlite" not in convo.drivers():
            support.unavailable("the sqlite driver is not built into libconvo")
        d = tempfile.mkdtemp(prefix="convo-py-example-")
        self.addCleanup(shutil.rmtree, d, True)
        self.url = "sqlite:" + os.path.join(d, "chat.db")

    def run_agent(self, stdin):
        r = subprocess.run([sys.executable, str(EXAMPLE), self.url, "conv"], input=stdin,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_restores_after_a_restart(self):
        self.assertEqual(self.run_agent("hello\n\nsecond line\n"),
                         "restored 0 messages\n"
                         "assistant: Hello! Tell me anything; I will remember it.\n"
                         "assistant: You said: second line (turn 2)\n")
        self.assertEqual(self.run_agent("third\n"),
                         "restored 4 messages\n"
                         "  user: hello\n"
                         "  assistant: Hello! Tell me anything; I will remember it.\n"
                         "  user: second line\n"
                         "  assistant: You said: second line (turn 2)\n"
                         "assistant: You said: third (turn 3)\n")
        with convo.Store(self.url) as s:
            messages, extra = s.load("conv")
        self.assertEqual(len(messages), 6)
        self.assertEqual(extra, {"turns": 3, "last_user_line": "third"})

    def test_catches_up_after_another_writer(self):
        p = subprocess.Popen([sys.executable, "-u", str(EXAMPLE), self.url, "busy"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline(), "restored 0 messages\n")
            p.stdin.write("one\n")
            p.stdin.flush()
            self.assertEqual(p.stdout.readline(), "assistant: You said: one (turn 1)\n")
            with convo.Store(self.url) as s:
                s.append("busy", {"role": "system", "content": "interjection"})
            out, err = p.communicate("two\n", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("reloading", err)  # the conflict was seen and reported
        self.assertTrue(out.startswith("restored 3 messages\n"), out)
        self.assertTrue(out.endswith("assistant: You said: two (turn 2)\n"), out)
        with convo.Store(self.url) as s:
            roles = [m["role"] for m in s.load("busy")[0]]
        self.assertEqual(roles, ["user", "assistant", "system", "user", "assistant"])


if __name__ == "__main__":
    unittest.main()
