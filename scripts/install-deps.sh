#!/usr/bin/env bash
# scripts/install-deps.sh — install what convo needs to build and test, on
# Debian 12, only when it is missing.
#
#   scripts/install-deps.sh               build + test dependencies (servers,
#                                         valgrind, clang for the fuzz test,
#                                         node) and the MongoDB
#                                         stand-in's npm packages
#   scripts/install-deps.sh --build-only  only what `./configure && make &&
#                                         make check` needs for the SQLite build
#   scripts/install-deps.sh --dry-run     say what would be installed, change nothing
#
# Packages are checked with dpkg; apt-get runs only when something is missing
# ('apt-get update' first when the package lists are empty, or once more when
# an install fails with stale lists). Works as root, or as a user with
# password-less sudo. Services that Debian would start on install (redis,
# postgresql) are kept from starting: the tests run their own throwaway ones
# (scripts/test-servers.sh).
set -eu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

BUILD_PKGS="build-essential autoconf automake libtool pkg-config
  libsqlite3-dev libhiredis-dev libpq-dev zlib1g-dev libmongoc-dev libbson-dev
  libjansson-dev libmsgpack-dev check"
TEST_PKGS="redis-server postgresql postgresql-client nodejs npm valgrind python3
  clang libclang-rt-14-dev bsdutils"

build_only=0
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown option: $arg" >&2; exit 2 ;;
  esac
done

log() { printf 'install-deps: %s\n' "$*" >&2; }

# dpkg_installed PKG: PKG itself is installed (dpkg -s says "install ok installed").
dpkg_installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

# provided PKG: an installed package Provides PKG (nodesource's nodejs
# provides and conflicts with Debian's npm, for instance).
provided() {
  dpkg-query -W -f='${db:Status-Status} ${Provides}\n' 2>/dev/null |
    grep '^installed ' | grep -Eq "[ ,]$1([ ,(]|\$)"
}

have_pkg() {
  case "$1" in
    # Node.js may come from elsewhere than Debian (nodesource, nvm...): a
    # working node/npm on PATH is enough, and installing Debian's npm next to
    # nodesource's nodejs would conflict.
    nodejs) command -v node >/dev/null 2>&1 && return 0 ;;
    npm) command -v npm >/dev/null 2>&1 && return 0 ;;
    # postgresql-client is a metapackage; postgresql-client-15 (pulled in by
    # postgresql) is the real thing.
    postgresql-client)
      dpkg-query -W -f='${db:Status-Status}\n' 'postgresql-client-[0-9]*' 2>/dev/null |
        grep -qx installed && return 0 ;;
  esac
  dpkg_installed "$1" || provided "$1"
}

pkgs=$BUILD_PKGS
[ "$build_only" -eq 1 ] || pkgs="$pkgs $TEST_PKGS"

missing=""
for p in $pkgs; do
  have_pkg "$p" || missing="$missing $p"
done
missing=${missing# }

if [ -z "$missing" ]; then
  log "all Debian packages present"
else
  log "missing: $missing"
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
  elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"   # no stdin here: never wait for a password prompt
  else
    log "error: not root and sudo not available; install as root: apt-get install $missing"
    exit 1
  fi

  apt_get() {
    # shellcheck disable=SC2086  # $SUDO is empty or "sudo -n"
    $SUDO env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a apt-get \
      -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
  }

  if [ "$dry_run" -eq 1 ]; then
    log "dry run: would run: apt-get install -y --no-install-recommends $missing"
  else
    # Keep Debian from starting redis/postgresql services on install, unless
    # the machine already has a policy of its own.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    remove_policy() {
      # shellcheck disable=SC2086
      if [ "$made_policy" -eq 1 ]; then $SUDO rm -f "$policy"; fi
    }
    trap remove_policy EXIT
    if [ ! -e "$policy" ]; then
      # shellcheck disable=SC2086
      printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
      # shellcheck disable=SC2086
      $SUDO chmod 755 "$policy"
      made_policy=1
    fi

    # shellcheck disable=SC2086  # word-split the package list
    if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
      log "package lists empty: apt-get update"
      apt_get update -q
      apt_get install -y -q --no-install-recommends $missing
    elif ! apt_get install -y -q --no-install-recommends $missing; then
      log "install failed; apt-get update and retry"
      apt_get update -q
      apt_get install -y -q --no-install-recommends $missing
    fi
    remove_policy
    made_policy=0
    trap - EXIT

    still=""
    for p in $missing; do have_pkg "$p" || still="$still $p"; done
    if [ -n "$still" ]; then
      log "error: still missing after install:$still"
      exit 1
    fi
    log "installed: $missing"
  fi
fi

# npm packages from their lockfiles: the MongoDB wire-protocol stand-in used by
# the tests (tests/mongo-server) and the Node binding with its test tools
# (bindings/node: koffi, LangGraph's packages, vitest) and the LangGraph example
# (examples/node: LangGraph and a copy of bindings/node, see its .npmrc).
if [ "$build_only" -eq 0 ]; then
  for ms in "$ROOT/tests/mongo-server" "$ROOT/bindings/node" "$ROOT/examples/node"; do
    if [ -f "$ms/package.json" ] && [ ! -d "$ms/node_modules" ]; then
      if ! command -v npm >/dev/null 2>&1; then
        log "error: npm not found; cannot install $ms's packages"
        exit 1
      fi
      if [ -f "$ms/package-lock.json" ] || [ -f "$ms/npm-shrinkwrap.json" ]; then
        cmd="ci"
      else
        cmd="install"   # npm ci refuses to run without a lockfile
      fi
      if [ "$dry_run" -eq 1 ]; then
        log "dry run: would run: npm $cmd --no-audit --no-fund in $ms"
      else
        log "npm $cmd in ${ms#"$ROOT"/}"
        (cd "$ms" && npm "$cmd" --no-audit --no-fund)
      fi
    fi
  done
fi
