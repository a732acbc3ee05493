#!/bin/bash
# bad-input.sh — bad input through the convo tool, on a SQLite file and on every
# test server named by CONVO_TEST_{REDIS,POSTGRES,MONGO}_URL: each is refused with
# one line "convo: ..." on stderr and the documented exit status (1 invalid,
# 5 too large), and nothing is written. Bad URL parameters and names that try
# injection are refused before anything is created.
# Run by `make check`; by hand: top_builddir=BUILD tests/bad-input.sh
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/tool-path.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset CONVO_URL
passed=0 failed=0 skipped=0

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

# CONVO_TEST_WRAPPER (e.g. "valgrind -q --error-exitcode=1 --leak-check=full")
# runs every invocation of the tool under that program.
# The real binary is started directly: `libtool --mode=execute` would mangle
# arguments that hold a newline.
convo() {
    if [ -n "$CONVO_REAL" ]; then
        # shellcheck disable=SC2086
        LD_LIBRARY_PATH=$CONVO_LIBPATH ${CONVO_TEST_WRAPPER:-} "$CONVO_REAL" "$@"
    elif [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
        # shellcheck disable=SC2086
        "$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$CONVO_BIN" "$@"
    else
        "$CONVO_BIN" "$@"
    fi
}

# refused DESC STATUS ARGS... (stdin as given): exit STATUS, empty stdout and
# exactly one stderr line "convo: ...".
refused() {
    local desc=$1 want=$2 got=0
    shift 2
    convo "$@" >"$T/out" 2>"$T/err" || got=$?
    if [ "$got" != "$want" ]; then
        bad "$desc: exit $got, want $want: $(head -c 300 "$T/err")"
    elif [ -s "$T/out" ]; then
        bad "$desc: printed on stdout: $(head -c 200 "$T/out")"
    elif [ "$(wc -l <"$T/err")" != 1 ] || ! grep -q '^convo: ' "$T/err"; then
        bad "$desc: stderr is not one 'convo: ' line: [$(head -c 400 "$T/err")]"
    else
        ok
    fi
}

# accepted DESC ARGS...: exit 0.
accepted() {
    local desc=$1 got=0
    shift
    convo "$@" >"$T/out" 2>"$T/err" </dev/null || got=$?
    if [ "$got" = 0 ]; then ok; else bad "$desc: exit $got: $(head -c 300 "$T/err")"; fi
}

python3 - "$T" <<'EOF'
import sys
t = sys.argv[1]
def put(name, data):
    with open(t + "/" + name, "wb") as f:
        f.write(data)
put("big.jsonl", b'{"role":"user","content":"' + b"a" * (1 << 20) + b'"}\n')
put("many.jsonl", b'{"role":"user"}\n' * 10001)
put("badutf8.jsonl", b'{"role":"user","content":"\xff"}\n')
put("overlong.jsonl", b'{"role":"user","content":"\xc0\xaf"}\n')
put("surrogate.jsonl", b'{"role":"user","content":"\xed\xa0\x80"}\n')
put("rawnul.jsonl", b'{"role":"user","content":"a\x00b"}\n')
put("mixed.jsonl", b'{"role":"user"}\n{"role":"user","content":"\xff"}\n')
put("deep.jsonl", b'{"role":"user","x":' + b"[" * 100000 + b"]" * 100000 + b"}\n")
put("lastbad.jsonl", b'{"role":"user"}\n' * 9999 + b'{"role":""}\n')
EOF
LONG_ROLE=$(printf 'r%.0s' $(seq 65))
ID513=$(head -c 513 /dev/zero | tr '\0' i)
ID512=$(head -c 512 /dev/zero | tr '\0' i)
CHUNK=$(head -c 120000 /dev/zero | tr '\0' x)
U='{"role":"user"}'

# nothing_written URL DESC: the thread t does not exist and no thread does.
nothing_written() {
    refused "$2: t was not created" 3 --url "$1" load t
    local got=0
    convo --url "$1" threads >"$T/out" 2>"$T/err" || got=$?
    if [ "$got" = 0 ] && [ ! -s "$T/out" ]; then ok; else
        bad "$2: threads after rejected input: exit $got, [$(head -c 200 "$T/out")]"
    fi
}

# suite NAME URL: every check against one empty store.
suite() {
    local name=$1 url=$2
    echo "---- bad-input: $name"
    # messages: exit 1
    refused "$name: invalid JSON" 1 --url "$url" append t '{"role":"user"'
    refused "$name: trailing garbage" 1 --url "$url" append t '{"role":"user"} x'
    refused "$name: duplicate key" 1 --url "$url" append t '{"role":"user","role":"tool"}'
    refused "$name: invalid UTF-8 argument" 1 --url "$url" append t "$(printf '{"role":"user","c":"\xff"}')"
    refused "$name: invalid UTF-8 on stdin" 1 --url "$url" append t <"$T/badutf8.jsonl"
    refused "$name: overlong UTF-8" 1 --url "$url" append t <"$T/overlong.jsonl"
    refused "$name: encoded surrogate" 1 --url "$url" append t <"$T/surrogate.jsonl"
    refused "$name: escaped lone surrogate" 1 --url "$url" append t '{"role":"user","c":"\ud800"}'
    refused "$name: raw NUL byte" 1 --url "$url" append t <"$T/rawnul.jsonl"
    refused "$name: deep nesting" 1 --url "$url" append t <"$T/deep.jsonl"
    refused "$name: not an object (array)" 1 --url "$url" append t '[{"role":"user"}]'
    refused "$name: not an object (string)" 1 --url "$url" append t '"user"'
    refused "$name: not an object (number)" 1 --url "$url" append t '42'
    refused "$name: not an object (null)" 1 --url "$url" append t 'null'
    refused "$name: missing role" 1 --url "$url" append t '{"content":"hi"}'
    refused "$name: empty role" 1 --url "$url" append t '{"role":""}'
    refused "$name: role a number" 1 --url "$url" append t '{"role":5}'
    refused "$name: role null" 1 --url "$url" append t '{"role":null}'
    refused "$name: role an object" 1 --url "$url" append t '{"role":{"name":"user"}}'
    refused "$name: role an array" 1 --url "$url" append t '{"role":["user"]}'
    refused "$name: role over 64 bytes" 1 --url "$url" append t "{\"role\":\"$LONG_ROLE\"}"
    refused "$name: role with NUL" 1 --url "$url" append t '{"role":"us\u0000er"}'
    refused "$name: one bad message in a batch" 1 --url "$url" append t <"$T/mixed.jsonl"
    refused "$name: last of 10,000 bad" 1 --url "$url" append t <"$T/lastbad.jsonl"
    refused "$name: good then bad argument" 1 --url "$url" append t "$U" '{"role":5}'
    # too large: exit 5
    refused "$name: message over 1 MiB" 5 --url "$url" append t <"$T/big.jsonl"
    refused "$name: batch of 10,001" 5 --url "$url" append t <"$T/many.jsonl"
    # thread ids: exit 1, for every command that takes one
    local id
    for id in '' "$ID513" "$(printf 'a\tb')" "$(printf 'a\nb')" "$(printf 'a\x7fb')" \
        "$(printf 'a\xc2\x85b')" "$(printf 'a\xffb')" "$(printf '\x1b[31m')"; do
        local shown
        shown=$(printf '%s' "$id" | head -c 20 | od -An -c | tr -s ' ' | head -c 60)
        refused "$name: append to id [$shown]" 1 --url "$url" append "$id" "$U"
        refused "$name: save-extra to id [$shown]" 1 --url "$url" save-extra "$id" '{}'
        refused "$name: load id [$shown]" 1 --url "$url" load "$id"
        refused "$name: extra of id [$shown]" 1 --url "$url" extra "$id"
        refused "$name: delete id [$shown]" 1 --url "$url" delete "$id"
        refused "$name: fork to id [$shown]" 1 --url "$url" fork t "$id"
    done
    # extra: exit 1 when invalid, 5 when the merge would pass 1 MiB
    refused "$name: extra invalid JSON" 1 --url "$url" save-extra t '{"a":'
    refused "$name: extra an array" 1 --url "$url" save-extra t '[1]'
    refused "$name: extra a string" 1 --url "$url" save-extra t '"x"'
    refused "$name: extra invalid UTF-8" 1 --url "$url" save-extra t "$(printf '{"a":"\xff"}')"
    refused "$name: extra duplicate key" 1 --url "$url" save-extra t '{"a":1,"a":2}'
    # a closed stdin is an error of its own, not the store's file or socket read as input
    refused "$name: append with stdin closed" 1 --url "$url" append t <&-
    if grep -q 'cannot read standard input: Bad file descriptor' "$T/err"; then ok; else
        bad "$name: append <&-: [$(head -c 300 "$T/err")]"
    fi
    refused "$name: save-extra with stdin closed" 1 --url "$url" save-extra t <&-
    # the thread index: a filter that is not a JSON object and a bad cursor are
    # refused (1), an unknown order or a misplaced flag is a usage error (2)
    local w
    for w in '[1]' '"u1"' 'null' '{"user_id":' '{"a":1,"a":2}' "$(printf '{"a":"\xff"}')"; do
        refused "$name: threads --where $w" 1 --url "$url" threads --where "$w"
        if grep -q 'where must be a JSON object' "$T/err"; then ok; else
            bad "$name: threads --where $w: [$(head -c 200 "$T/err")]"
        fi
    done
    local c
    for c in nonsense 'r0:zz:abc' 'r0:0000000000000001:' 'c0:0000000000000001:t' 'r1:0000000000000001:t'; do
        refused "$name: threads --after $c" 1 --url "$url" threads --order recent --after "$c"
        if grep -q 'cursor' "$T/err"; then ok; else bad "$name: threads --after $c: [$(head -c 200 "$T/err")]"; fi
    done
    for opts in "--order newest" "--order=" "--extra" "--last-message" "--reverse=1" "--where"; do
        # shellcheck disable=SC2086
        got=0; convo --url "$url" threads $opts >"$T/out" 2>"$T/err" || got=$?
        if [ "$got" = 2 ] && grep -q '^usage: convo' "$T/err" && [ ! -s "$T/out" ]; then ok; else
            bad "$name: threads $opts: exit $got, want 2 and the usage: [$(head -c 200 "$T/err")]"
        fi
    done
    refused "$name: --index-key named twice" 1 --url "$url" --index-key k --index-key k threads
    got=0; convo --url "$url" --index-key= threads >"$T/out" 2>"$T/err" || got=$?
    if [ "$got" = 2 ] && grep -q 'index-key needs a value' "$T/err"; then ok; else
        bad "$name: --index-key=: exit $got: [$(head -c 200 "$T/err")]"
    fi
    nothing_written "$url" "$name"

    # a closed stdout: exit 6, the result not printed into the server's connection
    local got=0
    convo --url "$url" append closed "$U" >&- 2>"$T/err" </dev/null || got=$?
    if [ "$got" = 6 ] && grep -q 'the batch is stored (first seq 0, 1 messages)' "$T/err"; then ok; else
        bad "$name: append >&-: exit $got, want 6: [$(head -c 300 "$T/err")]"
    fi
    accepted "$name: delete closed" --url "$url" delete closed

    # a 512-byte id is fine; the extra limit is on the merged object
    accepted "$name: 512-byte id" --url "$url" append "$ID512" "$U"
    accepted "$name: delete 512-byte id" --url "$url" delete "$ID512"
    local k
    for k in 1 2 3 4 5 6 7 8; do
        accepted "$name: extra key $k" --url "$url" save-extra big "{\"k$k\":\"$CHUNK\"}"
    done
    refused "$name: extra over 1 MiB" 5 --url "$url" save-extra big "{\"k9\":\"$CHUNK\"}"
    convo --url "$url" extra big >"$T/out" 2>/dev/null
    if ! grep -q '"k9"' "$T/out"; then ok; else bad "$name: an oversized extra merge was written"; fi
    accepted "$name: delete big" --url "$url" delete big

    # the tail rewrite: bad input is refused and the thread is left as it was
    accepted "$name: rewrite seed" --url "$url" append r "$U" '{"role":"tool","content":"x"}'
    refused "$name: replace-tail keep beyond the length" 1 --url "$url" replace-tail r --keep 3 "$U"
    if grep -q 'keep 3' "$T/err"; then ok; else bad "$name: keep beyond: [$(cat "$T/err")]"; fi
    refused "$name: replace-tail message without role" 1 --url "$url" replace-tail r --keep 1 '{"content":"hi"}'
    refused "$name: replace-tail bad JSON" 1 --url "$url" replace-tail r --keep 1 "$U" '{"role":"user"'
    if grep -q 'JSON argument 2' "$T/err"; then ok; else bad "$name: bad JSON not named: [$(cat "$T/err")]"; fi
    refused "$name: replace-tail bad line on stdin" 1 --url "$url" replace-tail r --keep 0 <"$T/mixed.jsonl"
    if grep -q 'line 2' "$T/err"; then ok; else bad "$name: bad line not named: [$(cat "$T/err")]"; fi
    refused "$name: replace-tail over 1 MiB" 5 --url "$url" replace-tail r --keep 1 <"$T/big.jsonl"
    refused "$name: replace-tail batch of 10,001" 5 --url "$url" replace-tail r --keep 1 <"$T/many.jsonl"
    refused "$name: replace-tail on an unknown thread" 3 --url "$url" replace-tail t --keep 0 "$U"
    refused "$name: pop of an unknown thread" 3 --url "$url" pop t
    local opts
    for opts in "--keep -1" "--keep 1x" "--keep=" "" "--keep 1 --expect-generation -1" \
        "--keep 1 --expect-length -2" "--keep 1 --keep 1"; do
        # shellcheck disable=SC2086
        got=0; convo --url "$url" replace-tail r $opts "$U" >"$T/out" 2>"$T/err" || got=$?
        if [ "$got" = 2 ] && grep -q '^usage: convo' "$T/err"; then ok; else
            bad "$name: replace-tail $opts: exit $got, want 2 and the usage: [$(head -c 200 "$T/err")]"
        fi
    done
    for opts in "--count 0" "--count -1" "--expect-length x"; do
        # shellcheck disable=SC2086
        got=0; convo --url "$url" pop r $opts >"$T/out" 2>"$T/err" || got=$?
        if [ "$got" = 2 ] && grep -q '^usage: convo' "$T/err"; then ok; else
            bad "$name: pop $opts: exit $got, want 2: [$(head -c 200 "$T/err")]"
        fi
    done
    convo --url "$url" load r --with-meta >"$T/out" 2>"$T/err"
    if [ "$(grep -c '"generation":0,' "$T/out")" = 2 ] &&
        grep -q '"message":{"role":"tool","content":"x"}}$' "$T/out"; then ok; else
        bad "$name: a refused rewrite changed the thread: [$(head -c 300 "$T/out")]"
    fi
    accepted "$name: delete r" --url "$url" delete r
    nothing_written "$url" "$name: after the rewrite checks"
}

# url_refused DESC URL: a URL the store refuses: exit 1, one line, nothing created.
url_refused() {
    refused "$1: threads" 1 --url "$2" threads
    refused "$1: append" 1 --url "$2" append t "$U"
}

have_driver() { "$CONVO_BIN" --version 2>/dev/null | grep -qw "$1"; }

# server DRIVER VARIABLE: the driver is built and $VARIABLE set, else skip
# (a failure under CONVO_REQUIRE_ALL=1 when only the URL is missing).
server() {
    eval "value=\${$2:-}"
    if ! have_driver "$1"; then
        echo "---- bad-input: $1: skipped: this build has no $1 driver"
        skipped=$((skipped + 1))
        return 1
    fi
    [ -n "$value" ] && return 0
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        bad "$1: $2 is not set, but CONVO_REQUIRE_ALL=1"
    else
        echo "---- bad-input: $1: skipped: set $2 to a $1 test server's URL"
        skipped=$((skipped + 1))
    fi
    return 1
}

url_refused "memory: bogus parameter" "memory:?bogus=1"
url_refused "unknown scheme" "nosuch:x"
if have_driver sqlite; then
    suite sqlite "sqlite:$T/bad.db"
    url_refused "sqlite: bogus parameter" "sqlite:$T/param.db?bogus=1"
    if [ ! -e "$T/param.db" ]; then ok; else bad "sqlite: a refused URL created the file"; fi
    # a path SQLite cannot open: the error names it
    mkdir "$T/dir.db"
    printf 'not a database, but long enough to be read as one: %0200d\n' 0 >"$T/text.db"
    for f in dir.db text.db; do
        refused "sqlite: open $f" 1 --url "sqlite:$T/$f" threads
        if grep -qF "$T/$f" "$T/err"; then ok; else bad "sqlite: open $f: the path is not named: [$(cat "$T/err")]"; fi
    done
else
    echo "---- bad-input: sqlite: skipped: this build has no sqlite driver"
    skipped=$((skipped + 1))
fi
token=$(convo_random)
if server redis CONVO_TEST_REDIS_URL; then
    suite redis "$(convo_url_add "$CONVO_TEST_REDIS_URL" "prefix=b$token")"
    url_refused "redis: bogus parameter" "$(convo_url_add "$CONVO_TEST_REDIS_URL" bogus=1)"
    url_refused "redis: prefix=a{b}" "$(convo_url_add "$CONVO_TEST_REDIS_URL" 'prefix=a%7Bb%7D')"
    url_refused "redis: prefix=a{b" "$(convo_url_add "$CONVO_TEST_REDIS_URL" 'prefix=a{b')"
    url_refused "redis: prefix with a newline" "$(convo_url_add "$CONVO_TEST_REDIS_URL" 'prefix=a%0Ab')"
    url_refused "redis: empty prefix" "$(convo_url_add "$CONVO_TEST_REDIS_URL" 'prefix=')"
    if command -v redis-cli >/dev/null 2>&1; then
        # b<token>:store is the store's own hash (layout version, put order:
        # docs/redis.md); nothing of any thread may stay
        left=$(redis-cli -u "$CONVO_TEST_REDIS_URL" --scan --pattern "*b$token*" |
            grep -vx "b$token:store" | head -1)
        if [ -z "$left" ]; then
            ok
        else
            bad "redis: key $left left under prefix b$token after every thread was deleted or refused"
        fi
        redis-cli -u "$CONVO_TEST_REDIS_URL" --scan --pattern "*b$token*" 2>/dev/null |
            xargs -r -n 100 redis-cli -u "$CONVO_TEST_REDIS_URL" DEL >/dev/null 2>&1 || true
    fi
fi
if server postgres CONVO_TEST_POSTGRES_URL; then
    suite postgres "$(convo_url_add "$CONVO_TEST_POSTGRES_URL" "schema=b_$token")"
    url_refused "postgres: bogus parameter" "$(convo_url_add "$CONVO_TEST_POSTGRES_URL" bogus=1)"
    for s in 'x;drop' 'x%3Bdrop' 'x%22;drop' 'X' 'pg_catalog' 'a-b' ''; do
        url_refused "postgres: schema=$s" "$(convo_url_add "$CONVO_TEST_POSTGRES_URL" "schema=$s")"
    done
    url_refused "postgres: pool=0" "$(convo_url_add "$CONVO_TEST_POSTGRES_URL" pool=0)"
    if command -v psql >/dev/null 2>&1; then
        n=$(psql -X -At "$CONVO_TEST_POSTGRES_URL" -c \
            "select count(*) from pg_namespace where nspname in ('x', 'x;drop', 'x\"', 'X', 'a-b')" 2>&1)
        if [ "$n" = 0 ]; then ok; else bad "postgres: a refused schema name was created ($n)"; fi
        psql -q -X "$CONVO_TEST_POSTGRES_URL" -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS \"b_$token\" CASCADE" \
            >/dev/null 2>&1 || true
    fi
fi
if server mongo CONVO_TEST_MONGO_URL; then
    suite mongo "$(convo_url_add "$CONVO_TEST_MONGO_URL" "database=b$token")"
    url_refused "mongo: bogus parameter" "$(convo_url_add "$CONVO_TEST_MONGO_URL" bogus=1)"
    for d in 'a/b' 'a.b' 'a$b' 'a%00b' 'a%20b'; do
        url_refused "mongo: database=$d" "$(convo_url_add "$CONVO_TEST_MONGO_URL" "database=$d")"
    done
    # an unknown read concern level: mongod refuses it (9 FailedToParse)
    url_refused "mongo: readConcernLevel=bogus" "$(convo_url_add "$CONVO_TEST_MONGO_URL" "database=b$token&readConcernLevel=bogus")"
    # a write concern only a replica set can give: a standalone mongod (as the
    # stand-in is) refuses it when the store opens (its createIndexes)
    if [ "${CONVO_TEST_MONGO_KIND:-}" = standin ]; then
        for w in 2 abc; do
            url_refused "mongo: w=$w on a standalone" "$(convo_url_add "$CONVO_TEST_MONGO_URL" "database=b$token&w=$w")"
        done
    fi
fi

echo "$passed passed, $failed failed ($skipped skipped)"
[ "$failed" = 0 ]
