# tool-path.sh — sourced by test scripts that start the tool (tests/bad-input.sh,
# tests/secrets.sh): the uninstalled tools/convo is a libtool wrapper script that
# costs ~50 ms a run, so ask libtool once for the real program and its library path.
# In: top_builddir. Out: CONVO_BIN (the wrapper), CONVO_REAL and CONVO_LIBPATH
# (empty when libtool cannot tell; then run CONVO_BIN), and convo_wrapped.
CONVO_BIN=$top_builddir/tools/convo
CONVO_REAL='' CONVO_LIBPATH=''
if [ -x "$top_builddir/libtool" ] &&
    convo_lt=$("$top_builddir/libtool" --mode=execute sh -c \
        'printf "%s\n%s\n" "$0" "${LD_LIBRARY_PATH:-}"' "$CONVO_BIN" 2>/dev/null) &&
    [ -x "$(printf '%s\n' "$convo_lt" | sed -n 1p)" ]; then
    CONVO_REAL=$(printf '%s\n' "$convo_lt" | sed -n 1p)
    CONVO_LIBPATH=$(printf '%s\n' "$convo_lt" | sed -n 2p)
fi

# convo_wrapped PROGRAM DIR: prints the path of a script DIR/NAME that runs the
# real binary behind the libtool wrapper PROGRAM under $CONVO_TEST_WRAPPER (or
# PROGRAM itself when no wrapper is set). Unlike `libtool --mode=execute`, it
# keeps arguments that hold newlines intact, and it works behind env(1).
convo_wrapped() {
    if [ -z "${CONVO_TEST_WRAPPER:-}" ] || [ ! -x "$top_builddir/libtool" ]; then
        printf '%s\n' "$1"
        return 0
    fi
    convo_w_lt=$("$top_builddir/libtool" --mode=execute sh -c \
        'printf "%s\n%s\n" "$0" "${LD_LIBRARY_PATH:-}"' "$1") || return 1
    convo_w_real=$(printf '%s\n' "$convo_w_lt" | sed -n 1p)
    convo_w_libs=$(printf '%s\n' "$convo_w_lt" | sed -n 2p)
    convo_w_out=$2/$(basename "$1")-wrapped
    {
        echo '#!/bin/sh'
        printf "LD_LIBRARY_PATH='%s'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\n" "$convo_w_libs"
        echo 'export LD_LIBRARY_PATH'
        printf "exec %s '%s' \"\$@\"\n" "$CONVO_TEST_WRAPPER" "$convo_w_real"
    } >"$convo_w_out"
    chmod +x "$convo_w_out"
    printf '%s\n' "$convo_w_out"
}
