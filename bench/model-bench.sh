#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The LSTM's speed against PyTorch on the same model in the same run:
# medic model bench, then Debian's python3-torch (reference BLAS, one
# thread) on the same weights, batch 1 and batched; prints both and the
# ratio.
#
#   bench/model-bench.sh [MODEL] [SECONDS]
#
# MODEL defaults to tests/data/lstm/v1_d8_h64_t60_b4.model.safetensors
# (D=8, H=64); windows of 60 steps.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-$top/tests/data/lstm/v1_d8_h64_t60_b4.model.safetensors}
seconds=${2:-3}
medic=${MEDIC:-$top/build/dev/medic}
[ -x "$medic" ] || { echo "model-bench: build medic first (scripts/dev.sh build)" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
  { echo "model-bench: install python3-torch (apt-get install python3-torch)" >&2; exit 1; }

echo "== medic (C, one core)"
out=$("$medic" model bench --model "$model" --batch 64 --seq 60 --seconds "$seconds")
echo "$out"
c1=$(echo "$out" | awk '/^batch 1:/ {print $3}')
cb=$(echo "$out" | awk '/^batch 64:/ {print $3}')

echo "== PyTorch $( /usr/bin/python3 -c 'import torch; print(torch.__version__)') (CPU, 1 thread, Debian's reference BLAS)"
read -r p1 pb < <(/usr/bin/python3 - "$model" "$seconds" <<'PY'
import json, struct, sys, time
import torch, torch.nn as nn
path, seconds = sys.argv[1], float(sys.argv[2])
torch.set_num_threads(1)
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
state = {}
for name, t in header.items():
    if name == "__metadata__":
        continue
    b, e = t["data_offsets"]
    state[name] = torch.frombuffer(bytearray(data[b:e]), dtype=torch.float32).reshape(t["shape"])
H, D = state["lstm.weight_hh_l0"].shape[1], state["lstm.weight_ih_l0"].shape[1]

class FaultPredictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(D, H, batch_first=True)
        self.classifier = nn.Sequential(nn.Linear(H, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
    def forward(self, x):
        out, _ = self.lstm(x)
        return self.classifier(out[:, -1, :])

model = FaultPredictor().eval()
model.load_state_dict(state)
results = []
for batch in (1, 64):
    x = torch.randn(batch, 60, D)
    with torch.no_grad():
        model(x)
        runs, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model(x)
            runs += 1
    elapsed = time.perf_counter() - start
    results.append(elapsed / runs * 1e6 if batch == 1 else runs * batch / elapsed)
print(f"{results[0]:.1f} {results[1]:.0f}")
PY
)
echo "batch 1: $p1 us per prediction"
echo "batch 64: $pb predictions/s"
echo "== ratio"
awk -v a="$c1" -v b="$p1" -v c="$cb" -v d="$pb" 'BEGIN {
  printf "batch 1: medic is %.1fx faster than PyTorch (%.1f us vs %.1f us)\n", b / a, a, b
  printf "batched: medic is %.1fx faster than PyTorch (%.0f/s vs %.0f/s)\n", c / d, c, d }'
