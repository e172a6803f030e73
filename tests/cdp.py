"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON
messages ended by NUL on fds 3 and 4), with nothing but the standard library: a test opens a page,
reads it with JavaScript, clicks, and waits for the page to change by itself."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")


class Browser:
    """One Chromium with one page; :meth:`close` ends it."""

    def __init__(self, binary: str, *, timeout: float = 30.0) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="cdp-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # the child's fds 3 (commands in) and 4 (answers out)
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self._proc = subprocess.Popen(
            [
                binary,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        self.timeout = timeout
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """Send one command (to the page's session when ``session`` is true) and return its result."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if kw.get("session"):
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buffer:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no answer to {method}")
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit {self._proc.poll()})")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result")

    def go(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait(lambda: self.js("document.readyState") == "complete" and self.url() == url)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        return result["result"].get("value")

    def url(self) -> str:
        return str(self.js("location.href"))

    def wait(self, done: Callable[[], bool], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            try:
                if done():
                    return
            except RuntimeError:  # a navigation between two questions
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the page did not get there")
            time.sleep(0.1)

    def screenshot(self, width: int, height: int) -> bytes:
        import base64

        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        return base64.b64decode(data)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self._profile.cleanup()
