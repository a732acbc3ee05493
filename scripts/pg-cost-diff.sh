#!/bin/bash
# scripts/pg-cost-diff.sh — per-function server instructions per run from two
# callgrind outputs kept by scripts/pg-statement-cost.sh (PG_COST_KEEP): the
# backend's counts at 600 runs less those at 100, over 500, largest first
# (exclusive counts; --inclusive for inclusive ones, which recursion blurs).
#
#   scripts/pg-cost-diff.sh DIR/append_plain-burst-100 DIR/append_plain-burst-600 [--inclusive] [LINES]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 FEW MANY [--inclusive] [LINES]" >&2; exit 2; }
few=$1 many=$2 inclusive=no lines=40
shift 2
for a in "$@"; do
  if [ "$a" = --inclusive ]; then inclusive=yes; else lines=$a; fi
done
counts() { # "function<TAB>instructions", one a line
  callgrind_annotate --inclusive=$inclusive --threshold=100 "$1" 2>/dev/null |
    awk '$1 ~ /^[0-9,]+$/ && NF >= 2 { n = $1; gsub(",", "", n); $1 = ""; sub(/^ +/, "");
                                       sub(/ \[.*$/, ""); sub(/^\([ 0-9.]+%\) */, ""); print $0 "\t" n }'
}
awk -F '\t' -v lines="$lines" '
  FNR == NR { few[$1] += $2; next }
  { many[$1] += $2 }
  END { for (f in many) { d = (many[f] - few[f]) / 500; if (d >= 50 || d <= -50) printf "%9.0f  %s\n", d, f }
        for (f in few) if (!(f in many) && few[f] >= 25000) printf "%9.0f  %s\n", -few[f] / 500, f }' \
  <(counts "$few") <(counts "$many") | sort -rn | head -n "$lines"
