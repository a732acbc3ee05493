#!/usr/bin/env bash
# scripts/check-sanitized.sh — the whole of `make check` built with
# AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer
# (./configure --enable-sanitizers), in a build folder of its own, against
# throwaway Redis, PostgreSQL and MongoDB servers (scripts/test-servers.sh).
# Any sanitizer report fails the test it happened in.
#
#   scripts/check-sanitized.sh [BUILDDIR]     default BUILDDIR: build-sanitized
#
# The build is out of tree. When the source tree itself is configured (after
# scripts/test.sh), automake refuses that, so the sources are copied
# (git ls-files) into BUILDDIR/src first. Environment: CONVO_JOBS (make -j,
# default 2), CONVO_CONFIGURE_FLAGS (more configure arguments), and
# CONVO_TEST_*_URL to use servers of your own instead of starting them.
set -eu

# shellcheck source=scripts/check-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/check-common.sh"
check_build check-sanitized "${1:-$ROOT/build-sanitized}" --enable-sanitizers
check_servers sanitized
# Every report is fatal; leaks are reported when each (forked) test process exits.
# ASan keeps freed memory poisoned in a quarantine of 256 MiB by default, which
# shows up as resident memory; tests/dump.c bounds the growth of a copy's peak
# RSS at 64 MiB, so the quarantine is 8 MiB here (with 32 MiB the SQLite-to-SQLite
# copy's peak grew by 82 MiB under ASan, with 8 MiB by 40 MiB).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=8}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Instrumented code runs 2-3 times slower: give Check's per-test timeouts room.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
check_run check-sanitized "under ASan, LSan and UBSan"
