# SPDX-License-Identifier: Apache-2.0
"""The published figures the simulator is built on, each with its source.

Nothing here is fitted to medic's own data: these are the numbers a reader
can check. The simulator's own assumptions (how each fault shows in the
telemetry beforehand) are in simulate.py, marked as assumptions."""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE_DIR = os.path.join(HERE, "..", "..", "tests", "data", "infinitehbd-trace")

# The source documents' figure for an 8xA100 server: a mean time between
# failures of about 1,426 hours, memory behind 38% of failures and the power
# supply behind 24%.
SERVER_MTBF_HOURS = 1426.0
SHARE_MEMORY = 0.38
SHARE_POWER_SUPPLY = 0.24

# The Llama 3 training report (Meta, "The Llama 3 Herd of Models", 2024,
# section 3.3.4): 419 unexpected interruptions in a 54-day snapshot on
# 16,384 H100 GPUs; faulty GPU 148 (30.1%), GPU HBM3 memory 72 (17.2%),
# network switch and cable 35 (8.4%), GPU SRAM memory 19 (4.5%), GPU system
# processor 17 (4.1%); GPU issues 58.7% of all unexpected interruptions.
LLAMA3 = {
    "interruptions": 419, "days": 54, "gpus": 16384,
    "faulty_gpu": 0.301, "hbm3_memory": 0.172, "network": 0.084,
    "sram_memory": 0.045, "gpu_system_processor": 0.041, "gpu_total": 0.587,
}


def llama3_gpu_mtbf_hours():
    """Hours between unexpected interruptions per GPU in the Llama 3 run."""
    return LLAMA3["days"] * 24.0 * LLAMA3["gpus"] / LLAMA3["interruptions"]


def infinitehbd_hardware_classes():
    """Hardware fault counts per class from the InfiniteHBD trace (400
    servers, 348 days; Apache-2.0, LICENSE next to the data)."""
    with open(os.path.join(TRACE_DIR, "fault_statistics.json")) as f:
        stats = json.load(f)
    hw = stats["Hardware Failure"]
    return {k: v for k, v in hw.items() if isinstance(v, dict)}


def infinitehbd_server_mtbf_hours():
    """Server-hours per hardware fault in the InfiniteHBD trace (400
    servers over its span)."""
    with open(os.path.join(TRACE_DIR, "fault_trace.json")) as f:
        events = json.load(f)
    starts = [e for e in events if e["event_type"] == "fault_start"
              and e["fault_type"]["Level"] == "Hardware Failure"]
    days = max(e["event_time"] for e in events)
    return 400 * days * 24.0 / len(starts)


def infinitehbd_repair_hours():
    """Durations (hours) from fault_start to fault_end of the trace's
    hardware faults: how long a failed node stays out."""
    with open(os.path.join(TRACE_DIR, "fault_trace.json")) as f:
        events = json.load(f)
    open_faults, hours = {}, []
    for e in events:
        if e["fault_type"]["Level"] != "Hardware Failure":
            continue
        key = (e["node_id"], e["fault_type"]["Class"], e["fault_type"]["Desc"])
        if e["event_type"] == "fault_start":
            open_faults[key] = e["event_time"]
        elif key in open_faults:
            hours.append((e["event_time"] - open_faults.pop(key)) * 24.0)
    return [h for h in hours if h > 0]


def fault_mix():
    """Shares of the simulator's fault classes. Memory and power supply take
    the source documents' 38% and 24%; the remaining 38% is split as the
    InfiniteHBD trace splits its other hardware faults: GPU faults other than
    ECC (Xid, lost, PCIe link, timeouts), fans (cooling), and faults that GPU
    telemetry cannot see (NIC, cables, motherboard, CPU, ...)."""
    hw = infinitehbd_hardware_classes()
    gpu = hw["GPU"]
    ecc = sum(v for k, v in gpu.items() if "ECC" in k)
    gpu_other = gpu["ClassTotal"] - ecc
    fan = hw["Fan"]["ClassTotal"]
    unseen = sum(v["ClassTotal"] for k, v in hw.items()
                 if k not in ("GPU", "Fan", "Power Supply"))
    rest = 1.0 - SHARE_MEMORY - SHARE_POWER_SUPPLY
    total = gpu_other + fan + unseen
    return {
        "gpu_memory": SHARE_MEMORY,
        "power_supply": SHARE_POWER_SUPPLY,
        "gpu_other": rest * gpu_other / total,
        "cooling": rest * fan / total,
        "unseen": rest * unseen / total,
    }
