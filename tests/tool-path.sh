# tool-path.sh — sourced by tests/bad-input.sh and tests/secrets.sh: the
# uninstalled tools/convo is a libtool wrapper script that costs ~50 ms a run, so
# ask libtool once for the real program and its library path.
# In: top_builddir. Out: CONVO_BIN (the wrapper), CONVO_REAL and CONVO_LIBPATH
# (empty when libtool cannot tell; then run CONVO_BIN).
CONVO_BIN=$top_builddir/tools/convo
CONVO_REAL='' CONVO_LIBPATH=''
if [ -x "$top_builddir/libtool" ] &&
    convo_lt=$("$top_builddir/libtool" --mode=execute sh -c \
        'printf "%s\n%s\n" "$0" "${LD_LIBRARY_PATH:-}"' "$CONVO_BIN" 2>/dev/null) &&
    [ -x "$(printf '%s\n' "$convo_lt" | sed -n 1p)" ]; then
    CONVO_REAL=$(printf '%s\n' "$convo_lt" | sed -n 1p)
    CONVO_LIBPATH=$(printf '%s\n' "$convo_lt" | sed -n 2p)
fi
