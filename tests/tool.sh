#!/bin/bash
# tool.sh — end-to-end tests of the convo command-line tool (every command,
# every exit status, byte-for-byte round trips between processes) and of the
# examples chat and agent. Run by `make check`; by hand: top_builddir=BUILD tests/tool.sh
set -eu

top_builddir=$(cd "${top_builddir:-.}" && pwd)
CONVO=$top_builddir/tools/convo
CHAT=$top_builddir/examples/chat
AGENT=$top_builddir/examples/agent
# under CONVO_TEST_WRAPPER (valgrind) the programs run wrapped; otherwise unchanged
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/tests/tool-path.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CONVO=$(convo_wrapped "$CONVO" "$T")
CHAT=$(convo_wrapped "$CHAT" "$T")
AGENT=$(convo_wrapped "$AGENT" "$T")
unset CONVO_URL
passed=0 failed=0 skipped=0

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

# check DESC STATUS CMD ...: runs CMD (stdin as given by the caller), keeps its
# stdout in $T/out and stderr in $T/err, and wants exit status STATUS.
check() {
    local desc=$1 want=$2 got=0
    shift 2
    "$@" >"$T/out" 2>"$T/err" || got=$?
    if [ "$got" = "$want" ]; then ok; else bad "$desc: exit $got, want $want: $(head -c 300 "$T/err")"; fi
}

# out_is DESC TEXT: the last stdout is TEXT plus a newline, byte for byte.
out_is() {
    if printf '%s\n' "$2" | cmp -s - "$T/out"; then ok; else
        bad "$1: stdout was [$(head -c 400 "$T/out")], want [$2]"
    fi
}

out_empty() {
    if [ ! -s "$T/out" ]; then ok; else bad "$1: stdout not empty: $(head -c 200 "$T/out")"; fi
}

# one_error DESC: the last stderr is exactly one line "convo: ..."
one_error() {
    if [ "$(wc -l <"$T/err")" = 1 ] && grep -q '^convo: ' "$T/err"; then ok; else
        bad "$1: stderr is not one 'convo: ' line: [$(head -c 400 "$T/err")]"
    fi
}

err_has() {
    if grep -qF -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2': [$(head -c 300 "$T/err")]"; fi
}

usage_shown() {
    if grep -q '^usage: convo' "$T/err"; then ok; else bad "$1: no usage line on stderr"; fi
}

# python3 with the binding on the libconvo just built; in a --enable-sanitizers build
# with the ASan runtime loaded first (python3 is not instrumented: without it the
# library fails to load) and no leak report for Python's own allocations.
convo_python() {
    local asan
    asan=$(ldd "$top_builddir/.libs/libconvo.so" 2>/dev/null | awk '/libasan/ { print $3; exit }')
    CONVO_LIBRARY="$top_builddir/.libs/libconvo.so" PYTHONPATH="$top_srcdir/bindings/python" \
        PYTHONDONTWRITEBYTECODE=1 LD_PRELOAD="${asan}${asan:+${LD_PRELOAD:+ }}${LD_PRELOAD:-}" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" python3 "$@"
}

# bench_fields DESC FIELD...: the last stdout is one JSON object with these fields, none negative
bench_fields() { # DESC FIELD...
    if python3 - "$T/out" "${@:2}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
missing = [f for f in sys.argv[2:] if f not in d]
bad = [f for f in sys.argv[2:] if f in d and isinstance(d[f], (int, float)) and d[f] < 0]
sys.exit(1 if missing or bad else 0)
PY
    then ok; else bad "$1: fields missing or negative in $(head -c 400 "$T/out")"; fi
}
M='memory:'
U='{"role":"user","content":"hi"}'
ODD='{"role" : "user",  "content":"h\u00e9"}'
UTF='{"role":"assistant","content":"héllo ✓ 😀"}'

python3 -c 'print("{\"role\":\"user\",\"content\":\"" + "a" * (2 << 20) + "\"}")' >"$T/big.jsonl"
python3 -c 'print("{\"role\":\"user\",\"content\":\"" + "b" * 1000000 + "\"}")' >"$T/near.jsonl"

# ---- usage: exit 2 with a usage line, before any store is opened ----
check "no command" 2 "$CONVO"
usage_shown "no command"
check "unknown command" 2 "$CONVO" --url "$M" frobnicate
usage_shown "unknown command"
check "unknown global option" 2 "$CONVO" --bogus load t
check "--url without value" 2 "$CONVO" --url
check "load without thread" 2 "$CONVO" --url "$M" load
usage_shown "load without thread"
check "load with two threads" 2 "$CONVO" --url "$M" load a b
check "unknown load option" 2 "$CONVO" --url "$M" load t --frobnicate
check "negative limit" 2 "$CONVO" --url "$M" load t --limit -1
check "limit with junk" 2 "$CONVO" --url "$M" load t --limit 5x
check "limit empty" 2 "$CONVO" --url "$M" load t --limit=
check "limit overflow" 2 "$CONVO" --url "$M" load t --limit 99999999999999999999
check "from with space" 2 "$CONVO" --url "$M" load t --from ' 1'
check "option without value" 2 "$CONVO" --url "$M" load t --tail
check "flag with value" 2 "$CONVO" --url "$M" load t --with-meta=1
check "option twice" 2 "$CONVO" --url "$M" load t --limit 1 --limit 2
check "--url after the command without value" 2 "$CONVO" load t --url
err_has "--url after the command without value" "needs a value"
check "--url before and after the command" 2 "$CONVO" --url "$M" load t --url "$M"
err_has "--url before and after the command" "given twice"
check "--url after the command twice" 2 "$CONVO" load t --url="$M" --url "$M"
check "--url twice before the command" 2 "$CONVO" --url "$M" --url="$M" load t
err_has "--url twice before the command" "given twice"
err_has "--url after the command twice" "given twice"
# an empty --url (an unset variable: --url "$URL") is refused, not the default sqlite:convo.db
here=$PWD
cd "$T"
check "--url ''" 2 "$CONVO" --url '' threads
err_has "--url ''" "option --url needs a value"
check "--url=" 2 "$CONVO" threads --url=
cd "$here"
if [ ! -e "$T/convo.db" ]; then ok; else bad "an empty --url created convo.db"; rm -f "$T/convo.db"; fi
check "bad expect-length" 2 "$CONVO" --url "$M" append t "$U" --expect-length -3
check "bad upto" 2 "$CONVO" --url "$M" fork a b --upto x
check "save-extra with two JSON" 2 "$CONVO" --url "$M" save-extra t "{}" "{}"
check "save-extra of an empty stdin" 1 "$CONVO" --url "$M" save-extra t </dev/null
check "threads with argument" 2 "$CONVO" --url "$M" threads x
check "threads --order unknown" 2 "$CONVO" --url "$M" threads --order newest
usage_shown "threads --order unknown"
check "threads --extra without --with-meta" 2 "$CONVO" --url "$M" threads --extra
usage_shown "threads --extra without --with-meta"
check "threads --last-message without --with-meta" 2 "$CONVO" --url "$M" threads --last-message
check "--index-key without a value" 2 "$CONVO" --url "$M" threads --index-key
check "--index-key empty" 2 "$CONVO" --url "$M" --index-key= threads
check "--index-key for bench" 2 "$CONVO" --url "$M" --index-key k bench --scenario append
check "help of unknown command" 2 "$CONVO" help frobnicate
check "usage error opens no store" 2 env -C "$T" "$CONVO" load
if [ ! -e "$T/convo.db" ]; then ok; else bad "a usage error created convo.db"; fi

# ---- help and version: exit 0 on stdout ----
check "--help" 0 "$CONVO" --help
if grep -q '^  append THREAD' "$T/out" && grep -q 'exit status' "$T/out"; then ok; else bad "--help text"; fi
if grep -q '6 stored but the output could not be written' "$T/out"; then ok; else bad "--help: exit status 6 missing"; fi
check "help" 0 "$CONVO" help
check "help load" 0 "$CONVO" help load
if grep -q '^usage: convo \[--url URL\] load THREAD' "$T/out"; then ok; else bad "help load text"; fi
check "load --help" 0 "$CONVO" load --help
check "bench --help" 0 "$CONVO" bench --help
if grep -q '^usage: convo bench --scenario' "$T/out"; then ok; else bad "bench --help text"; fi
# copy parses its arguments as every command does: --help, a problem line, --
check "copy --help" 0 "$CONVO" copy --help
if grep -q '^usage: convo copy SRC_URL DST_URL' "$T/out"; then ok; else bad "copy --help text"; fi
check "copy with one URL" 2 "$CONVO" copy "$M"
err_has "copy with one URL" "convo: copy: missing arguments"
usage_shown "copy with one URL"
check "copy with an unknown option" 2 "$CONVO" copy "$M" "$M" --frobnicate
err_has "copy with an unknown option" "unknown option '--frobnicate' for copy"
check "copy of thread -x after --" 3 "$CONVO" copy "$M" "$M" -- -x
one_error "copy of thread -x after --"
check "--version" 0 "$CONVO" --version
if head -1 "$T/out" | grep -q '^convo [0-9]'; then ok; else bad "--version text"; fi
if grep -q '^drivers:.* sqlite' "$T/out"; then have_sqlite=1; else have_sqlite=0; fi

# ---- one process, memory: store (every invocation starts empty) ----
check "append one" 0 "$CONVO" --url "$M" append t "$U"
out_is "append one" "0 1"
check "append args" 0 "$CONVO" --url "$M" append t "$U" "$ODD" "$UTF"
out_is "append args" "0 3"
check "append --opt=value" 0 "$CONVO" --url "$M" append t "$U" --expect-length=0 --idempotency-key=k
out_is "append --opt=value" "0 1"
check "options before arguments" 0 "$CONVO" --url "$M" append --expect-length 0 t "$U"
out_is "options before arguments" "0 1"
printf '%s\n\n%s\r\n   \n%s' "$U" "$ODD" "$UTF" >"$T/three.jsonl"
check "stdin JSON Lines" 0 "$CONVO" --url "$M" append t <"$T/three.jsonl"
out_is "stdin JSON Lines" "0 3"
check "empty stdin" 1 "$CONVO" --url "$M" append t </dev/null
one_error "empty stdin"

# errors that write nothing: one line, exit 1
check "no role" 1 "$CONVO" --url "$M" append t '{"content":"x"}'
one_error "no role"
check "role not a string" 1 "$CONVO" --url "$M" append t '{"role":5}'
one_error "role not a string"
check "invalid JSON" 1 "$CONVO" --url "$M" append t '{"role":"user"'
one_error "invalid JSON"
check "not an object" 1 "$CONVO" --url "$M" append t '["role"]'
one_error "not an object"
check "empty thread id" 1 "$CONVO" --url "$M" append '' "$U"
one_error "empty thread id"
check "control char in thread id" 1 "$CONVO" --url "$M" append "$(printf 'a\tb')" "$U"
one_error "control char in thread id"
check "second argument bad" 1 "$CONVO" --url "$M" append t "$U" '{"x":1}'
one_error "second argument bad"
err_has "second argument bad" "JSON argument 2:"
printf '%s\n\n%s\n%s\n' "$U" "$U" '{"role":"user",' >"$T/badline.jsonl"
check "stdin invalid line" 1 "$CONVO" --url "$M" append t <"$T/badline.jsonl"
one_error "stdin invalid line"
err_has "stdin invalid line" "line 4:"
printf '\n%s\n' '{"content":"no role"}' >"$T/norole.jsonl"
check "stdin single line without role" 1 "$CONVO" --url "$M" append t <"$T/norole.jsonl"
err_has "stdin single line without role" "line 2:"
check "empty idempotency key" 1 "$CONVO" --url "$M" append t "$U" --idempotency-key ''
one_error "empty idempotency key"
check "bad extra JSON" 1 "$CONVO" --url "$M" save-extra t '{"a":'
one_error "bad extra JSON"
check "extra not an object" 1 "$CONVO" --url "$M" save-extra t '[1]'
one_error "extra not an object"
check "unknown URL scheme" 1 "$CONVO" --url 'nosuch://x' threads
one_error "unknown URL scheme"
for url in 'postgres://alice:s3cr3tpw@127.0.0.1:1/db' 'redis://:s3cr3tpw@127.0.0.1:1/0'; do
    check "unreachable $url" 1 "$CONVO" --url "$url" threads
    one_error "unreachable $url"
    if ! grep -q s3cr3tpw "$T/err"; then ok; else bad "password printed: $(cat "$T/err")"; fi
done

# not found: 3
check "load unknown" 3 "$CONVO" --url "$M" load nope
one_error "load unknown"
check "extra unknown" 3 "$CONVO" --url "$M" extra nope
check "delete unknown" 3 "$CONVO" --url "$M" delete nope
check "fork unknown" 3 "$CONVO" --url "$M" fork nope other
check "threads of an empty store" 0 "$CONVO" --url "$M" threads
out_empty "threads of an empty store"

# conflict: 4
check "expect-length mismatch" 4 "$CONVO" --url "$M" append t "$U" --expect-length 2
one_error "expect-length mismatch"

# too large: 5 (a 2 MiB message cannot be an argument: Linux caps one at 128 KiB)
check "2 MiB message" 5 "$CONVO" --url "$M" append t <"$T/big.jsonl"
one_error "2 MiB message"
python3 -c 'print("\n".join(["{\"role\":\"user\"}"] * 10001))' >"$T/many.jsonl"
check "10001 messages" 5 "$CONVO" --url "$M" append t <"$T/many.jsonl"
one_error "10001 messages"

# ---- across processes: a SQLite file ----
if [ "$have_sqlite" = 0 ]; then
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then bad "the sqlite driver is not built"; fi
    echo "SKIP: sqlite driver not built; cross-process tool tests and examples skipped"
    skipped=1
else
    S="sqlite:$T/x.db"
    check "append in one process" 0 "$CONVO" --url "$S" append t "$U"
    out_is "append in one process" "0 1"
    check "load in another" 0 "$CONVO" --url "$S" load t
    out_is "load in another" "$U"
    check "append odd spacing" 0 "$CONVO" --url "$S" append t "$ODD" "$UTF"
    out_is "append odd spacing" "1 2"
    check "load byte for byte" 0 "$CONVO" --url "$S" load t
    out_is "load byte for byte" "$U
$ODD
$UTF"

    # checkpoints: a thread without any lists nothing; an unknown thread is 3, as for load
    check "checkpoints of a thread without any" 0 "$CONVO" --url "$S" checkpoints t
    out_empty "checkpoints of a thread without any"
    check "checkpoints --ns of a thread without any" 0 "$CONVO" --url "$S" checkpoints t --ns sub
    check "checkpoints of an unknown thread" 3 "$CONVO" --url "$S" checkpoints nope
    one_error "checkpoints of an unknown thread"
    err_has "checkpoints of an unknown thread" "thread not found"

    # rejected appends wrote nothing
    "$CONVO" --url "$S" append t '{"content":"x"}' 2>/dev/null || true
    "$CONVO" --url "$S" append t "$U" '{"role":"user"' 2>/dev/null || true
    "$CONVO" --url "$S" append '' "$U" 2>/dev/null || true
    "$CONVO" --url "$S" append t <"$T/badline.jsonl" 2>/dev/null || true
    "$CONVO" --url "$S" append t <"$T/big.jsonl" 2>/dev/null || true
    "$CONVO" --url "$S" append t "$U" --expect-length 1 2>/dev/null || true
    check "after rejected appends" 0 "$CONVO" --url "$S" load t
    out_is "after rejected appends" "$U
$ODD
$UTF"
    check "threads after rejected appends" 0 "$CONVO" --url "$S" threads
    out_is "threads after rejected appends" "t"

    # load options
    check "load --from" 0 "$CONVO" --url "$S" load t --from 1
    out_is "load --from" "$ODD
$UTF"
    check "load --limit" 0 "$CONVO" --url "$S" load t --limit 1
    out_is "load --limit" "$U"
    check "load --tail" 0 "$CONVO" --url "$S" load t --tail 2
    out_is "load --tail" "$ODD
$UTF"
    check "load --from past the end" 0 "$CONVO" --url "$S" load t --from 10
    out_empty "load --from past the end"

    # --with-meta: parse every line, check fields, time format and verbatim bytes
    check "load --with-meta" 0 "$CONVO" --url "$S" load t --with-meta
    if python3 - "$T/out" "$U" "$ODD" "$UTF" <<'EOF'; then ok; else bad "--with-meta output"; fi
import json, re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "no final newline"
lines = lines[:-1]
sent = sys.argv[2:]
assert len(lines) == len(sent), lines
for i, (line, msg) in enumerate(zip(lines, sent)):
    obj = json.loads(line)
    assert list(obj) == ["seq", "generation", "created_at", "role", "message"], obj
    assert obj["seq"] == i, obj
    assert obj["generation"] == 0, obj
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", obj["created_at"]), obj
    assert obj["role"] == json.loads(msg)["role"], obj
    assert obj["message"] == json.loads(msg), obj
    assert line.endswith('"message":' + msg + "}"), "message bytes not verbatim: " + line
EOF

    # a pretty-printed message is stored and printed as is, over several lines
    PRETTY='{
  "role": "system",
  "content": "multi\nline"
}'
    check "append pretty" 0 "$CONVO" --url "$S" append p "$PRETTY"
    check "load pretty" 0 "$CONVO" --url "$S" load p
    out_is "load pretty" "$PRETTY"

    # expected length, idempotency key
    check "expect-length match" 0 "$CONVO" --url "$S" append t "$U" --expect-length 3
    out_is "expect-length match" "3 1"
    check "expect-length stale" 4 "$CONVO" --url "$S" append t "$U" --expect-length 3
    one_error "expect-length stale"
    check "idempotent first" 0 "$CONVO" --url "$S" append t "$U" "$U" --idempotency-key step-1
    out_is "idempotent first" "4 2"
    check "idempotent replay" 0 "$CONVO" --url "$S" append t "$U" "$U" --idempotency-key step-1
    out_is "idempotent replay" "4 2"
    check "replay beats expected length" 0 "$CONVO" --url "$S" append t "$U" "$U" \
        --idempotency-key step-1 --expect-length 0
    out_is "replay beats expected length" "4 2"
    check "length after replay" 0 "$CONVO" --url "$S" load t
    if [ "$(wc -l <"$T/out")" = 6 ]; then ok; else bad "replay duplicated messages"; fi

    # stdin: one atomic batch, large input
    check "stdin batch" 0 "$CONVO" --url "$S" append b <"$T/three.jsonl"
    out_is "stdin batch" "0 3"
    check "stdin batch load" 0 "$CONVO" --url "$S" load b
    out_is "stdin batch load" "$U
$ODD"$'\r'"
$UTF"
    check "stdin bad line writes nothing" 1 "$CONVO" --url "$S" append b <"$T/badline.jsonl"
    check "stdin bad line wrote nothing" 0 "$CONVO" --url "$S" load b
    if [ "$(wc -l <"$T/out")" = 3 ]; then ok; else bad "a rejected stdin batch wrote messages"; fi
    python3 -c '
import json
for i in range(5000):
    print(json.dumps({"role": "user", "i": i, "pad": "p" * 100}))' >"$T/large.jsonl"
    cat "$T/near.jsonl" >>"$T/large.jsonl"
    check "large stdin" 0 "$CONVO" --url "$S" append large <"$T/large.jsonl"
    out_is "large stdin" "0 5001"
    check "large stdin load" 0 "$CONVO" --url "$S" load large
    if cmp -s "$T/out" "$T/large.jsonl"; then ok; else bad "large stdin did not come back byte for byte"; fi
    check "10001 lines write nothing" 5 "$CONVO" --url "$S" append many <"$T/many.jsonl"
    check "10001 lines wrote nothing" 3 "$CONVO" --url "$S" load many

    # extra
    check "extra of a thread without one" 0 "$CONVO" --url "$S" extra t
    out_is "extra of a thread without one" "{}"
    check "save-extra" 0 "$CONVO" --url "$S" save-extra t '{"a":1,"b":{"x":1}}'
    out_empty "save-extra"
    check "save-extra merge" 0 "$CONVO" --url "$S" save-extra t '{"b":{"y":2},"c":null,"$d.e":"k"}'
    check "extra merged" 0 "$CONVO" --url "$S" extra t
    if python3 -c 'import json,sys; assert json.load(open(sys.argv[1])) == {"a":1,"b":{"y":2},"c":None,"$d.e":"k"}' "$T/out"; then ok; else
        bad "extra merged: $(cat "$T/out")"
    fi
    check "save-extra creates a thread" 0 "$CONVO" --url "$S" save-extra e '{}'
    check "load of an extra-only thread" 0 "$CONVO" --url "$S" load e
    out_empty "load of an extra-only thread"
    # an argument holds at most 128 KiB: grow the merged extra past 1 MiB key by key
    chunk=$(head -c 120000 /dev/zero | tr '\0' x)
    for k in 1 2 3 4 5 6 7 8; do "$CONVO" --url "$S" save-extra big "{\"k$k\":\"$chunk\"}"; done
    check "extra too large" 5 "$CONVO" --url "$S" save-extra big "{\"k9\":\"$chunk\"}"
    one_error "extra too large"
    check "extra too large wrote nothing" 0 "$CONVO" --url "$S" extra big
    if ! grep -q '"k9"' "$T/out"; then ok; else bad "an oversized extra merge was written"; fi
    "$CONVO" --url "$S" delete big

    # threads: order, paging, --after, --limit
    for id in c a d; do "$CONVO" --url "$S" append "th-$id" "$U" >/dev/null; done
    check "threads" 0 "$CONVO" --url "$S" threads
    out_is "threads" "b
e
large
p
t
th-a
th-c
th-d"
    check "threads --limit" 0 "$CONVO" --url "$S" threads --limit 2
    out_is "threads --limit" "b
e"
    check "threads --after" 0 "$CONVO" --url "$S" threads --after t --limit 2
    out_is "threads --after" "th-a
th-c"
    check "threads --after the last" 0 "$CONVO" --url "$S" threads --after th-d
    out_empty "threads --after the last"

    # the thread index: --where, --order, --reverse, --with-meta, cursors, --index-key
    I="sqlite:$T/index.db"
    check "index: declare the key" 0 "$CONVO" --url "$I" --index-key user_id save-extra ia '{"user_id":"u1","title":"A"}'
    "$CONVO" --url "$I" append ia "$U" >/dev/null
    "$CONVO" --url "$I" save-extra ib '{"user_id":"u2"}'
    "$CONVO" --url "$I" append ib "$U" >/dev/null
    "$CONVO" --url "$I" save-extra ic '{"user_id":"u1"}'
    "$CONVO" --url "$I" append ic "$U" >/dev/null
    "$CONVO" --url "$I" append ia '{"role":"assistant","content":"l\u00e4st"}' >/dev/null
    check "threads of an index store, byte order" 0 "$CONVO" --url "$I" threads
    out_is "threads of an index store, byte order" "ia
ib
ic"
    check "threads --where" 0 "$CONVO" --url "$I" threads --where '{"user_id":"u1"}'
    out_is "threads --where" "ia
ic"
    check "threads --order recent" 0 "$CONVO" --url "$I" threads --order recent
    out_is "threads --order recent" "ia
ic
ib"
    check "threads --reverse" 0 "$CONVO" --url "$I" threads --reverse
    out_is "threads --reverse" "ib
ic
ia"
    check "threads --order created" 0 "$CONVO" --url "$I" threads --order created
    out_is "threads --order created" "ic
ib
ia"
    check "threads --order created --reverse" 0 "$CONVO" --url "$I" threads --order created --reverse
    out_is "threads --order created --reverse" "ia
ib
ic"
    check "threads --order id --reverse" 0 "$CONVO" --url "$I" threads --order=id --reverse
    out_is "threads --order id --reverse" "ic
ib
ia"
    check "threads --where matching none" 0 "$CONVO" --url "$I" threads --where '{"user_id":"u9"}'
    out_empty "threads --where matching none"
    check "threads --with-meta" 0 "$CONVO" --url "$I" threads --with-meta --extra --last-message --where '{"user_id":"u1"}'
    if python3 - "$T/out" <<'EOF'; then ok; else bad "threads --with-meta output: [$(head -c 600 "$T/out")]"; fi
import json, re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "no final newline"
rows = [json.loads(l) for l in lines[:-1]]
assert [r["id"] for r in rows] == ["ia", "ic"], rows
for r in rows:
    assert list(r) == ["id", "created_at", "updated_at", "length", "extra", "last_message", "cursor"], r
    for k in ("created_at", "updated_at"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r[k]), r
    assert r["created_at"] < r["updated_at"], r
assert rows[0]["length"] == 2 and rows[1]["length"] == 1, rows
assert rows[0]["extra"] == {"user_id": "u1", "title": "A"}, rows
assert rows[1]["last_message"] == {"role": "user", "content": "hi"}, rows
# the last message's bytes as appended (the \u00e4 escape kept)
assert '"last_message":{"role":"assistant","content":"l\\u00e4st"},"cursor":' in lines[0], lines[0]
EOF
    check "threads --with-meta, no extras" 0 "$CONVO" --url "$I" threads --with-meta --limit 1
    if python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert list(r)==["id","created_at","updated_at","length","cursor"] and r["id"]=="ia", r' "$T/out"; then ok; else
        bad "threads --with-meta --limit 1: [$(head -c 300 "$T/out")]"
    fi
    # --after takes the cursor of a row: the listing goes on after it
    cursor=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cursor"])' "$T/out" 2>/dev/null) || cursor=none
    check "threads --after a cursor" 0 "$CONVO" --url "$I" threads --with-meta --after "$cursor"
    if [ "$(python3 -c 'import json,sys; print(" ".join(json.loads(l)["id"] for l in open(sys.argv[1])))' "$T/out")" = "ic ib" ]; then ok; else
        bad "threads --after a cursor: [$(head -c 300 "$T/out")]"
    fi
    check "threads --after a cursor, ids" 0 "$CONVO" --url "$I" threads --order recent --after "$cursor" --limit 1
    out_is "threads --after a cursor, ids" "ic"
    check "threads --after a cursor of another order" 1 "$CONVO" --url "$I" threads --order created --after "$cursor"
    one_error "threads --after a cursor of another order"
    err_has "threads --after a cursor of another order" "cursor"
    # the key is recorded in the store: an open naming another is refused, one naming none keeps it
    check "--index-key another key" 1 "$CONVO" --url "$I" --index-key tenant threads
    one_error "--index-key another key"
    out_empty "--index-key another key"
    check "--index-key the same key, after the command" 0 "$CONVO" --url "$I" threads --index-key=user_id --where '{"user_id":"u2"}'
    out_is "--index-key the same key, after the command" "ib"
    check "--index-key for copy" 2 "$CONVO" --index-key user_id copy "$I" memory:
    usage_shown "--index-key for copy"
    # more than a page (the tool reads 1,000 rows a page): every thread once, newest first
    if convo_python -c 'import convo, sys
with convo.Store(sys.argv[1]) as s:
    for i in range(1005):
        s.save_extra("many-%04d" % i, {"user_id": "u3"})' "$I"; then ok; else bad "index: seeding 1,005 threads"; fi
    check "threads --where over two pages" 0 "$CONVO" --url "$I" threads --where '{"user_id":"u3"}'
    if python3 -c 'import sys; ids = open(sys.argv[1]).read().split(); assert ids == ["many-%04d" % i for i in reversed(range(1005))], ids[:3]' "$T/out"; then ok; else
        bad "threads --where over two pages: $(wc -l <"$T/out") lines: $(head -c 100 "$T/out")"
    fi
    check "threads --where --limit 1003" 0 "$CONVO" --url "$I" threads --where '{"user_id":"u3"}' --order id --limit 1003
    if [ "$(wc -l <"$T/out")" = 1003 ] && [ "$(tail -n 1 "$T/out")" = many-1002 ]; then ok; else
        bad "threads --limit 1003: $(wc -l <"$T/out") lines, last $(tail -n 1 "$T/out")"
    fi

    # fork
    check "fork" 0 "$CONVO" --url "$S" fork t t2 --upto 2
    check "fork copied" 0 "$CONVO" --url "$S" load t2
    out_is "fork copied" "$U
$ODD"
    check "fork copied extra" 0 "$CONVO" --url "$S" extra t2
    if grep -q '"a":1' "$T/out"; then ok; else bad "fork did not copy extra"; fi
    check "fork all" 0 "$CONVO" --url "$S" fork t t3
    check "fork all copied" 0 "$CONVO" --url "$S" load t3
    if [ "$(wc -l <"$T/out")" = 6 ]; then ok; else bad "fork without --upto"; fi
    check "fork onto existing" 4 "$CONVO" --url "$S" fork t t2
    one_error "fork onto existing"
    check "fork upto past the end" 1 "$CONVO" --url "$S" fork t t4 --upto 99
    one_error "fork upto past the end"
    # --with-checkpoints: the checkpoints (put through the Python binding) come too
    if convo_python -c 'import convo, sys
with convo.Store(sys.argv[1]) as s:
    s.append("fc", [{"role": "user", "n": i} for i in range(2)])
    s.checkpoint_put("fc", "c1", log_length=1, metadata={"step": 1})
    s.checkpoint_put("fc", "c2", parent_id="c1", log_length=2, metadata={"step": 2})
    s.checkpoint_put_writes("fc", "c2", "task", [(0, "x", ("json", b"1"))])' "$S"; then
        check "fork --with-checkpoints" 0 "$CONVO" --url "$S" fork fc fc2 --with-checkpoints
        "$CONVO" --url "$S" checkpoints fc >"$T/src-cps"
        check "the copy's checkpoints" 0 "$CONVO" --url "$S" checkpoints fc2
        if [ "$(wc -l <"$T/out")" = 2 ] && grep -q '"c2"' "$T/out" &&
            [ "$(sed 's/"fc2"/"fc"/; s/"created_at":[^,}]*//' "$T/out")" = \
              "$(sed 's/"created_at":[^,}]*//' "$T/src-cps")" ]; then ok; else
            bad "fork --with-checkpoints: $(head -c 300 "$T/out") vs $(head -c 300 "$T/src-cps")"
        fi
        check "fork --with-checkpoints --upto 1" 0 "$CONVO" --url "$S" fork fc fc3 --with-checkpoints --upto 1
        check "only the checkpoint within 1 message" 0 "$CONVO" --url "$S" checkpoints fc3
        if [ "$(wc -l <"$T/out")" = 1 ] && grep -q '"c1"' "$T/out"; then ok; else
            bad "fork --with-checkpoints --upto 1: $(head -c 300 "$T/out")"
        fi
        check "fork without the flag" 0 "$CONVO" --url "$S" fork fc fc4
        check "no checkpoints without the flag" 0 "$CONVO" --url "$S" checkpoints fc4
        out_empty "no checkpoints without the flag"
        check "fork --with-checkpoints onto existing" 4 "$CONVO" --url "$S" fork fc fc2 --with-checkpoints
        one_error "fork --with-checkpoints onto existing"
        check "fork --with-checkpoints unknown" 3 "$CONVO" --url "$S" fork nope fc5 --with-checkpoints
        check "nothing created" 3 "$CONVO" --url "$S" load fc5
        for t in fc fc2 fc3 fc4; do "$CONVO" --url "$S" delete $t; done
    else
        bad "could not put a checkpoint through the Python binding"
    fi

    # delete
    check "delete" 0 "$CONVO" --url "$S" delete t2
    out_empty "delete"
    check "deleted" 3 "$CONVO" --url "$S" load t2
    check "delete again" 3 "$CONVO" --url "$S" delete t2

    # ---- pop and replace-tail: the tail rewrite, across processes ----
    R1='{"role":"user","content":"r1"}'
    R2='{"role":"assistant","content":"r2"}'
    R3='{"role":"user","content":"r3"}'
    "$CONVO" --url "$S" append r "$R1" "$R2" "$R3" >/dev/null
    check "pop" 0 "$CONVO" --url "$S" pop r
    out_is "pop prints the removed message" "$R3"
    check "load after pop" 0 "$CONVO" --url "$S" load r
    out_is "load after pop" "$R1
$R2"
    check "generation after pop" 0 "$CONVO" --url "$S" load r --tail 1 --with-meta
    if grep -q '^{"seq":1,"generation":1,' "$T/out"; then ok; else bad "generation after pop: $(cat "$T/out")"; fi
    check "pop --expect-length stale" 4 "$CONVO" --url "$S" pop r --expect-length 3
    one_error "pop --expect-length stale"
    out_empty "pop --expect-length stale"
    check "pop --count --expect-length" 0 "$CONVO" --url "$S" pop r --count 2 --expect-length 2
    out_is "pop --count prints in seq order" "$R1
$R2"
    check "pop of an empty thread" 0 "$CONVO" --url "$S" pop r
    out_empty "pop of an empty thread"
    check "an empty pop writes nothing" 0 "$CONVO" --url "$S" replace-tail r --keep 0 "$R1" "$R2"
    out_is "an empty pop writes nothing (generation 3 after 2 pops)" "0 2 3"
    check "pop --count past the length" 0 "$CONVO" --url "$S" pop r --count 5
    out_is "pop --count past the length pops them all" "$R1
$R2"
    check "pop unknown thread" 3 "$CONVO" --url "$S" pop nope
    one_error "pop unknown thread"
    check "pop --count 0" 2 "$CONVO" --url "$S" pop r --count 0
    usage_shown "pop --count 0"
    # replace-tail: keep N, new messages from arguments or stdin; FIRST_SEQ COUNT GENERATION
    "$CONVO" --url "$S" append r "$R1" "$R2" "$R3" >/dev/null
    check "replace-tail" 0 "$CONVO" --url "$S" replace-tail r --keep 2 "$U" "$ODD"
    out_is "replace-tail" "2 2 5"
    check "replace-tail stored" 0 "$CONVO" --url "$S" load r
    out_is "replace-tail stored" "$R1
$R2
$U
$ODD"
    check "replace-tail --expect-length" 0 "$CONVO" --url "$S" replace-tail r --keep 3 "$R3" --expect-length 4
    out_is "replace-tail --expect-length" "3 1 6"
    check "replace-tail --expect-length stale" 4 "$CONVO" --url "$S" replace-tail r --keep 3 "$R3" --expect-length 5
    one_error "replace-tail --expect-length stale"
    check "replace-tail --expect-generation stale" 4 "$CONVO" --url "$S" replace-tail r --keep 3 "$R3" --expect-generation 5
    check "replace-tail --expect-generation" 0 "$CONVO" --url "$S" replace-tail r --keep 3 "$UTF" --expect-generation 6
    out_is "replace-tail --expect-generation" "3 1 7"
    check "stale conditions wrote nothing" 0 "$CONVO" --url "$S" load r --from 3
    out_is "stale conditions wrote nothing" "$UTF"
    check "replace-tail --idempotency-key" 0 "$CONVO" --url "$S" replace-tail r --keep 1 "$R3" --idempotency-key edit-1
    out_is "replace-tail --idempotency-key" "1 1 8"
    check "replace-tail replay" 0 "$CONVO" --url "$S" replace-tail r --keep 1 "$R3" --idempotency-key edit-1
    out_is "replace-tail replay answers as the first call" "1 1 8"
    check "replace-tail replay applied once" 0 "$CONVO" --url "$S" load r
    out_is "replace-tail replay applied once" "$R1
$R3"
    check "replace-tail key reused for another call" 4 "$CONVO" --url "$S" replace-tail r --keep 0 "$R3" --idempotency-key edit-1
    one_error "replace-tail key reused for another call"
    printf '%s\n\n%s\n' "$R2" "$R3" >"$T/tail.jsonl"
    check "replace-tail from stdin" 0 "$CONVO" --url "$S" replace-tail r --keep 1 <"$T/tail.jsonl"
    out_is "replace-tail from stdin" "1 2 9"
    check "replace-tail from stdin stored" 0 "$CONVO" --url "$S" load r
    out_is "replace-tail from stdin stored" "$R1
$R2
$R3"
    check "replace-tail with empty stdin truncates" 0 "$CONVO" --url "$S" replace-tail r --keep 1 </dev/null
    out_is "replace-tail with empty stdin truncates" "1 0 10"
    check "replace-tail unknown thread" 3 "$CONVO" --url "$S" replace-tail nope --keep 0 "$U"
    # append on a generation
    check "append --expect-generation stale" 4 "$CONVO" --url "$S" append r "$R2" --expect-generation 9
    one_error "append --expect-generation stale"
    check "append --expect-generation" 0 "$CONVO" --url "$S" append r "$R2" --expect-generation 10 --expect-length 1
    out_is "append --expect-generation" "1 1"
    # pop and replace-tail whose output cannot be written: done, and said so (exit 6)
    got=0
    "$CONVO" --url "$S" pop r >/dev/full 2>"$T/err" || got=$?
    if [ "$got" = 6 ] && grep -q '1 messages were removed (from seq 1)' "$T/err"; then ok; else
        bad "pop >/dev/full: exit $got: $(head -c 300 "$T/err")"
    fi
    got=0
    "$CONVO" --url "$S" replace-tail r --keep 1 "$R2" >/dev/full 2>"$T/err" || got=$?
    if [ "$got" = 6 ] && grep -q 'the tail is rewritten (first seq 1, 1 messages, generation 12)' "$T/err"; then ok; else
        bad "replace-tail >/dev/full: exit $got: $(head -c 300 "$T/err")"
    fi
    # a checkpoint in the way (put through the Python binding on the same file): pop
    # reports it at once, naming it, rather than retrying as after a race
    if convo_python -c 'import convo, sys
with convo.Store(sys.argv[1]) as s:
    s.append("cp", [{"role": "user", "n": i} for i in range(3)])
    s.checkpoint_put("cp", "cp-1", log_length=3)' "$S"; then
        check "pop with a checkpoint in the way" 4 "$CONVO" --url "$S" pop cp
        one_error "pop with a checkpoint in the way"
        err_has "pop with a checkpoint in the way" "cp-1"
        out_empty "pop with a checkpoint in the way"
        check "pop --drop-checkpoints" 0 "$CONVO" --url "$S" pop cp --drop-checkpoints
        out_is "pop --drop-checkpoints" '{"role":"user","n":2}'
        check "the checkpoint went with it" 0 "$CONVO" --url "$S" checkpoints cp
        out_empty "the checkpoint went with it"
        "$CONVO" --url "$S" delete cp
    else
        bad "could not put a checkpoint through the Python binding"
    fi

    # the generation travels with export/import and fork; an import into a thread
    # rewritten since is a conflict, not a mix of two tails
    "$CONVO" --url "$S" append g "$R1" "$R2" >/dev/null
    "$CONVO" --url "$S" pop g >/dev/null
    check "export a rewritten thread" 0 "$CONVO" --url "$S" export g
    cp "$T/out" "$T/g.dump"
    check "import a rewritten thread" 0 "$CONVO" --url "sqlite:$T/g2.db" import <"$T/g.dump"
    check "imported generation" 0 "$CONVO" --url "sqlite:$T/g2.db" load g --with-meta
    if grep -q '^{"seq":0,"generation":1,' "$T/out" && [ "$(wc -l <"$T/out")" = 1 ]; then ok; else
        bad "imported generation: $(head -c 300 "$T/out")"
    fi
    check "import again changes nothing" 0 "$CONVO" --url "sqlite:$T/g2.db" import <"$T/g.dump"
    check "rewrite the imported thread" 0 "$CONVO" --url "sqlite:$T/g2.db" replace-tail g --keep 0 "$R3"
    check "import into a thread rewritten since" 4 "$CONVO" --url "sqlite:$T/g2.db" import <"$T/g.dump"
    err_has "import into a thread rewritten since" "generation"
    check "the rewritten thread is left as it was" 0 "$CONVO" --url "sqlite:$T/g2.db" load g
    out_is "the rewritten thread is left as it was" "$R3"
    check "fork --expect-generation stale" 4 "$CONVO" --url "$S" fork g g-fork --expect-generation 0
    one_error "fork --expect-generation stale"
    check "a stale fork created nothing" 3 "$CONVO" --url "$S" load g-fork
    check "fork keeps the generation" 0 "$CONVO" --url "$S" fork g g-fork --expect-generation 1
    check "forked generation" 0 "$CONVO" --url "$S" load g-fork --with-meta
    if grep -q '^{"seq":0,"generation":1,' "$T/out"; then ok; else bad "forked generation: $(head -c 300 "$T/out")"; fi
    "$CONVO" --url "$S" delete g
    "$CONVO" --url "$S" delete g-fork

    # four processes popping one thread at once: each message is popped exactly
    # once (a pop that loses the race reads the tail again), none is lost
    "$CONVO" --url "$S" delete r
    python3 -c 'import json; [print(json.dumps({"role": "user", "n": i})) for i in range(40)]' >"$T/forty.jsonl"
    "$CONVO" --url "$S" append r <"$T/forty.jsonl" >/dev/null
    for p in 1 2 3 4; do
        (for _ in $(seq 10); do "$CONVO" --url "$S" pop r || echo "pop failed: $?"; done >"$T/pop.$p" 2>&1) &
    done
    wait
    if sort "$T"/pop.[1-4] | cmp -s - <(sort "$T/forty.jsonl"); then ok; else
        bad "concurrent pops: not each message once: $(sort "$T"/pop.[1-4] | uniq -c | sort -rn | head -3)"
    fi
    check "concurrent pops emptied the thread" 0 "$CONVO" --url "$S" load r
    out_empty "concurrent pops emptied the thread"
    "$CONVO" --url "$S" delete r

    # URL from $CONVO_URL, else sqlite:convo.db in the current directory
    check "CONVO_URL" 0 env CONVO_URL="$S" "$CONVO" load t --limit 1
    out_is "CONVO_URL" "$U"
    mkdir "$T/cwd"
    check "default URL" 0 env -C "$T/cwd" "$CONVO" append d "$U"
    if [ -f "$T/cwd/convo.db" ]; then ok; else bad "default URL did not create convo.db"; fi
    check "--url beats CONVO_URL" 3 env CONVO_URL="$S" "$CONVO" --url "sqlite:$T/cwd/convo.db" load t

    # ---- examples/chat: restored after a restart ----
    C="sqlite:$T/chat.db"
    printf 'hello\nsecond line\n' >"$T/chat1"
    printf 'third\n' >"$T/chat2"
    check "chat first run" 0 "$CHAT" "$C" conv <"$T/chat1"
    out_is "chat first run" "restored 0 messages
assistant: You said: hello
assistant: You said: second line"
    check "chat second run" 0 "$CHAT" "$C" conv <"$T/chat2"
    out_is "chat second run" "restored 4 messages
  user: hello
  assistant: You said: hello
  user: second line
  assistant: You said: second line
assistant: You said: third"
    check "chat thread" 0 "$CONVO" --url "$C" load conv --from 4
    out_is "chat thread" '{"role":"user","content":"third"}
{"role":"assistant","content":"You said: third"}'

    # another writer between two lines: the chat sees the conflict, reloads, retries
    mkfifo "$T/fifo"
    "$CHAT" "$C" busy <"$T/fifo" >"$T/chat.out" 2>"$T/chat.err" &
    chat_pid=$!
    exec 3>"$T/fifo"
    echo one >&3
    for _ in $(seq 100); do
        [ "$("$CONVO" --url "$C" load busy 2>/dev/null | wc -l)" = 2 ] && break
        sleep 0.05
    done
    "$CONVO" --url "$C" append busy '{"role":"system","content":"interjection"}' >/dev/null
    echo two >&3
    exec 3>&-
    chat_rc=0
    wait "$chat_pid" || chat_rc=$?
    check "chat after a conflict" 0 "$CONVO" --url "$C" load busy
    out_is "chat after a conflict" '{"role":"user","content":"one"}
{"role":"assistant","content":"You said: one"}
{"role":"system","content":"interjection"}
{"role":"user","content":"two"}
{"role":"assistant","content":"You said: two"}'
    if [ "$chat_rc" = 0 ] && grep -q '^restored 3 messages' "$T/chat.out"; then ok; else
        bad "chat conflict handling: rc $chat_rc, stdout $(cat "$T/chat.out") stderr $(cat "$T/chat.err")"
    fi

    # ---- examples/agent: one step per run, a crash between append and save_extra ----
    A="sqlite:$T/agent.db"
    check "agent step 1" 0 "$AGENT" "$A" job
    check "agent step 2" 0 "$AGENT" "$A" job
    out_is "agent step 2" 'step 2: messages 2..3
thread job: 4 messages, extra {"step":2,"last_tool":"add"}'
    check "agent crash" 1 env AGENT_CRASH_AFTER_APPEND=1 "$AGENT" "$A" job
    check "agent rerun" 0 "$AGENT" "$A" job
    out_is "agent rerun" 'step 3: messages 4..5 (already stored: replayed)
thread job: 6 messages, extra {"step":3,"last_tool":"add"}'
    # a store whose listing fails: one error line and status 1 (it once freed a garbage cursor)
    check "threads: store to break" 0 "$CONVO" --url "sqlite:$T/broken.db" append b "$U"
    python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("ALTER TABLE convo_threads RENAME TO gone"); c.commit()' "$T/broken.db"
    check "threads when listing fails" 1 "$CONVO" --url "sqlite:$T/broken.db" threads
    one_error "threads when listing fails"
    # stdin is read only up to the limits of one call: a writer that never stops is cut off
    # feed KIND BYTES CMD...: pipes up to BYTES of KIND (zeros, or one message per line)
    # into CMD; $fed is how many bytes the writer got rid of before the reader stopped
    feed() {
        local kind=$1 total=$2
        shift 2
        got=0
        python3 -c '
import os, sys
kind, total = sys.argv[1], int(sys.argv[2])
chunk = bytes(65536) if kind == "zero" else b"{\"role\":\"user\"}\n" * 4096
sent = 0
try:
    while sent < total:
        sent += os.write(1, chunk)
except BrokenPipeError:
    pass
sys.stderr.write(str(sent))' "$kind" "$total" 2>"$T/fed" | "$@" >"$T/out" 2>"$T/err" || got=$?
        fed=$(cat "$T/fed")
    }
    L="sqlite:$T/limits.db"
    feed zero 268435456 "$CONVO" --url "$L" append z
    if [ "$got" = 5 ] && [ "$fed" -lt 16777216 ]; then ok; else
        bad "append < zeros: exit $got (want 5) after $fed bytes (want < 16 MiB)"; fi
    err_has "append < zeros" "line 1 of standard input is over the limit of 1048576 bytes"
    feed lines 67108864 "$CONVO" --url "$L" append y
    if [ "$got" = 5 ] && [ "$fed" -lt 4194304 ]; then ok; else
        bad "append < endless lines: exit $got (want 5) after $fed bytes (want < 4 MiB)"; fi
    err_has "append < endless lines" "more than 10000 messages"
    check "append < endless lines stored nothing" 3 "$CONVO" --url "$L" load y
    feed zero 268435456 "$CONVO" --url "$L" save-extra z
    if [ "$got" = 5 ] && [ "$fed" -lt 16777216 ]; then ok; else
        bad "save-extra < zeros: exit $got (want 5) after $fed bytes (want < 16 MiB)"; fi
    python3 -c 'import json; print(json.dumps({"big": "x" * 200000, "n": 1}))' >"$T/patch.json"
    check "save-extra of a 200 KB patch on stdin" 0 "$CONVO" --url "$L" save-extra p <"$T/patch.json"
    check "its extra" 0 "$CONVO" --url "$L" extra p
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["n"] == 1 and len(d["big"]) == 200000' "$T/out"; then ok; else
        bad "save-extra from stdin: extra is [$(head -c 100 "$T/out")]"; fi
    python3 -c 'import json; print(json.dumps({"big": "x" * 1048576}))' >"$T/patch.json"
    check "save-extra of a patch over 1 MiB on stdin" 5 "$CONVO" --url "$L" save-extra p <"$T/patch.json"
    err_has "patch over 1 MiB" "the patch on standard input is over the limit of 1048576 bytes"
    # libmongoc's counters file /dev/shm/mongoc-PID: gone while the tool runs (it was
    # left behind by every killed process, even one that used only SQLite)
    shm_left() { # URL: the tool waits on stdin with the store open, then is killed
        local url=$1 db=$2 pid='' i f
        rm -f "$T/fifo" && mkfifo "$T/fifo"
        # as a user runs it: without the MONGOC_DISABLE_SHM=1 that make check sets
        env -u MONGOC_DISABLE_SHM "$CONVO" --url "$url" append s <"$T/fifo" >/dev/null 2>&1 &
        exec 7>"$T/fifo"
        for i in $(seq 200); do
            for f in /proc/[0-9]*/fd/*; do
                case $(readlink "$f" 2>/dev/null) in "$db"*) pid=${f#/proc/}; pid=${pid%%/*}; break 2 ;; esac
            done
            sleep 0.05
        done
        if [ -z "$pid" ]; then bad "shm ($url): the tool never opened $db"; exec 7>&-; return; fi
        if [ -e "/dev/shm/mongoc-$pid" ]; then bad "shm ($url): /dev/shm/mongoc-$pid exists while the tool runs"; else ok; fi
        kill -9 "$pid"
        exec 7>&-
        wait || true
        if [ -e "/dev/shm/mongoc-$pid" ]; then bad "shm ($url): /dev/shm/mongoc-$pid left by the killed tool"; rm -f "/dev/shm/mongoc-$pid"; else ok; fi
    }
    case $("$CONVO" --version) in
    *mongo*) shm_left "sqlite:$T/shm.db" "$T/shm.db" ;;
    *) echo "tool.sh: built without the MongoDB driver: no libmongoc counters file to check" ;;
    esac
    # output that cannot be written after a stored write: exit 6, said on stderr, stored once
    O="sqlite:$T/output.db"
    got=0; "$CONVO" --url "$O" append o "$U" >/dev/full 2>"$T/err" || got=$?
    if [ "$got" = 6 ]; then ok; else bad "append >/dev/full: exit $got, want 6"; fi
    one_error "append >/dev/full"
    err_has "append >/dev/full" "the batch is stored (first seq 0, 1 messages)"
    got=0; "$CONVO" --url "$O" append o "$U" >&- 2>"$T/err" || got=$?
    if [ "$got" = 6 ]; then ok; else bad "append >&-: exit $got, want 6"; fi
    err_has "append >&-" "the batch is stored (first seq 1, 1 messages)"
    check "appends with no output stored" 0 "$CONVO" --url "$O" load o
    if [ "$(wc -l <"$T/out")" = 2 ]; then ok; else bad "appends with no output: $(wc -l <"$T/out") messages, want 2"; fi
    got=0; "$CONVO" --url "$O" load o >/dev/full 2>"$T/err" || got=$?
    if [ "$got" = 1 ]; then ok; else bad "load >/dev/full: exit $got, want 1"; fi
    one_error "load >/dev/full"
    got=0; "$CONVO" --url "$O" export >/dev/full 2>"$T/err" || got=$?
    if [ "$got" = 1 ]; then ok; else bad "export >/dev/full: exit $got, want 1"; fi
    one_error "export >/dev/full"
    err_has "export >/dev/full" "writing the dump failed: No space left on device"
    # input that cannot be read: exit 1, the system's reason named
    check "import < a directory" 1 "$CONVO" --url "$O" import <"$T"
    one_error "import < a directory"
    err_has "import < a directory" "reading the dump from standard input failed at byte 0: Is a directory"
    check "import <&-" 1 "$CONVO" --url "$O" import <&-
    err_has "import <&-" "Bad file descriptor"
    # copy: when the destination refuses (a conflict on a, with 2.4 MB of b still
    # to send), that is the error, not the export's broken pipe once the import
    # stopped ("writing the dump failed", exit 1)
    python3 -c 'import json; print(json.dumps({"role": "user", "content": "x" * 600000}))' >"$T/big.json"
    "$CONVO" --url "sqlite:$T/csrc.db" append a "$U" "$U" >/dev/null
    for i in 1 2 3 4; do "$CONVO" --url "sqlite:$T/csrc.db" append b <"$T/big.json" >/dev/null; done
    "$CONVO" --url "sqlite:$T/cdst.db" append a "$U" >/dev/null
    check "copy onto a conflicting thread" 4 "$CONVO" copy "sqlite:$T/csrc.db" "sqlite:$T/cdst.db"
    one_error "copy onto a conflicting thread"
    err_has "copy onto a conflicting thread" "thread a has 1 messages, the dump continues at 0"
    # issue 23.4: a summary line on stderr after export, import and copy (--quiet: none);
    # errors name the thread; a failed command leaves no new database behind
    "$CONVO" --url "sqlite:$T/sum.db" append s "$U" "$U" >/dev/null
    check "export with a summary" 0 "$CONVO" --url "sqlite:$T/sum.db" export
    mv "$T/out" "$T/sum.bin"
    if grep -qE "^export: 1 thread, 2 messages, 0 checkpoints, $(wc -c <"$T/sum.bin") bytes in [0-9.]+ s$" "$T/err" &&
        [ "$(wc -l <"$T/err")" = 1 ]; then ok; else bad "export summary: [$(head -c 300 "$T/err")]"; fi
    check "import with a summary" 0 "$CONVO" --url "sqlite:$T/sum2.db" import <"$T/sum.bin"
    if grep -qE '^import: 1 thread, 2 messages, 0 checkpoints, [0-9]+ bytes in [0-9.]+ s$' "$T/err"; then ok; else
        bad "import summary: [$(head -c 300 "$T/err")]"
    fi
    check "import again" 0 "$CONVO" --url "sqlite:$T/sum2.db" import <"$T/sum.bin"
    err_has "import again" "import: 1 thread, 2 messages (2 there already), 0 checkpoints"
    check "copy with a summary" 0 "$CONVO" copy "sqlite:$T/sum.db" memory:
    if grep -qE '^copy: 1 thread, 2 messages, 0 checkpoints, [0-9]+ bytes in [0-9.]+ s$' "$T/err"; then ok; else
        bad "copy summary: [$(head -c 300 "$T/err")]"
    fi
    for c in "export" "import" "copy"; do
        case $c in
            export) check "export --quiet" 0 "$CONVO" --url "sqlite:$T/sum.db" export --quiet ;;
            import) check "import --quiet" 0 "$CONVO" --url "sqlite:$T/sum2.db" import --quiet <"$T/sum.bin" ;;
            copy) check "copy --quiet" 0 "$CONVO" copy "sqlite:$T/sum.db" memory: --quiet ;;
        esac
        if [ ! -s "$T/err" ]; then ok; else bad "$c --quiet: stderr [$(head -c 200 "$T/err")]"; fi
    done
    check "copy of a missing thread" 3 "$CONVO" copy "sqlite:$T/sum.db" "sqlite:$T/new-copy.db" nosuch
    one_error "copy of a missing thread"
    err_has "copy of a missing thread" "convo: thread nosuch not found"
    check "export of a missing thread" 3 "$CONVO" --url "sqlite:$T/sum.db" export s nosuch
    err_has "export of a missing thread" "convo: thread nosuch not found"
    printf 'not a dump' >"$T/junk.bin"
    check "import of junk into a new file" 1 "$CONVO" --url "sqlite:$T/new-import.db" import <"$T/junk.bin"
    one_error "import of junk into a new file"
    check "import of junk into a new sqlite:/// file" 1 "$CONVO" --url "sqlite://$T/new%2Dpct.db" \
        import <"$T/junk.bin"
    for f in new-import.db new-copy.db new-pct.db; do
        if [ -z "$(find "$T" -maxdepth 1 -name "$f*")" ]; then ok; else
            bad "a failed command left $f behind: $(cd "$T" && ls "$f"*)"
        fi
    done
    # ...but a file that was there, even without a thread, is kept
    "$CONVO" --url "sqlite:$T/kept.db" append k "$U" >/dev/null
    "$CONVO" --url "sqlite:$T/kept.db" delete k
    check "import of junk into an existing file" 1 "$CONVO" --url "sqlite:$T/kept.db" import <"$T/junk.bin"
    if [ -f "$T/kept.db" ]; then ok; else bad "a failed import removed a database that was there"; fi
    check "--url after append" 0 "$CONVO" append after "$U" --url "sqlite:$T/after.db"
    check "--url= after load" 0 "$CONVO" load after --url="sqlite:$T/after.db"
    out_is "--url= after load" "$U"
    check "-- keeps a later --url a thread id" 3 "$CONVO" --url "sqlite:$T/after.db" load -- --url
    check "bench sqlite append" 0 "$CONVO" --url "sqlite:$T/bench.db" bench --scenario append --messages 300 --json
    bench_fields "bench sqlite append" raw_ops_per_sec ratio
    check "bench sqlite conversation" 0 "$CONVO" --url "sqlite:$T/bench.db" bench --scenario conversation --turns 20 --json
    bench_fields "bench sqlite conversation" raw_bytes stored_bytes storage_ratio
    # the thread index scenario works on fresh files next to the one named, and removes them
    mkdir "$T/bt"
    check "bench sqlite threads" 0 "$CONVO" --url "sqlite:$T/bt/b.db" bench --scenario threads --count 300 --users 10 --pages 5 --json
    bench_fields "bench sqlite threads" sizes page_growth appends_per_sec_indexed appends_per_sec_unindexed append_ratio save_extra_ratio
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["sizes"]; assert [x["threads"] for x in s]==[30,300] and all(x["page_ms_p50"]>0 and x["load_ms_p50"]>0 and x["unindexed_page_ms_p50"]>0 for x in s), d' "$T/out"; then ok; else
        bad "bench sqlite threads: sizes: $(head -c 400 "$T/out")"
    fi
    if [ -z "$(ls -A "$T/bt")" ]; then ok; else bad "bench threads left files: $(ls "$T/bt")"; fi
    check "agent messages" 0 "$CONVO" --url "$A" load job --tail 1
    out_is "agent messages" '{"role":"tool_result","tool_call_id":"call_3","content":"6"}'
fi

# ---- one rule for integers in messages and extra (issue 23.4) ----
check "append of an integer past 64 bits" 1 "$CONVO" --url "$M" append big '{"role":"u","n":9223372036854775808}'
one_error "append of an integer past 64 bits"
err_has "append of an integer past 64 bits" "message holds an integer outside the signed 64-bit range"
check "save-extra of an integer past 64 bits" 1 "$CONVO" --url "$M" save-extra big '{"n":-9223372036854775809}'
err_has "save-extra of an integer past 64 bits" "extra holds an integer outside the signed 64-bit range"
check "append of 64-bit integers" 0 "$CONVO" --url "$M" append big '{"role":"u","n":[9223372036854775807,-9223372036854775808]}'

# ---- bench: every scenario prints one JSON object with the documented fields ----
# (speed is never asserted: only that the figures are there and make sense)
for sc in append load extra checkpoint; do
    check "bench $sc" 0 "$CONVO" --url "$M" bench --scenario "$sc" --messages 40 --json
    bench_fields "bench $sc" scenario driver ops seconds ops_per_sec p50_us p99_us
done
check "bench pop" 0 "$CONVO" --url "$M" bench --scenario pop --messages 40 --json
bench_fields "bench pop" scenario driver ops ops_per_sec p50_us p99_us append_us pop_us pop_to_append \
    append_p50_us pop_p50_us pop_to_append_p50
if grep -q '"scenario":"pop","driver":"memory",.*"ops":40,' "$T/out"; then ok; else bad "bench pop: $(head -c 300 "$T/out")"; fi
if [ "$have_sqlite" = 1 ]; then
    # every round trip left the thread as it found it: the pop removed what the append added
    check "bench pop on sqlite" 0 "$CONVO" --url "sqlite:$T/pop.db" bench --scenario pop --messages 30 --prefill 5 --json
    bench_fields "bench pop on sqlite" append_us pop_us pop_to_append
fi
check "bench conversation" 0 "$CONVO" --url "$M" bench --scenario conversation --turns 20 --json
bench_fields "bench conversation" scenario driver turns raw_bytes stored_bytes storage_ratio
check "bench conversation --put-log" 0 "$CONVO" --url "$M" bench --scenario conversation --turns 20 --put-log --json
bench_fields "bench conversation --put-log" scenario driver put_log turns raw_bytes stored_bytes storage_ratio
if grep -q '"put_log":true' "$T/out"; then ok; else bad "bench --put-log: not reported: $(head -c 200 "$T/out")"; fi
check "bench threads" 0 "$CONVO" --url "$M" bench --scenario append --messages 40 --threads 3 --json
bench_fields "bench threads" ops ops_per_sec
# the issue's own form: --url after the command (the default URL would be SQLite)
check "bench --url after the command" 0 "$CONVO" bench --url "$M" --scenario append --messages 40 --json
bench_fields "bench --url after the command" scenario driver ops ops_per_sec p50_us p99_us
if grep -q '"driver":"memory"' "$T/out"; then ok; else bad "bench --url after the command: not on memory: $(head -c 200 "$T/out")"; fi
if [ ! -s "$T/err" ]; then ok; else bad "bench: stderr not a terminal, yet: $(head -c 200 "$T/err")"; fi

# ---- progress: on stderr when it is a terminal (script(1) gives a pty), never on stdout ----
if command -v script >/dev/null 2>&1; then
    check "bench on a terminal" 0 script -qec "'$CONVO' --url memory: bench --scenario append --messages 2000 --json >'$T/bench.json'" "$T/typescript"
    if grep -q 'append: 2000/2000' "$T/typescript"; then ok; else
        bad "bench on a terminal: no progress: [$(head -c 300 "$T/typescript")]"
    fi
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ops"] == 2000' "$T/bench.json"; then ok; else
        bad "bench on a terminal: stdout is not the JSON alone: [$(head -c 300 "$T/bench.json")]"
    fi
    check "copy on a terminal" 0 script -qec "'$CONVO' copy memory: memory: </dev/null" "$T/typescript"
    if grep -q 'copy: 0 threads, 0 messages, 0 checkpoints, [0-9]* bytes in' "$T/typescript"; then ok; else
        bad "copy on a terminal: no progress line: [$(head -c 300 "$T/typescript")]"
    fi
else
    bad "script(1) (bsdutils) is missing: progress on a terminal untested"
fi
check "bench unknown scenario" 2 "$CONVO" --url "$M" bench --scenario nope
check "bench threads" 0 "$CONVO" --url "$M" bench --scenario threads --count 200 --users 10 --pages 5 --messages 2 --json
bench_fields "bench threads" scenario driver threads users messages_per_thread sizes page_growth append_ratio append_ratio_p50 save_extra_ratio
if grep -q '"scenario":"threads","driver":"memory","threads":200,"users":10,"messages_per_thread":2,' "$T/out"; then ok; else bad "bench threads: $(head -c 300 "$T/out")"; fi
check "bench threads, text" 0 "$CONVO" --url "$M" bench --scenario threads --count 100 --users 10 --pages 3
if grep -q '^  at 100 threads: the newest 20 of one user' "$T/out"; then ok; else bad "bench threads text: $(head -c 300 "$T/out")"; fi
check "bench threads, too few users" 2 "$CONVO" --url "$M" bench --scenario threads --users 5
check "bench threads, too few threads a user" 2 "$CONVO" --url "$M" bench --scenario threads --count 50 --users 10
check "bench threads, a SQLite URL with parameters" 1 "$CONVO" --url "sqlite:$T/p.db?x=1" bench --scenario threads --count 100 --users 10
check "bench bad number" 2 "$CONVO" --url "$M" bench --scenario append --messages -1

[ "$skipped" = 0 ] || echo "tool.sh: the SQLite part was skipped"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
