#!/usr/bin/env bash
# scripts/test-logs.sh — show what `make check` left behind, for people and CI.
#
#   scripts/test-logs.sh dump [BUILDDIR]     print each test-suite.log, then every
#                                            test's own log (FOO.log beside FOO.trs)
#   scripts/test-logs.sh summary [BUILDDIR]  print the Check summary lines
#                                            ("100%: Checks: N, Failures: 0, Errors: 0")
#                                            of every test's log, as the last lines;
#                                            exit 1 if one reports failures or errors,
#                                            2 if there is none at all
#   scripts/test-logs.sh clean [BUILDDIR]    remove every FOO.trs and FOO.log and
#                                            test-suite.log (run before make check)
#
# BUILDDIR defaults to the current directory (where make check ran).
set -eu

cmd=${1:-}
dir=${2:-.}
[ -d "$dir" ] || { echo "test-logs: $dir is not a directory" >&2; exit 2; }

# The automake parallel harness writes FOO.log and FOO.trs for each test.
trs_files() {
  find "$dir" \( -name node_modules -o -name .git \) -prune -o -name '*.trs' -print | sort
}

SUMMARY_RE='^[0-9]+%: Checks: '

case "$cmd" in
  dump)
    find "$dir" \( -name node_modules -o -name .git \) -prune -o -name test-suite.log -print |
      sort | while IFS= read -r f; do
        printf '\n======== %s ========\n' "$f"
        cat "$f"
      done
    trs_files | while IFS= read -r trs; do
      log=${trs%.trs}.log
      [ -f "$log" ] || continue
      printf '\n======== %s (%s) ========\n' "$log" "$(sed -n 's/^:test-result: //p' "$trs" | sort -u | tr '\n' ' ')"
      cat "$log"
    done
    ;;
  clean)
    trs_files | while IFS= read -r trs; do
      rm -f "$trs" "${trs%.trs}.log"
    done
    find "$dir" \( -name node_modules -o -name .git \) -prune -o -name test-suite.log -print |
      while IFS= read -r f; do rm -f "$f"; done
    ;;
  summary)
    names="" lines=""
    while IFS= read -r trs; do
      log=${trs%.trs}.log
      [ -f "$log" ] || continue
      found=$(grep -E "$SUMMARY_RE" "$log" || true)
      [ -n "$found" ] || continue
      name=${log#"$dir"/}
      names="$names ${name%.log}"
      lines="$lines$found
"
    done <<EOF
$(trs_files)
EOF
    if [ -z "$lines" ]; then
      echo "test-logs: no Check summary line in any test log" >&2
      exit 2
    fi
    # each suite's wall time (scripts/test-wrapper.sh writes it last in its log)
    printf '\n==== wall time per suite ====\n'
    while IFS= read -r trs; do
      log=${trs%.trs}.log
      [ -f "$log" ] || continue
      t=$(sed -n 's/^wall time: \([0-9]*\) s$/\1/p' "$log" | tail -1)
      name=${log#"$dir"/}
      printf '%6s s  %s\n' "${t:-?}" "${name%.log}"
    done <<TIMES
$(trs_files)
TIMES
    printf '\n==== Check summary:%s ====\n' "$names"
    printf '%s' "$lines"
    if printf '%s' "$lines" | grep -Eq 'Failures: [1-9]|Errors: [1-9]'; then
      exit 1
    fi
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
