# lib.sh — sourced by tests/conformance-*.sh: where the build is, a random token
# for a fresh namespace per run, adding a parameter to a URL, and the rule for a
# missing test server (skip with 77, or fail when CONVO_REQUIRE_ALL=1).
#
# top_srcdir / top_builddir come from `make check` (AM_TESTS_ENVIRONMENT); by
# hand they default to this file's tree and to the current directory when it
# holds a build. CONVO_TEST_WRAPPER runs the suite under a tool, e.g.
#   CONVO_TEST_WRAPPER="valgrind --error-exitcode=1 --leak-check=full" make check

if [ -z "${top_srcdir:-}" ]; then
    top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
fi
if [ -z "${top_builddir:-}" ]; then
    if [ -x ./tests/conformance ]; then top_builddir=$(pwd); else top_builddir=$top_srcdir; fi
fi
CONVO_CONFORMANCE=$top_builddir/tests/conformance

# A short random lower-case hex token.
convo_random() {
    od -An -N6 -tx1 /dev/urandom | tr -d ' \n'
}

# convo_url_add URL KEY=VALUE: the URL with one more query parameter.
convo_url_add() {
    case $1 in
        *\? | *\&) printf '%s%s\n' "$1" "$2" ;;
        *\?*) printf '%s&%s\n' "$1" "$2" ;;
        *) printf '%s?%s\n' "$1" "$2" ;;
    esac
}

# convo_need_url DRIVER VARIABLE: returns when $VARIABLE is set; otherwise
# skips (exit 77), or fails under CONVO_REQUIRE_ALL=1.
convo_need_url() {
    eval "convo_need_value=\${$2:-}"
    [ -n "$convo_need_value" ] && return 0
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        echo "conformance-$1: FAIL: $2 is not set, but CONVO_REQUIRE_ALL=1 demands the $1 suite (start servers with scripts/test-servers.sh)" >&2
        exit 1
    fi
    echo "conformance-$1: skipped: set $2 to a $1 test server's URL" >&2
    exit 77
}

# convo_conformance URL: runs the suite on URL and returns its status.
convo_conformance() {
    if [ ! -x "$CONVO_CONFORMANCE" ]; then
        echo "$0: no $CONVO_CONFORMANCE: build it (make check) or set top_builddir" >&2
        return 99
    fi
    if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
        # the build's programs are libtool wrappers: let libtool start the tool on the real binary
        # shellcheck disable=SC2086
        "$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$CONVO_CONFORMANCE" "$1"
    else
        "$CONVO_CONFORMANCE" "$1"
    fi
}
