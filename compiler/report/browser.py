"""A report seen by a real browser: headless Chromium driven over the Chrome DevTools
Protocol (``websocket-client``, the ``[test]`` extra), for the tests and
``bench/report_screenshot.py``.

:class:`Chromium` starts the browser with a fresh profile and nothing of its own on the
network, opens a page, and records what the page did: every request it made (all are
intercepted; any but the page's own ``file://`` URL is refused and kept in
:attr:`Page.requests`) and every console message, error and uncaught exception
(:attr:`Page.console`).  :meth:`Page.evaluate` runs an expression in the page (its value
returned as JSON), :meth:`Page.screenshot` takes a PNG of the whole page."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: Where Chromium is looked for (``$TESSERA_CHROMIUM`` first).
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Flags that run it headless as root, without a sandbox, GPU or any traffic of its own.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--disable-extensions", "--mute-audio", "--remote-debugging-port=0")
#: Seconds to wait for the browser to start, and for a page to load.
START_S, LOAD_S = 30.0, 30.0


class BrowserError(RuntimeError):
    """The browser could not start, or a protocol command failed."""


def find_chromium() -> str | None:
    """The Chromium executable, or None when there is none."""
    given = os.environ.get("TESSERA_CHROMIUM")
    if given:
        return given if Path(given).is_file() else None
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


@dataclass
class Page:
    """One tab: the protocol connection and what the page did."""

    socket: object
    url: str = ""
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    next_id: int = 0

    def command(self, method: str, **params) -> dict:
        """Send one command; answer intercepted requests and record events until its result."""
        self.next_id += 1
        sent = self.next_id
        self.socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == sent:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            if "method" in message:
                self.on_event(message)

    def on_event(self, message: dict) -> None:
        method, params = message["method"], message.get("params", {})
        self.events.append(message)
        if method == "Fetch.requestPaused":
            url = params["request"]["url"]
            self.requests.append(url)
            if url == self.url:
                self.send("Fetch.continueRequest", requestId=params["requestId"])
            else:
                self.send("Fetch.failRequest", requestId=params["requestId"], errorReason="BlockedByClient")
        elif method == "Runtime.consoleAPICalled":
            words = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append(f"console.{params.get('type')}: {words}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console.append(f"exception: {details.get('exception', {}).get('description', details.get('text'))}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append(f"log.{entry.get('level')}: {entry.get('text')} {entry.get('url', '')}".strip())

    def send(self, method: str, **params) -> None:
        """A command whose result is not awaited (answers to intercepted requests)."""
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))

    def open(self, path: str | Path, width: int = 1440, height: int = 900) -> None:
        """Load a file at a laptop's viewport, waiting for its load event; what the page did
        is recorded afresh."""
        self.url = Path(path).resolve().as_uri()
        self.requests, self.console, self.events = [], [], []
        self.command("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.command("Page.navigate", url=self.url)
        deadline = time.monotonic() + LOAD_S
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise BrowserError(f"{self.url} did not load in {LOAD_S:.0f} s")
            self.command("Runtime.evaluate", expression="document.readyState")

    def evaluate(self, expression: str):
        """The value of ``expression`` in the page (JSON-serializable)."""
        found = self.command("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in found:
            raise BrowserError(f"the page raised: {found['exceptionDetails'].get('text')}")
        return found.get("result", {}).get("value")

    def screenshot(self, path: str | Path, max_height: int = 16000) -> Path:
        """A PNG of the whole page (at most ``max_height`` pixels tall)."""
        size = self.command("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height), "scale": 1}
        shot = self.command("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        path = Path(path)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


class Chromium:
    """A headless Chromium for one ``with`` block: :meth:`page` opens a tab."""

    def __init__(self, executable: str | None = None):
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise BrowserError("no Chromium found (apt-get install chromium, or set TESSERA_CHROMIUM)")
        self.profile = tempfile.mkdtemp(prefix="tessera-chromium-")
        self.process: subprocess.Popen | None = None
        self.port = 0

    def __enter__(self) -> "Chromium":
        self.process = subprocess.Popen([self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_S
        while not (marker.is_file() and marker.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError(f"{self.executable} did not start (exit {self.process.returncode})")
            time.sleep(0.05)
        self.port = int(marker.read_text().split()[0])
        return self

    def page(self) -> Page:
        """The browser's tab, its requests intercepted and its console recorded."""
        import websocket

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as answer:
            targets = json.loads(answer.read())
        target = next(t for t in targets if t.get("type") == "page")
        socket = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=LOAD_S, suppress_origin=True)
        page = Page(socket)
        for domain in ("Page", "Runtime", "Log"):
            page.command(f"{domain}.enable")
        page.command("Fetch.enable", patterns=[{"urlPattern": "*"}])
        return page

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for _ in range(10):  # the browser's helpers may write a last file as they exit
            shutil.rmtree(self.profile, ignore_errors=True)
            if not os.path.exists(self.profile):
                break
            time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["BrowserError", "Chromium", "Page", "find_chromium"]
