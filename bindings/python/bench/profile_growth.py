"""The functions whose time grows between two cProfile dumps of the same number of turns
(langgraph_split.py --profile FILE: FILE.early for turns 51-100, FILE.late for the last
50): per function, the total and own time in each (ms per turn), sorted by how much
the own time grew.

    python bindings/python/bench/profile_growth.py FILE [--top 25] [--turns 50]"""

import argparse
import pstats


def per_function(path):
    stats = pstats.Stats(path).stats
    out = {}
    for (file, line, name), (_, calls, own, total, _) in stats.items():
        key = "%s:%d(%s)" % (file.rsplit("/", 2)[-1] if "/" in file else file, line, name)
        out[key] = (calls, own, total)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--turns", type=int, default=50)
    o = p.parse_args()
    early, late = per_function(o.profile + ".early"), per_function(o.profile + ".late")
    ms = 1000.0 / o.turns
    total = [sum(v[1] for v in d.values()) * ms for d in (early, late)]
    print("saver CPU per turn (thread time, in its calls): %.2f -> %.2f ms" % tuple(total))
    rows = []
    for key in set(early) | set(late):
        e, l = early.get(key, (0, 0.0, 0.0)), late.get(key, (0, 0.0, 0.0))
        rows.append((l[1] - e[1], key, e, l))
    rows.sort(reverse=True)
    print("| function | calls/turn | own ms/turn early -> late | total ms/turn early -> late |")
    print("|---|---|---|---|")
    for grow, key, e, l in rows[:o.top]:
        print("| %s | %.1f -> %.1f | %.3f -> %.3f | %.3f -> %.3f |" % (
            key, e[0] / o.turns, l[0] / o.turns, e[1] * ms, l[1] * ms, e[2] * ms, l[2] * ms))


if __name__ == "__main__":
    main()
