#!/bin/bash
# c-install.sh — a C program built against an installed libconvo the way README.md and
# docs/c.md say (issue 23.3): `make install` to a temporary prefix, then
#  - README's example program built with `cc app.c $(pkg-config --cflags --libs convo)`
#    and PKG_CONFIG_PATH: it does not start by itself (libconvo.so.0 is not in the
#    loader's path, as the docs warn), starts with LD_LIBRARY_PATH, and starts by itself
#    when linked with the rpath docs/c.md gives;
#  - examples/chat.c and examples/agent.c: they need jansson on the link line (without it
#    the link fails, as the docs say), and run when built with the documented line.
# `make install prefix=P` stands for `./configure --prefix=P`: convo.pc records
# configure's prefix, so pkg-config is told P (--define-variable=prefix=P).
# Run by `make check`; by hand: top_builddir=BUILD tests/c-install.sh
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*"
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
    exit
}
CC=${CC:-cc}
if ! command -v pkg-config >/dev/null 2>&1; then
    echo "SKIP: no pkg-config"
    exit 77
fi
# a --enable-sanitizers build: the installed library needs the sanitizers' runtime
case " $(sed -n 's/^SANITIZE_CFLAGS = //p' "$top_builddir/Makefile") " in
*fsanitize*) CC="$CC -fsanitize=address,undefined" ;;
esac

# the docs give the commands run below (README.md, docs/c.md)
for doc in README.md docs/c.md; do
    for want in 'PKG_CONFIG_PATH' 'LD_LIBRARY_PATH' 'ldconfig' \
        '-Wl,-rpath,$(pkg-config --variable=libdir convo)' \
        'cc examples/chat.c -o chat $(pkg-config --cflags --libs convo jansson)'; do
        if grep -qF -- "$want" "$top_srcdir/$doc"; then ok; else bad "$doc does not say $want"; fi
    done
done

if ! make -s -C "$top_builddir" install prefix="$P" >"$T/install.log" 2>&1; then
    bad "make install prefix=$P: $(tail -5 "$T/install.log")"
    finish
fi
ok
export PKG_CONFIG_PATH=$P/lib/pkgconfig
pc() { pkg-config --define-variable=prefix="$P" "$@"; }
libdir=$(pc --variable=libdir convo)
if [ "$libdir" = "$P/lib" ] && [ -e "$libdir/libconvo.so.0" ]; then ok; else
    bad "pkg-config --variable=libdir convo: '$libdir', want $P/lib holding libconvo.so.0"
fi

# README's example program, as README.md prints it
awk '/^```c$/ { on = 1; next } /^```$/ { if (on) exit } on' "$top_srcdir/README.md" >"$T/app.c"
grep -q 'convo_open' "$T/app.c" || bad "no C example found in README.md"
url=sqlite:chat.db
"$top_builddir/tools/convo" --version | grep -qw sqlite || url=memory:
sed -i "s|\"sqlite:chat.db\"|\"$url\"|" "$T/app.c"
mkdir "$T/run"
# shellcheck disable=SC2046
if $CC -o "$T/app" "$T/app.c" $(pc --cflags --libs convo) 2>"$T/cc.log"; then ok; else
    bad "cc app.c \$(pkg-config --cflags --libs convo): $(head -5 "$T/cc.log")"
fi
# the loader does not look in a --prefix's lib by itself: the documented failure
(cd "$T/run" && env -u LD_LIBRARY_PATH "$T/app") >"$T/out" 2>&1
if grep -q 'libconvo.so.0: cannot open shared object file' "$T/out"; then ok; else
    bad "app without LD_LIBRARY_PATH or rpath: expected the loader's error, got: $(head -3 "$T/out")"
fi
if (cd "$T/run" && LD_LIBRARY_PATH=$libdir "$T/app") >"$T/out" 2>&1 &&
    grep -q '^extra: {"title":"greetings"}$' "$T/out"; then ok; else
    bad "app with LD_LIBRARY_PATH=$libdir: $(head -5 "$T/out")"
fi
# shellcheck disable=SC2046
if $CC -o "$T/app-rpath" "$T/app.c" $(pc --cflags --libs convo) -Wl,-rpath,"$libdir" 2>"$T/cc.log" &&
    (cd "$T/run" && env -u LD_LIBRARY_PATH "$T/app-rpath") >"$T/out" 2>&1 &&
    grep -q '^1 {"role":"assistant","content":"hello!"}$' "$T/out"; then ok; else
    bad "app linked with -Wl,-rpath,$libdir: $(head -5 "$T/cc.log" "$T/out")"
fi

# the examples use jansson themselves: without it on the link line the link fails
# shellcheck disable=SC2046
if $CC -o "$T/chat" "$top_srcdir/examples/chat.c" $(pc --cflags --libs convo) >"$T/cc.log" 2>&1; then
    bad "examples/chat.c linked without jansson: the docs say it needs it"
elif grep -q 'json_' "$T/cc.log"; then ok; else
    bad "examples/chat.c without jansson failed for another reason: $(head -5 "$T/cc.log")"
fi
for ex in chat agent; do
    # shellcheck disable=SC2046
    if ! $CC -o "$T/$ex" "$top_srcdir/examples/$ex.c" $(pc --cflags --libs convo jansson) \
        -Wl,-rpath,"$libdir" 2>"$T/cc.log"; then
        bad "cc examples/$ex.c \$(pkg-config --cflags --libs convo jansson): $(head -5 "$T/cc.log")"
        continue
    fi
    ok
done
u=sqlite:$T/run/examples.db
[ "$url" != memory: ] || u=memory:
if printf 'hi\n' | "$T/chat" "$u" c >"$T/out" 2>&1 && grep -q 'hi' "$T/out"; then ok; else
    bad "examples/chat: $(head -5 "$T/out")"
fi
if "$T/agent" "$u" a >"$T/out" 2>&1 && [ -s "$T/out" ]; then ok; else
    bad "examples/agent: $(head -5 "$T/out")"
fi
finish
