"""A fleet of 8-GPU servers as DCGM exporter shows it: one sample a minute
per GPU of the ten metrics in FEATURES, with the hardware faults of
sources.py and the telemetry that comes before them.

What is cited (sources.py): how often servers fail, the mix of fault
classes, how long repairs take. What is assumed (below, marked ASSUMPTION):
how each class shows in the telemetry beforehand, and the healthy fleet's
load, noise and benign events. The benign events are there so that static
thresholds alone cannot separate the classes: hot-aisle excursions above
85 C, application Xids (13, 31, 43) when a job crashes, uncorrectable
errors absorbed by row remapping, GPUs with a steady trickle of
single-bit errors, noisy PCIe links."""

import numpy as np

import sources

# Model inputs, in order: name, PromQL template for DCGM exporter (label
# Hostname as dcgm-exporter sets it, gpu the index).
SEL = '{Hostname="{{node}}",gpu="{{gpu}}"}'
FEATURES = [
    ("gpu_temp", "DCGM_FI_DEV_GPU_TEMP" + SEL),
    ("memory_temp", "DCGM_FI_DEV_MEMORY_TEMP" + SEL),
    ("power", "DCGM_FI_DEV_POWER_USAGE" + SEL),
    ("fb_used", "DCGM_FI_DEV_FB_USED" + SEL),
    ("sm_clock", "DCGM_FI_DEV_SM_CLOCK" + SEL),
    ("ecc_sbe_rate", "increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL" + SEL + "[5m])"),
    ("ecc_dbe_rate", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" + SEL + "[5m])"),
    ("remapped_rows", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS" + SEL),
    ("pcie_replay_rate", "increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER" + SEL + "[5m])"),
    ("xid", "DCGM_FI_DEV_XID_ERRORS" + SEL),
]
F = {name: i for i, (name, _) in enumerate(FEATURES)}
GPUS = 8
STEP_S = 60

# ASSUMPTION: the share of each class that strikes with nothing in the
# telemetry beforehand, and the range (minutes, log-uniform) over which the
# others build up.
SUDDEN = {"gpu_memory": 0.3, "power_supply": 0.4, "gpu_other": 0.4, "cooling": 0.15,
          "unseen": 1.0}
LEAD = {"gpu_memory": (30, 720), "power_supply": (15, 240), "gpu_other": (15, 360),
        "cooling": (20, 240), "unseen": (0, 0)}
NODE_LEVEL = {"power_supply", "cooling", "unseen"}


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


def _rolling_sum(x, width):
    c = np.cumsum(x, axis=-1)
    out = c.copy()
    out[..., width:] = c[..., width:] - c[..., :-width]
    return out


def _hold(events, hold):
    """A gauge that shows the last event's code for `hold` minutes."""
    out = np.zeros_like(events)
    for g, t in zip(*np.nonzero(events)):
        out[g, t:t + hold] = events[g, t]
    return out


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


def simulate_node(rng, minutes, faults):
    """Telemetry [GPUS, minutes, len(FEATURES)] float32 of one node."""
    G, T = GPUS, minutes
    t = np.arange(T)
    x = np.zeros((G, T, len(FEATURES)), np.float32)

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
    load = np.full(T, 0.03)
    fb = np.full(T, 450.0)
    xid_events = np.zeros((G, T))
    s = int(rng.integers(0, 60))
    while s < T:
        d = max(int(rng.exponential(360)), 30)
        level, mem = rng.uniform(0.75, 1.0), rng.uniform(20000, 79000)
        load[s:s + d] = level
        fb[s:s + d] = mem
        period = int(rng.integers(20, 61))
        for c in range(s + period, min(s + d, T), period):
            load[c:c + int(rng.integers(2, 5))] = 0.3 * level
        end = min(s + d, T) - 1
        if rng.random() < 0.08:  # an application crash: Xid 13, 31 or 43
            gpus = rng.choice(G, size=int(rng.integers(1, G + 1)), replace=False)
            xid_events[gpus, end] = rng.choice([13, 31, 43])
        s += d + max(int(rng.exponential(30)), 1)
    u = np.clip(load[None, :] + rng.normal(0, 0.03, (G, T)), 0, 1)

    eff = rng.uniform(0.92, 1.03, (G, 1))
    cool = rng.uniform(0.9, 1.1, (G, 1))
    power = 55 + u * 345 * eff
    power_sd = np.full((G, T), 6.0)
    temp_add = np.zeros((G, T))
    memtemp_add = np.zeros((G, T))
    brake = np.zeros((G, T), bool)
    clock_sd = np.full((G, T), 8.0)

    # ASSUMPTION: healthy error counters. Single-bit errors once in 3 days,
    # a steady trickle (one in 25 min) on 3% of GPUs; an uncorrectable
    # error absorbed by row remapping once in 180 days (Xid 48, a row
    # remapped); PCIe replays once a day, every 8 min on 2% of links.
    sbe_rate = np.where(rng.random((G, 1)) < 0.03, 1 / 25, 1 / (3 * 1440)) * np.ones((G, T))
    replay_rate = np.where(rng.random((G, 1)) < 0.02, 1 / 8, 1 / 1440) * np.ones((G, T))
    dbe_rate = np.full((G, T), 1 / (180 * 1440))
    remap_rate = np.zeros((G, T))
    fault_xid_rate = np.zeros((G, T))

    for start, cls, gpu, lead in faults:
        if lead <= 0:
            continue
        a = start - lead
        p = np.linspace(0, 1, lead, endpoint=False)
        rows = slice(None) if gpu < 0 else slice(gpu, gpu + 1)
        span = slice(a, start)
        # ASSUMPTION: how each class announces itself.
        if cls == "gpu_memory":  # HBM wearing out: correctable errors climb
            sbe_rate[rows, span] += 0.02 * np.exp(5 * p)
            remap_rate[rows, span] += 0.01 * p
            memtemp_add[rows, span] += 2.5 * p
            dbe_rate[rows, span] += np.where(p > 0.8, 0.02, 0.0)
        elif cls == "power_supply":  # a failing PSU: noisy draw, power brake
            power_sd[rows, span] += 25 * p
            hit = rng.random(lead) < 0.02 + 0.1 * p
            for i in np.nonzero(hit)[0]:
                brake[rows, a + i:a + i + int(rng.integers(1, 4))] = True
        elif cls == "gpu_other":  # link and board trouble: replays, Xids
            replay_rate[rows, span] += 0.05 * np.exp(4 * p)
            fault_xid_rate[rows, span] += 0.01 * p
            clock_sd[rows, span] += 60 * p
        elif cls == "cooling":  # a fan going: the whole node warms up
            temp_add[rows, span] += 18 * p ** 1.5

    power = np.where(brake, power * 0.55, power) + rng.normal(0, 1, (G, T)) * power_sd
    temp = _smooth(ambient[None, :] + 6 + u * 50 * cool, 3.0) + temp_add
    temp += rng.normal(0, 0.6, (G, T))
    memtemp = temp + 3 + 7 * u + memtemp_add + rng.normal(0, 0.6, (G, T))
    clock = np.where(u > 0.15, 1410.0, 210.0) - np.maximum(temp - 84, 0) * 45
    clock = np.where(brake, 600.0, clock) + rng.normal(0, 1, (G, T)) * clock_sd

    dbe = rng.poisson(dbe_rate)
    xid_events = np.where(dbe > 0, 48, xid_events)
    late = rng.random((G, T)) < fault_xid_rate
    xid_events = np.where(late, rng.choice([74, 79, 119], size=(G, T)), xid_events)
    remaps = rng.poisson(remap_rate) + dbe
    initial = np.where(rng.random((G, 1)) < 0.7, 0, rng.integers(1, 3, (G, 1)))

    x[..., F["gpu_temp"]] = temp
    x[..., F["memory_temp"]] = memtemp
    x[..., F["power"]] = np.clip(power, 40, 420)
    x[..., F["fb_used"]] = fb[None, :] * rng.uniform(0.98, 1.02, (G, 1))
    x[..., F["sm_clock"]] = np.clip(clock, 210, 1410)
    x[..., F["ecc_sbe_rate"]] = _rolling_sum(rng.poisson(sbe_rate), 5)
    x[..., F["ecc_dbe_rate"]] = _rolling_sum(dbe, 5)
    x[..., F["remapped_rows"]] = initial + np.cumsum(remaps, axis=1)
    x[..., F["pcie_replay_rate"]] = _rolling_sum(rng.poisson(replay_rate), 5)
    x[..., F["xid"]] = _hold(xid_events, 5)
    return x


def simulate_fleet(seed, nodes, days, accel, mix=None):
    """Yields (node, telemetry, faults, down) for each node of a fleet."""
    mix = mix or sources.fault_mix()
    rng = np.random.default_rng(seed)
    minutes = int(days * 1440)
    for n in range(nodes):
        faults, down = draw_faults(rng, minutes, accel, mix)
        yield n, simulate_node(rng, minutes, faults), faults, down
