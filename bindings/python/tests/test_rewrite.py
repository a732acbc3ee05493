"""Store.replace_tail and Store.pop against every driver: results, the
thread's generation, the conditions (length, generation, the caller's view of
the tail) and the state a ConflictError carries, idempotent replays,
checkpoints in the way, bad input writing nothing, racing pops, asyncio."""

import asyncio
import json
import pickle
import threading

import convo
from convo.asyncio import Checkpointer
import support

A = {"role": "user", "content": "a"}
B = {"role": "assistant", "content": "b"}
C = {"role": "user", "content": "c"}


class RewriteTests:
    def seed(self, t, messages=(A, B, C)):
        self.store.append(t, list(messages))

    def conflict(self, fn, *args, **kwargs):
        with self.assertRaises(convo.ConflictError) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code, convo.ECONFLICT)
        return cm.exception

    def test_replace_tail(self):
        t = self.tid()
        self.seed(t)
        self.assertEqual(self.store.load_history(t).generation, 0)
        new = [{"role": "assistant", "content": "B2", "id": "m1"}, '{"content":"x", "role" : "tool"}']
        res = self.store.replace_tail(t, 1, new)
        self.assertIsInstance(res, convo.RewriteResult)
        self.assertEqual(res, (1, 2, 2, 1, False))
        h = self.store.load_history(t)
        self.assertEqual((h.length, h.generation), (3, 1))
        self.assertEqual([m.seq for m in h.messages], [0, 1, 2])
        self.assertEqual(h.messages[0].json(), A)
        self.assertEqual(h.messages[2].raw, b'{"content":"x", "role" : "tool"}')
        self.assertEqual(h.messages[1].role, "assistant")
        # no messages: a pop from keep on
        self.assertEqual(self.store.replace_tail(t, 0), (0, 0, 3, 2, False))
        self.assertEqual(self.store.load(t), ([], {}))

    def test_pop(self):
        t = self.tid()
        self.seed(t)
        self.assertEqual(self.store.pop(t), [C])
        self.assertEqual(self.store.load_history(t).generation, 1)
        self.assertEqual(self.store.pop(t, 5, expected_length=2), [A, B])  # fewer than asked
        self.assertEqual(self.store.pop(t), [])  # empty: nothing written
        self.assertEqual(self.store.load_history(t).generation, 2)
        self.store.append(t, C)
        self.assertEqual(self.store.load_history(t).messages[0].seq, 0)  # seq stays dense
        with self.assertRaises(convo.NotFoundError):
            self.store.pop(self.tid("nope"))
        with self.assertRaises(convo.InvalidError):
            self.store.pop(t, 0)

    def test_conditions_and_the_state_a_conflict_carries(self):
        t = self.tid()
        self.seed(t)
        e = self.conflict(self.store.replace_tail, t, 2, [C], expected_length=2)
        self.assertEqual((e.length, e.generation), (3, 0))
        self.store.pop(t)
        e = self.conflict(self.store.replace_tail, t, 2, [C], expected_generation=0)
        self.assertEqual((e.length, e.generation), (2, 1))
        e = self.conflict(self.store.append, t, C, expected_generation=0)
        self.assertEqual((e.length, e.generation), (2, 1))
        e = self.conflict(self.store.append, t, C, expected_length=3)
        self.assertEqual((e.length, e.generation), (2, 1))
        e = self.conflict(self.store.pop, t, expected_length=3)
        self.assertEqual((e.length, e.generation), (2, 1))
        # the state goes with a pickled error (multiprocessing, concurrent.futures)
        e2 = pickle.loads(pickle.dumps(e))
        self.assertEqual((type(e2), e2.length, e2.generation, e2.message),
                         (convo.ConflictError, 2, 1, e.message))
        # none of the refused calls wrote anything
        h = self.store.load_history(t)
        self.assertEqual(([m.json() for m in h.messages], h.generation), ([A, B], 1))
        self.store.append(t, C, expected_length=2, expected_generation=1)
        self.assertEqual(self.store.replace_tail(t, 3, expected_length=3, expected_generation=1),
                         (3, 0, 0, 2, False))

    def test_expected_suffix(self):
        t = self.tid()
        self.seed(t)
        seen = self.store.load_history(t, from_seq=1).messages
        # another writer replaces the tail with other messages of the same length
        other = self.open_store() if self.shared_store else self.store
        other.replace_tail(t, 2, [{"role": "user", "content": "c2"}])
        self.conflict(self.store.replace_tail, t, 1, [C], expected_suffix=seen)
        fresh = self.store.load_history(t, from_seq=1).messages
        res = self.store.replace_tail(t, 1, [C], expected_suffix=fresh)
        self.assertEqual((res.first_seq, res.generation), (1, 2))
        # dicts are compared as compact JSON; an empty view means "nothing after keep"
        self.assertEqual(self.store.replace_tail(t, 1, [B], expected_suffix=[C]).generation, 3)
        self.conflict(self.store.replace_tail, t, 2, [C], expected_suffix=[B])
        self.assertEqual(self.store.replace_tail(t, 2, [C], expected_suffix=[]).generation, 4)
        self.assertEqual(self.store.load(t)[0], [A, B, C])

    def test_idempotency_key(self):
        t = self.tid()
        self.seed(t)
        first = self.store.replace_tail(t, 2, [B], idempotency_key="regen-1")
        self.assertEqual(first, (2, 1, 1, 1, False))
        again = self.store.replace_tail(t, 2, [B], idempotency_key="regen-1")
        self.assertEqual((again.first_seq, again.count, again.replayed), (2, 1, True))
        self.assertEqual(self.store.load(t)[0], [A, B, B])
        self.conflict(self.store.replace_tail, t, 1, [B], idempotency_key="regen-1")
        # an append whose messages the rewrite removed: a replay is a conflict,
        # never an answer with seqs that now hold other messages
        self.store.append(t, C, idempotency_key="turn-4")
        self.store.replace_tail(t, 3, [A])
        self.conflict(self.store.append, t, C, idempotency_key="turn-4")

    def test_checkpoint_in_the_way(self):
        t = self.tid()
        self.seed(t)
        self.store.checkpoint_put(t, "cp-1", log_length=3)
        e = self.conflict(self.store.pop, t)  # not retried: the thread did not move
        self.assertIn("cp-1", e.message)
        self.assertEqual((e.length, e.generation), (3, 0))
        self.conflict(self.store.replace_tail, t, 2, [B])
        self.assertEqual(len(self.store.load(t)[0]), 3)
        self.assertEqual(self.store.pop(t, drop_checkpoints=True), [C])
        self.assertIsNone(self.store.checkpoint_get(t, "cp-1"))
        self.store.checkpoint_put(t, "cp-2", log_length=2)
        self.assertEqual(self.store.replace_tail(t, 2, [A]).generation, 2)  # cp-2 keeps its messages

    def test_bad_input_writes_nothing(self):
        t = self.tid()
        self.seed(t)
        for keep, msgs in [(4, [A]), (-1, [A]), (1, [{"content": "no role"}]), (1, ['{"role":']),
                           (1, [A, {"role": ""}])]:
            with self.assertRaises(convo.InvalidError, msg=repr((keep, msgs))):
                self.store.replace_tail(t, keep, msgs)
        with self.assertRaises(convo.InvalidError):
            self.store.replace_tail(t, 1, [A], drop_checkpoints=1)
        with self.assertRaises(convo.TooLargeError):
            self.store.replace_tail(t, 1, [{"role": "user", "x": "y" * (1 << 20)}])
        with self.assertRaises(convo.NotFoundError):
            self.store.replace_tail(self.tid("nope"), 0, [A])
        self.assertIsNone(self.store.load(self.tid("nope")))
        h = self.store.load_history(t)
        self.assertEqual(([m.json() for m in h.messages], h.generation), ([A, B, C], 0))

    def test_fork_takes_the_generation(self):
        t = self.tid()
        self.seed(t)
        self.store.pop(t)
        self.conflict(self.store.fork, t, self.tid("f"), expected_generation=0)
        self.assertIsNone(self.store.load(self.tid("f")))
        self.store.fork(t, self.tid("f"), expected_generation=1)
        self.assertEqual(self.store.load_history(self.tid("f")).generation, 1)

    def test_export_and_import_carry_the_generation(self):
        import io
        t = self.tid()
        self.seed(t)
        self.store.pop(t)
        with self.assertRaises(convo.ConflictError):
            self.store.export(io.BytesIO(), [t], expected_generations=[0])
        with self.assertRaises(convo.InvalidError):
            self.store.export(io.BytesIO(), [t], expected_generations=[1, 1])
        buf = io.BytesIO()
        self.store.export(buf, [t], expected_generations=[1])
        with convo.Store("memory:") as other:
            other.import_(io.BytesIO(buf.getvalue()))
            self.assertEqual(other.load_history(t).generation, 1)
            other.replace_tail(t, 0, [C])  # rewritten since the import
            with self.assertRaises(convo.ConflictError):
                other.import_(io.BytesIO(buf.getvalue()))
            self.assertEqual(other.load(t)[0], [C])

    def test_racing_pops_take_each_message_once(self):
        t = self.tid()
        self.store.append(t, [{"role": "user", "n": i} for i in range(40)])
        got, errors = [], []
        def work():
            s = self.open_store() if self.shared_store else self.store
            try:
                for _ in range(10):
                    got.extend(s.pop(t))
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(m["n"] for m in got), list(range(40)))
        self.assertEqual(self.store.load_history(t).length, 0)

    def test_asyncio(self):
        t = self.tid()
        self.seed(t)
        cp = Checkpointer(self.store)
        self.addCleanup(cp.close)
        async def go():
            self.assertEqual(await cp.pop(t, 2), [B, C])
            res = await cp.replace_tail(t, 1, [C], expected_length=1, expected_generation=1)
            self.assertEqual(res, (1, 1, 0, 2, False))
            await cp.append(t, A, expected_generation=2)
        asyncio.run(go())
        self.assertEqual(self.store.load(t)[0], [A, C, A])


support.per_driver(globals(), RewriteTests)
