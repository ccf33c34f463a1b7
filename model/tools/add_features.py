#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a copy of a FaultPredictor safetensors file with a feature
description in its metadata (window, step, features with PromQL templates
and scaler), standard library only.

    model/tools/add_features.py IN OUT FEATURES.json WINDOW STEP

FEATURES.json is a list of {"name", "query", "center", "scale"}, one per
model input, in input order."""

import json
import struct
import sys


def main():
    src, dst, features_path, window, step = sys.argv[1:6]
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    with open(features_path) as f:
        features = json.load(f)
    dim = header["lstm.weight_ih_l0"]["shape"][1]
    if len(features) != dim:
        sys.exit(f"{len(features)} features for a model with {dim} inputs")
    meta = header.setdefault("__metadata__", {})
    meta.update({"window": str(window), "step": step,
                 "features": json.dumps(features, separators=(",", ":"))})
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - (8 + len(raw)) % 8) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


if __name__ == "__main__":
    main()
