"""convo.asyncio.Checkpointer against every driver: restore after a restart,
50 concurrent appends through asyncio.gather, fresh returned data, errors,
and blocking calls kept off the event loop."""

import asyncio
import threading
import time
import unittest
from unittest import mock

import convo
from convo.asyncio import Checkpointer, CheckpointData
import support


class CheckpointerTests:
    def setUp(self):
        super().setUp()
        # memory: stores are private to their handle: share the test's store
        if self.shared_store:
            self.cp = Checkpointer(self.url, max_workers=16)
        else:
            self.cp = Checkpointer(self.store, max_workers=16)
        self.addCleanup(self.cp.close)

    def run_async(self, coro):
        return asyncio.run(coro)

    def test_load_append_save_extra(self):
        t = self.tid()
        async def go():
            self.assertIsNone(await self.cp.load(t))
            res = await self.cp.append(t, [{"role": "user", "content": "hi ✓"},
                                           {"role": "assistant", "content": "hello"}])
            self.assertEqual(res, (0, 2, False))
            await self.cp.save_extra(t, {"step": 1, "none": None})
            data = await self.cp.load(t)
            self.assertIsInstance(data, CheckpointData)
            self.assertIsInstance(data.messages, list)
            self.assertIsInstance(data.extra, dict)
            self.assertEqual(data.messages, [{"role": "user", "content": "hi ✓"},
                                             {"role": "assistant", "content": "hello"}])
            self.assertEqual(data.extra, {"step": 1, "none": None})
            self.assertEqual(data, CheckpointData(data.messages, data.extra))
            self.assertEqual((await self.cp.load(t, tail=1)).messages[0]["content"], "hello")
        self.run_async(go())

    def test_restore_after_restart(self):
        if not self.shared_store:
            self.skipTest("every memory: store is a new one")
        t = self.tid()
        async def first_run():
            async with Checkpointer(self.url) as cp:
                await cp.append(t, {"role": "user", "content": "remember me"})
                await cp.save_extra(t, {"step": 1})
        async def second_run():
            cp = await Checkpointer.open(self.url)
            async with cp:
                return await cp.load(t)
        self.run_async(first_run())
        data = self.run_async(second_run())
        self.assertEqual(data.messages, [{"role": "user", "content": "remember me"}])
        self.assertEqual(data.extra, {"step": 1})

    def test_50_concurrent_appends(self):
        t = self.tid()
        async def go():
            return await asyncio.gather(*(
                self.cp.append(t, [{"role": "user", "i": i}, {"role": "assistant", "i": i}])
                for i in range(50)))
        results = self.run_async(go())
        self.assertEqual(sorted(r.first_seq for r in results), list(range(0, 100, 2)))
        self.assertTrue(all(r.count == 2 and not r.replayed for r in results))
        h = self.cp.store.load_history(t)
        self.assertEqual([m.seq for m in h.messages], list(range(100)))  # dense
        msgs = [m.json() for m in h.messages]
        self.assertEqual(sorted(m["i"] for m in msgs[0::2]), list(range(50)))
        for r in results:  # each batch where its result says, in one piece
            i = msgs[r.first_seq]["i"]
            self.assertEqual(msgs[r.first_seq], {"role": "user", "i": i})
            self.assertEqual(msgs[r.first_seq + 1], {"role": "assistant", "i": i})

    def test_concurrent_save_extra_with_different_keys(self):
        t = self.tid()
        async def go():
            await asyncio.gather(*(self.cp.save_extra(t, {"k%d" % i: i}) for i in range(30)))
            return await self.cp.load(t)
        data = self.run_async(go())
        self.assertEqual(data.extra, {"k%d" % i: i for i in range(30)})

    def test_concurrent_idempotent_retries_store_once(self):
        t = self.tid()
        batch = [{"role": "user", "content": "once"}]
        async def go():
            return await asyncio.gather(*(self.cp.append(t, batch, idempotency_key="k")
                                          for _ in range(20)))
        results = self.run_async(go())
        self.assertEqual({(r.first_seq, r.count) for r in results}, {(0, 1)})
        self.assertEqual(sum(not r.replayed for r in results), 1)
        self.assertEqual(len(self.cp.store.load(t)[0]), 1)

    def test_returned_data_belongs_to_the_caller(self):
        t = self.tid()
        async def go():
            await self.cp.append(t, {"role": "user", "content": "orig", "tags": ["a"]})
            await self.cp.save_extra(t, {"state": {"n": 1}})
            first = await self.cp.load(t)
            first.messages[0]["content"] = "mutated"
            first.messages[0]["tags"].append("b")
            first.messages.append({"role": "ghost"})
            first.extra["state"]["n"] = 2
            first.extra["added"] = 1
            second = await self.cp.load(t)
            third = await self.cp.load(t)
            return first, second, third
        first, second, third = self.run_async(go())
        self.assertEqual(second.messages, [{"role": "user", "content": "orig", "tags": ["a"]}])
        self.assertEqual(second.extra, {"state": {"n": 1}})
        self.assertIsNot(second.messages, third.messages)
        self.assertIsNot(second.messages[0], third.messages[0])
        self.assertIsNot(second.extra, third.extra)

    def test_errors_propagate(self):
        t = self.tid()
        async def go():
            with self.assertRaises(convo.InvalidError) as cm:
                await self.cp.append(t, '{"role":')
            self.assertEqual(cm.exception.code, convo.EINVAL)
            with self.assertRaises(convo.InvalidError):
                await self.cp.append(t, {"content": "no role"})
            await self.cp.append(t, {"role": "user"})
            with self.assertRaises(convo.ConflictError) as cm:
                await self.cp.append(t, {"role": "user"}, expected_length=0)
            self.assertEqual(cm.exception.code, convo.ECONFLICT)
            with self.assertRaises(convo.NotFoundError):
                await self.cp.delete(self.tid("nope"))
            with self.assertRaises(convo.TooLargeError):
                await self.cp.append(t, {"role": "user", "c": "x" * (2 << 20)})
        self.run_async(go())

    def test_delete_fork_threads(self):
        t = self.tid()
        async def go():
            await self.cp.append(t, [{"role": "user", "i": 0}, {"role": "user", "i": 1}])
            await self.cp.fork(t, self.tid("copy"), upto=1)
            ids = await self.cp.thread_ids(after=self.tid(""))
            await self.cp.delete(t)
            return ids, await self.cp.load(t), await self.cp.load(self.tid("copy"))
        ids, gone, copy = self.run_async(go())
        self.assertEqual([i for i in ids if i.startswith(self.tid(""))],
                         sorted([t, self.tid("copy")]))
        self.assertIsNone(gone)
        self.assertEqual(copy.messages, [{"role": "user", "i": 0}])

    def test_load_runs_off_the_event_loop(self):
        # the call blocks until the event loop has ticked 3 times: on the loop's
        # own thread it could never see them (the wait gives up after 30 s and
        # the test fails), off it the ticks come while it waits -- no timing
        t = self.tid()
        seen = []
        loop_ran = threading.Event()
        real_load = self.cp.store.load
        def slow_load(*args, **kwargs):
            seen.append(threading.current_thread())
            if not loop_ran.wait(30):  # a slow backend, until the loop has run
                raise AssertionError("the event loop did not run during the call")
            return real_load(*args, **kwargs)
        async def ticker(stop):
            ticks = 0
            while not stop.is_set():
                await asyncio.sleep(0.01)
                ticks += 1
                if ticks == 3:
                    loop_ran.set()
            return ticks
        async def go():
            await self.cp.append(t, {"role": "user"})
            stop = asyncio.Event()
            tick_task = asyncio.ensure_future(ticker(stop))
            with mock.patch.object(self.cp.store, "load", side_effect=slow_load):
                data = await self.cp.load(t)
            stop.set()
            return data, await tick_task
        data, ticks = self.run_async(go())
        self.assertEqual(len(seen), 1)
        self.assertIsNot(seen[0], threading.current_thread())
        self.assertTrue(seen[0].name.startswith("convo"), seen[0].name)
        self.assertGreaterEqual(ticks, 3)  # the loop kept running during the call
        self.assertGreaterEqual(len(data.messages), 1)

    def test_calls_run_in_parallel(self):
        # 4 calls each wait until all 4 are inside the store at once: run one
        # after another they never meet (the barrier gives up after 30 s and
        # the test fails) -- no timing. The default pool has >= 5 workers.
        t = self.tid()
        real_append = self.cp.store.append
        together = threading.Barrier(4, timeout=30)
        def slow_append(*args, **kwargs):
            together.wait()
            return real_append(*args, **kwargs)
        async def go():
            with mock.patch.object(self.cp.store, "append", side_effect=slow_append):
                await asyncio.gather(*(self.cp.append(t, {"role": "user"}) for _ in range(4)))
        self.run_async(go())
        self.assertFalse(together.broken)
        self.assertEqual(len(self.store.load(t)[0]), 4)

    def test_shared_store_is_left_open(self):
        async def go():
            async with Checkpointer(self.store) as cp:
                await cp.save_extra(self.tid(), {"a": 1})
        self.run_async(go())
        self.assertFalse(self.store.closed)
        self.assertEqual(self.store.load(self.tid()), ([], {"a": 1}))
        with self.assertRaises(TypeError):
            Checkpointer(self.store, max_message_bytes=10)

    def test_owned_store_is_closed(self):
        cp = Checkpointer(self.url)
        self.run_async(cp.aclose())
        self.assertTrue(cp.store.closed)

    def test_closed_checkpointer_raises_invalid_error(self):
        # was a RuntimeError of the executor ("cannot schedule new futures after shutdown")
        cp = Checkpointer(self.store)
        cp.close()
        cp.close()  # twice is fine
        async def go():
            with self.assertRaisesRegex(convo.InvalidError, "checkpointer is closed"):
                await cp.load(self.tid())
            with self.assertRaisesRegex(convo.InvalidError, "checkpointer is closed"):
                await cp.checkpoint_list(self.tid()).__anext__()
        self.run_async(go())
        self.assertFalse(self.store.closed)


support.per_driver(globals(), CheckpointerTests)


class GilChoiceTests(unittest.TestCase):
    def test_a_store_opened_here_releases_the_gil_unless_told(self):
        """the event loop runs during a call's C part: keep_gil=False by default"""
        for cp, keep in ((Checkpointer("memory:"), False),
                         (Checkpointer("memory:", keep_gil=True), True)):
            self.addCleanup(cp.close)
            self.assertIs(cp.store.keep_gil, keep)
        with convo.Store("memory:") as s:
            cp = Checkpointer(s)
            self.addCleanup(cp.close)
            self.assertIs(cp.store.keep_gil, True)  # a store given keeps its choice

if __name__ == "__main__":
    unittest.main()
