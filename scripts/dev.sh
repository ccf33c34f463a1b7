#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set-up, build and test for medic on Debian 12, as root.
#
#   scripts/dev.sh serve [ARGS]   install what is missing, build, run `medic serve`
#   scripts/dev.sh test           install what is missing, build, run every test
#                                 (the last one installs and purges the medic package)
#   scripts/dev.sh deps           only install what is missing
#   scripts/dev.sh build          only build (build/dev)
#   scripts/dev.sh fuzz [SECONDS] build the libFuzzer targets with clang and fuzz
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

build_packages=(gcc make cmake pkg-config libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev
  libsqlite3-dev libfreeipmi-dev libyaml-dev libgnutls28-dev libpq-dev liblz4-dev)
test_packages=(libcmocka-dev clang clang-format libclang-rt-14-dev python3 python3-aiosmtpd curl
  openssl prometheus prometheus-alertmanager openipmi freeipmi-tools munge slurmctld slurmd
  slurm-client python3-torch python3-numpy chromium fonts-dejavu-core systemd binutils
  groff-base man-db postgresql-15 tzdata)

say() { printf '==> %s\n' "$*"; }

install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "dev.sh: installing packages needs root (run as root or with sudo)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() { # preset
  say "building ($1)"
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1" -j "$(nproc)"
}

run_ctest() { # preset
  say "testing ($1)"
  ctest --preset "$1" -j 2
}

fuzz() { # seconds per target; fails when any target finds a crash or leak
  build fuzz
  local corpus target failed=0
  for target in webhook policy model prometheus dataset requests health slurm config whatif; do
    corpus=$(mktemp -d)
    cp "tests/fuzz/corpus/$target"/* "$corpus/"
    say "fuzzing the $target parser for $1 s"
    # libFuzzer prints a line per new input: keep the end (a crash's report)
    # a crashing input lands under build/fuzz, never in the source tree
    # (called from `fuzz || status=1`, where set -e does not hold: each
    # target's status is kept by hand)
    "build/fuzz/tests/fuzz_$target" -max_total_time="$1" -max_len=65536 -print_final_stats=1 \
      -close_fd_mask=3 -artifact_prefix="build/fuzz/$target-" "$corpus" 2>&1 | tail -n 40 ||
      { failed=1; say "the $target fuzzer failed: its input is under build/fuzz/$target-*"; }
    rm -rf "$corpus"
  done
  return "$failed"
}

cmd=${1:-}
shift || true
case "$cmd" in
  deps)
    install_missing "${build_packages[@]}" "${test_packages[@]}"
    ;;
  build)
    install_missing "${build_packages[@]}"
    build dev
    ;;
  serve)
    install_missing "${build_packages[@]}"
    build dev
    say "starting medic serve (Ctrl-C stops it)"
    exec build/dev/medic serve "$@"
    ;;
  test)
    install_missing "${build_packages[@]}" "${test_packages[@]}"
    status=0
    say "checking formatting (clang-format)"
    git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror || status=1
    build dev
    run_ctest dev || status=1
    fuzz "${MEDIC_FUZZ_SECONDS:-30}" || status=1
    build asan
    run_ctest asan || status=1
    build release
    say "testing the Debian package (cpack, dpkg -i, run, remove, purge)"
    tests/package/test_deb.sh build/release || status=1
    exit $status
    ;;
  fuzz)
    install_missing "${build_packages[@]}" "${test_packages[@]}"
    fuzz "${1:-300}"
    ;;
  *)
    sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'
    [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
    ;;
esac
