#!/bin/bash
# python-pip.sh — the Python binding as a pip package (bindings/python/pyproject.toml,
# distribution convo-store, import name convo): builds its sdist and, from the sdist,
# its wheel (python -m build), installs the wheel with plain `pip install` into a fresh
# virtual environment outside the source tree, imports it there and runs a small program
# with libconvo found through CONVO_LIBRARY and through pkg-config's convo.pc; then
# installs the openai-agents extra and runs the ConvoSession tests
# (bindings/python/tests/test_agents.py, the SDK's real Runner), then the langgraph extra
# with langgraph and langgraph-checkpoint-conformance and runs the ConvoSaver tests
# (test_langgraph*.py: LangGraph's conformance suite on memory:, SQLite and PostgreSQL, a
# real StateGraph against InMemorySaver, examples/python/langgraph_chat.py) in that
# environment, on memory:, SQLite and the servers named by CONVO_TEST_{REDIS,POSTGRES,MONGO}_URL.
# PyPI packages are pinned by bindings/python/constraints.txt (PIP_FIND_LINKS is
# honoured). Run by `make check`; by hand: top_builddir=BUILD tests/python-pip.sh
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)
PY=python3
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "SKIP: python3 not found"
    exit 77
fi
LIB=$top_builddir/.libs/libconvo.so
if [ ! -e "$LIB" ]; then
    echo "python-pip.sh: $LIB does not exist: build libconvo.la first" >&2
    exit 99
fi
T=$(mktemp -d /tmp/convo-pip.XXXXXX)
trap 'rm -rf "$T"' EXIT
export PIP_CONSTRAINT=$top_srcdir/bindings/python/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH CONVO_LIBRARY

# as tests/python.sh: python3 is not instrumented in a --enable-sanitizers build
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ { print $3; exit }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

passed=0
fail() {
    echo "FAIL: $*" >&2
    echo "$passed passed, 1 failed"
    echo "0%: Checks: $((passed + 1)), Failures: 1, Errors: 0"
    exit 1
}
ok() {
    passed=$((passed + 1))
    echo "PASS: $*"
}

# The project copied out of the source tree (setuptools writes build/ and *.egg-info
# beside pyproject.toml, and the source tree is read-only under make distcheck).
mkdir -p "$T/src"
cp -R "$top_srcdir/bindings/python/pyproject.toml" "$top_srcdir/bindings/python/README.md" \
    "$top_srcdir/bindings/python/convo" "$T/src/" || fail "copying bindings/python"
rm -rf "$T/src/convo/_installed.py" "$T/src/convo/__pycache__"

"$PY" -m venv "$T/tools" >"$T/log" 2>&1 || fail "python3 -m venv: $(tail -3 "$T/log")"
"$T/tools/bin/pip" install -q build >"$T/log" 2>&1 || fail "pip install build: $(tail -5 "$T/log")"
"$T/tools/bin/python" -m build --outdir "$T/dist" "$T/src" >"$T/log" 2>&1 ||
    fail "python -m build: $(tail -15 "$T/log")"
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")
sdist=$T/dist/convo_store-$version.tar.gz
wheel=$T/dist/convo_store-$version-py3-none-any.whl
[ -f "$sdist" ] && [ -f "$wheel" ] || fail "build made $(ls "$T/dist"), not convo_store-$version (sdist and wheel)"
ok "python -m build: sdist and wheel convo_store-$version"

# the wheel holds every module of the package and py.typed, and nothing else
want=$(cd "$T/src" && find convo -name '*.py' -o -name py.typed | sort)
got=$("$PY" - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
print("\n".join(sorted(n for n in names if not n.startswith("convo_store-"))))
EOF
)
[ "$want" = "$got" ] || fail "the wheel holds $(echo $got), not $(echo $want)"
ok "the wheel holds convo/*.py and convo/py.typed"

# a fresh environment outside the source tree; plain pip install of the wheel
"$PY" -m venv "$T/app" >"$T/log" 2>&1 || fail "python3 -m venv: $(tail -3 "$T/log")"
"$T/app/bin/pip" install "$wheel" >"$T/log" 2>&1 || fail "pip install $wheel: $(tail -5 "$T/log")"
ok "pip install convo_store-$version-py3-none-any.whl"
cd "$T" || fail "cd $T"
cat >"$T/program.py" <<'EOF'
import os, sys
import convo
where = os.path.dirname(convo.__file__)
assert where.startswith(sys.prefix), "imported %s, not the installed package" % where
assert os.path.exists(os.path.join(where, "py.typed"))
with convo.Store(sys.argv[1]) as store:
    store.append("t", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}])
    store.replace_tail("t", 1, [{"role": "assistant", "content": "hello"}], expected_length=2)
    messages, extra = store.load("t")
    assert messages == [{"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "hello"}], messages
    h = store.load_history("t", tail=1)
    assert (h.length, h.generation) == (2, 1), h
print(convo.library_path, convo.__version__)
EOF
url=sqlite:$T/pip.db
out=$(CONVO_LIBRARY=$LIB "$T/app/bin/python" program.py "$url" 2>&1) || fail "the program with CONVO_LIBRARY: $out"
[ "$out" = "$LIB $version" ] || fail "the program loaded $out, not $LIB $version"
ok "import convo from the venv; append, replace_tail, load (CONVO_LIBRARY=$LIB)"

# without CONVO_LIBRARY: found through convo.pc's libdir (as after `make install
# prefix=P` with P/lib/pkgconfig on PKG_CONFIG_PATH)
if command -v pkg-config >/dev/null 2>&1; then
    mkdir -p "$T/pc"
    printf 'libdir=%s\n\nName: convo\nDescription: convo\nVersion: %s\nLibs: -L${libdir} -lconvo\n' \
        "$top_builddir/.libs" "$version" >"$T/pc/convo.pc"
    out=$(PKG_CONFIG_PATH=$T/pc "$T/app/bin/python" program.py "sqlite:$T/pc.db" 2>&1) ||
        fail "the program through pkg-config: $out"
    [ "$out" = "$top_builddir/.libs/libconvo.so.0 $version" ] || fail "through pkg-config it loaded $out"
    ok "libconvo found through convo.pc's libdir, without CONVO_LIBRARY"
else
    echo "pkg-config not found: the convo.pc route is not checked"
fi

# unittest files of bindings/python/tests in the venv; counts what ran and passed
skipped_total=0
run_unit() { # WHAT PATTERN [VAR=VALUE ...]
    local what=$1 pattern=$2 rc ran skipped
    shift 2
    env CONVO_LIBRARY=$LIB "$@" "$T/app/bin/python" -m unittest discover -v \
        -s "$top_srcdir/bindings/python/tests" -p "$pattern" >"$T/unit" 2>&1
    rc=$?
    cat "$T/unit"
    ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$T/unit" | tail -n 1)
    [ "$rc" = 0 ] && [ -n "$ran" ] && [ "$ran" -gt 0 ] || fail "$what (exit $rc, ran ${ran:-none})"
    skipped=$(grep -E '^OK \(skipped=' "$T/unit" | sed 's/.*skipped=\([0-9]*\).*/\1/')
    passed=$((passed + ran - ${skipped:-0}))
    skipped_total=$((skipped_total + ${skipped:-0}))
}

# CONVO_PIP_TESTS: which framework parts run (default both; tests/python-langgraph-all.sh
# runs only langgraph, on every driver)
want() { case " ${CONVO_PIP_TESTS:-agents langgraph} " in *" $1 "*) return 0 ;; esac; return 1; }

# the openai-agents extra, and ConvoSession with the SDK's real Runner
if want agents; then
    "$T/app/bin/pip" install "$wheel[openai-agents]" >"$T/log" 2>&1 ||
        fail "pip install convo_store[openai-agents]: $(tail -5 "$T/log")"
    ok "pip install convo_store[openai-agents]"
    run_unit "the ConvoSession tests" 'test_agents*.py' CONVO_REQUIRE_AGENTS=1
fi

# the langgraph extra, LangGraph itself and its checkpoint conformance suite: ConvoSaver
# through the suite (unmodified) and through LangGraph's real runtime, and the example
if want langgraph; then
    "$T/app/bin/pip" install "$wheel[langgraph]" langgraph langgraph-checkpoint-conformance \
        >"$T/log" 2>&1 || fail "pip install convo_store[langgraph]: $(tail -5 "$T/log")"
    ok "pip install convo_store[langgraph] langgraph langgraph-checkpoint-conformance"
    run_unit "the ConvoSaver tests" 'test_langgraph*.py' CONVO_REQUIRE_LANGGRAPH=1
fi
echo "$passed passed, 0 failed, $skipped_total skipped"
echo "100%: Checks: $passed, Failures: 0, Errors: 0"
