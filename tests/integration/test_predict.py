#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""medic predict against a real Prometheus whose history was backfilled
with `promtool tsdb create-blocks-from openmetrics`: the risk from
Prometheus equals the risk from the same window given as CSV (the CSV path
runs the forward pass checked against PyTorch's vectors); every GPU of an
8-GPU node is scored and the highest risk is the node's; a GPU whose
telemetry stopped while its node's others report is lost, risk 1 with how
long, on the node path and in medic serve's decisions and /metrics; any
other gap longer than 5 steps and a stopped Prometheus give clear errors,
in bounded time."""

import datetime
import json
import math
import os
import re
import signal
import socket
import subprocess
import time

from lab import Medic, Process, Suite, free_port, request, require_binary, wait_until, \
    write_secret

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "data", "lstm", "dcgm-d8-w30.model.safetensors")
METRICS = ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_POWER_USAGE",
           "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
           "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS"]


def value(metric, node, gpu, t):
    """Known telemetry: smooth, different per GPU, with a hot GPU 5 on gpu-node-08."""
    hot = 25.0 if (node == "gpu-node-08" and gpu == 5) else 0.0
    base = {"DCGM_FI_DEV_GPU_TEMP": 55 + hot + 5 * math.sin(t / 600 + gpu),
            "DCGM_FI_DEV_MEMORY_TEMP": 60 + hot + 4 * math.cos(t / 900 + gpu),
            "DCGM_FI_DEV_POWER_USAGE": 240 + 30 * math.sin(t / 300 + gpu),
            "DCGM_FI_DEV_FB_USED": 30000 + 1000 * gpu,
            "DCGM_FI_DEV_SM_CLOCK": 1410 - 10 * gpu,
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": int(t / 1800) * (gpu % 2),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
            "DCGM_FI_DEV_XID_ERRORS": 79 if hot and t % 1200 < 300 else 0}[metric]
    return round(base, 3)


def openmetrics(nodes, start, end, step=15, holes=()):
    """holes: ((node, gpu), from, to): that GPU has no sample in [from, to)."""
    lines = []
    for m in METRICS:
        lines.append(f"# TYPE {m} gauge")
        for node, gpus in nodes.items():
            for g in range(gpus):
                for t in range(start, end + 1, step):
                    if any((node, g) == h[0] and h[1] <= t < h[2] for h in holes):
                        continue
                    lines.append(f'{m}{{Hostname="{node}",gpu="{g}",job="dcgm"}} '
                                 f"{value(m, node, g, t)} {t}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def start_prometheus(suite, name, history):
    prom_bin, promtool = require_binary("prometheus"), require_binary("promtool")
    d = suite.subdir(name)
    om = os.path.join(d, "history.om")
    with open(om, "w") as f:
        f.write(history)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", om,
                    os.path.join(d, "data")], check=True, capture_output=True, timeout=120)
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global: { scrape_interval: 15s }\n")
    port = free_port()
    p = Process("prometheus", [prom_bin, f"--config.file={d}/prometheus.yml",
                               f"--storage.tsdb.path={d}/data",
                               f"--web.listen-address=127.0.0.1:{port}",
                               "--storage.tsdb.retention.time=30d"], d)
    suite.on_exit(p.stop)
    url = f"http://127.0.0.1:{port}"
    wait_until("prometheus ready", lambda: request("GET", url + "/-/ready")[0] == 200, timeout=30)
    # the backfilled block is there once a query sees it
    wait_until("history queryable", lambda: json.loads(request(
        "GET", url + "/api/v1/query?query=count(DCGM_FI_DEV_GPU_TEMP)")[2])["data"]["result"],
        timeout=90)
    return url, p


def predict(suite, *args):
    out = subprocess.run([suite.medic, "predict", "--model", MODEL, "--format", "json", *args],
                         capture_output=True, text=True, timeout=60)
    return out


def window_csv(path, node, gpu, end, first_sample, last_sample, steps=30, step=60):
    """The window medic reads, computed from the same formula: the value of
    each feature at each grid time (the latest sample at or before it).
    For a GPU whose counters do not move, increase() is 0."""
    names = ["gpu_temp", "memory_temp", "power", "fb_used", "sm_clock", "ecc_sbe_rate",
             "ecc_dbe_rate", "xid"]
    with open(path, "w") as f:
        f.write(",".join(names) + "\n")
        for k in range(steps):
            t = end - (steps - 1 - k) * step
            sample = min(first_sample + (t - first_sample) // 15 * 15, last_sample)
            row = []
            for m in METRICS:
                if m.endswith("_TOTAL"):
                    assert value(m, node, gpu, sample) == value(m, node, gpu, first_sample)
                    row.append("0")
                else:
                    row.append(str(value(m, node, gpu, sample)))
            f.write(",".join(row) + "\n")


def test_prometheus_window_matches_csv(suite):
    now = int(time.time())
    end_hist = now - 30
    history = openmetrics({"gpu-node-01": 2, "gpu-node-08": 8}, end_hist - 2 * 3600, end_hist)
    url, _ = start_prometheus(suite, "prom", history)
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-01", "--gpu", "0")
    grid_end = int(time.time()) // 60 * 60  # the window ends at now, aligned down to the step
    assert out.returncode == 0, out.stderr
    from_prom = json.loads(out.stdout)
    assert grid_end <= end_hist + 300  # still inside Prometheus' 5 minute lookback
    csv = os.path.join(suite.workdir, "window.csv")
    window_csv(csv, "gpu-node-01", 0, grid_end, end_hist - 2 * 3600, end_hist)
    from_csv = json.loads(predict(suite, "--csv", csv).stdout)
    assert abs(from_prom["risk"] - from_csv["risk"]) < 1e-5, (from_prom, from_csv)
    print(f"  gpu-node-01 gpu 0: risk {from_prom['risk']:.6f} from Prometheus, "
          f"{from_csv['risk']:.6f} from the same window as CSV")
    # every GPU of an 8-GPU node: the node's risk is the highest
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-08")
    node = json.loads(out.stdout)
    assert len(node["gpus"]) == 8, node
    assert node["risk"] == max(g["risk"] for g in node["gpus"]), node
    hot = [g for g in node["gpus"] if g["gpu"] == "5"][0]
    print(f"  gpu-node-08: 8 GPUs scored, node risk {node['risk']:.4f}, hot GPU 5 "
          f"{hot['risk']:.4f}")
    # a node Prometheus does not know
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-99")
    assert out.returncode == 1 and "no gpu_temp series for node gpu-node-99" in out.stderr, out


def lost_gpu(end_hist):
    """gpu-node-04's GPU 2 sends nothing for its last 12 minutes while the
    node's other three go on: Prometheus still answers its last sample for
    5 of them, so it is silent for the window's last 7 steps or more."""
    return (("gpu-node-04", 2), end_hist - 720, end_hist + 1)


def check_lost(gpus):
    """medic predict's GPUs of gpu-node-04: GPU 2 lost, the others scored."""
    lost = [g for g in gpus if g.get("reason")]
    assert [g["gpu"] for g in lost] == ["2"] and lost[0]["risk"] == 1, gpus
    assert lost[0]["telemetry_lost_seconds"] >= 6 * 60, lost
    assert lost[0]["reason"].startswith("telemetry lost: nothing for the last "), lost
    assert all(g["risk"] < 1 for g in gpus if g["gpu"] != "2"), gpus
    return lost[0]


def test_gap_and_prometheus_down(suite):
    now = int(time.time())
    end_hist = now - 30
    history = openmetrics({"gpu-node-02": 1, "gpu-node-04": 4}, end_hist - 2 * 3600, end_hist,
                          holes=[(("gpu-node-02", 0), end_hist - 1500, end_hist - 600),
                                 lost_gpu(end_hist)])
    url, prom = start_prometheus(suite, "gap", history)
    # a gap in a node's only GPU: no other GPU tells it from the exporter's
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-02", "--gpu", "0")
    assert out.returncode == 1 and "a gap in the window" in out.stderr, out
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-02")
    assert out.returncode == 1 and "a gap in the window" in out.stderr, out
    # a GPU silent while its node's others report is lost
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-04")
    assert out.returncode == 0, out
    node = json.loads(out.stdout)
    lost = check_lost(node["gpus"])
    assert node["risk"] == 1 and len(node["gpus"]) == 4, node
    print(f"  gpu-node-04: gpu 2 risk 1, {lost['reason']}; the others "
          f"{max(g['risk'] for g in node['gpus'] if g['gpu'] != '2'):.4f} at most")
    # asked for alone it is lost too: its node's other GPUs are fetched to
    # tell it from its exporter, as for an alert on it
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-04", "--gpu", "2")
    assert out.returncode == 0, out
    alone = json.loads(out.stdout)
    assert alone["risk"] == 1 and [g["gpu"] for g in alone["gpus"]] == ["2"], alone
    assert alone["gpus"][0]["reason"] == lost["reason"], (alone, lost)
    # a sibling asked for alone is scored by the model, as in the node's answer
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-04", "--gpu", "1")
    assert out.returncode == 0, out
    one = json.loads(out.stdout)
    assert [g["gpu"] for g in one["gpus"]] == ["1"] and one["risk"] < 1, one
    assert abs(one["risk"] - next(g["risk"] for g in node["gpus"] if g["gpu"] == "1")) < 1e-6
    # a lost GPU has no window to write
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-04", "--gpu", "2",
                  "--window-csv", os.path.join(suite.workdir, "lost.csv"))
    assert out.returncode == 1 and "gpu 2 is lost (telemetry lost: " in out.stderr, out
    assert not os.path.exists(os.path.join(suite.workdir, "lost.csv"))
    prom.stop()
    started = time.monotonic()
    out = predict(suite, "--prometheus", url, "--node", "gpu-node-02", "--gpu", "0")
    assert out.returncode == 1 and "prometheus http://127.0.0.1" in out.stderr, out
    assert time.monotonic() - started < 10


SERVE_CONFIG = """
model: { path: %s, fleet_interval: 1s }
prometheus: { url: %s, timeout: 3s }
inventory:
  nodes: [ { name: gpu-node-01 }, { name: gpu-node-08 } ]
policies:
  - name: risky-gpu
    match: '{alertname="GPUHot"}'
    when: { risk_at_least: 0.0, risk_unknown: skip }
    steps:
      - action: drain
"""


def hot_alert(node, gpu=None):
    labels = {"alertname": "GPUHot", "Hostname": node}
    if gpu is not None:
        labels["gpu"] = gpu
    alert = {"status": "firing", "labels": labels, "annotations": {},
             # to the microsecond: the same alert sent again within a second
             # would be a duplicate, recorded and not evaluated again
             "startsAt": datetime.datetime.now(datetime.timezone.utc).isoformat().replace(
                 "+00:00", "Z"),
             "endsAt": "0001-01-01T00:00:00Z"}
    return json.dumps({"version": "4", "groupKey": f"{{}}:{{Hostname=\"{node}\"}}",
                       "status": "firing", "receiver": "medic", "groupLabels": {},
                       "commonLabels": {}, "commonAnnotations": {}, "externalURL": "",
                       "alerts": [alert]})


def prometheus_query_ranges(url):
    body = request("GET", url + "/metrics")[2].decode()
    return sum(float(line.split()[-1]) for line in body.splitlines()
               if line.startswith("prometheus_http_requests_total{")
               and 'handler="/api/v1/query_range"' in line)


def quiet(url):
    """Waits until Prometheus has answered every query_range under way:
    its counter holds still across half a second."""
    last = [None]

    def still():
        now = prometheus_query_ranges(url)
        held, last[0] = now == last[0], now
        return held
    wait_until("Prometheus to finish its queries", still, timeout=20, interval=0.5)


def alert_before_a_step_takes_the_fleets_risk(medic, auth):
    """Fleet scoring runs a cycle ahead of each step of the model's window
    and exports the risks of the window ending at that step; an alert
    decided before the step, its window ending a step earlier, still takes
    the risk of the cycle before and asks Prometheus nothing. First, what
    is watched is alive: an alert on gpu-node-03, whose only GPU the fleet
    leaves out, asks Prometheus itself."""
    asked = "medic_risk_prometheus_requests_total"

    def decision(node, gpu):
        seen = len(medic.audit("decisions"))
        status, _, body = medic.post("/webhook", hot_alert(node, gpu), headers=auth)
        assert status == 200, body
        return wait_until("the decision", lambda: medic.audit("decisions")[:-seen or None],
                          timeout=20)[0]

    before = medic.metric(asked)
    d = decision("gpu-node-03", "0")
    assert d["risk"] is None and medic.metric(asked) > before, (d, medic.metric(asked))
    # the window of the exported risks ends at a step still to come
    end = wait_until("a cycle ahead of the next step", lambda: (lambda e: e if e > time.time()
                     else None)(medic.metric(
                         "medic_fleet_scoring_window_end_timestamp_seconds")), timeout=75)
    before = medic.metric(asked)
    d = decision("gpu-node-08", "5")
    assert d["risk"] is not None and medic.metric(asked) == before, (d, medic.metric(asked))
    early = time.time() < end
    print(f"  a cycle ahead of the step at {time.strftime('%H:%M:%S', time.gmtime(end))}: an "
          f"alert {'before' if early else 'just after'} it took the fleet's risk "
          f"{d['risk']:.6f}, no query of its own")


def test_round_fetches_its_nodes_together(suite, url, token, expected, fleet_medic):
    """One notification with alerts on four nodes (one decision each): the engine asks
    Prometheus once per model feature for all of them (counted by
    Prometheus itself; this medic does no fleet scoring, and the one that
    does is stopped meanwhile), and each alert gets its own GPU's risk, or
    the reason it has none, or that its telemetry is lost. expected() gives
    medic predict's risks, asked
    before and after the round: a step of the model's window may begin
    between them."""
    workdir = suite.subdir("serve-batch")
    medic = Medic(suite.medic, workdir, f"auth: {{ webhook_bearer_token_file: {token} }}\n" +
                  SERVE_CONFIG.replace("fleet_interval: 1s", "fleet_interval: off") % (os.path.abspath(MODEL), url))
    medic.start()
    suite.on_exit(medic.stop)
    alerts = []
    for node, gpu in [("gpu-node-08", "5"), ("gpu-node-01", "1"), ("gpu-node-03", "0"),
                      ("gpu-node-04", "2")]:
        alerts += json.loads(hot_alert(node, gpu))["alerts"]
    body = json.loads(hot_alert("gpu-node-08"))
    body["alerts"] = alerts
    os.kill(fleet_medic.process.pid, signal.SIGSTOP)
    try:
        quiet(url)
        before = expected()
        quiet(url)
        asked = prometheus_query_ranges(url)
        status, _, answer = medic.post("/webhook", json.dumps(body),
                                       headers={"Authorization": "Bearer risk-token"})
        assert status == 200, answer
        got = wait_until("four decisions", lambda: (lambda d: d if len(d) == 4 else None)(
            medic.audit("decisions")), timeout=20)
        quiet(url)
        assert prometheus_query_ranges(url) - asked == 8, "one query_range per feature"
    finally:
        os.kill(fleet_medic.process.pid, signal.SIGCONT)
    after = expected()
    by_gpu = {}
    for d in got:
        gpu = re.search(r"gpu (\S+) \(", d["reason"] or "")
        by_gpu[(d["node"], gpu.group(1) if gpu else None)] = d
    for (node, gpu), risk in before.items():
        if (node, str(gpu)) in by_gpu:
            got_risk = by_gpu[(node, str(gpu))]["risk"]
            assert min(abs(got_risk - risk), abs(got_risk - after[(node, gpu)])) < 1e-5, (
                node, gpu, risk, after[(node, gpu)], by_gpu)
    unknown = [d for d in got if d["node"] == "gpu-node-03"]
    assert len(unknown) == 1 and unknown[0]["risk"] is None, got
    assert "a gap in the window" in unknown[0]["reason"], unknown
    lost = [d for d in got if d["node"] == "gpu-node-04"]
    assert len(lost) == 1 and lost[0]["risk"] == 1, got
    assert re.search(r"risk 1\.0* gpu 2 \(telemetry lost: nothing for the last \d+m while the "
                     r"node's other GPUs reported\)$", lost[0]["reason"]), lost
    assert sorted(d["node"] for d in got if d["risk"] is not None) == [
        "gpu-node-01", "gpu-node-04", "gpu-node-08"], got
    checked = [k for k in before if (k[0], str(k[1])) in by_gpu]
    assert len(checked) == 2, (checked, by_gpu)
    print("  one notification, alerts on 4 nodes: 8 query_range requests in all; "
          f"gpu-node-03: {unknown[0]['reason'][-90:]}; gpu-node-04: {lost[0]['reason'][-100:]}")
    medic.stop()


def clear_of_a_step_boundary(medic, margin=10):
    """The fleet's cycle ahead of each step boundary (the model's 60 s)
    scores the window ending there a moment early, so that just before one
    /metrics and a decision may hold the next window's risk while medic
    predict still scores this one. Waits until a second or more past a
    boundary and margin seconds or more before the next, then for a whole
    cycle begun since."""
    wait_until("clear of a step boundary", lambda: margin < 60 - time.time() % 60 < 59,
               timeout=70, interval=0.2)
    cycles = medic.metric("medic_fleet_scoring_cycles_total")
    wait_until("a fleet cycle in this step",
               lambda: medic.metric("medic_fleet_scoring_cycles_total") >= cycles + 2, timeout=20)


def test_serve_enriches_alerts_with_risk(suite):
    now = int(time.time())
    end_hist = now - 30
    # gpu-node-03's only GPU has a 15 minute hole in its window: fleet
    # scoring leaves it out and counts it; gpu-node-04's GPU 2 is lost
    history = openmetrics({"gpu-node-01": 2, "gpu-node-08": 8, "gpu-node-03": 1,
                           "gpu-node-04": 4}, end_hist - 2 * 3600, end_hist,
                          holes=[(("gpu-node-03", 0), end_hist - 1500, end_hist - 600),
                                 lost_gpu(end_hist)])
    url, prom = start_prometheus(suite, "serve-prom", history)
    workdir = suite.subdir("serve")
    token = write_secret(os.path.join(workdir, "webhook.token"), "risk-token")
    medic = Medic(suite.medic, workdir, f"auth: {{ webhook_bearer_token_file: {token} }}\n" +
                  SERVE_CONFIG % (os.path.abspath(MODEL), url))
    medic.start()
    suite.on_exit(medic.stop)
    auth = {"Authorization": "Bearer risk-token"}

    def expected(*args):
        return json.loads(predict(suite, "--prometheus", url, "--node", *args).stdout)["risk"]

    cases = [("gpu-node-08", "5"), ("gpu-node-08", None), ("gpu-node-01", "1")]
    closed = set()
    for node, gpu in cases:
        args = [node] + (["--gpu", gpu] if gpu else [])
        clear_of_a_step_boundary(medic)
        before = expected(*args)
        seen = len(medic.audit("decisions"))
        fired = hot_alert(node, gpu)
        status, _, body = medic.post("/webhook", fired, headers=auth)
        assert status == 200, body
        d = wait_until("the decision", lambda: medic.audit("decisions")[:-seen or None],
                       timeout=20)[0]
        after = expected(*args)
        assert d["node"] == node and d["policy"] == "risky-gpu", d
        assert d["risk"] is not None and min(abs(d["risk"] - before),
                                             abs(d["risk"] - after)) < 1e-5, (d, before, after)
        # the reason ends with the scored GPU and the inputs that stand out
        assert len(d["model_hash"]) == 64 and re.search(
            r"risk [0-9.]+ gpu \S+ \(\w+=\S+( \w+=\S+){0,3}\)$", d["reason"]), d
        print(f"  {node} gpu {gpu or '(all)'}: {d['verdict']}, risk {d['risk']:.6f} in the "
              f"audit log (medic predict: {before:.6f}); reason: {d['reason'][:100]}")
        # resolved, so that the next alert on the node opens an incident of
        # its own (one per node and policy) and is decided, and scored, anew
        resolved = json.loads(fired)
        resolved["status"] = resolved["alerts"][0]["status"] = "resolved"
        assert medic.post("/webhook", json.dumps(resolved), headers=auth)[0] == 200
        wait_until("the incident to close", lambda: [
            i for i in medic.audit("incidents", "--node", node) if i["state"] == "recovered"
            and i["incident"] not in closed], timeout=20)
        closed.update(i["incident"] for i in medic.audit("incidents", "--node", node))
    # fleet scoring: every GPU Prometheus knows, on /metrics, each the same
    # risk as medic predict gives it alone
    clear_of_a_step_boundary(medic)
    before = {(n, g): expected(n, "--gpu", str(g)) for n, g in
              [("gpu-node-08", 5), ("gpu-node-08", 0), ("gpu-node-01", 1)]}
    wait_until("fleet scores", lambda: medic.metric(
        'medic_gpu_failure_risk{node="gpu-node-08",gpu="5"}') if medic.metric(
        "medic_fleet_scoring_cycles_total") >= 2 else None, timeout=20)
    body = medic.get("/metrics")[2].decode()
    after = {(n, g): expected(n, "--gpu", str(g)) for n, g in before}
    values = {line.split()[0]: float(line.split()[-1]) for line in body.splitlines()
              if line and not line.startswith("#")}
    for (n, g), risk in before.items():
        fleet = values[f'medic_gpu_failure_risk{{node="{n}",gpu="{g}"}}']
        assert min(abs(fleet - risk), abs(fleet - after[(n, g)])) < 1e-5, (n, g, fleet, risk)
    gpus = [k for k in values if k.startswith("medic_gpu_failure_risk{")]
    # 2 GPUs of gpu-node-01, 8 of gpu-node-08, 4 of gpu-node-04, none of -03
    assert len(gpus) == 14, gpus
    lost = 'node="gpu-node-04",gpu="2"'
    assert values[f"medic_gpu_failure_risk{{{lost}}}"] == 1, values
    assert values[f"medic_gpu_telemetry_lost_seconds{{{lost}}}"] >= 360, values
    assert len([k for k in values if k.startswith("medic_gpu_telemetry_lost_seconds{")]) == 1
    cycles = values["medic_fleet_scoring_cycles_total"]
    # one request per feature and cycle, whatever the number of nodes (a
    # cycle under way may have made its requests and not yet counted itself)
    assert values["medic_fleet_scoring_prometheus_requests_total"] in (8 * cycles,
                                                                       8 * (cycles + 1)), values
    assert values["medic_fleet_scoring_gpu_failures_total"] in (cycles, cycles + 1), values
    assert values["medic_fleet_scoring_failures_total"] == 0, values
    print(f"  fleet scoring: {len(gpus)} GPUs on /metrics, each as medic predict scores it; "
          f"gpu-node-03 gpu 0 left out; gpu-node-04 gpu 2 lost for "
          f"{values[f'medic_gpu_telemetry_lost_seconds{{{lost}}}']:.0f} s; {cycles:.0f} cycles "
          "of 8 requests")
    test_round_fetches_its_nodes_together(
        suite, url, token, lambda: {k: expected(k[0], "--gpu", str(k[1])) for k in before}, medic)
    alert_before_a_step_takes_the_fleets_risk(medic, auth)
    # with Prometheus stopped the risk is unknown, with the reason, and
    # fleet scoring exports no stale risks
    failed = medic.metric("medic_fleet_scoring_failures_total")
    prom.stop()
    wait_until("fleet scoring to fail", lambda: medic.metric(
        "medic_fleet_scoring_failures_total") > failed, timeout=20)
    body = medic.get("/metrics")[2].decode()
    assert "medic_gpu_failure_risk{" not in body, body
    status, _, _ = medic.post("/webhook", hot_alert("gpu-node-01", "0"), headers=auth)
    assert status == 200
    d = wait_until("the unknown-risk decision", lambda: [
        x for x in medic.audit("decisions") if "risk unknown" in (x["reason"] or "")
        and "Couldn't connect" in x["reason"]], timeout=10)[0]
    assert d["risk"] is None and d["verdict"] == "no_match", d
    assert "Couldn't connect" in d["reason"], d
    print(f"  Prometheus stopped: {d['verdict']}, {d['reason'][:100]}")
    # a Prometheus that accepts connections and never answers: the webhook
    # is answered while the engine still waits on it, and the wait ends at
    # the configured timeout with the reason
    host, port = url.rsplit("/", 1)[1].split(":")
    hang = socket.socket()
    hang.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hang.bind((host, int(port)))
    hang.listen(16)
    suite.on_exit(hang.close)
    seen = len(medic.audit("decisions"))
    status, _, _ = medic.post("/webhook", hot_alert("gpu-node-01", "1"), headers=auth)
    assert status == 200
    assert len(medic.audit("decisions")) == seen, "decided before Prometheus answered"
    d = wait_until("the timed-out decision", lambda: medic.audit("decisions")[:-seen or None],
                   timeout=15)[0]
    assert d["risk"] is None and "risk unknown" in d["reason"], d
    assert "timed out" in d["reason"].lower() or "timeout" in d["reason"].lower(), d
    print(f"  Prometheus silent: answered at once, then {d['verdict']}, {d['reason'][:110]}")

if __name__ == "__main__":
    Suite(__doc__).run([test_prometheus_window_matches_csv, test_gap_and_prometheus_down,
                        test_serve_enriches_alerts_with_risk])
