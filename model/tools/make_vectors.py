#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes FaultPredictor models and test vectors computed by real PyTorch
(Debian's python3-torch; run with /usr/bin/python3), in the safetensors
layout medic reads, for `medic model check` and the test suite.

    /usr/bin/python3 model/tools/make_vectors.py OUTDIR [--seed S]

Cases mirror the shapes that matter: the production shape (D=8, H=64,
T=60), a single step, a long window, other D and H (sizes that are not a
multiple of 16, or more than 64), and inputs large enough
to saturate the gates (where a naive exp or tanh overflows). Weights are
PyTorch's default initialisation under a fixed seed: the point is the
arithmetic, not a trained model."""

import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import fault_predictor  # noqa: E402


class FaultPredictor(fault_predictor.FaultPredictor):
    """The trained architecture, also returning the last hidden state."""

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.classifier(out[:, -1, :]), out[:, -1, :]


def write_safetensors(path, tensors, metadata):
    """tensors: name -> float32 torch tensor. Sorted names, data back to back,
    header padded with spaces to a multiple of 8 (as the safetensors library
    writes an all-F32 file)."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().to(torch.float32)
        data = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - (8 + len(raw)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


CASES = [  # name, D, H, T, B, input kind
    ("v1_d8_h64_t60_b4", 8, 64, 60, 4, "normal"),
    ("v2_d8_h64_t1_b1", 8, 64, 1, 1, "normal"),
    ("v3_d8_h64_t300_b2", 8, 64, 300, 2, "normal"),
    ("v4_d8_h32_t6_b3", 8, 32, 6, 3, "normal"),
    ("v5_d12_h16_t24_b5", 12, 16, 24, 5, "normal"),
    ("v6_d8_h64_t60_b4_large", 8, 64, 60, 4, "large"),
    ("v7_d8_h64_t60_b2_extreme", 8, 64, 60, 2, "extreme"),
    # hidden sizes medic pads (20 to 32) or splits into a chunk of four
    # blocks of 16 units and one more (80)
    ("v8_d5_h20_t30_b6", 5, 20, 30, 6, "normal"),
    ("v9_d10_h80_t40_b5", 10, 80, 40, 5, "large"),
    # the built-in model's feature count at the benchmark's size
    ("v10_d16_h64_t60_b4", 16, 64, 60, 4, "normal"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    manifest = ["# case model_file vectors_file D H T B input_kind (made by make_vectors.py)"]
    for i, (name, d, h, t, b, kind) in enumerate(CASES):
        torch.manual_seed(args.seed + i)
        model = FaultPredictor(d, h).eval()
        g = torch.Generator().manual_seed(args.seed + 100 + i)
        if kind == "normal":
            x = torch.randn(b, t, d, generator=g)
        elif kind == "large":
            x = (torch.rand(b, t, d, generator=g) * 100 - 50)
        else:
            x = (torch.rand(b, t, d, generator=g) * 1000 - 500)
        with torch.no_grad():
            y, last = model(x)
        model_file, vectors_file = f"{name}.model.safetensors", f"{name}.vectors.safetensors"
        meta = {"arch": "FaultPredictor", "input_dim": d, "hidden_dim": h,
                "classifier_hidden": 32, "gate_order": "i,f,g,o", "seed": args.seed + i,
                "torch_version": torch.__version__}
        write_safetensors(os.path.join(args.outdir, model_file), model.state_dict(), meta)
        write_safetensors(os.path.join(args.outdir, vectors_file),
                          {"input": x, "output": y, "last_hidden": last},
                          {"case": name, "B": b, "T": t, "D": d, "H": h, "input_kind": kind,
                           "torch_version": torch.__version__})
        manifest.append(f"{name} {model_file} {vectors_file} {d} {h} {t} {b} {kind}")
        print(f"{name}: output {[round(v, 4) for v in y.flatten().tolist()]}")
    with open(os.path.join(args.outdir, "MANIFEST.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
