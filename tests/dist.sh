#!/bin/sh
# dist.sh — the release tarball carries every file of the source tree that its own
# build and test command need (issue 18.5: it once lacked tests/mongo-server/,
# which scripts/test-servers.sh starts), and none of the files the build makes
# (drivers/*/lua.h, sql.h are generated from the .lua/.sql files at build time).
# Builds the tarball's tree with `make distdir` and compares it with `git ls-files`
# (in a git checkout) or with the source tree's files (in an unpacked tarball).
# Ends with "N passed, N failed".
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

if ! ${MAKE:-make} -C "$top_builddir" distdir distdir="$tmp/convo" >"$tmp/make.log" 2>&1; then
    sed -n '1,40p' "$tmp/make.log"
    bad "make distdir failed"
    echo "$passed passed, $failed failed"
    exit 1
fi
ok
# not shipped on purpose: CI's entry point, git's own files, an empty-dir marker
not_shipped='^(\.ci/|\.gitignore$|.*/\.gitignore$|m4/\.keep$)'
if git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$top_srcdir" ls-files >"$tmp/want"
    from="git ls-files"
else
    (cd "$top_srcdir" && find . -type f ! -path '*/node_modules/*' ! -path './autom4te.cache/*' |
        sed 's|^\./||') >"$tmp/want"
    from="the unpacked source tree"
fi
missing=0
while IFS= read -r f; do
    printf '%s\n' "$f" | grep -Eq "$not_shipped" && continue
    [ -e "$tmp/convo/$f" ] && continue
    case $f in # an unpacked tree also holds what its build made
        *.o | *.lo | *.la | *.log | *.trs | */lua.h | */sql.h | config.* | Makefile | libtool | stamp-h1) continue ;;
    esac
    [ "$from" = "git ls-files" ] || [ -z "$(find "$top_srcdir/$f" -newer "$top_srcdir/configure" 2>/dev/null)" ] || continue
    echo "not in the tarball: $f"
    missing=$((missing + 1))
done <"$tmp/want"
if [ "$missing" = 0 ]; then ok; else bad "$missing files of $from are not in the tarball"; fi
# what scripts/test-servers.sh needs to start the MongoDB stand-in
for f in tests/mongo-server/server.js tests/mongo-server/package.json tests/mongo-server/package-lock.json; do
    if [ -f "$tmp/convo/$f" ]; then ok; else bad "tarball lacks $f"; fi
done
generated=$(cd "$tmp/convo" && find drivers -name lua.h -o -name sql.h -o -name '*.o' -o -name '*.lo' | head -5)
if [ -z "$generated" ]; then ok; else bad "the tarball ships built files: $generated"; fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
