#!/bin/sh
# fuzz.sh — builds the libFuzzer targets of tests/fuzz/ (fuzz_url, fuzz_message,
# fuzz_dump, fuzz_segment; fuzz_pg_unpack too when the PostgreSQL driver is built) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer from
# lib/*.c and the memory driver, and runs each for a short time over a copy of
# its seed corpus (tests/fuzz/corpus/TARGET/). A crash, leak or failed check fails
# and the input is kept in $top_builddir/tests/fuzz-artifacts/.
#
#   tests/fuzz.sh              what make check runs
#   tests/fuzz.sh --seeds      regenerate tests/fuzz/corpus/fuzz_dump/ (then commit it)
#   tests/fuzz.sh TARGET FILE  run one target on one input (reproduce a crash)
#
# CONVO_FUZZ_SECONDS (default 20) per target; CONVO_FUZZ_TARGETS (default all);
# CLANG (default clang or clang-14).
# Without clang and its libFuzzer runtime it skips (77), or fails under
# CONVO_REQUIRE_ALL=1. Under CONVO_TEST_WRAPPER (valgrind) it skips: the
# targets carry their own sanitizers.
set -eu

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=$(cd "${top_builddir:-.}" && pwd)
SECONDS_EACH=${CONVO_FUZZ_SECONDS:-20}
TARGETS=${CONVO_FUZZ_TARGETS:-fuzz_url fuzz_message fuzz_dump fuzz_segment}

skip() {
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        echo "fuzz: FAIL: $* (CONVO_REQUIRE_ALL=1; scripts/install-deps.sh installs clang)"
        exit 1
    fi
    echo "fuzz: skipped: $*"
    exit 77
}

if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
    echo "fuzz: skipped under CONVO_TEST_WRAPPER (the fuzz targets run their own sanitizers)"
    exit 77
fi
if [ -z "${CLANG:-}" ]; then
    for c in clang clang-14; do
        if command -v "$c" >/dev/null 2>&1; then CLANG=$c; break; fi
    done
fi
[ -n "${CLANG:-}" ] || skip "clang not found"
[ -f "$top_builddir/config.h" ] || { echo "fuzz: no config.h in $top_builddir (configure first)"; exit 1; }
if pkg-config --exists msgpack; then MSGPACK=msgpack; else MSGPACK=msgpack-c; fi
DEPS_CFLAGS=$(pkg-config --cflags jansson "$MSGPACK" zlib)
DEPS_LIBS=$(pkg-config --libs jansson "$MSGPACK" zlib)
# fuzz_pg_unpack (the PostgreSQL driver's decoder, drivers/postgres/unpack.c)
# when the build has that driver (configure found it as pkg-config's libpq): it
# needs libpq's headers only.
if grep -q '^#define HAVE_DRIVER_POSTGRES 1' "$top_builddir/config.h" &&
    pkg-config --exists libpq; then
    PG_CFLAGS=$(pkg-config --cflags libpq)
    [ -n "${CONVO_FUZZ_TARGETS:-}" ] || TARGETS="$TARGETS fuzz_pg_unpack"
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/convo-fuzz.XXXXXX")
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM

# The build's config.h, without the networked and SQLite drivers: only the
# memory driver is linked in (registry.c lists what config.h says).
{
    printf '#include "%s/config.h"\n' "$top_builddir"
    for d in SQLITE REDIS POSTGRES MONGO; do printf '#undef HAVE_DRIVER_%s\n' "$d"; done
} >"$W/config.h"

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-g -O1 -std=gnu11 -pthread $SAN -I$W -I$top_srcdir/include -I$top_srcdir/lib $DEPS_CFLAGS"

echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$W/probe.c"
# shellcheck disable=SC2086
"$CLANG" -fsanitize=fuzzer,address "$W/probe.c" -o "$W/probe" >"$W/probe.log" 2>&1 ||
    skip "$CLANG cannot link libFuzzer programs (install libclang-rt-14-dev): $(head -c 300 "$W/probe.log")"

started=$(date +%s)
# compile SOURCE: its object in $W, with coverage for libFuzzer.
compile() {
    # shellcheck disable=SC2086
    "$CLANG" -c $CFLAGS -fsanitize=fuzzer-no-link "$1" -o "$W/obj-$(basename "$1" .c).o"
}
pids=""
for src in "$top_srcdir"/lib/*.c "$top_srcdir"/drivers/memory/*.c; do
    compile "$src" &
    pids="$pids $!"
    if [ "$(echo $pids | wc -w)" -ge "${CONVO_JOBS:-2}" ]; then
        for p in $pids; do wait "$p" || { echo "fuzz: FAIL: compiling libconvo with $CLANG"; exit 1; }; done
        pids=""
    fi
done
for p in $pids; do wait "$p" || { echo "fuzz: FAIL: compiling libconvo with $CLANG"; exit 1; }; done
build() { # build TARGET: the program $W/TARGET
    extra=""
    if [ "$1" = fuzz_pg_unpack ]; then
        extra="-I$top_srcdir/drivers/postgres ${PG_CFLAGS:-} $top_srcdir/drivers/postgres/unpack.c"
    fi
    # shellcheck disable=SC2086
    "$CLANG" $CFLAGS -fsanitize=fuzzer "$top_srcdir/tests/fuzz/$1.c" $extra "$W"/obj-*.o \
        $DEPS_LIBS -o "$W/$1"
}

# A huge allocation returns NULL (the code under test must cope) rather than
# stopping the fuzzer; fuzz_dump fails on CONVO_ENOMEM itself.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [ "${1:-}" = --seeds ]; then
    # shellcheck disable=SC2086
    "$CLANG" $CFLAGS "$top_srcdir/tests/fuzz/dump_seeds.c" "$W"/obj-*.o $DEPS_LIBS -o "$W/seeds"
    out=$top_srcdir/tests/fuzz/corpus/fuzz_dump
    mkdir -p "$out"
    "$W/seeds" "$out"
    echo "fuzz: wrote the seeds of fuzz_dump to $out:"
    ls -l "$out"
    exit 0
fi
if [ $# -eq 2 ]; then
    build "$1"
    "$W/$1" -malloc_limit_mb=1048576 "$2"
    exit
fi

# tests/fuzz/TARGET.dict, when there is one: tokens libFuzzer splices in.
dict() {
    if [ -f "$top_srcdir/tests/fuzz/$1.dict" ]; then echo "-dict=$top_srcdir/tests/fuzz/$1.dict"; fi
}

passed=0 failed=0
for t in $TARGETS; do
    if ! build "$t" >"$W/$t.build" 2>&1; then
        echo "fuzz: FAIL: $t does not build:"
        cat "$W/$t.build"
        failed=$((failed + 1))
        continue
    fi
    mkdir -p "$W/corpus-$t"
    cp "$top_srcdir/tests/fuzz/corpus/$t/"* "$W/corpus-$t/"
    status=0
    "$W/$t" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1048576 \
        -max_len=65536 $(dict "$t") \
        -artifact_prefix="$W/crash-$t-" "$W/corpus-$t" >"$W/$t.log" 2>&1 || status=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$W/$t.log" | tail -n 1)
    if [ "$status" = 0 ]; then
        echo "fuzz: $t: ${runs:-?} inputs in ${SECONDS_EACH} s, no failure"
        passed=$((passed + 1))
        continue
    fi
    failed=$((failed + 1))
    echo "fuzz: FAIL: $t (exit $status); the end of its log:"
    tail -n 60 "$W/$t.log"
    keep=$top_builddir/tests/fuzz-artifacts
    mkdir -p "$keep"
    for a in "$W/crash-$t-"*; do
        [ -f "$a" ] || continue
        cp "$a" "$keep/"
        echo "fuzz: input kept: $keep/$(basename "$a") (reproduce: tests/fuzz.sh $t FILE)"
        od -A d -c "$a" | head -n 20
    done
done
echo "fuzz: built and ran in $(($(date +%s) - started)) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
