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


STEP_AGENT = EXAMPLE.parent / "step_agent.py"


class StepAgentExample(unittest.TestCase):
    """examples/python/step_agent.py: killed after 2 steps, it resumes from the
    latest checkpoint and ends as a run that was never interrupted."""

    def setUp(self):
        if "sqlite" not in convo.drivers():
            support.unavailable("the sqlite driver is not built into libconvo")
        d = tempfile.mkdtemp(prefix="convo-py-example-")
        self.addCleanup(shutil.rmtree, d, True)
        self.url = "sqlite:" + os.path.join(d, "agent.db")

    def run_agent(self, thread, *args, rc=0):
        r = subprocess.run([sys.executable, str(STEP_AGENT), self.url, thread, *args],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, rc, r.stderr)
        return r.stdout.splitlines()

    def test_resumes_from_the_latest_checkpoint(self):
        whole = self.run_agent("whole")
        self.assertEqual(whole[0], "starting a new run")
        self.assertEqual(whole[-1], "finished: 6 steps, 6 messages")
        first = self.run_agent("crashed", "--crash-after", "2", rc=3)
        self.assertEqual(first, whole[:3])
        second = self.run_agent("crashed")
        self.assertEqual(second[0], "restored step 2 from checkpoint step-0002")
        self.assertEqual(second[1:], whole[3:])
        with convo.Store(self.url) as s:
            a, b = s.checkpoint_get("whole"), s.checkpoint_get("crashed")
            self.assertEqual((b.id, b.parent_id, b.log_length, b.body),
                             (a.id, a.parent_id, a.log_length, a.body))
            self.assertEqual(s.load("crashed"), s.load("whole"))
            self.assertEqual([c.id for c in s.checkpoint_list("crashed", ns="")],
                             ["step-%04d" % i for i in range(6, 0, -1)])
        self.assertEqual(self.run_agent("crashed"),
                         ["restored step 6 from checkpoint step-0006",
                          "finished: 6 steps, 6 messages"])


if __name__ == "__main__":
    unittest.main()
