# SPDX-License-Identifier: Apache-2.0
"""A third fleet simulator (C), kept for the final figures of the
evaluation: models are chosen on simulators A and B, and C is scored once,
for the report. It was written from what the Llama 3 training report and
dcgm-exporter document, not from the model's inputs: nothing here reads
features.FEATURES, and its assumptions were not adjusted to any model's
score on it.

Shared with simulate.py and simulate_wear.py: only the interface
(simulate_fleet yields each node's features.Scrapes, its faults and its
outage mask). Where it differs from both on purpose:

- Fault rate and mix from the Llama 3 report alone (sources.LLAMA3): the
  interruptions per GPU-hour of a 16,384-GPU H100 run, split into faulty
  GPUs, HBM3, SRAM, the GPU system processor (GSP) and faults GPU
  telemetry cannot see (the network, and half of the interruptions the
  report leaves unexplained: ASSUMPTION).
- Faults come from a hazard: a GPU turns sick at a random time and its
  precursors are switched on and off by a two-state process (on for a
  share of the time drawn per fault), their intensity growing
  exponentially towards the failure; the sick time is gamma-distributed
  per class. Repair times are log-normal (ASSUMPTION), not the trace's.
- Exporter conventions: the Xid gauge shows the last code for five
  minutes and then 0; volatile counters (correctable and uncorrectable
  ECC, PCIe replays) restart at every driver reload, and nodes reload
  their driver at a weekly maintenance; remapped-row counts persist. A
  GPU whose GSP is failing stops answering DCGM for minutes: its own
  samples are missing while its siblings' are not.
- Healthy confounders: a fleet-wide driver roll-out (every node reloads
  within a day, with application Xids after), racks in a hot aisle for
  days, a scheduler that caps power per job, PCIe replays that follow
  the load of collective communication, GPUs with a steady trickle of
  correctable errors that never fail.

Every figure below that is not from sources.py or a datasheet is an
ASSUMPTION of this simulator."""

import numpy as np

import features
import sources

GPUS = 8

# Datasheet figures: board power (W), max SM clock (MHz); the rest
# (idle draw and clock, temperature rise at full power) ASSUMPTION.
GPU_MODELS = {
    "A100-80GB": {"tdp": 400.0, "clock": 1410.0, "idle": 55.0, "idle_clock": 210.0, "rise": 40.0},
    "H100-SXM": {"tdp": 700.0, "clock": 1980.0, "idle": 65.0, "idle_clock": 345.0, "rise": 46.0},
    "H200": {"tdp": 700.0, "clock": 1980.0, "idle": 70.0, "idle_clock": 345.0, "rise": 46.0},
}

# ASSUMPTION: the sick time before the failure (gamma: shape, mean
# minutes), the share of faults with no precursor, and each precursor's
# intensity at the failure (events per minute when on).
SICK = {"gpu_other": (1.5, 180.0), "gpu_memory": (2.0, 480.0), "gpu_sram": (1.2, 60.0),
        "gsp": (2.0, 40.0), "unseen": (1.0, 0.0)}
SUDDEN = {"gpu_other": 0.5, "gpu_memory": 0.3, "gpu_sram": 0.5, "gsp": 0.3, "unseen": 1.0}
NODE_LEVEL = {"unseen"}

IDLE, SW_POWER, HW_SLOWDOWN, SW_THERMAL = 1, 4, 8, 32


def _shares():
    """The Llama 3 report's interruptions by class, as shares of all of
    them: the network and half of what the report does not attribute
    (ASSUMPTION) count as faults GPU telemetry cannot see."""
    l3 = sources.LLAMA3
    named = l3["faulty_gpu"] + l3["hbm3_memory"] + l3["network"] + l3["sram_memory"] + \
        l3["gpu_system_processor"]
    return {"gpu_other": l3["faulty_gpu"], "gpu_memory": l3["hbm3_memory"],
            "gpu_sram": l3["sram_memory"], "gsp": l3["gpu_system_processor"],
            "unseen": l3["network"] + 0.5 * (1 - named)}


def fault_mix():
    """The hardware faults' mix (_shares normalised)."""
    total = sum(_shares().values())
    return {k: v / total for k, v in _shares().items()}


def gpu_fault_rate_per_minute():
    """Hardware faults per GPU-minute: the report's interruptions per
    GPU-hour, the share of them _shares covers."""
    return sum(_shares().values()) / (sources.llama3_gpu_mtbf_hours() * 60.0)


def draw_faults(rng, minutes, accel, mix):
    """One node's faults: [(minute, class, gpus, sick minutes or 0)] and
    the down mask (the node out for a log-normal repair time, median 8 h,
    divided by accel)."""
    classes = list(mix)
    p = np.array([mix[c] for c in classes])
    rate = GPUS * gpu_fault_rate_per_minute() * accel
    down = np.zeros(minutes, bool)
    faults, t, up_since = [], 0.0, 0
    while True:
        t += rng.exponential(1.0 / rate)
        cls = classes[rng.choice(len(classes), p=p)]
        shape, mean = SICK[cls]
        sick = 0 if rng.random() < SUDDEN[cls] or mean == 0 else \
            int(np.clip(rng.gamma(shape, mean / shape), 3, 2880))
        at = int(t)
        if at >= minutes:
            break
        sick = min(sick, max(at - up_since, 0))
        gpus = list(range(GPUS)) if cls in NODE_LEVEL else [int(rng.integers(GPUS))]
        faults.append((at, cls, gpus, sick))
        repair = max(int(480 * np.exp(rng.normal(0, 1.0)) / accel), 20)
        down[at:min(at + repair, minutes)] = True
        t = float(at + repair)
        up_since = at + repair
    return faults, down


def _on_off(rng, n, on_share):
    """A two-state process over n minutes, on for about on_share of them,
    in runs of a few minutes to an hour."""
    out = np.zeros(n, bool)
    state, i = rng.random() < on_share, 0
    while i < n:
        mean = 20 * on_share if state else 20 * (1 - on_share)
        run = max(int(rng.exponential(max(mean, 1))), 1)
        out[i:i + run] = state
        i += run
        state = not state
    return out


def node_truth(rng, T, faults, gpu_model, maintenance, rollout):
    """Minute-level truth of one node: gauges [GPUS, T], counter events per
    minute, Xid events (code per minute, 0: none) and the GPUs' missing
    minutes."""
    m = GPU_MODELS[gpu_model]
    tdp, fmax = m["tdp"], m["clock"]
    # ASSUMPTION: jobs take the whole node for 1..24 h, at 0.7..1 of the
    # board power with a checkpoint dip every 20..60 min; 10% of the time
    # the node waits idle for its next job.
    load = np.zeros(T)
    cap = np.full(T, tdp)
    s = 0
    while s < T:
        d = int(rng.uniform(60, 1440))
        if rng.random() < 0.1:
            s += d // 4
            continue
        e = min(s + d, T)
        load[s:e] = rng.uniform(0.7, 1.0)
        every = int(rng.integers(20, 61))
        for c in range(s + every, e, every):
            load[c:c + 2] = 0.2
        if rng.random() < 0.2:  # the scheduler caps this job's power
            cap[s:e] = tdp * rng.uniform(0.55, 0.8)
        s = e
    u = np.clip(load[None, :] + rng.normal(0, 0.03, (GPUS, T)), 0, 1)
    # ASSUMPTION: the inlet: 22..27 C; a hot aisle (+6..10 C) for 1..4
    # days on a node in five.
    inlet = np.full(T, rng.uniform(22, 27))
    if rng.random() < 0.2:
        a = int(rng.integers(T))
        inlet[a:a + int(rng.integers(1440, 5760))] += rng.uniform(6, 10)
    offset = rng.normal(0, 2.0, (GPUS, 1))

    sbe = np.full((GPUS, T), 1 / (7 * 1440.0))
    sbe[rng.random(GPUS) < 0.03] = 1 / 10.0  # a steady trickle, never fails
    dbe = np.full((GPUS, T), 1 / (900 * 1440.0))
    remap = np.full((GPUS, T), 1 / (365 * 1440.0))
    link = np.exp(rng.normal(np.log(1 / 600.0), 1.0, (GPUS, 1)))
    replay = link * (0.2 + u)  # collectives drive the link
    slowdown = np.zeros((GPUS, T), bool)
    power_dip = np.zeros((GPUS, T))
    heat = np.zeros((GPUS, T))
    missing = np.zeros((GPUS, T), bool)
    xid = np.zeros((GPUS, T))
    xid_rate = {119: np.zeros((GPUS, T)), 48: np.zeros((GPUS, T)), 94: np.zeros((GPUS, T))}

    for at, cls, gpus, sick in faults:
        if sick <= 0:
            continue
        span = slice(at - sick, at)
        grow = np.exp(rng.uniform(2, 5) * (np.linspace(0, 1, sick) - 1))  # 1 at the failure
        for g in gpus:
            on = _on_off(rng, sick, rng.uniform(0.3, 0.8))
            if cls == "gpu_memory":
                sbe[g, span] += on * 0.5 * grow
                remap[g, span] += on * 0.02 * grow
                dbe[g, span] += on * 0.01 * grow ** 2
            elif cls == "gpu_sram":
                dbe[g, span] += on * 0.03 * grow
                xid_rate[94][g, span] += on * 0.02 * grow
            elif cls == "gsp":
                xid_rate[119][g, span] += on * 0.05 * grow
                missing[g, span] |= on & (rng.random(sick) < 0.6 * grow)
            else:  # a failing board: its link, its power stage, its heat
                kind = rng.integers(3)
                if kind == 0:
                    replay[g, span] += on * 2.0 * grow
                elif kind == 1:
                    slowdown[g, span] |= on & (rng.random(sick) < 0.5 * grow)
                    power_dip[g, span] += on * 0.3 * grow
                else:
                    heat[g, span] += on * 25 * grow
    # the driver reloads (maintenance and the roll-out) bring application
    # Xids on some GPUs in the hour after
    for r in list(maintenance) + ([rollout] if rollout is not None else []):
        for g in np.nonzero(rng.random(GPUS) < 0.3)[0]:
            if r + 60 < T:
                xid[g, r + int(rng.integers(1, 60))] = rng.choice([13, 31, 43])

    draw = m["idle"] + u * (tdp - m["idle"])
    draw = np.minimum(draw, cap[None, :]) * (1 - np.clip(power_dip, 0, 0.8))
    draw *= 1 + rng.normal(0, 0.01, (GPUS, T))
    temp = inlet[None, :] + offset + 10 + m["rise"] * draw / tdp + heat
    temp += rng.normal(0, 0.7, (GPUS, T))
    busy = u > 0.1
    clock = np.where(busy, fmax * (0.97 + 0.03 * rng.random((GPUS, T))), m["idle_clock"])
    clock = np.where(draw >= cap[None, :] * 0.98, clock * 0.85, clock)
    clock = np.where(temp > 87, clock * 0.8, clock)
    clock = np.where(slowdown, clock * 0.4, clock)
    throttle = np.where(busy, 0, IDLE) + np.where(draw >= cap[None, :] * 0.98, SW_POWER, 0) \
        + np.where(temp > 87, SW_THERMAL, 0) + np.where(slowdown, HW_SLOWDOWN, 0)
    events = {"ECC_SBE_AGG_TOTAL": rng.poisson(sbe) * (1 + rng.poisson(2.0, (GPUS, T))),
              "ECC_DBE_AGG_TOTAL": rng.poisson(dbe),
              "CORRECTABLE_REMAPPED_ROWS": rng.poisson(remap),
              "UNCORRECTABLE_REMAPPED_ROWS": rng.poisson(dbe * 0.2),
              "PCIE_REPLAY_COUNTER": rng.poisson(replay)}
    xid = np.where(events["ECC_DBE_AGG_TOTAL"] > 0, 48, xid)
    for code, rate in xid_rate.items():
        xid = np.where(rng.random((GPUS, T)) < rate, code, xid)
    return {"GPU_TEMP": temp, "MEMORY_TEMP": temp + 6 + 4 * u,
            "POWER_USAGE": np.maximum(draw, 0.05 * tdp),
            "SM_CLOCK": np.clip(clock, m["idle_clock"] * 0.5, fmax),
            "CLOCK_THROTTLE_REASONS": throttle.astype(np.float64),
            "events": events, "xid": xid, "missing": missing}


VOLATILE = {"ECC_SBE_AGG_TOTAL", "ECC_DBE_AGG_TOTAL", "PCIE_REPLAY_COUNTER"}
XID_SHOWN_MIN = 5


def scrape_node(rng, truth, down, reloads, setting):
    """dcgm-exporter on one node: a scrape every interval seconds while the
    node is up; a GPU's sample missing where its truth says so, and 0.5% of
    scrapes lost (ASSUMPTION). Volatile counters restart at each driver
    reload and boot; the Xid gauge shows a code for XID_SHOWN_MIN
    minutes."""
    T = down.shape[0]
    iv = float(setting["interval"])
    ts = np.arange(rng.uniform(0, iv), T * 60.0, iv)
    minute = (ts // 60).astype(np.int64)
    up = ~down[minute] & (rng.random(len(ts)) >= 0.005)
    boots = np.r_[0, np.nonzero(down[:-1] & ~down[1:])[0] + 1]
    restarts = np.unique(np.r_[boots, np.asarray(reloads, np.int64)])
    epoch = np.searchsorted(restarts, minute, side="right") - 1
    present = set(features.SERIES)
    for family in set(features.OPTIONAL) - set(setting["families"]):
        present -= set(features.OPTIONAL[family])
    out = []
    for g in range(GPUS):
        keep = up & ~truth["missing"][g, minute]
        mm, ep = minute[keep], epoch[keep]
        v = {"GPU_TEMP": np.round(truth["GPU_TEMP"][g, mm]),
             "MEMORY_TEMP": np.round(truth["MEMORY_TEMP"][g, mm]),
             "POWER_USAGE": np.round(truth["POWER_USAGE"][g, mm], 1),
             "SM_CLOCK": np.round(truth["SM_CLOCK"][g, mm]),
             "CLOCK_THROTTLE_REASONS": truth["CLOCK_THROTTLE_REASONS"][g, mm]}
        for name, ev in truth["events"].items():
            total = np.cumsum(ev[g]).astype(np.float64)
            if name in VOLATILE:
                at_restart = np.r_[0.0, total[np.maximum(restarts[1:] - 1, 0)]]
                v[name] = total[mm] - at_restart[ep]
            else:
                v[name] = total[mm] + rng.poisson(2)
        codes = truth["xid"][g]
        at = np.r_[-10 ** 9, np.nonzero(codes)[0]]
        last = at[np.searchsorted(at, mm, side="right") - 1]
        v["XID_ERRORS"] = np.where(mm - last < XID_SHOWN_MIN, codes[np.maximum(last, 0)], 0.0)
        out.append(features.Scrapes(ts[keep], {k: x for k, x in v.items() if k in present}))
    return out


def simulate_fleet(setting, nodes, days, accel, mix=None):
    """As simulate.simulate_fleet: yields (node, [features.Scrapes per GPU],
    faults [(minute, class, gpu or -1 for the node, sick minutes)], down)
    per node. setting: seed, gpu (a GPU_MODELS key), interval, families."""
    mix = mix or fault_mix()
    rng = np.random.default_rng(setting["seed"] + 2_000_029)
    T = int(days * 1440)
    # the fleet's driver roll-out: one day, each node at its own minute
    rollout_day = int(rng.integers(max(int(days), 1))) * 1440
    for n in range(nodes):
        drawn, down = draw_faults(rng, T, accel, mix)
        weekly = int(rng.integers(7 * 1440))
        maintenance = list(range(weekly, T, 7 * 1440))
        rollout = rollout_day + int(rng.integers(1440))
        rollout = rollout if rollout < T else None
        truth = node_truth(rng, T, drawn, setting["gpu"], maintenance, rollout)
        reloads = maintenance + ([rollout] if rollout is not None else [])
        faults = []
        for at, cls, gpus, sick in drawn:
            if len(gpus) == GPUS:
                faults.append((at, cls, -1, sick))
            else:
                faults.extend((at, cls, g, sick) for g in gpus)
        yield n, scrape_node(rng, truth, down, reloads, setting), faults, down.copy()
