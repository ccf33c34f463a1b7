#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The on-call page (GET /, GET /nodes/NAME) of a real medic serve: what a
person on call needs is on it, every label value is escaped, the read
credentials guard it, and in Debian's headless Chromium it renders
(DOM, a 1280x900 screenshot) without a single request leaving medic."""

import base64
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse

from lab import Medic, Suite, require_binary, wait_until, write_secret

TOKEN = "page-read-token"
HOSTILE = "<img src=x onerror=alert(1)>\"&'node"


def alert(node, gpu, name="GPUXidError"):
    return {"status": "firing", "labels": {"alertname": name, "Hostname": node, "gpu": str(gpu),
                                           "xid": "79"},
            "annotations": {"summary": "<b>GPU fell off the bus</b>"},
            "startsAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "endsAt": "0001-01-01T00:00:00Z"}


def notification(key, alerts):
    return json.dumps({"version": "4", "groupKey": key, "status": "firing", "receiver": "medic",
                       "alerts": alerts})


def start(suite, name, config=""):
    inventory = "".join(f"    - {{ name: gpu-node-0{i} }}\n" for i in range(1, 5))
    medic = Medic(suite.medic, suite.subdir(name),
                  f"inventory:\n  nodes:\n{inventory}"
                  "policies:\n  - name: xid-drain\n    match: '{alertname=\"GPUXidError\"}'\n"
                  "    steps: [ { action: drain } ]\n" + config)
    medic.start()
    suite.on_exit(medic.stop)
    # three nodes of the inventory, one node named to break out of HTML
    alerts = [alert(f"gpu-node-0{n}", g) for n in (1, 2, 3) for g in (0, 1)]
    alerts.append(alert(HOSTILE, 0))
    assert medic.post("/webhook", notification("g1", alerts))[0] == 200
    wait_until("the decisions", lambda: len(medic.audit("decisions")) >= 4, timeout=20)
    return medic


def text(html):
    return re.sub(r"<[^>]+>", " ", html)


def test_front_and_node_pages(suite):
    medic = start(suite, "pages")
    status, headers, body = medic.get("/")
    page = body.decode()
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8", headers
    assert "default-src 'none'" in headers["content-security-policy"], headers
    assert '<meta http-equiv="refresh" content="30">' in page  # fresh without JavaScript
    # what on-call needs: mode, storm state, caps, open incidents, decisions
    words = " ".join(text(page).split())
    assert "mode dry-run" in words and "storm none" in words, words
    assert "open incidents 4" in words, words
    assert "caps: 2 disruptive actions in flight; 0.05 of 4 inventory nodes = 0" in words, words
    for n in (1, 2, 3):
        assert f'<a href="/nodes/gpu-node-0{n}">gpu-node-0{n}</a>' in page
    assert page.count('class="suppressed"') == 4, page  # the fleet cap holds every drain
    assert "xid-drain" in page and "step 1 (drain) was suppressed" in page
    # the hostile node name is text, never markup
    assert "<img" not in page and "onerror=alert(1)&gt;" in page, page
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;&amp;&#39;node" in page
    link = "/nodes/" + urllib.parse.quote(HOSTILE, safe="")
    assert f'href="{link}"' in page

    status, _, body = medic.get(link)
    node_page = body.decode()
    assert status == 200 and "<img" not in node_page and "<b>" not in node_page
    rows = re.findall(r"<tr><td[^>]*>[^<]*</td><td[^>]*>(alert|decision|incident|action)</td>",
                      node_page)
    assert rows == ["alert", "decision", "incident"], rows
    assert "medic audit timeline --node &lt;img" in node_page

    status, _, body = medic.get("/nodes/gpu-node-01")
    assert status == 200 and body.decode().count(">alert</td>") == 2
    assert body.decode().count('href="/nodes/gpu-node-01"') == 1, body  # its one incident
    assert "gpu-node-02" not in body.decode()  # nothing about another node
    status, _, body = medic.get("/nodes/gpu-node-04")
    assert status == 200 and "Nothing recorded about this node." in body.decode()
    assert "No open incident on this node." in body.decode()
    assert medic.get("/nodes")[0] == 404 and medic.get("/index.html")[0] == 404
    # a malformed node name is the request's fault, said in HTTP's terms
    for bad in ("/nodes/%00", "/nodes/", "/nodes/a%01b", "/nodes/" + "n" * 200):
        status, _, body = medic.get(bad)
        assert status == 400 and "Not a node name" in body.decode(), (bad, status, body)
        assert "--node" not in body.decode(), body
    assert medic.post("/", "{}")[0] == 405


def test_read_credentials_guard_the_page(suite):
    token = write_secret(os.path.join(suite.subdir("guarded"), "read.token"), TOKEN)
    medic = start(suite, "guarded", f"auth: {{ read_bearer_token_file: {token} }}\n")
    for path in ("/", "/nodes/gpu-node-01"):
        status, headers, _ = medic.get(path)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer"), headers
        assert medic.get(path, {"Authorization": "Bearer wrong"})[0] == 401
        status, _, body = medic.get(path, {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and b"gpu-node-01" in body
    # with basic auth beside the token, the page offers basic first: a
    # browser asks its user for a user and password
    pw = write_secret(os.path.join(suite.subdir("guarded-basic"), "read.pw"), "oncall-pw")
    medic = start(suite, "guarded-basic",
                  f"auth: {{ read_bearer_token_file: {token},\n"
                  f"        read_basic_auth: {{ username: oncall, password_file: {pw} }} }}\n")
    status, headers, _ = medic.get("/")
    assert status == 401, status
    assert headers["www-authenticate"] == 'Basic realm="medic", Bearer realm="medic"', headers
    basic = {"Authorization": "Basic " + base64.b64encode(b"oncall:oncall-pw").decode()}
    status, _, body = medic.get("/", basic)
    assert status == 200 and b"gpu-node-01" in body
    # the API keeps offering the token first
    status, headers, _ = medic.get("/api/v1/decisions")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer"), headers


def chromium(suite, url, *args):
    """Debian's headless Chromium on url; returns (stdout, the URLs the page
    requested: the main frame and everything it loaded, told from the
    browser's own background requests by their network isolation key, the
    page's site)."""
    home = suite.subdir("chromium-" + str(len(os.listdir(suite.workdir))))
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=f"{home}/.config",
               XDG_CACHE_HOME=f"{home}/.cache")
    out = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--window-size=1280,900",
         "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
         f"--user-data-dir={home}/profile", f"--log-net-log={home}/net.json", *args, url],
        env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    with open(f"{home}/net.json") as f:
        log = json.load(f)
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = {e["params"]["url"] for e in log["events"]
            if e["type"] == start_job and "127.0.0.1" in e.get("params", {}).get(
                "network_isolation_key", "")}
    return out.stdout, urls


def test_in_chromium(suite):
    require_binary("chromium")
    medic = start(suite, "browser")
    dom, urls = chromium(suite, medic.url + "/", "--dump-dom")
    assert "Open incidents" in dom and "Recent decisions" in dom, dom[:2000]
    assert dom.count("xid-drain") >= 8, dom  # four incidents, four decisions
    assert "<img" not in dom, dom  # the hostile node name stayed text
    assert medic.url + "/" in urls, urls
    assert all(u.startswith(medic.url + "/") for u in urls), urls
    shot = os.path.join(suite.workdir, "oncall.png")
    out, urls = chromium(suite, medic.url + "/", f"--screenshot={shot}")
    assert all(u.startswith(medic.url + "/") for u in urls), urls
    # a page whose text did not render (no font) is a blank PNG of ~5 kB
    assert os.path.getsize(shot) > 20000, os.path.getsize(shot)
    if os.environ.get("MEDIC_SCREENSHOT"):
        shutil.copy(shot, os.environ["MEDIC_SCREENSHOT"])
    node = medic.url + "/nodes/gpu-node-02"
    dom, urls = chromium(suite, node, "--dump-dom")
    assert dom.count(">alert</td>") == 2 and ">decision</td>" in dom, dom
    assert all(u.startswith(medic.url + "/") for u in urls), urls


if __name__ == "__main__":
    Suite(__doc__).run([
        test_front_and_node_pages,
        test_read_credentials_guard_the_page,
        test_in_chromium,
    ])
