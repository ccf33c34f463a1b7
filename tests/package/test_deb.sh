#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package as an operator meets it, on this machine (root): cpack
# builds it from the release build; it installs with dpkg -i, its Depends name
# a package for every library the binary links, its /etc file is a
# conffile, it creates the medic user; its units pass systemd-analyze
# (verify, and security rated OK); medic starts as the unit's ExecStart runs
# it (as medic, in /var/lib/medic: no systemd runs here), takes a webhook
# and shows it on the on-call page; remove keeps the configuration, purge
# leaves nothing behind.
#
#   tests/package/test_deb.sh [BUILD_DIR]     # default build/release
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build/release}
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" -eq 0 ] || fail "run as root: it installs and purges the package"

dpkg-query -W medic >/dev/null 2>&1 && fail "a medic package is already installed; purge it first"
(cd "$build" && rm -f medic_*.deb && cpack -G DEB >/dev/null)
deb=$(ls "$build"/medic_*.deb)
ok "built $(basename "$deb")"

# Depends: one package per linked library (no library left unnamed)
depends=$(dpkg-deb -f "$deb" Depends)
for lib in $(ldd "$build/medic" | awk '/=>/ {print $3}'); do
  pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n1 | cut -d: -f1) ||
    pkg=$(dpkg -S "$lib" | head -n1 | cut -d: -f1)
  case "$pkg" in libc6|libgcc-s1) continue ;; esac
  # only direct dependencies must be named: libraries medic itself links
  if objdump -p "$build/medic" | grep -q "NEEDED *$(basename "$lib")\$"; then
    grep -q "\\b$pkg\\b" <<<"$depends" || fail "Depends ($depends) misses $pkg for $lib"
  fi
done
ok "Depends: $depends"

dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb failed (a Depends missing? apt-get install -f)"
[ -x /usr/bin/medic ] || fail "/usr/bin/medic missing"
dpkg-query -W -f='${Conffiles}\n' medic | grep -q "/etc/medic/medic.yaml" ||
  fail "/etc/medic/medic.yaml is not a conffile"
getent passwd medic >/dev/null || fail "no medic user"
[ "$(stat -c %U /var/lib/medic)" = medic ] || fail "/var/lib/medic not medic's"
[ -f /usr/share/doc/medic/README.md ] && [ -f /usr/share/doc/medic/examples/medic.yaml ] &&
  [ -f /usr/share/doc/medic/grafana-dashboard.json ] || fail "docs missing"
grep -q '^License: Apache-2.0' /usr/share/doc/medic/copyright || fail "no copyright file saying Apache-2.0"
for page in man1/medic.1 man1/medic-serve.1 man1/medic-audit.1 man5/medic.yaml.5; do
  [ -f "/usr/share/man/$page.gz" ] || fail "no manual page /usr/share/man/$page.gz"
done
man -w medic-serve >/dev/null || fail "man does not find medic-serve(1)"
ok "installed: /usr/bin/medic, conffile /etc/medic/medic.yaml, user medic, /usr/share/doc/medic, manual pages"

medic check config /etc/medic/medic.yaml >/dev/null || fail "the packaged configuration is invalid"
for unit in medic.service medic-agent.service; do
  out=$(systemd-analyze verify "/usr/lib/systemd/system/$unit" 2>&1) || fail "verify $unit: $out"
  [ -z "$out" ] || fail "systemd-analyze verify $unit complains: $out"
  # the threshold is in tenths: above 3.9 would rate MEDIUM, EXPOSED or UNSAFE
  rating=$(systemd-analyze security --offline=true --threshold=39 \
    "/usr/lib/systemd/system/$unit" 2>&1 | tail -n1) ||
    fail "systemd-analyze security $unit: $rating"
  ok "$unit: verify clean; ${rating#→ }"
done

# the unit's ExecStart, as the unit's user, where no systemd runs
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/medic.service)
log=$(mktemp)
(cd /var/lib/medic && exec setpriv --reuid=medic --regid=medic --init-groups -- $exec_start) \
  >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:9799/-/ready >/dev/null && break
  kill -0 $pid 2>/dev/null || { cat "$log"; fail "medic exited"; }
  sleep 0.1
done
curl -sf http://127.0.0.1:9799/-/ready >/dev/null || { cat "$log"; fail "medic never ready"; }
answer=$(curl -sf -H 'Content-Type: application/json' --data-binary \
  @"$top/tests/fixtures/alertmanager/am-webhook-multi-alert.json" http://127.0.0.1:9799/webhook)
grep -q '"status":"accepted"' <<<"$answer" || fail "webhook: $answer"
for _ in $(seq 100); do
  [ "$(medic audit decisions --db /var/lib/medic/medic.db --format json | grep -c '"verdict"')" \
    -gt 0 ] && break
  sleep 0.1
done
page=$(curl -sf http://127.0.0.1:9799/)
grep -q "Recent decisions" <<<"$page" && grep -q "gpu-node-" <<<"$page" ||
  fail "the on-call page does not show the decision"
[ "$(stat -c %U /var/lib/medic/medic.db)" = medic ] || fail "the audit log is not medic's"
kill -TERM $pid
wait $pid || fail "medic did not stop cleanly on SIGTERM: $(tail -n5 "$log")"
trap - EXIT
ok "ran as the unit runs it: webhook accepted, decided, on the on-call page, stopped cleanly"

dpkg -r medic >/dev/null
[ ! -e /usr/bin/medic ] || fail "remove left /usr/bin/medic"
[ -f /etc/medic/medic.yaml ] || fail "remove took the configuration"
dpkg -P medic >/dev/null
for left in /etc/medic /var/lib/medic /usr/share/doc/medic /usr/lib/systemd/system/medic.service \
  /usr/share/man/man1/medic.1.gz; do
  [ ! -e "$left" ] || fail "purge left $left"
done
getent passwd medic >/dev/null && fail "purge left the medic user"
getent group medic >/dev/null && fail "purge left the medic group"
dpkg-query -W medic >/dev/null 2>&1 && fail "purge left the package known to dpkg"
ok "removed (configuration kept), purged (nothing left)"
rm -f "$log"
