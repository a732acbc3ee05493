#!/bin/sh
# conformance-memory.sh — the conformance suite on the in-process memory: store
# (every open is a new empty store, so multi-handle tests skip themselves).
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
convo_conformance "memory:"
