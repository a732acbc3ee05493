"""Where ConvoSaver's time per turn goes as a conversation grows (issue 28): the chatbot
of langgraph_runtime.py (same seeded 200-byte messages) run on one thread for --turns
turns, each saver method and each Store call it makes timed per turn; prints, for the
50 turns ending at turn 100 and at the last turn, the median ms per turn of get_tuple,
put, put_writes (these include waiting: a put waits for its parent's writes, a write
for its checkpoint's put) and of the Store calls inside them (the Store calls: libconvo
and the backend), in wall time and in the calling thread's CPU time ("cpu ...": no
waiting in it), the items and text bytes crossing ctypes per turn ("items put", "bytes
get": a list passed or returned, an item left out by `known` 0 bytes), then a warm
get_tuple taken apart (MessageCache.known, Store.checkpoint_get, the revival of the tuple).

    CONVO_LIBRARY=$BUILD/.libs/libconvo.so PYTHONPATH=bindings/python \\
        VENV/bin/python bindings/python/bench/langgraph_split.py [--turns 1000] [--url URL]
        [--kind full|delta] [--profile FILE]

The URL defaults to a SQLite file in a temporary folder (removed at the end). --kind
delta: the messages channel is a DeltaChannel (get_delta_channel_history and the
Store.checkpoint_list it makes are timed too). --profile: cProfile (in thread CPU time) of
the saver's calls in turns 51-100 and in the last 50, written to FILE.early and FILE.late
(pstats; compare them with profile_growth.py)."""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langchain_core.messages import HumanMessage  # noqa: E402

import langgraph_runtime as bench  # noqa: E402
import convo  # noqa: E402
from convo.langgraph import ConvoSaver  # noqa: E402

METHODS = ("get_tuple", "put", "put_writes", "get_delta_channel_history")
STORE_CALLS = ("checkpoint_get", "checkpoint_put", "checkpoint_put_writes", "checkpoint_list")


PROFILES = []   # --profile: per window, a cProfile.Profile per saver method call
PROFILING = []  # non-empty while the calls are profiled


def timing(obj, names, spent, lock, prefix=""):
    for name in names:
        original = getattr(obj, name)

        def wrapped(*a, _f=original, _n=prefix + name, **k):
            t, cpu = time.perf_counter(), time.thread_time()
            profile = None
            if PROFILING and not prefix:
                import cProfile
                # the thread's CPU time: a call waiting for the GIL or a lock costs nothing
                profile = cProfile.Profile(time.thread_time)
                profile.enable()
            try:
                return _f(*a, **k)
            finally:
                if profile is not None:
                    profile.disable()
                    with lock:
                        PROFILES[-1].append(profile)
                with lock:
                    spent[_n] = spent.get(_n, 0.0) + time.perf_counter() - t
                    spent["cpu " + _n] = spent.get("cpu " + _n, 0.0) + time.thread_time() - cpu
        setattr(obj, name, wrapped)


def _items_of(values):
    """(items, bytes of the texts given) of the Items among values."""
    n = size = 0
    for v in values:
        if isinstance(v, convo.Items):
            n += len(v.items)
            # at C speed: a count in Python per item would be most of a warm read's growth
            size += sum(map(len, filter(None, v.items)))
    return n, size


def crossing(store, spent, lock):
    """What crosses ctypes per Store call: items and text bytes of the lists passed to
    checkpoint_put / checkpoint_put_writes and returned by checkpoint_get / _list (an
    item left out by `known` counts as an item of 0 bytes)."""
    def count(name, n, size):
        with lock:
            spent["items " + name] = spent.get("items " + name, 0) + n
            spent["bytes " + name] = spent.get("bytes " + name, 0) + size

    put, put_writes, get = store.checkpoint_put, store.checkpoint_put_writes, store.checkpoint_get

    def counted_put(*a, **k):
        ch = k.get("channels") or ()
        count("put", *_items_of([c[2] for c in ch] if not isinstance(ch, dict) else ()))
        return put(*a, **k)

    def counted_put_writes(thread_id, checkpoint_id, task_id, writes, **k):
        count("put_writes", *_items_of([w[2] for w in writes]))
        return put_writes(thread_id, checkpoint_id, task_id, writes, **k)

    def counted_get(*a, **k):
        cp = get(*a, **k)
        if cp is not None:
            count("get", *_items_of([c.value for c in cp.channels] +
                                    [w.value for w in cp.writes]))
        return cp
    store.checkpoint_put, store.checkpoint_put_writes = counted_put, counted_put_writes
    store.checkpoint_get = counted_get


def best(f, n=15):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1000)
    return "%.2f (median %.2f)" % (min(times), statistics.median(times))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--url")
    p.add_argument("--kind", default="full", choices=("full", "delta"))
    p.add_argument("--profile")
    o = p.parse_args()
    if o.turns < 150:
        p.error("--turns must be >= 150")
    tmp = tempfile.mkdtemp(prefix="convo-split-")
    try:
        saver = ConvoSaver(o.url or "sqlite:" + os.path.join(tmp, "split.db"))
        spent, lock = {}, threading.Lock()
        timing(saver, METHODS, spent, lock)
        crossing(saver.store, spent, lock)
        timing(saver.store, STORE_CALLS, spent, lock, "store.")
        convo = bench.Conversation(o.turns, 200)
        graph = bench.chatbot(o.kind, saver, convo)
        thread = {"configurable": {"thread_id": "split-%d" % os.getpid()}}
        per_turn = []
        for t, (human, _) in enumerate(convo.turns):
            if o.profile and t in (50, o.turns - 50):
                PROFILING.append(True)
                PROFILES.append([])
            elif o.profile and t == 100:
                PROFILING.clear()
            spent.clear()
            graph.invoke({"messages": [HumanMessage(**human)]}, thread)
            per_turn.append(dict(spent))
        for window, profiles in zip(("early", "late"), PROFILES):
            import pstats
            stats = pstats.Stats(profiles[0])
            for profile in profiles[1:]:
                stats.add(profile)
            stats.dump_stats("%s.%s" % (o.profile, window))
        names = METHODS + tuple("store." + n for n in STORE_CALLS)
        names += tuple("cpu " + n for n in names)
        names += tuple("%s %s" % (w, c) for c in ("put", "put_writes", "get")
                       for w in ("items", "bytes"))
        for lo, hi in ((50, 100), (o.turns - 50, o.turns)):
            print("turns %d-%d: %s" % (lo + 1, hi, ", ".join(
                "%s %.2f" % (n, statistics.median(r.get(n, 0.0) for r in per_turn[lo:hi]) *
                             (1 if n.startswith(("items ", "bytes ")) else 1000))
                for n in names)))
        thread_id = thread["configurable"]["thread_id"]
        cache = saver._channels.cache
        print("warm get_tuple at turn %d, ms: whole %s" % (o.turns, best(
            lambda: saver.get_tuple(thread))))
        known = cache.known(thread_id)
        print("  MessageCache.known %s" % best(lambda: cache.known(thread_id)))
        print("  Store.checkpoint_get %s" % best(
            lambda: saver.store.checkpoint_get(thread_id, None, known=known)))
        cp = saver.store.checkpoint_get(thread_id, None, known=known)
        print("  the tuple from it %s" % best(lambda: saver._tuple(cp)))
        saver.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
