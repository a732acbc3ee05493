#!/bin/sh
# abi.sh — libconvo.so exports exactly the functions include/convo.h declares
# CONVO_EXTERN: no convo__* helper of the core, no driver table, nothing else
# (issue 18.11). Run by `make check`; by hand: top_builddir=BUILD tests/abi.sh
set -u
top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
so=$top_builddir/.libs/libconvo.so
[ -e "$so" ] || { echo "abi: $so does not exist: build libconvo.la first" >&2; exit 99; }
command -v nm >/dev/null 2>&1 || { echo "abi: nm not found (binutils)" >&2; exit 99; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# defined dynamic symbols, minus what the toolchain adds to every library
nm -D --defined-only "$so" | awk '$2 ~ /^[TDRBVW]$/ { print $3 }' | sed 's/@.*//' |
    grep -vE '^(_init|_fini|_edata|_end|__bss_start)$' | sort -u >"$T/exported"
# the names convo.h declares CONVO_EXTERN (a declaration may span lines)
tr '\n' ' ' <"$top_srcdir/include/convo.h" | grep -oE 'CONVO_EXTERN[^;(]*\(' |
    sed -E 's/\($//; s/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)$/\1/' |
    grep -v '^__attribute__$' | sort -u >"$T/declared"

failed=0
extra=$(comm -23 "$T/exported" "$T/declared")
missing=$(comm -13 "$T/exported" "$T/declared")
if [ -n "$extra" ]; then
    echo "FAIL: exported but not CONVO_EXTERN in convo.h: $(echo $extra | head -c 600)"
    failed=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: declared CONVO_EXTERN but not exported: $(echo $missing | head -c 600)"
    failed=1
fi
if grep -vq '^convo_[a-z]' "$T/exported" || grep -q '^convo__\|^convo_driver_' "$T/exported"; then
    echo "FAIL: a name outside convo_* or an internal one is exported"
    failed=1
fi
n=$(wc -l <"$T/declared")
[ "$n" -gt 40 ] || { echo "FAIL: only $n CONVO_EXTERN names read from convo.h"; failed=1; }
if [ $failed = 0 ]; then
    echo "$n exported names, all declared in convo.h"
    echo "1 passed, 0 failed"
else
    echo "0 passed, 1 failed"
fi
exit $failed
