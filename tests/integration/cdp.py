# SPDX-License-Identifier: Apache-2.0
"""A small client of the Chrome DevTools Protocol for the page tests:
Debian's headless Chromium started with --remote-debugging-pipe, its
protocol messages (JSON, each ended by a NUL byte) on two pipes, so no
WebSocket library and no browser download is needed. It loads pages,
submits forms and reads what a person would see."""

import json
import os
import select
import subprocess
import time


class Browser:
    def __init__(self, workdir, headers=None):
        self.home = workdir
        os.makedirs(workdir, exist_ok=True)
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        env = dict(os.environ, HOME=workdir, XDG_CONFIG_HOME=f"{workdir}/.config",
                   XDG_CACHE_HOME=f"{workdir}/.cache")
        args = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--disable-extensions",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                f"--user-data-dir={workdir}/profile", "--remote-debugging-pipe",
                "about:blank"]
        # the pipes become the browser's fds 3 (in) and 4 (out)
        command = " ".join(f"'{a}'" for a in args)
        self.process = subprocess.Popen(
            ["bash", "-c", f"exec {command} 3<&{to_chrome_r} 4>&{from_chrome_w}"],
            pass_fds=(to_chrome_r, from_chrome_w), env=env,
            stdout=subprocess.DEVNULL, stderr=open(f"{workdir}/chromium.log", "w"))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.next_id = 0
        self.buffer = b""
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Network.enable", session=True)
        if headers:
            self.call("Network.setExtraHTTPHeaders", {"headers": headers}, session=True)

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_chrome], [], [], left)[0]:
                raise AssertionError("the browser did not answer in time")
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                raise AssertionError("the browser went away")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=False, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            got = self._read(timeout)
            if got.get("id") == self.next_id:
                if "error" in got:
                    raise AssertionError(f"{method}: {got['error']}")
                return got.get("result", {})
            self.events.append(got)

    def wait_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(max(0.1, deadline - time.monotonic())))

    def evaluate(self, expression):
        """Runs expression in the page (from DevTools, not from the page:
        the page itself runs no script) and returns its value."""
        got = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                        session=True)
        return got.get("result", {}).get("value")

    def load(self, url):
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def submit(self, form_selector):
        """Submits the form as a click on its button would, and waits for the
        page that answers."""
        self.events.clear()
        self.evaluate(f"document.querySelector({json.dumps(form_selector)}).requestSubmit()")
        self.wait_event("Page.loadEventFired")

    def text(self):
        return self.evaluate("document.body.innerText")

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self.to_chrome)
        os.close(self.from_chrome)
