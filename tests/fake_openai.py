"""An OpenAI-compatible fake server speaking real HTTP on 127.0.0.1.

Used in the test process (context manager) or as a separate process (``python
tests/fake_openai.py --port 0 --script FILE.json``) when a test needs to kill our CLI while
it talks to the server.

Endpoints:

* ``POST /v1/chat/completions``: answers with the next queued behaviour (see :meth:`script`),
  or, when the queue is empty, with ``responder(request_json)`` (default ``{"memories": []}``);
* ``POST /v1/embeddings``: deterministic unit vectors derived from a hash of each input text
  (``embedding_dims`` dimensions, default 32), or the next behaviour queued with
  :meth:`script_embeddings`;
* ``GET /v1/models``: one model.

Every request is recorded in :attr:`FakeOpenAI.requests` (path, parsed JSON body, headers).

Like real servers:

* a request carrying ``max_tokens`` (or ``max_completion_tokens``) gets a reply cut to that
  many tokens (4 characters each) with ``finish_reason: "length"`` when it is longer
  (``honor_max_tokens=False`` turns this off);
* with ``reject_json_schema=True`` a request whose ``response_format`` is ``json_schema``
  is answered HTTP 500 with llama.cpp's server's message (``response_format type must be
  one of "text" or "json_object", but got: json_schema``), before any queued behaviour;
  ``reject_json_object=True`` does the same for ``json_object``.

Behaviours:

* ``Reply(obj_or_text, tokens_in=None, tokens_out=None, finish_reason="stop")``: a chat
  completion whose message content is ``obj_or_text`` (JSON-dumped unless it is a ``str``,
  so a test can send garbage). Tokens default to ``len(request body) // 4`` and
  ``len(content) // 4``;
* ``Status(code, body=None, retry_after=None, usage=None)``: an error status with an
  OpenAI-shaped error body (``body`` may be a dict, a str, or ``None`` for a default
  message); ``usage=(prompt_tokens, completion_tokens)`` adds a ``usage`` object to it (a
  server that generated before it failed);
* ``Hang(seconds)``: wait, then answer with the next behaviour in ``then`` (default a
  ``Reply`` from the responder). Closing the server wakes every hung request;
* ``Raw(obj, status=200)``: send ``obj`` as the JSON body unchanged (e.g. no choices).

Script file format for the separate process: a JSON list whose items are
``{"reply": <obj or str>, "tokens_in": 5, "tokens_out": 3, "finish_reason": "length"}``,
``{"status": 500, "body": ..., "retry_after": 2, "usage": [10, 20]}``, ``{"hang": 5}`` or
``{"raw": <obj>}``; ``--reject-json-schema`` starts the fake as llama.cpp's server. The
process prints ``PORT <n>`` on its first stdout line and, with ``--log FILE``, appends each
request as one JSON line.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import math
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODEL = "fake-model"
DEFAULT_EMBEDDING_DIMS = 32


@dataclass(frozen=True)
class Reply:
    """A successful chat completion carrying ``content`` (JSON-dumped unless a str)."""

    content: Any
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = "stop"
    model: str | None = None


@dataclass(frozen=True)
class Status:
    """An HTTP error status; ``retry_after`` (seconds) becomes a ``Retry-After`` header."""

    code: int
    body: Any = None
    retry_after: float | str | None = None
    usage: tuple[int, int] | None = None


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` before answering with ``then`` (or the default answer)."""

    seconds: float
    then: Any = None


@dataclass(frozen=True)
class Raw:
    """Send ``obj`` as the JSON response body unchanged, with ``status``."""

    obj: Any
    status: int = 200


Behaviour = Reply | Status | Hang | Raw


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received. ``json`` is ``None`` when the body was not JSON;
    ``received_at`` is ``time.monotonic()`` on arrival (seconds)."""

    method: str
    path: str
    json: Any
    headers: dict[str, str] = field(default_factory=dict)
    received_at: float = field(default_factory=time.monotonic)


#: What llama.cpp's server answers (HTTP 500) to a ``response_format`` it does not support.
LLAMA_CPP_FORMAT_ERROR = ('response_format type must be one of "text" or "json_object", but '
                          "got: {}")


def default_responder(request_json: dict[str, Any]) -> Any:
    """The answer when no behaviour is queued: no memories."""
    return {"memories": []}


def fake_vector(text: str, dims: int = DEFAULT_EMBEDDING_DIMS) -> list[float]:
    """The deterministic unit vector the fake returns for ``text``."""
    raw = b""
    counter = 0
    while len(raw) < dims * 4:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    values = [(b - 127.5) / 127.5 for b in raw[: dims * 4 : 4]]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class FakeOpenAI:
    """The fake server. ``with FakeOpenAI() as fake: ...`` starts and stops it.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``.
        requests: every :class:`RecordedRequest`, in arrival order.
        responder: ``callable(request_json) -> content | Behaviour`` used when the chat queue
            is empty.
        embedding_dims: length of the vectors ``/v1/embeddings`` returns.
        reject_json_schema: answer a ``json_schema`` request as llama.cpp's server does.
        reject_json_object: answer a ``json_object`` request the same way.
        honor_max_tokens: cut replies longer than the request's ``max_tokens``.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        responder: Callable[[dict[str, Any]], Any] = default_responder,
        embedding_dims: int = DEFAULT_EMBEDDING_DIMS,
        reject_json_schema: bool = False,
        reject_json_object: bool = False,
        honor_max_tokens: bool = True,
    ) -> None:
        self.responder = responder
        self.embedding_dims = embedding_dims
        self.reject_json_schema = reject_json_schema
        self.reject_json_object = reject_json_object
        self.honor_max_tokens = honor_max_tokens
        self.requests: list[RecordedRequest] = []
        self.on_request: Callable[[RecordedRequest], None] | None = None
        self._chat: deque[Behaviour] = deque()
        self._embed: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The base URL to give an OpenAI client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours for ``/v1/chat/completions``, consumed one per request."""
        with self._lock:
            self._chat.extend(behaviours)

    def script_embeddings(self, *behaviours: Behaviour) -> None:
        """Queue behaviours (``Status``, ``Hang``, ``Raw``) for ``/v1/embeddings``."""
        with self._lock:
            self._embed.extend(behaviours)

    def requests_to(self, path_suffix: str) -> list[RecordedRequest]:
        """The recorded requests whose path ends with ``path_suffix``."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(path_suffix)]

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies sent to ``/chat/completions``."""
        return [r.json for r in self.requests_to("/chat/completions")]

    def start(self) -> FakeOpenAI:
        """Start serving in a daemon thread; returns ``self``."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake hung requests and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (for the separate process)."""
        try:
            self._server.serve_forever(poll_interval=0.05)
        finally:
            self._stop.set()
            self._server.server_close()

    # -- request handling (runs in handler threads) --------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
        if self.on_request is not None:
            self.on_request(request)

    def _next(self, queue: deque[Behaviour]) -> Behaviour | None:
        with self._lock:
            return queue.popleft() if queue else None

    def _refused_format(self, body: dict[str, Any]) -> Status | None:
        fmt = body.get("response_format")
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if (kind == "json_schema" and self.reject_json_schema) or (
                kind == "json_object" and self.reject_json_object):
            return Status(500, {"error": {"code": 500, "type": "server_error",
                                          "message": LLAMA_CPP_FORMAT_ERROR.format(kind)}})
        return None

    def _chat_answer(self, body: dict[str, Any], raw_len: int) -> tuple[int, Any, dict]:
        refused = self._refused_format(body)
        if refused is not None:  # refused before the request is queued for generation
            return _common_answer(refused)
        behaviour = self._next(self._chat)
        while isinstance(behaviour, Hang):
            if self._stop.wait(behaviour.seconds):
                return 0, None, {}
            behaviour = behaviour.then
        if behaviour is None:
            behaviour = self.responder(body)
        if not isinstance(behaviour, Reply | Status | Raw):
            behaviour = Reply(behaviour)
        if isinstance(behaviour, Reply):
            content = (
                behaviour.content
                if isinstance(behaviour.content, str)
                else json.dumps(behaviour.content)
            )
            tokens_in = behaviour.tokens_in if behaviour.tokens_in is not None else raw_len // 4
            tokens_out = (
                behaviour.tokens_out if behaviour.tokens_out is not None else len(content) // 4
            )
            cap = body.get("max_tokens") or body.get("max_completion_tokens")
            if self.honor_max_tokens and isinstance(cap, int) and len(content) > 4 * cap:
                content = content[: 4 * cap]
                tokens_out = cap
                behaviour = Reply(content, behaviour.tokens_in, cap, "length", behaviour.model)
            return 200, _completion(body, behaviour, content, tokens_in, tokens_out), {}
        return _common_answer(behaviour)

    def _embedding_answer(self, body: dict[str, Any], first: Any) -> tuple[int, Any, dict]:
        behaviour = first
        while isinstance(behaviour, Hang):
            if self._stop.wait(behaviour.seconds):
                return 0, None, {}
            behaviour = behaviour.then
        if isinstance(behaviour, Status | Raw):
            return _common_answer(behaviour)
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dims = int(body.get("dimensions") or self.embedding_dims)
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vec = fake_vector(str(text), dims)
            emb: Any = base64.b64encode(struct.pack(f"<{dims}f", *vec)).decode() if b64 else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(len(str(t)) // 4 + 1 for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model", DEFAULT_MODEL),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }, {}


def _completion(
    body: dict[str, Any], reply: Reply, content: str, tokens_in: int, tokens_out: int
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{hashlib.sha1(content.encode()).hexdigest()[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or body.get("model") or DEFAULT_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def _common_answer(behaviour: Status | Raw) -> tuple[int, Any, dict]:
    if isinstance(behaviour, Raw):
        return behaviour.status, behaviour.obj, {}
    headers = {}
    if behaviour.retry_after is not None:
        headers["Retry-After"] = str(behaviour.retry_after)
    body = behaviour.body
    if body is None or isinstance(body, str):
        message = body if isinstance(body, str) else f"fake error {behaviour.code}"
        body = {"error": {"message": message, "type": "fake_error", "code": None}}
    if behaviour.usage is not None and isinstance(body, dict):
        tokens_in, tokens_out = behaviour.usage
        body = {**body, "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                  "total_tokens": tokens_in + tokens_out}}
    return behaviour.code, body, headers


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeOpenAI/1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
            if status == 0:  # the server is closing: drop the connection
                return
            payload = (body if isinstance(body, str) else json.dumps(body)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timeout) and closed its socket

        def do_GET(self) -> None:
            fake._record(RecordedRequest("GET", self.path, None, dict(self.headers.items())))
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": DEFAULT_MODEL,
                                 "object": "model", "owned_by": "fake"}]}, {})
            else:
                self._send(404, {"error": {"message": "not found", "type": "not_found"}}, {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            fake._record(RecordedRequest("POST", self.path, body, dict(self.headers.items())))
            path = self.path.split("?", 1)[0].rstrip("/")
            if not isinstance(body, dict):
                self._send(400, {"error": {"message": "body is not a JSON object"}}, {})
            elif path.endswith("/chat/completions"):
                self._send(*fake._chat_answer(body, len(raw)))
            elif path.endswith("/embeddings"):
                self._send(*fake._embedding_answer(body, fake._next(fake._embed)))
            else:
                self._send(404, {"error": {"message": f"no route {path}"}}, {})

    return Handler


def behaviour_from_json(item: dict[str, Any]) -> Behaviour:
    """Turn one item of a script file into a behaviour (see the module docstring)."""
    if "reply" in item:
        return Reply(item["reply"], item.get("tokens_in"), item.get("tokens_out"),
                     item.get("finish_reason", "stop"))
    if "status" in item:
        usage = item.get("usage")
        return Status(int(item["status"]), item.get("body"), item.get("retry_after"),
                      (int(usage[0]), int(usage[1])) if usage else None)
    if "hang" in item:
        then = item.get("then")
        return Hang(float(item["hang"]), behaviour_from_json(then) if then else None)
    if "raw" in item:
        return Raw(item["raw"], int(item.get("http_status", 200)))
    raise ValueError(f"unknown behaviour: {sorted(item)}")


def main(argv: Iterable[str] | None = None) -> int:
    """Run the fake in the foreground; prints ``PORT <n>`` once listening."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON list of chat behaviours")
    parser.add_argument("--default", help="JSON content answered when the script is used up")
    parser.add_argument("--dims", type=int, default=DEFAULT_EMBEDDING_DIMS)
    parser.add_argument("--log", help="append each request as one JSON line to this file")
    parser.add_argument("--reject-json-schema", action="store_true",
                        help="answer json_schema requests HTTP 500, as llama.cpp's server")
    args = parser.parse_args(list(argv) if argv is not None else None)

    fake = FakeOpenAI(port=args.port, embedding_dims=args.dims,
                      reject_json_schema=args.reject_json_schema)
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            fake.script(*(behaviour_from_json(item) for item in json.load(fh)))
    if args.default is not None:
        default = json.loads(args.default)
        fake.responder = lambda _body: default
    if args.log:
        log_path = args.log
        log_lock = threading.Lock()

        def write(request: RecordedRequest) -> None:
            line = json.dumps({"method": request.method, "path": request.path,
                               "json": request.json})
            with log_lock, open(log_path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

        fake.on_request = write
    print(f"PORT {fake.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        fake.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
