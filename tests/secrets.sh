#!/bin/bash
# secrets.sh — a password in a store URL never reaches the tool's output (for every
# scheme, unreachable servers, bad parameters, and the real test servers with a
# wrong password), and SQLite files are created 0600 and never made more open.
# Run by `make check`; by hand: top_builddir=BUILD tests/secrets.sh
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$top_srcdir/tests/tool-path.sh"
CONVO=$CONVO_BIN
if [ -n "$CONVO_REAL" ]; then
    CONVO=$CONVO_REAL
    export LD_LIBRARY_PATH=$CONVO_LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset CONVO_URL
passed=0 failed=0
PW=S3cretPW

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

# Not run under CONVO_TEST_WRAPPER: valgrind prints the command line (and so the
# password) itself; tests/bad-input.sh runs the tool's error paths under it.
have_driver() { "$CONVO" --version 2>/dev/null | grep -qw "$1"; }

# no_secret DESC URL CMD...: runs `convo --url URL CMD...` (and for load the same
# with the URL in CONVO_URL); neither stdout nor stderr may hold the password, in
# clear or percent-encoded, and the run must end (a timeout is a failure).
no_secret() {
    local desc=$1 url=$2 rc hows=arg
    shift 2
    [ "$1" != load ] || hows="arg env"
    for how in $hows; do
        rc=0
        if [ $how = arg ]; then
            timeout 60 "$CONVO" --url "$url" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
        else
            CONVO_URL=$url timeout 60 "$CONVO" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
        fi
        if [ "$rc" = 124 ]; then
            bad "$desc ($how): no answer within 60 s"
        elif grep -qiE 'S3cretPW|S3cret%50W|S3cret%2550W' "$T/out" "$T/err"; then
            bad "$desc ($how): password printed: $(cat "$T/out" "$T/err" | head -c 300)"
        elif [ "$rc" = 0 ] && [ "${want_fail:-1}" = 1 ]; then
            bad "$desc ($how): succeeded against a server that should refuse"
        else
            ok
        fi
    done
}

# every_command DESC URL: the commands that open the store.
every_command() {
    no_secret "$1: load" "$2" load t
    no_secret "$1: threads" "$2" threads
    no_secret "$1: append" "$2" append t '{"role":"user"}'
}

# ---- unreachable servers (port 1 refuses at once), short timeouts, bad parameters ----
urls=(
    "redis://user:$PW@127.0.0.1:1/?connect_timeout=500"
    "redis://:$PW@127.0.0.1:1/0?connect_timeout=500"
    "redis://user:S3cret%50W@127.0.0.1:1/?connect_timeout=500"
    "rediss://user:$PW@127.0.0.1:1/?connect_timeout=500"
    "redis://user:$PW@127.0.0.1:1/?bogus=1"
    "redis://user:$PW@127.0.0.1:1/?prefix=a%7Bb"
    "redis://user:$PW@127.0.0.1:1/notanumber"
    "postgres://u:$PW@127.0.0.1:1/db?connect_timeout=1"
    "postgresql://u:$PW@127.0.0.1:1/db?connect_timeout=1"
    "postgres://u:S3cret%50W@127.0.0.1:1/db?connect_timeout=1"
    "postgres://u@127.0.0.1:1/db?password=$PW&connect_timeout=1"
    "postgresql://u@127.0.0.1:1/db?connect_timeout=1&password=$PW"
    "postgres://u:$PW@127.0.0.1:1/db?bogus=1"
    "postgres://u:$PW@127.0.0.1:1/db?schema=x;drop"
    "postgres://u@127.0.0.1:1/db?password=$PW&bogus=1"
    "postgres://u:$PW@127.0.0.1:99999/db"
    "postgres://u:$PW@[::1/db"
    "mongodb://u:$PW@127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500"
    "mongodb://u:S3cret%50W@127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500"
    "mongodb://u:$PW@127.0.0.1:1/?bogus=1&serverSelectionTimeoutMS=500"
    "mongodb://u:$PW@127.0.0.1:1/?database=a/b&serverSelectionTimeoutMS=500"
    "mongodb://u:$PW@127.0.0.1:1,127.0.0.1:2/?serverSelectionTimeoutMS=500&connectTimeoutMS=500"
    "sqlite:$T/pw.db?password=$PW"
    "nosuch://u:$PW@127.0.0.1:1/"
)
for url in "${urls[@]}"; do
    every_command "${url%%:*}" "$url"
done
if [ -e "$T/pw.db" ]; then bad "sqlite: a rejected URL created the file"; else ok; fi

# ---- the real test servers, with a wrong password injected ----
# with_password URL: the URL with its authority's credentials replaced.
with_password() {
    local url=$1 scheme rest
    scheme=${url%%://*}
    rest=${url#*://}
    case $rest in *@*) rest=${rest#*@} ;; esac # drop the credentials there were
    printf '%s://convo:%s@%s\n' "$scheme" "$PW" "$rest"
}
add_param() {
    case $1 in *\?*) printf '%s&%s\n' "$1" "$2" ;; *) printf '%s?%s\n' "$1" "$2" ;; esac
}
if [ -n "${CONVO_TEST_POSTGRES_URL:-}" ] && have_driver postgres; then
    u=$(with_password "$CONVO_TEST_POSTGRES_URL")
    every_command "postgres server, wrong password" "$(add_param "$u" connect_timeout=5)"
    every_command "postgres server, wrong password, bad parameter" "$(add_param "$u" bogus=1)"
    # the same password as a parameter, without credentials in the authority
    base=${CONVO_TEST_POSTGRES_URL#*://}
    base=${base#*@}
    every_command "postgres server, wrong password= parameter" \
        "postgres://convo@$base?password=$PW&connect_timeout=5"
fi
if [ -n "${CONVO_TEST_REDIS_URL:-}" ] && have_driver redis; then
    # a server without passwords answers AUTH with an error that must not echo it
    every_command "redis server, wrong password" "$(with_password "$CONVO_TEST_REDIS_URL")"
    every_command "redis server, bad parameter" \
        "$(add_param "$(with_password "$CONVO_TEST_REDIS_URL")" bogus=1)"
fi
if [ -n "${CONVO_TEST_MONGO_URL:-}" ] && have_driver mongo; then
    # the stand-in may not check passwords: only the output matters here
    want_fail=0 every_command "mongo server, wrong password" \
        "$(add_param "$(with_password "$CONVO_TEST_MONGO_URL")" serverSelectionTimeoutMS=2000)"
    every_command "mongo server, bad parameter" \
        "$(add_param "$(with_password "$CONVO_TEST_MONGO_URL")" bogus=1)"
fi

# ---- a one-letter password: masked where it is the password, never inside words ----
# (issue 19.7: replacing every "e" printed "conn***ction ... us***r", which shows it)
# short_password DESC URL: the URL's password is "e"; the output must not hold
# "***" glued to a letter, and must still read as the error it is (WORDS).
short_password() {
    local desc=$1 url=$2 words=$3
    timeout 60 "$CONVO" --url "$url" load t >"$T/out" 2>"$T/err" </dev/null
    if grep -qE '[A-Za-z]\*\*\*|\*\*\*[A-Za-z]' "$T/out" "$T/err"; then
        bad "$desc: a mask inside a word: $(head -c 300 "$T/err")"
    elif ! grep -q "$words" "$T/err"; then
        bad "$desc: expected '$words' in: $(head -c 300 "$T/err")"
    else
        ok
    fi
}
# the client library's own error, so only where the driver is built (issue 23.1)
if have_driver postgres; then
    short_password "unreachable postgres" "postgres://u:e@127.0.0.1:1/db?connect_timeout=1" \
        "Connection refused"
fi
if have_driver mongo; then
    short_password "unreachable mongo" \
        "mongodb://u:e@127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500" \
        "serverSelectionTimeoutMS"
fi
if [ -n "${CONVO_TEST_POSTGRES_URL:-}" ] && have_driver postgres; then
    base=${CONVO_TEST_POSTGRES_URL#*://}
    base=${base#*@}
    short_password "postgres server, password e" "postgres://convo:e@$base?connect_timeout=5" \
        "password authentication failed for user \"convo\""
    short_password "postgres server, password=e" \
        "postgres://convo@$base?password=e&connect_timeout=5" \
        "password authentication failed for user \"convo\""
fi
if [ -n "${CONVO_TEST_REDIS_URL:-}" ] && have_driver redis; then
    short_password "redis server, password e" "$(with_password "$CONVO_TEST_REDIS_URL" | sed 's/:S3cretPW@/:e@/')" \
        "invalid username-password pair"
fi

# ---- SQLite file modes ----
mode() { stat -c %a "$1"; }
# no_wider FILE MAX DESC: FILE has no permission bit MAX lacks.
no_wider() {
    local m
    m=$(mode "$1")
    if [ $((8#$m & ~8#$2)) = 0 ]; then ok; else bad "$3: mode $m is wider than $2"; fi
}
if have_driver sqlite; then
    for mask in 022 000; do
        db=$T/modes-$mask.db
        (umask $mask && "$CONVO" --url "sqlite:$db" append t '{"role":"user"}' >/dev/null) ||
            bad "sqlite append (umask $mask)"
        if [ "$(mode "$db")" = 600 ]; then ok; else bad "new file under umask $mask: mode $(mode "$db"), want 600"; fi
        # keep a reader open so the -wal and -shm files stay after the writer exits
        python3 - "$db" "$CONVO" "$mask" "$T/walmodes" <<'EOF'
import os, sqlite3, subprocess, sys
db, tool, mask, out = sys.argv[1:]
con = sqlite3.connect(db)
con.execute("select count(*) from sqlite_master").fetchall()
os.umask(int(mask, 8))
subprocess.run([tool, "--url", "sqlite:" + db, "append", "t", '{"role":"user"}'],
               check=True, stdout=subprocess.DEVNULL)
with open(out, "w") as f:
    for suffix in ("-wal", "-shm"):
        p = db + suffix
        f.write("%s %s\n" % (suffix, oct(os.stat(p).st_mode & 0o777)[2:] if os.path.exists(p) else "missing"))
con.close()
EOF
        while read -r suffix m; do
            if [ "$m" = 600 ]; then ok; else bad "$suffix under umask $mask: mode $m, want 600"; fi
        done <"$T/walmodes"
    done

    # a file the user loosened to 0640 is never made more open, nor are its -wal/-shm
    db=$T/loose.db
    "$CONVO" --url "sqlite:$db" append t '{"role":"user"}' >/dev/null || bad "sqlite append"
    chmod 0640 "$db"
    (umask 000 && "$CONVO" --url "sqlite:$db" append t '{"role":"user"}' >/dev/null) ||
        bad "sqlite append to a 0640 file"
    no_wider "$db" 640 "a 0640 file after a write"
    python3 - "$db" "$CONVO" "$T/walmodes" <<'EOF'
import os, sqlite3, subprocess, sys
db, tool, out = sys.argv[1:]
con = sqlite3.connect(db)
con.execute("select count(*) from sqlite_master").fetchall()
os.umask(0)
subprocess.run([tool, "--url", "sqlite:" + db, "append", "t", '{"role":"user"}'],
               check=True, stdout=subprocess.DEVNULL)
with open(out, "w") as f:
    for suffix in ("", "-wal", "-shm"):
        p = db + suffix
        f.write("%s %s\n" % (suffix or "db", oct(os.stat(p).st_mode & 0o777)[2:] if os.path.exists(p) else "missing"))
con.close()
EOF
    while read -r suffix m; do
        if [ "$m" = missing ]; then bad "$suffix of the 0640 file missing"; continue; fi
        if [ $((8#$m & ~8#640)) = 0 ]; then ok; else bad "$suffix of a 0640 file: mode $m is wider"; fi
    done <"$T/walmodes"
    no_wider "$db" 640 "a 0640 file after a write with a reader open"
    # a tighter mode stays tight too
    chmod 0600 "$db"
    "$CONVO" --url "sqlite:$db" load t >/dev/null || bad "sqlite load after chmod 0600"
    no_wider "$db" 600 "a 0600 file after a read"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
