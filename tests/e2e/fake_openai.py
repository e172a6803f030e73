"""A small OpenAI-compatible server on loopback for end-to-end agents: ``POST /v1/chat/completions``.

Scripted and stateless: a conversation whose request already holds ``k`` tool results gets a tool
call (``screen_open``, id ``c<k+1>``) while ``k < tool_rounds``, then the final answer. The model name
``scripted-<n>`` asks for ``n`` passes (``n - 1`` tool rounds); any other model answers at once.
Every request is recorded (bounded) so a test can say how many model calls an agent made.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_NAME = "screen_open"
TOOL_RESULT = "screen shows: runs list"
FINAL_ANSWER = "The most recent zone redundancy run is run-42."
MAX_BODY = 1 << 20
MAX_RECORDED = 1000
_PASSES = re.compile(r"^scripted-(\d{1,4})$")


def completion(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted reply to one chat-completions request body."""
    model = str(request.get("model", ""))
    messages = request.get("messages") or []
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    matched = _PASSES.match(model)
    rounds = int(matched.group(1)) - 1 if matched else 0
    message: dict[str, Any]
    if done < rounds:
        call = {
            "id": f"c{done + 1}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": json.dumps({"screen": "runs"})},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": FINAL_ANSWER}
        finish = "stop"
    return {
        "id": f"chatcmpl-{done}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 20 + done, "completion_tokens": 7, "total_tokens": 27 + done},
    }


class FakeOpenAI:
    """The server; ``base_url`` is what an ``openai`` client takes (``http://127.0.0.1:<port>/v1``)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                return

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._reply(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._reply(413, {"error": {"message": "request too large"}})
                    return
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError as error:
                    self._reply(400, {"error": {"message": f"bad JSON: {error}"}})
                    return
                with owner._lock:
                    if len(owner.requests) < MAX_RECORDED:
                        owner.requests.append(request)
                self._reply(200, completion(request))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running server for the duration of the block."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
