"""A fake OpenAI-compatible server on loopback: ``/v1/chat/completions`` (plain and streaming) with
scripted replies, tool calls included.

Real HTTP (``ThreadingHTTPServer`` on 127.0.0.1, port 0), so the real ``openai`` client, its
instrumentations and agent frameworks run against it unchanged. Replies are scripted per model
(``"*"``: any model); each reply is ``{"content": "..."}``, ``{"tool_calls": [{"name": ...,
"arguments": {...}}]}`` (optionally ``"id"``) or ``{"status": 500}`` (that HTTP status with an
OpenAI-style error body); a model whose script is used up answers ``"done"``.

In Python::

    with FakeOpenAI({"agent-m": [{"tool_calls": [{"name": "lookup", "arguments": {"id": 7}}]},
                                 {"content": "charge 7 was refunded"}]}) as server:
        client = openai.OpenAI(base_url=server.url, api_key="test")

From another language: ``python tests/fake_openai.py [--script script.json]`` prints the base URL
(``http://127.0.0.1:PORT/v1``) on its first line and serves until stdin closes or it is killed.
``POST /_script`` replaces the script (the same JSON), ``GET /_requests`` returns the request bodies
received so far, ``POST /_reset`` clears both.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

Reply = Mapping[str, Any]
Script = Mapping[str, Sequence[Reply]]

DEFAULT_ANSWER = "done"
MAX_BODY = 1 << 20  # a request body above this gets 413
MAX_RECORDED = 1000  # request bodies kept in ``requests`` (the rest are answered, not kept)
_CHUNK_CHARS = 8  # streamed content and arguments arrive in pieces this long


class FakeOpenAI:
    """The server: start with ``with FakeOpenAI(script) as server`` (or :meth:`start`/:meth:`stop`)."""

    def __init__(self, script: Script | None = None) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, list[Reply]] = {}
        self._ids = itertools.count(1)
        self.requests: list[dict[str, Any]] = []
        """Every ``/v1/chat/completions`` request body, in arrival order (the first MAX_RECORDED)."""
        self.set_script(script or {})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to give the client (``.../v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def set_script(self, script: Script) -> None:
        """Replace the replies still to come, per model (``"*"`` for any model)."""
        with self._lock:
            self._queues = {model: list(replies) for model, replies in script.items()}

    def reset(self) -> None:
        """Forget the script and the requests received."""
        with self._lock:
            self._queues = {}
            self.requests.clear()

    def models_called(self) -> list[str]:
        """The ``model`` of each request received, in order."""
        with self._lock:
            return [str(body.get("model")) for body in self.requests]

    def next_reply(self, body: Mapping[str, Any]) -> Reply:
        """Record the request and take the next scripted reply for its model."""
        with self._lock:
            if len(self.requests) < MAX_RECORDED:
                self.requests.append(dict(body))
            model = str(body.get("model", ""))
            for key in (model, "*"):
                queue = self._queues.get(key)
                if queue:
                    return queue.pop(0)
            return {"content": DEFAULT_ANSWER}

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _tool_calls(server: FakeOpenAI, reply: Reply) -> list[dict[str, Any]]:
    calls = []
    for call in reply.get("tool_calls", ()):
        arguments = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id") or server.new_id("call_"),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, separators=(",", ":")),
                },
            }
        )
    return calls


def _usage(body: Mapping[str, Any], reply: Reply) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", ())) // 4 + 1
    completion = len(str(reply.get("content") or "")) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _completion(server: FakeOpenAI, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
    calls = _tool_calls(server, reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": server.new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(body, reply),
    }


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK_CHARS] for i in range(0, len(text), _CHUNK_CHARS)] or [""]


def _stream_chunks(
    server: FakeOpenAI, body: Mapping[str, Any], reply: Reply
) -> list[dict[str, Any]]:
    ident, created, model = server.new_id("chatcmpl-"), int(time.time()), body.get("model", "")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    content = reply.get("content")
    if content:
        chunks.extend(chunk({"content": piece}) for piece in _pieces(str(content)))
    calls = _tool_calls(server, reply)
    for index, call in enumerate(calls):
        function = call["function"]
        head = {"index": index, "id": call["id"], "type": "function"}
        chunks.append(
            chunk(
                {"tool_calls": [{**head, "function": {"name": function["name"], "arguments": ""}}]}
            )
        )
        for piece in _pieces(function["arguments"]):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        chunks.append(
            {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": _usage(body, reply),
            }
        )
    return chunks


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else {}

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/_requests":
                with server._lock:
                    self._json(200, list(server.requests))
            elif self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": []})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            if int(self.headers.get("Content-Length") or 0) > MAX_BODY:
                self._json(413, {"error": {"message": f"request body over {MAX_BODY} bytes"}})
                self.close_connection = True  # the body was not read
                return
            try:
                body = self._body()
            except json.JSONDecodeError as error:
                self._json(400, {"error": {"message": f"body is not JSON: {error}"}})
                return
            if self.path == "/_script":
                server.set_script(body)
                self._json(200, {"ok": True})
            elif self.path == "/_reset":
                server.reset()
                self._json(200, {"ok": True})
            elif self.path.rstrip("/") == "/v1/chat/completions":
                reply = server.next_reply(body)
                if "status" in reply:
                    error = {
                        "message": f"scripted failure {reply['status']}",
                        "type": "server_error",
                    }
                    self._json(int(reply["status"]), {"error": error})
                elif body.get("stream"):
                    self._stream(_stream_chunks(server, body, reply))
                else:
                    self._json(200, _completion(server, body, reply))
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def _stream(self, chunks: Sequence[Mapping[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for item in chunks:
                self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", type=Path, help="JSON {model: [reply, ...]} to start with")
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text()) if args.script else {}
    with FakeOpenAI(script) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()  # serve until stdin closes (the parent process went away)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
