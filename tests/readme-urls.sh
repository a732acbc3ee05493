#!/bin/sh
# readme-urls.sh — README.md's URL table names every parameter each driver takes
# (issue 23.4: the Redis row left out db=N). The parameters are read from the
# drivers' sources: the names they take with convo__url_take*(url, "NAME"...) or
# the SQLite driver's int_param(url, "NAME"...), and ttl for convo__url_take_ttl.
# Run by `make check`; by hand: tests/readme-urls.sh
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
passed=0 failed=0
# driver folder, and how its row of the table starts
for pair in "sqlite|sqlite:" "redis|redis://" "postgres|postgres://" "mongo|mongodb://"; do
    dir=${pair%%|*} start=${pair#*|}
    row=$(grep -F -- "| \`$start" "$top_srcdir/README.md" | head -1)
    if [ -z "$row" ]; then
        echo "FAIL: README.md has no URL table row for $start"
        failed=$((failed + 1))
        continue
    fi
    names=$(cat "$top_srcdir/drivers/$dir"/*.c |
        sed -n 's/.*\(convo__url_take[a-z_]*\|int_param\)(url, "\([a-z_]*\)".*/\2/p' | sort -u)
    if cat "$top_srcdir/drivers/$dir"/*.c | grep -q 'convo__url_take_ttl('; then
        names="$names ttl"
    fi
    [ -n "$names" ] || { echo "FAIL: no parameter found in drivers/$dir"; failed=$((failed + 1)); }
    for name in $names; do
        if printf '%s\n' "$row" | grep -q "[?&]$name="; then
            passed=$((passed + 1))
        else
            echo "FAIL: README.md's $start row does not give $name= (drivers/$dir takes it)"
            failed=$((failed + 1))
        fi
    done
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
