#!/bin/bash
# without-drivers.sh — the tool's suites pass on a build without the server drivers,
# as scripts/quickstart.sh makes (SQLite only): issue 23.1, tests/secrets.sh ran two
# PostgreSQL/MongoDB cases without its have_driver guard and failed every quickstart.
# Runs tests/secrets.sh and tests/bad-input.sh on a stand-in for such a build: a
# script in front of this build's tool that answers `--version` without redis,
# postgres and mongo, and refuses their URLs as libconvo does when built without
# them. Run by `make check`; by hand: top_builddir=BUILD tests/without-drivers.sh
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)
. "$top_srcdir/tests/tool-path.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# the stand-in build: $T/build/tools/convo, and no libtool beside it
mkdir -p "$T/build/tools"
real=${CONVO_REAL:-$CONVO_BIN}
{
    echo '#!/bin/bash'
    printf "real='%s'\n" "$real"
    [ -z "$CONVO_REAL" ] || printf "export LD_LIBRARY_PATH='%s'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\n" "$CONVO_LIBPATH"
    cat <<'EOF'
if [ "${1:-}" = --version ]; then
    "$real" --version | sed -E '/^drivers:/ { s/ (redis|postgres|mongo)\b//g }'
    exit "${PIPESTATUS[0]}"
fi
for a in "${CONVO_URL:-}" "$@"; do
    case $a in
        redis:* | rediss:* | redis+unix:* | redis+cluster:* | postgres:* | postgresql:* | mongodb:*)
            echo "convo: this libconvo was built without the driver for ${a%%:*}:" >&2
            exit 1
            ;;
    esac
done
exec "$real" "$@"
EOF
} >"$T/build/tools/convo"
chmod +x "$T/build/tools/convo"

if "$T/build/tools/convo" --version | grep -qwE 'redis|postgres|mongo' ||
    ! "$T/build/tools/convo" --version | grep -qw memory; then
    echo "without-drivers: the stand-in's --version is wrong: $("$T/build/tools/convo" --version)"
    echo "0 passed, 1 failed"
    exit 1
fi

passed=0 failed=0
for suite in secrets bad-input; do
    echo "==== tests/$suite.sh on a build without redis, postgres, mongo"
    if top_builddir=$T/build top_srcdir=$top_srcdir bash "$top_srcdir/tests/$suite.sh"; then
        passed=$((passed + 1))
    else
        echo "FAIL: tests/$suite.sh on a build without redis, postgres, mongo"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
