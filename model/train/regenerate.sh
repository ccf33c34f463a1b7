#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Trains the default model again and compares it with the committed one.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$top/model/train/medic_train.py" default --out "$tmp/default.safetensors"
/usr/bin/python3 "$top/model/train/medic_train.py" compare "$top/model/default.safetensors" \
  "$tmp/default.safetensors" --tolerance 1e-3
if cmp -s "$top/model/default.safetensors" "$tmp/default.safetensors"; then
  echo "identical to the committed file"
fi
