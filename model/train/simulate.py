# SPDX-License-Identifier: Apache-2.0
"""Fleets of 8-GPU servers as dcgm-exporter shows them to Prometheus: raw
scrapes of the series features.py reads, with the hardware faults of
sources.py and the telemetry that comes before them.

What differs between fleets is a setting, so that training can be held out
on some: the GPU model (clocks, power limit, idle draw), the scrape
interval, and which optional families the exporter's counters file lists.
Within a fleet: workload phases (idle, training, checkpoint dips), driver
reloads (after every repair and at maintenance) that reset the volatile
PCIe replay counter and clear the held Xid, exporter gaps, lifetime
counters that start where years of service left them.

What is cited (sources.py): how often servers fail, the mix of fault
classes, how long repairs take. What is assumed (below, marked ASSUMPTION):
how each class shows in the telemetry beforehand, and the healthy fleet's
load, noise and benign events. The benign events are there so that static
thresholds alone cannot separate the classes: hot-aisle excursions above
85 C with thermal throttling, application Xids (13, 31, 43) held for days,
a double-bit error absorbed by row remapping (Xid 48 or 94 held for days),
GPUs with a steady trickle of single-bit errors, noisy PCIe links, brief
HW slowdowns."""

import numpy as np

import features
import sources

GPUS = 8
STEP_S = 60

# name: power limit (W), idle draw (W), max and idle SM clock (MHz), the
# temperature a full load adds over the inlet, Xid codes of a double-bit
# error (A100: 48; H100 also reports contained/uncontained ECC as 94/95)
GPU_MODELS = {
    "A100-40GB": {"tdp": 400.0, "idle": 55.0, "clock": 1410.0, "idle_clock": 210.0,
                  "heat": 48.0, "dbe_xids": (48,)},
    "A100-80GB": {"tdp": 400.0, "idle": 62.0, "clock": 1410.0, "idle_clock": 210.0,
                  "heat": 52.0, "dbe_xids": (48,)},
    "H100-80GB": {"tdp": 700.0, "idle": 72.0, "clock": 1980.0, "idle_clock": 345.0,
                  "heat": 55.0, "dbe_xids": (48, 94, 95)},
}

# ASSUMPTION: the share of each class that strikes with nothing in the
# telemetry beforehand, and the range (minutes, log-uniform) over which the
# others build up.
SUDDEN = {"gpu_memory": 0.3, "power_supply": 0.4, "gpu_other": 0.4, "cooling": 0.15,
          "unseen": 1.0}
LEAD = {"gpu_memory": (30, 720), "power_supply": (15, 240), "gpu_other": (15, 360),
        "cooling": (20, 240), "unseen": (0, 0)}
NODE_LEVEL = {"power_supply", "cooling", "unseen"}

# CLOCK_THROTTLE_REASONS bits
IDLE, SW_POWER, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 1, 4, 8, 32, 64, 128


def _smooth(x, tau):
    """Causal first-order lag with time constant tau (minutes) along the
    last axis."""
    n = x.shape[-1]
    k = np.exp(-np.arange(int(tau * 6) + 1) / tau)
    k /= k.sum()
    flat = x.reshape(-1, n)
    out = np.empty_like(flat)
    for i, row in enumerate(flat):
        padded = np.concatenate([np.full(len(k) - 1, row[0]), row])
        out[i] = np.convolve(padded, k, mode="valid")
    return out.reshape(x.shape)


def draw_faults(rng, minutes, accel, mix):
    """Fault times for one node: a Poisson process at the cited server MTBF
    divided by accel; after each, the node is out for a repair time drawn
    from the InfiniteHBD trace (also divided by accel, so the share of time
    down matches the trace's). Returns [(minute, class, gpu, lead)] and the
    down mask."""
    repairs = np.array(sources.infinitehbd_repair_hours())
    classes = list(mix)
    p = np.array([mix[c] for c in classes])
    rate = accel / (sources.SERVER_MTBF_HOURS * 60.0)
    down = np.zeros(minutes, bool)
    faults, t = [], 0.0
    last_up = 0
    while True:
        t += rng.exponential(1.0 / rate)
        if t >= minutes:
            break
        start = int(t)
        cls = classes[rng.choice(len(classes), p=p)]
        gpu = -1 if cls in NODE_LEVEL else int(rng.integers(GPUS))
        lo, hi = LEAD[cls]
        lead = 0
        if rng.random() >= SUDDEN[cls]:
            lead = int(np.exp(rng.uniform(np.log(lo), np.log(hi))))
            lead = min(lead, start - last_up)
        faults.append((start, cls, gpu, max(lead, 0)))
        end = start + max(int(rng.choice(repairs) * 60.0 / accel), 30)
        down[start:min(end, minutes)] = True
        t = float(end)
        last_up = end
    return faults, down


def driver_reloads(rng, down):
    """Minutes at which the driver loads again: the end of every outage
    (a repaired node boots) and, ASSUMPTION, a maintenance reboot every
    5..20 days (the node away 5..12 minutes, added to down)."""
    T = len(down)
    t = int(rng.integers(5 * 1440, 20 * 1440))
    while t < T:
        down[t:t + int(rng.integers(5, 13))] = True
        t += int(rng.integers(5 * 1440, 20 * 1440))
    ends = np.nonzero(down[:-1] & ~down[1:])[0] + 1
    return ends


def node_state(rng, minutes, faults, gpu):
    """Minute-level truth of one node for a GPU model: gauges [GPUS, T]
    (temp, memtemp, power, clock, throttle bitmask), per-minute counts of
    counter events, and Xid events (code, or 0)."""
    G, T = GPUS, minutes
    t = np.arange(T)
    m = GPU_MODELS[gpu]
    tdp, clock_max = m["tdp"], m["clock"]

    # ASSUMPTION: the machine room. 24 C with a daily swing and a slow
    # drift; hot-aisle excursions (+8..16 C for 10..40 min) every 4 days on
    # average, enough to take a loaded GPU past 85 C.
    ambient = 24 + 1.5 * np.sin(2 * np.pi * t / 1440 + rng.uniform(0, 6.3))
    ambient += _smooth(rng.normal(0, 3.0, T), 120.0)
    for _ in range(rng.poisson(T / (1440 * 4))):
        s, d = int(rng.integers(T)), int(rng.integers(10, 41))
        ambient[s:s + d] += rng.uniform(8, 16) * np.sin(np.linspace(0, np.pi, d))[:T - s]

    # ASSUMPTION: the load. Training jobs of 6 h on average (all GPUs of
    # the node together), idle gaps, checkpoint dips every 20..60 min.
    load = np.full(T, 0.0)
    xid_events = np.zeros((G, T))
    s = int(rng.integers(0, 60))
    while s < T:
        d = max(int(rng.exponential(360)), 30)
        level = rng.uniform(0.7, 1.0)
        load[s:s + d] = level
        period = int(rng.integers(20, 61))
        for c in range(s + period, min(s + d, T), period):
            load[c:c + int(rng.integers(2, 5))] = 0.25 * level
        end = min(s + d, T) - 1
        if rng.random() < 0.08:  # an application crash: Xid 13, 31 or 43
            gpus = rng.choice(G, size=int(rng.integers(1, G + 1)), replace=False)
            xid_events[gpus, end] = rng.choice([13, 31, 43])
        s += d + max(int(rng.exponential(30)), 1)
    busy = load > 0.15
    u = np.clip(load[None, :] + rng.normal(0, 0.03, (G, T)) * busy, 0, 1)

    eff = rng.uniform(0.92, 1.03, (G, 1))
    cool = rng.uniform(0.9, 1.1, (G, 1))
    power_sd = np.full((G, T), 0.015 * tdp)
    temp_add = np.zeros((G, T))
    memtemp_add = np.zeros((G, T))
    brake = np.zeros((G, T), bool)
    # ASSUMPTION: a brief HW slowdown (1..2 min) once in 10 days per GPU
    slowdown = np.zeros((G, T), bool)
    for g, s in zip(*np.nonzero(rng.random((G, T)) < 1 / (10 * 1440))):
        slowdown[g, s:s + int(rng.integers(1, 3))] = True
    clock_sd = np.full((G, T), 0.006 * clock_max)

    # ASSUMPTION: healthy error counters. Single-bit errors once in 3 days,
    # a steady trickle (one in 25 min) on 3% of GPUs; an uncorrectable
    # error absorbed by row remapping once in 180 days (a row remapped, the
    # DBE Xid held); PCIe replays once a day, every 8 min on 2% of links.
    sbe_rate = np.where(rng.random((G, 1)) < 0.03, 1 / 25, 1 / (3 * 1440)) * np.ones((G, T))
    replay_rate = np.where(rng.random((G, 1)) < 0.02, 1 / 8, 1 / 1440) * np.ones((G, T))
    dbe_rate = np.full((G, T), 1 / (180 * 1440))
    remap_rate = np.zeros((G, T))
    fault_xid_rate = np.zeros((G, T))

    for start, cls, g, lead in faults:
        if lead <= 0:
            continue
        a = start - lead
        p = np.linspace(0, 1, lead, endpoint=False)
        rows = slice(None) if g < 0 else slice(g, g + 1)
        span = slice(a, start)
        # ASSUMPTION: how each class announces itself.
        if cls == "gpu_memory":  # HBM wearing out: correctable errors climb
            sbe_rate[rows, span] += 0.02 * np.exp(5 * p)
            remap_rate[rows, span] += 0.01 * p
            memtemp_add[rows, span] += 2.5 * p
            dbe_rate[rows, span] += np.where(p > 0.8, 0.02, 0.0)
        elif cls == "power_supply":  # a failing PSU: noisy draw, power brake
            power_sd[rows, span] += 0.06 * tdp * p
            hit = rng.random(lead) < 0.02 + 0.1 * p
            for i in np.nonzero(hit)[0]:
                brake[rows, a + i:a + i + int(rng.integers(1, 4))] = True
        elif cls == "gpu_other":  # link and board trouble: replays, Xids
            replay_rate[rows, span] += 0.05 * np.exp(4 * p)
            fault_xid_rate[rows, span] += 0.01 * p
            clock_sd[rows, span] += 0.04 * clock_max * p
        elif cls == "cooling":  # a fan going: the whole node warms up
            temp_add[rows, span] += 18 * p ** 1.5

    draw = m["idle"] + u * (tdp - m["idle"]) * eff
    draw = np.where(brake, draw * 0.55, draw) + rng.normal(0, 1, (G, T)) * power_sd
    temp = _smooth(ambient[None, :] + 6 + u * m["heat"] * cool, 3.0) + temp_add
    temp += rng.normal(0, 0.6, (G, T))
    memtemp = temp + 3 + 7 * u + memtemp_add + rng.normal(0, 0.6, (G, T))
    hot = np.maximum(temp - 84, 0)
    clock = np.where(u > 0.15, clock_max, m["idle_clock"]) - hot * 0.032 * clock_max
    clock = np.where(brake | slowdown, 0.42 * clock_max, clock)
    clock = clock + rng.normal(0, 1, (G, T)) * clock_sd
    throttle = np.where(u > 0.15, 0, IDLE) + np.where(draw > 0.97 * tdp, SW_POWER, 0) \
        + np.where(temp > 83, SW_THERMAL, 0) + np.where(temp > 88, HW_THERMAL, 0) \
        + np.where(brake, POWER_BRAKE + HW_SLOWDOWN, 0) + np.where(slowdown, HW_SLOWDOWN, 0)

    dbe = rng.poisson(dbe_rate)
    dbe_xid = rng.choice(m["dbe_xids"], size=(G, T))
    xid_events = np.where(dbe > 0, dbe_xid, xid_events)
    late = rng.random((G, T)) < fault_xid_rate
    xid_events = np.where(late, rng.choice([74, 79, 119], size=(G, T)), xid_events)
    return {
        "GPU_TEMP": temp, "MEMORY_TEMP": memtemp,
        "POWER_USAGE": np.clip(draw, 0.1 * tdp, 1.05 * tdp),
        "SM_CLOCK": np.clip(clock, m["idle_clock"], clock_max),
        "CLOCK_THROTTLE_REASONS": throttle.astype(np.float64),
        "events": {"ECC_SBE_AGG_TOTAL": rng.poisson(sbe_rate), "ECC_DBE_AGG_TOTAL": dbe,
                   "CORRECTABLE_REMAPPED_ROWS": rng.poisson(remap_rate),
                   "UNCORRECTABLE_REMAPPED_ROWS": dbe,
                   "PCIE_REPLAY_COUNTER": rng.poisson(replay_rate)},
        "xid": xid_events,
    }


def scrape_node(rng, state, down, reloads, setting):
    """features.Scrapes of every GPU of a node: a scrape every
    setting["interval"] seconds from a random phase while the node is up,
    ASSUMPTION: less an exporter gap of 2..10 min once in 3 days."""
    T = down.shape[0]
    iv = float(setting["interval"])
    ts = np.arange(rng.uniform(0, iv), T * 60.0, iv)
    minute = (ts // 60).astype(np.int64)
    keep = ~down[minute]
    for _ in range(rng.poisson(T / (3 * 1440))):
        s = rng.uniform(0, T * 60.0)
        keep &= ~((ts >= s) & (ts < s + rng.uniform(120, 600)))
    ts, minute = ts[keep], minute[keep]
    # the driver loads at each reload minute: since[g] is the reload epoch
    epoch = np.searchsorted(reloads, minute, side="right")
    present = set(features.SERIES)
    for family in set(features.OPTIONAL) - set(setting["families"]):
        present -= set(features.OPTIONAL[family])
    out = []
    for g in range(GPUS):
        v = {}
        n = len(ts)
        v["GPU_TEMP"] = np.round(state["GPU_TEMP"][g, minute] + rng.normal(0, 0.3, n))
        v["MEMORY_TEMP"] = np.round(state["MEMORY_TEMP"][g, minute] + rng.normal(0, 0.3, n))
        v["POWER_USAGE"] = np.round(state["POWER_USAGE"][g, minute]
                                    * rng.normal(1, 0.01, n), 3)
        v["SM_CLOCK"] = np.round(state["SM_CLOCK"][g, minute] / 15) * 15
        v["CLOCK_THROTTLE_REASONS"] = state["CLOCK_THROTTLE_REASONS"][g, minute]
        for name, ev in state["events"].items():
            total = np.cumsum(ev[g])
            if name == "PCIE_REPLAY_COUNTER":  # volatile: counts since the driver loaded
                at_reload = np.r_[0, total[np.maximum(reloads - 1, 0)]]
                v[name] = (total[minute] - at_reload[epoch]).astype(np.float64)
            else:  # lifetime, from where years of service left it
                base = {"ECC_SBE_AGG_TOTAL": rng.integers(0, 400),
                        "CORRECTABLE_REMAPPED_ROWS": rng.integers(0, 3)}.get(name, 0)
                v[name] = (base + total[minute]).astype(np.float64)
        # the last Xid seen since the driver loaded (0 until one comes)
        codes = state["xid"][g]
        at = np.r_[-1, np.nonzero(codes)[0]]  # -1: none yet
        last = at[np.searchsorted(at, minute, side="right") - 1]
        since_reload = last >= np.r_[0, reloads][epoch]
        v["XID_ERRORS"] = np.where(since_reload & (last >= 0), codes[np.maximum(last, 0)], 0.0)
        out.append(features.Scrapes(ts, {k: x for k, x in v.items() if k in present}))
    return out


def fault_mix():
    """The shares of the fault classes: sources.fault_mix (the source
    documents' memory and power supply shares, the rest as the InfiniteHBD
    trace splits it)."""
    return sources.fault_mix()


def simulate_fleet(setting, nodes, days, accel, mix=None):
    """Yields (node, [features.Scrapes per GPU], faults, down) for each node
    of a fleet; setting: seed, gpu (a GPU_MODELS key), interval (seconds),
    families (the features.OPTIONAL families exported)."""
    mix = mix or fault_mix()
    rng = np.random.default_rng(setting["seed"])
    minutes = int(days * 1440)
    for n in range(nodes):
        faults, down = draw_faults(rng, minutes, accel, mix)
        outage = down.copy()
        reloads = driver_reloads(rng, down)
        state = node_state(rng, minutes, faults, setting["gpu"])
        yield n, scrape_node(rng, state, down, reloads, setting), faults, outage
