#!/usr/bin/env python3
"""What a SQLite store's checkpoints would cost sealed into compressed segments.

An estimate for a design not built (docs/performance.md, "Sealed segments"): the
checkpoint rows of each thread, in put order, grouped N at a time and compressed
with zlib, rows one after another and column by column.  Prints bytes a
checkpoint of the compressed segments (record headers, page slack and any index
left out).  Reads the store only.

usage: scripts/segment-estimate.py STORE.db [STORE.db ...]
"""
import sqlite3
import struct
import sys
import zlib

COLUMNS = ("thread, ns, id, parent_id, parent_place, meta, body_type, body, "
           "log_length, created_at, put_order, channel_list, meta_shape, pending")


def enc(v):
    if v is None:
        return b"\0"
    if isinstance(v, int):
        return struct.pack("<q", v)
    if isinstance(v, str):
        v = v.encode()
    return struct.pack("<H", len(v)) + v


def estimate(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(f"SELECT {COLUMNS} FROM convo_checkpoints "
                      "ORDER BY thread, ns, put_order").fetchall()
    n = len(rows)
    if n == 0:
        print(f"{path}: no checkpoints")
        return
    table = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN "
                       "('convo_checkpoints', 'convo_checkpoints_by_id')").fetchone()[0]
    print(f"{path}: {n} checkpoints, table + id index {table / n:.1f} B a checkpoint")
    ncol = len(rows[0])
    for size in (1, 3, 8, 16, 32, 64):
        whole = bycol = 0
        for i in range(0, n, size):
            seg = rows[i:i + size]
            # a segment never spans two threads or namespaces
            keys = {(r[0], r[1]) for r in seg}
            if len(keys) > 1:
                parts = [[r for r in seg if (r[0], r[1]) == k] for k in sorted(keys)]
            else:
                parts = [seg]
            for part in parts:
                whole += len(zlib.compress(b"".join(
                    b"".join(enc(c) for c in r[2:]) for r in part), 9))
                bycol += len(zlib.compress(b"".join(
                    b"".join(enc(r[c]) for r in part) for c in range(2, ncol)), 1))
        print(f"  segment {size:3d}: zlib -9 rows {whole / n:6.1f}, "
              f"zlib -1 by column {bycol / n:6.1f} B a checkpoint")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        estimate(p)
