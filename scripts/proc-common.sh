# scripts/proc-common.sh — sourced by test-servers.sh and redis-cluster.sh: what
# both ask of a server process they started.
# shellcheck shell=bash

# alive PID: the process exists and is not a zombie (a daemon's parent may not
# have reaped it yet; kill -0 alone would call it alive).
alive() {
  local pid=${1:-} stat
  case "$pid" in ''|*[!0-9]*) return 1 ;; esac
  kill -0 "$pid" 2>/dev/null || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}
