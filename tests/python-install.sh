#!/bin/bash
# python-install.sh — `make install` puts the Python package in the pythondir of
# the Python configure found (AM_PATH_PYTHON: its purelib path under the prefix),
# with _installed.py, and that Python imports it from there. It was hard-coded
# to $(prefix)/lib/python3/dist-packages, which only Debian's own Python reads.
# Run by `make check`; by hand: top_builddir=BUILD tests/python-install.sh
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
PY=${PYTHON:-python3}
if [ "$PY" = : ] || ! command -v "$PY" >/dev/null 2>&1; then
    echo "SKIP: configure found no Python, the binding is not installed"
    exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/prefix

# A --enable-sanitizers build: python3 is not instrumented, so the ASan runtime is
# loaded first (as tests/python.sh does); Python's own allocations are not leaks.
asan=$(ldd "$top_builddir/.libs/libconvo.so" 2>/dev/null | awk '/libasan/ { print $3; exit }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

fail() {
    echo "FAIL: $*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

# install-data: headers, pkg-config file and the Python package, no relinking
make -s -C "$top_builddir" install-data prefix="$P" >"$T/log" 2>&1 ||
    fail "make install-data: $(tail -5 "$T/log")"

# Where this Python puts pure packages under prefix P, as AM_PATH_PYTHON
# computes it (Debian's posix_local scheme counts as posix_prefix there).
want=$("$PY" - "$P" <<'EOF'
import sys, sysconfig
get = getattr(sysconfig, "get_default_scheme", None) or sysconfig._get_default_scheme
scheme = get()
if scheme == "posix_local":
    scheme = "posix_prefix"
print(sysconfig.get_path("purelib", scheme, vars={"base": sys.argv[1]}))
EOF
) || fail "$PY could not say its purelib path"

for f in __init__.py _lib.py store.py _installed.py; do
    [ -f "$want/convo/$f" ] || fail "$want/convo/$f not installed; got: $(cd "$P" && find . -name "$f")"
done
grep -q "LIBDIR = \"$P/lib\"" "$want/convo/_installed.py" ||
    fail "_installed.py does not record $P/lib: $(cat "$want/convo/_installed.py")"
[ ! -e "$P/lib/python3/dist-packages" ] || fail "still installed in $P/lib/python3/dist-packages"

# the same Python imports the installed package from there
out=$(cd "$T" && PYTHONPATH=$want CONVO_LIBRARY=$top_builddir/.libs/libconvo.so PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -c 'import convo, sys; print(convo.__file__); print(convo.drivers())' 2>&1) ||
    fail "import convo from $want: $out"
case $out in "$want/convo/__init__.py"*) ;; *) fail "imported another convo: $out" ;; esac

mkdir -p "$P/bin" "$P/lib" # uninstall goes there too
make -s -C "$top_builddir" uninstall prefix="$P" >"$T/log" 2>&1 || fail "make uninstall: $(tail -5 "$T/log")"
[ ! -e "$want/convo/_installed.py" ] || fail "make uninstall left _installed.py"
echo "1 passed, 0 failed"
