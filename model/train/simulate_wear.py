# SPDX-License-Identifier: Apache-2.0
"""A second fleet simulator, built on other assumptions than simulate.py so
that the project can measure whether a model transfers from one to the
other (medic_train.py evaluate trains on each and tests on the other).

Shared with simulate.py: only the interface (simulate_fleet yields each
node's features.Scrapes, its faults and its outage mask) and the published
repair times. Everything else is chosen apart from it, and differs on
purpose where real fleets differ:

- Fault rate and mix from the InfiniteHBD trace alone (sources.py): its own
  server MTBF and its own split of hardware faults (ECC, other GPU faults,
  power supplies, fans and hot GPUs, and what GPU telemetry cannot see).
- Faults come from wear: a GPU (or a node's power supply) enters a
  degrading state, whose length is drawn log-normally per class, and fails
  at its end. A share of each class degrades without any sign.
- Exporter conventions as dcgm-exporter's: the Xid gauge holds the last
  code until the next one (only a reboot clears it); ECC, remapped-row and
  PCIe replay counters are lifetime counts with the baselines an older GPU
  has (the replay count restarts at a reboot); clocks are absolute MHz,
  set by the power management rather than fixed; one scrape per node, so a
  lost scrape loses every GPU's sample; the scrape time jitters.
- GPU models from the vendors' datasheets: A100 40/80 GB (400 W, 1410 MHz),
  H100 SXM and H200 (700 W, 1980 MHz), B200 (1000 W, 1965 MHz).
- Healthy confounders: GPUs that always run hotter than their siblings and
  never fail, node-wide cooling hiccups, operator power caps, GPUs with a
  steady stream of correctable errors, benign row remaps (Xid 63 held for
  weeks), application Xids held until the next code, noisy PCIe links.

Every figure below that is not from a datasheet or sources.py is an
ASSUMPTION of this simulator."""

import numpy as np

import features
import sources

GPUS = 8

# Datasheet figures: board power (W), max SM clock (MHz); idle draw, idle
# clock and the temperature rise at full power over the inlet (ASSUMPTION,
# from the same family's typical readings); the HBM's offset over the GPU
# die (ASSUMPTION: HBM3/3e runs hotter than HBM2e).
GPU_MODELS = {
    "A100-40GB": {"tdp": 400.0, "clock": 1410.0, "idle": 50.0, "idle_clock": 210.0,
                  "rise": 45.0, "hbm": 4.0},
    "A100-80GB": {"tdp": 400.0, "clock": 1410.0, "idle": 60.0, "idle_clock": 210.0,
                  "rise": 48.0, "hbm": 5.0},
    "H100-SXM": {"tdp": 700.0, "clock": 1980.0, "idle": 70.0, "idle_clock": 345.0,
                 "rise": 50.0, "hbm": 8.0},
    "H200": {"tdp": 700.0, "clock": 1980.0, "idle": 75.0, "idle_clock": 345.0,
             "rise": 50.0, "hbm": 10.0},
    "B200": {"tdp": 1000.0, "clock": 1965.0, "idle": 120.0, "idle_clock": 345.0,
             "rise": 42.0, "hbm": 9.0},
}

# ASSUMPTION: how long each class degrades before it fails (median minutes
# and the log-normal spread), and the share that degrades without a sign.
DEGRADE = {"gpu_memory": (240, 1.0), "gpu_other": (90, 1.1), "cooling": (60, 0.8),
           "power_supply": (45, 0.9), "unseen": (0, 0)}
SILENT = {"gpu_memory": 0.25, "gpu_other": 0.45, "cooling": 0.1, "power_supply": 0.5,
          "unseen": 1.0}
NODE_LEVEL = {"power_supply", "unseen"}

IDLE, SW_POWER, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 1, 4, 8, 32, 64, 128


def fault_mix():
    """The InfiniteHBD trace's own split of hardware faults: GPU ECC faults
    (memory), the other GPU faults, power supplies, fans and hot GPUs
    (cooling), and the rest, which GPU telemetry cannot see."""
    hw = sources.infinitehbd_hardware_classes()
    gpu = hw["GPU"]
    ecc = sum(v for k, v in gpu.items() if "ECC" in k)
    hot = gpu.get("GPU Temperature High", 0)
    counts = {"gpu_memory": ecc, "gpu_other": gpu["ClassTotal"] - ecc - hot,
              "power_supply": hw["Power Supply"]["ClassTotal"],
              "cooling": hw["Fan"]["ClassTotal"] + hot,
              "unseen": sum(v["ClassTotal"] for k, v in hw.items()
                            if k not in ("GPU", "Fan", "Power Supply"))}
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


def _lag(x, tau):
    """First-order lag (time constant tau minutes) along the last axis."""
    a = 1.0 / tau
    out = np.empty_like(x)
    out[..., 0] = x[..., 0]
    for t in range(1, x.shape[-1]):
        out[..., t] = out[..., t - 1] + a * (x[..., t] - out[..., t - 1])
    return out


def _bursts(rng, rate, size):
    """Counts per minute: events at `rate` per minute, each a burst of
    1 + Poisson(size) errors (correctable errors arrive in clusters)."""
    n = rng.poisson(rate)
    return np.where(n > 0, n + rng.poisson(size * n), 0)


def draw_faults(rng, minutes, accel, mix):
    """Degradations that end in a fault for one node: onsets at the trace's
    server MTBF divided by accel; the node is out for a repair time from the
    trace (also divided by accel). Returns [(fault minute, class, gpus,
    degradation minutes or 0 when silent)] and the down mask."""
    repairs = np.array(sources.infinitehbd_repair_hours())
    classes = list(mix)
    p = np.array([mix[c] for c in classes])
    rate = accel / (sources.infinitehbd_server_mtbf_hours() * 60.0)
    down = np.zeros(minutes, bool)
    faults, t, up_since = [], 0.0, 0
    while True:
        t += rng.exponential(1.0 / rate)
        cls = classes[rng.choice(len(classes), p=p)]
        med, spread = DEGRADE[cls]
        length = 0 if rng.random() < SILENT[cls] else \
            int(np.clip(med * np.exp(rng.normal(0, spread)), 5, 1440))
        start = int(t) + length
        if start >= minutes:
            break
        length = min(length, start - up_since)
        if cls in NODE_LEVEL:
            gpus = list(range(GPUS))
        elif cls == "cooling":  # a fan serves two neighbouring GPUs
            g = int(rng.integers(GPUS - 1))
            gpus = [g, g + 1] if rng.random() < 0.5 else [g]
        else:
            gpus = [int(rng.integers(GPUS))]
        faults.append((start, cls, gpus, max(length, 0)))
        end = start + max(int(rng.choice(repairs) * 60.0 / accel), 30)
        down[start:min(end, minutes)] = True
        t = float(end)
        up_since = end
    return faults, down


def workload(rng, T):
    """Per-GPU load in [0, 1]: ASSUMPTION, segments of median 3 h that are
    training (0.85..1, evaluation dips), inference (each GPU its own slowly
    wandering load) or idle."""
    load = np.zeros((GPUS, T))
    s = 0
    while s < T:
        d = int(np.clip(180 * np.exp(rng.normal(0, 0.8)), 20, 2880))
        kind = rng.choice(3, p=[0.6, 0.25, 0.15])
        e = min(s + d, T)
        if kind == 0:
            level = rng.uniform(0.85, 1.0)
            load[:, s:e] = level
            every = int(rng.integers(30, 121))
            for c in range(s + every, e, every):
                load[:, c:c + int(rng.integers(3, 8))] = 0.1
        elif kind == 1:
            walk = np.cumsum(rng.normal(0, 0.04, (GPUS, e - s)), axis=1)
            load[:, s:e] = np.clip(0.45 + walk + rng.uniform(-0.2, 0.2, (GPUS, 1)), 0.15, 0.9)
        s = e
    return load


def node_truth(rng, T, faults, gpu_model):
    """Minute-level truth of one node: gauges [GPUS, T], counter events per
    minute, and Xid codes per minute (0: none)."""
    m = GPU_MODELS[gpu_model]
    tdp, fmax = m["tdp"], m["clock"]
    t = np.arange(T)
    u = workload(rng, T)

    # ASSUMPTION: the inlet. 20..26 C with a daily swing; node-wide cooling
    # hiccups (+6..14 C over 20..90 min) every 6 days on average.
    inlet = rng.uniform(20, 26) + rng.uniform(0.5, 2.5) * np.sin(2 * np.pi * t / 1440 +
                                                                 rng.uniform(0, 6.3))
    for _ in range(rng.poisson(T / (6 * 1440))):
        s, d = int(rng.integers(T)), int(rng.integers(20, 91))
        inlet[s:s + d] += rng.uniform(6, 14) * np.hanning(d + 2)[1:-1][:T - s]
    # ASSUMPTION: each GPU's place in the chassis shifts its temperature;
    # one GPU in 25 runs 6..12 C hotter than its siblings all its life.
    offset = rng.normal(0, 1.5, (GPUS, 1)) + np.where(rng.random((GPUS, 1)) < 0.04,
                                                      rng.uniform(6, 12, (GPUS, 1)), 0.0)
    # ASSUMPTION: an operator caps the node's power now and then (a day or
    # more at 60..85% of the board power, one node in 10 at a time).
    limit = np.full(T, tdp)
    for _ in range(rng.poisson(T / (10 * 1440))):
        s = int(rng.integers(T))
        limit[s:s + int(rng.integers(1440, 4320))] = tdp * rng.uniform(0.6, 0.85)

    demand = m["idle"] + u * (tdp - m["idle"]) * rng.uniform(0.93, 1.02, (GPUS, 1))
    brake = np.zeros((GPUS, T), bool)
    slow = np.zeros((GPUS, T), bool)
    heat = np.zeros((GPUS, T))
    power_noise = np.full((GPUS, T), 0.01)
    # ASSUMPTION: healthy counters. Correctable errors in bursts (median
    # one burst in 4 days, one GPU in 20 a steady stream of one an hour);
    # a benign row remap once in 200 days (Xid 63), an uncorrectable error
    # contained by a remap once in 500 days (Xid 94); PCIe replays with a
    # per-link rate spread over two decades; application Xids at the end of
    # one job in ten; an NVLink Xid 74 once in 300 days.
    sbe_rate = np.exp(rng.normal(np.log(1 / (4 * 1440)), 1.0, (GPUS, 1))) * np.ones((GPUS, T))
    sbe_rate[rng.random(GPUS) < 0.05] = 1 / 60
    remap_rate = np.full((GPUS, T), 1 / (200 * 1440))
    dbe_rate = np.full((GPUS, T), 1 / (500 * 1440))
    replay_rate = np.exp(rng.normal(np.log(1 / 2880), 1.2, (GPUS, 1))) * np.ones((GPUS, T))
    xid_rate = {74: np.full((GPUS, T), 1 / (300 * 1440)), 119: np.zeros((GPUS, T))}
    xid = np.zeros((GPUS, T))
    ends = np.nonzero(np.abs(np.diff(u.mean(axis=0))) > 0.3)[0]
    for e in ends[rng.random(len(ends)) < 0.1]:
        g = rng.choice(GPUS, size=int(rng.integers(1, GPUS + 1)), replace=False)
        xid[g, e] = rng.choice([13, 31, 43, 45])

    for start, cls, gpus, length in faults:
        if length <= 0:
            continue
        a = start - length
        p = np.linspace(0, 1, length, endpoint=False)
        span = slice(a, start)
        # ASSUMPTION: what each class shows while it degrades.
        for g in gpus:
            if cls == "gpu_memory":  # HBM: bursts of correctable errors, remaps, contained ECC
                sbe_rate[g, span] += 0.003 + 0.05 * p ** 2
                remap_rate[g, span] += 0.004 * p
                dbe_rate[g, span] += np.where(p > 0.7, 0.004, 0.0)
            elif cls == "gpu_other":  # one of: GSP timeouts, a bad link, a failing VRM
                kind = rng.integers(3)
                if kind == 0:
                    xid_rate[119][g, span] += 0.002 + 0.01 * p
                elif kind == 1:
                    replay_rate[g, span] += 0.02 * np.exp(3 * p)
                    xid_rate[74][g, span] += 0.004 * p
                else:
                    slow[g, span] |= rng.random(length) < 0.03 + 0.15 * p
                    power_noise[g, span] += 0.08 * p
            elif cls == "cooling":  # the GPU's fan: it heats up on its own
                heat[g, span] += 30 * p ** 1.3
            elif cls == "power_supply":  # the node's PSU: brake episodes, noisy draw
                brake[g, span] |= rng.random(length) < 0.01 + 0.08 * p
                power_noise[g, span] += 0.05 * p
    brake = brake | np.roll(brake, 1, axis=1) | np.roll(brake, 2, axis=1)

    draw = np.minimum(demand, limit)
    draw = np.where(brake, np.minimum(draw, 0.5 * tdp), draw)
    draw = draw * (1 + rng.normal(0, 1, (GPUS, T)) * power_noise)
    busy = u > 0.05
    temp = _lag(inlet + offset + 8 + m["rise"] * draw / tdp, 4.0) + heat
    temp += rng.normal(0, 0.5, (GPUS, T))
    # the power management sets the clock: lower where the cap or the
    # brake holds the draw below what the load asks, lower still when hot
    headroom = np.clip(draw / np.maximum(demand, 1), 0.3, 1.0)
    clock = np.where(busy, fmax * headroom ** 0.5, m["idle_clock"])
    clock -= np.maximum(temp - 85, 0) * 0.04 * fmax
    clock = np.where(slow, clock * 0.5, clock) + rng.normal(0, 0.004 * fmax, (GPUS, T))
    throttle = np.where(busy, 0, IDLE) + np.where(demand > limit * 0.99, SW_POWER, 0) \
        + np.where(temp > 85, SW_THERMAL, 0) + np.where(temp > 90, HW_THERMAL + HW_SLOWDOWN, 0) \
        + np.where(brake, POWER_BRAKE + HW_SLOWDOWN, 0) + np.where(slow, HW_SLOWDOWN, 0)

    remap = rng.poisson(remap_rate)
    dbe = rng.poisson(dbe_rate)
    xid = np.where(remap > 0, 63, xid)
    xid = np.where(dbe > 0, 94, xid)
    for code, rate in xid_rate.items():
        xid = np.where(rng.random((GPUS, T)) < rate, code, xid)
    return {
        "GPU_TEMP": temp,
        "MEMORY_TEMP": temp + m["hbm"] * (0.5 + u) + rng.normal(0, 0.5, (GPUS, T)),
        "POWER_USAGE": np.maximum(draw, 0.05 * tdp),
        "SM_CLOCK": np.clip(clock, m["idle_clock"], fmax),
        "CLOCK_THROTTLE_REASONS": throttle.astype(np.float64),
        "events": {"ECC_SBE_AGG_TOTAL": _bursts(rng, sbe_rate, 3.0),
                   "ECC_DBE_AGG_TOTAL": dbe, "CORRECTABLE_REMAPPED_ROWS": remap,
                   "UNCORRECTABLE_REMAPPED_ROWS": dbe,
                   "PCIE_REPLAY_COUNTER": _bursts(rng, replay_rate, 2.0)},
        "xid": xid,
    }


def scrape_node(rng, truth, down, setting):
    """One dcgm-exporter per node: a scrape every interval seconds (jitter
    of 2%) while the node is up; ASSUMPTION: a share of scrapes lost
    (setting["loss"], default 1%) and exporter outages of 5..30 min once in
    4 days. Lifetime counters start at an older GPU's baseline (setting
    ["age_years"]); the replay counter and the held Xid restart when the
    node boots."""
    T = down.shape[0]
    iv = float(setting["interval"])
    ts = np.cumsum(iv * (1 + rng.normal(0, 0.02, int(T * 60 / iv) + 2))) + rng.uniform(0, iv)
    ts = ts[ts < T * 60.0]
    minute = (ts // 60).astype(np.int64)
    keep = ~down[minute] & (rng.random(len(ts)) >= setting.get("loss", 0.01))
    for _ in range(rng.poisson(T / (4 * 1440))):
        s = rng.uniform(0, T * 60.0)
        keep &= ~((ts >= s) & (ts < s + rng.uniform(300, 1800)))
    ts, minute = ts[keep], minute[keep]
    boots = np.r_[0, np.nonzero(down[:-1] & ~down[1:])[0] + 1]
    epoch = np.searchsorted(boots, minute, side="right") - 1
    present = set(features.SERIES)
    for family in set(features.OPTIONAL) - set(setting["families"]):
        present -= set(features.OPTIONAL[family])
    age = setting.get("age_years", 2.0)
    out = []
    for g in range(GPUS):
        v = {"GPU_TEMP": np.round(truth["GPU_TEMP"][g, minute]),
             "MEMORY_TEMP": np.round(truth["MEMORY_TEMP"][g, minute]),
             "POWER_USAGE": np.round(truth["POWER_USAGE"][g, minute], 2),
             "SM_CLOCK": np.round(truth["SM_CLOCK"][g, minute]),
             "CLOCK_THROTTLE_REASONS": truth["CLOCK_THROTTLE_REASONS"][g, minute]}
        # ASSUMPTION: baselines of a GPU `age` years in service
        base = {"ECC_SBE_AGG_TOTAL": rng.poisson(age * 90 * np.exp(rng.normal(0, 1.5))),
                "ECC_DBE_AGG_TOTAL": rng.poisson(age * 0.3),
                "CORRECTABLE_REMAPPED_ROWS": rng.poisson(age * 1.5),
                "UNCORRECTABLE_REMAPPED_ROWS": rng.poisson(age * 0.3),
                "PCIE_REPLAY_COUNTER": 0}
        for name, ev in truth["events"].items():
            total = np.cumsum(ev[g])
            if name == "PCIE_REPLAY_COUNTER":  # counts since the node booted
                at_boot = np.r_[0, total[np.maximum(boots[1:] - 1, 0)]]
                v[name] = (total[minute] - at_boot[epoch]).astype(np.float64)
            else:
                v[name] = (base[name] + total[minute]).astype(np.float64)
        codes = truth["xid"][g]
        at = np.r_[-1, np.nonzero(codes)[0]]
        last = at[np.searchsorted(at, minute, side="right") - 1]
        held = (last >= 0) & (last >= boots[epoch])
        v["XID_ERRORS"] = np.where(held, codes[np.maximum(last, 0)], 0.0)
        out.append(features.Scrapes(ts, {k: x for k, x in v.items() if k in present}))
    return out


def simulate_fleet(setting, nodes, days, accel, mix=None):
    """As simulate.simulate_fleet: yields (node, [features.Scrapes per GPU],
    faults [(minute, class, gpu or -1 for the node, degradation minutes)],
    down) per node. setting: seed, gpu (a GPU_MODELS key), interval,
    families, and optionally loss and age_years."""
    mix = mix or fault_mix()
    rng = np.random.default_rng(setting["seed"] + 1_000_003)
    T = int(days * 1440)
    for n in range(nodes):
        drawn, down = draw_faults(rng, T, accel, mix)
        truth = node_truth(rng, T, drawn, setting["gpu"])
        faults = []
        for start, cls, gpus, length in drawn:
            if len(gpus) == GPUS:
                faults.append((start, cls, -1, length))
            else:
                faults.extend((start, cls, g, length) for g in gpus)
        yield n, scrape_node(rng, truth, down, setting), faults, down.copy()
