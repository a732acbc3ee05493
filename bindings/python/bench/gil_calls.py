"""Per-call wall time of a store's appends made from a second thread while the main
thread runs pure Python (LangGraph's async durability in miniature: a put on a
background thread beside the graph's next step), with keep_gil=True and False,
alternated in rounds. Reports the median per call of each round, and the same
with nothing running beside (the cost of the call itself).

    CONVO_LIBRARY=$BUILD/.libs/libconvo.so PYTHONPATH=bindings/python \\
        python3 bindings/python/bench/gil_calls.py [--url sqlite:/tmp/x.db] [--calls 300] [--rounds 3]

A bench, not a test: it asserts nothing about time."""

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

import convo


BATCH = [b'{"role":"user","content":"%s"}' % (b"x" * 200)] * 500


def calls_beside(store, n, busy):
    """Wall per call (ms) of n appends of 500 messages given as JSON text (the
    work in C, 1-3 ms) from a second thread; busy: the main thread runs
    Python meanwhile."""
    times, done = [], threading.Event()

    def worker():
        for i in range(n):
            t0 = time.perf_counter()
            store.append("t%d" % (i % 10), BATCH)
            times.append((time.perf_counter() - t0) * 1000)
        done.set()
    t = threading.Thread(target=worker)
    t.start()
    while busy and not done.is_set():
        sum(i * i for i in range(2000))  # pure Python, never blocking
    t.join()
    return statistics.median(times), statistics.mean(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=None)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    o = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="convo-gil-bench-")
    print("python %s, switch interval %.3f ms, load %s" % (
        sys.version.split()[0], sys.getswitchinterval() * 1000,
        " ".join(open("/proc/loadavg").read().split()[:3])))
    rows = {}
    for r in range(o.rounds):
        for keep in (False, True):
            url = o.url or "sqlite:" + os.path.join(tmp, "r%d-%s.db" % (r, keep))
            with convo.Store(url, keep_gil=keep) as s:
                alone = calls_beside(s, o.calls, False)
                beside = calls_beside(s, o.calls, True)
            rows.setdefault(keep, []).append((alone, beside))
            print("round %d keep_gil=%-5s  alone %.3f (mean %.3f) ms/call  beside busy Python "
                  "%.3f (mean %.3f) ms/call" % ((r + 1, keep) + alone + beside))
    for keep, vals in rows.items():
        print("keep_gil=%-5s medians of the rounds' medians: alone %.3f, beside %.3f ms/call" % (
            keep, statistics.median(v[0][0] for v in vals), statistics.median(v[1][0] for v in vals)))


if __name__ == "__main__":
    main()
