"""examples/python/langgraph_chat.py on a SQLite file: a LangGraph chatbot on
ConvoSaver picks its conversation up after a restart. Skipped without LangGraph,
failed under CONVO_REQUIRE_LANGGRAPH=1 (tests/python-pip.sh)."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import convo
import support
from test_langgraph import _need_langgraph

EXAMPLE = pathlib.Path(os.environ.get("top_srcdir") or pathlib.Path(__file__).resolve().parents[3]
                       ) / "examples" / "python" / "langgraph_chat.py"


class LangGraphChatExample(unittest.TestCase):
    def setUp(self):
        _need_langgraph()
        if "sqlite" not in convo.drivers():
            support.unavailable("the sqlite driver is not built into libconvo")
        d = tempfile.mkdtemp(prefix="convo-py-langgraph-")
        self.addCleanup(shutil.rmtree, d, True)
        self.url = "sqlite:" + os.path.join(d, "chat.db")

    def run_chat(self, stdin, thread="conv"):
        r = subprocess.run([sys.executable, str(EXAMPLE), self.url, thread], input=stdin,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_restores_after_a_restart(self):
        self.assertEqual(self.run_chat("hello\n\nsecond line\n"),
                         "restored 0 messages\n"
                         "assistant: Hello! Tell me anything; I will remember it.\n"
                         "assistant: You said: second line (turn 2)\n")
        self.assertEqual(self.run_chat("third\n"),
                         "restored 4 messages\n"
                         "  human: hello\n"
                         "  ai: Hello! Tell me anything; I will remember it.\n"
                         "  human: second line\n"
                         "  ai: You said: second line (turn 2)\n"
                         "assistant: You said: third (turn 3)\n")
        self.assertEqual(self.run_chat("", thread="other"), "restored 0 messages\n")
        with convo.Store(self.url) as s:
            steps = [c.metadata["step"] for c in s.checkpoint_list("conv", ns="")]
        self.assertEqual(steps, list(range(7, -2, -1)))    # three turns: input, loop, chatbot
