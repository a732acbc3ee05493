"""convo.asyncio.Checkpointer's checkpoint, dump and maintenance calls against
every driver: the same results as convo.Store, errors raised in the awaiting
task, and every call run on the Checkpointer's threads, never on the loop."""

import asyncio
import io
import threading
import time
import unittest
from unittest import mock

import convo
from convo.asyncio import Checkpointer
import support

J = "json"


class AsyncCheckpointTests:
    def setUp(self):
        super().setUp()
        self.cp = Checkpointer(self.store, max_workers=4)
        self.addCleanup(self.cp.close)

    def test_put_get_list_prune_writes(self):
        t = self.tid()
        async def go():
            self.assertIsNone(await self.cp.checkpoint_get(t))
            for i in range(5):
                await self.cp.checkpoint_put(t, "c%d" % i, metadata={"step": i},
                                             channels={"a": (str(i), (J, b"%d" % i))},
                                             parent_id="c%d" % (i - 1) if i else None)
            await self.cp.checkpoint_put_writes(t, "c4", "task", [(0, "a", (J, b"9"))],
                                                task_path="p")
            latest = await self.cp.checkpoint_get(t)
            self.assertEqual((latest.id, latest.parent_id, latest.values),
                             ("c4", "c3", {"a": (J, b"4")}))
            self.assertEqual(latest.writes, (("task", "p", 0, "a", (J, b"9")),))
            self.assertEqual(latest, self.store.checkpoint_get(t))
            ids = [c.id async for c in self.cp.checkpoint_list(t, ns="", page_size=2)]
            self.assertEqual(ids, ["c4", "c3", "c2", "c1", "c0"])
            ids = [c.id async for c in self.cp.checkpoint_list(t, ns="", before="c3", limit=2,
                                                               filter={})]
            self.assertEqual(ids, ["c2", "c1"])
            ids = [c.id async for c in self.cp.checkpoint_list(t, filter={"step": 2})]
            self.assertEqual(ids, ["c2"])
            await self.cp.checkpoint_prune(t, 1)
            self.assertEqual([c.id async for c in self.cp.checkpoint_list(t)], ["c4"])
        asyncio.run(go())

    def test_errors_reach_the_awaiting_task(self):
        t = self.tid()
        async def go():
            with self.assertRaises(convo.NotFoundError):
                await self.cp.checkpoint_put_writes(t, "nope", "task", [(0, "a", (J, b"1"))])
            with self.assertRaises(convo.InvalidError):
                await self.cp.checkpoint_put("", "c1")
            with self.assertRaises(convo.InvalidError):
                async for _ in self.cp.checkpoint_list(t, filter="[]"):
                    pass
            await self.cp.checkpoint_put(t, "c1")
            with self.assertRaises(convo.NotFoundError):
                async for _ in self.cp.checkpoint_list(t, before="nope"):
                    pass
            with self.assertRaises(convo.CorruptError):
                await self.cp.import_(io.BytesIO(b"garbage"))
        asyncio.run(go())

    def test_export_import_copy_sweep(self):
        t = self.tid()
        self.store.append(t, [{"role": "user", "content": "hi"}])
        self.store.checkpoint_put(t, "c1", log_length=1)
        async def go():
            buf = io.BytesIO()
            stats = await self.cp.export(buf, [t])
            self.assertEqual((stats.threads, stats.messages, stats.checkpoints), (1, 1, 1))
            await self.cp.delete(t)
            buf.seek(0)
            self.assertEqual((await self.cp.import_(buf)).messages, 1)
            self.assertEqual((await self.cp.load(t)).messages, [{"role": "user", "content": "hi"}])
            async with Checkpointer("memory:") as other:
                stats = await self.cp.copy(other, [t])
                self.assertEqual(stats.checkpoints, 1)
                self.assertEqual((await other.checkpoint_get(t)).log_length, 1)
            self.assertEqual(await self.cp.sweep(), 0)
            self.assertGreater(await self.cp.stored_bytes(), 0)
        asyncio.run(go())

    def test_every_call_runs_off_the_event_loop(self):
        t = self.tid()
        self.store.checkpoint_put(t, "c1")
        calls = {
            "checkpoint_put": lambda: self.cp.checkpoint_put(t, "c2"),
            "checkpoint_put_writes": lambda: self.cp.checkpoint_put_writes(
                t, "c1", "task", [(0, "a", (J, b"1"))]),
            "checkpoint_get": lambda: self.cp.checkpoint_get(t),
            "checkpoint_prune": lambda: self.cp.checkpoint_prune(t, 5),
            "export": lambda: self.cp.export(io.BytesIO(), [t]),
            "sweep": lambda: self.cp.sweep(),
            "stored_bytes": lambda: self.cp.stored_bytes(),
        }

        # each call blocks until the event loop has ticked 3 times: on the loop's
        # own thread it could never see them (the wait gives up after 30 s and the
        # test fails), off it the ticks come while it waits -- no timing
        for name, call in calls.items():
            seen = []
            loop_ran = threading.Event()
            real = getattr(self.store, name)

            async def ticker(stop, loop_ran=loop_ran):
                ticks = 0
                while not stop.is_set():
                    await asyncio.sleep(0.01)
                    ticks += 1
                    if ticks == 3:
                        loop_ran.set()
                return ticks

            def slow(*args, real=real, seen=seen, loop_ran=loop_ran, **kwargs):
                seen.append(threading.current_thread())
                if not loop_ran.wait(30):  # a stalled backend, until the loop has run
                    raise AssertionError("the event loop did not run during the call")
                return real(*args, **kwargs)

            async def go(name=name, call=call, slow=slow, ticker=ticker):
                stop = asyncio.Event()
                ticks = asyncio.ensure_future(ticker(stop))
                with mock.patch.object(self.store, name, side_effect=slow):
                    await call()
                stop.set()
                return await ticks
            with self.subTest(call=name):
                ticks = asyncio.run(go())
                self.assertEqual(len(seen), 1)
                self.assertTrue(seen[0].name.startswith("convo"), seen[0].name)
                self.assertGreaterEqual(ticks, 3)  # the loop ran during the call

    def test_list_pages_are_fetched_off_the_event_loop(self):
        t = self.tid()
        for i in range(3):
            self.store.checkpoint_put(t, "c%d" % i)
        seen = []
        real = self.store._checkpoint_page
        def page(*args):
            seen.append(threading.current_thread())
            return real(*args)
        async def go():
            with mock.patch.object(self.store, "_checkpoint_page", side_effect=page):
                return [c.id async for c in self.cp.checkpoint_list(t, ns="", page_size=1)]
        self.assertEqual(asyncio.run(go()), ["c2", "c1", "c0"])
        self.assertGreaterEqual(len(seen), 3)
        self.assertTrue(all(th.name.startswith("convo") for th in seen), seen)


support.per_driver(globals(), AsyncCheckpointTests)

if __name__ == "__main__":
    unittest.main()
