"""A scripted stand-in model for the genuine OpenCode: OpenAI-compatible, streaming, 127.0.0.1.

OpenCode reaches it through a custom provider (``@ai-sdk/openai-compatible`` with
``options.baseURL = StubModel.base_url``). Every ``POST /v1/chat/completions`` body is kept,
whole, in :attr:`StubModel.requests`, so a test can read the system messages, the tools list
and the messages OpenCode really sent.

How a reply is chosen (the same scheme as the OpenCode fixture generator's stub):

* a **title request** (its system prompt says "title generator") gets :data:`TITLE`;
* any other request is matched against the rules given to :meth:`StubModel.script`: the rule
  whose ``match`` string occurs in the text of the LAST ``role=user`` message wins (the longest
  match when several do). The **step** is the number of assistant messages after that user
  message: step 0 is the first call of a turn, step 1 the call made after the tool results of
  step 0 came back, and so on. A step past the end of a rule, or a request no rule matches,
  gets :data:`DEFAULT_TEXT`.

So a rule ``script("look it up", call_tool("memoryd_memory", query="pnpm"), reply("Found."))``
makes the model call the tool on the first request of the turn and answer "Found." once
OpenCode has sent the tool result back. A step may also be a function of the request
(:data:`StepFn`), e.g. to call a tool with an id the previous tool result gave.

Wire format (streaming): a role chunk, the text in small ``delta.content`` chunks, each tool
call as two ``delta.tool_calls`` chunks (name and first half of the JSON arguments, then the
rest), a chunk with ``finish_reason`` (``tool_calls`` or ``stop``), a usage-only chunk and
``data: [DONE]``; the connection then closes. Non-streaming requests get one
``chat.completion`` object.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TITLE = "Stub title"
DEFAULT_TEXT = "Done."
MODELS = ("stub-coder", "stub-small")


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes: OpenCode's tool ``name`` and its JSON ``arguments``."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One model answer: ``text`` and/or ``tool_calls`` (then OpenCode runs them and asks again)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


#: A step computed from the request it answers (e.g. from its last tool message).
StepFn = Callable[["ModelRequest"], Step]


def reply(text: str) -> Step:
    """A step that answers with ``text`` and stops the turn."""
    return Step(text=text)


def call_tool(name: str, /, **arguments: Any) -> Step:
    """A step that calls tool ``name`` with ``arguments`` (keyword arguments become the JSON)."""
    return Step(tool_calls=(ToolCall(name, arguments),))


def content_text(content: Any) -> str:
    """Flatten an OpenAI message ``content`` (a string or a list of parts) to its text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(str(p.get("text", "")) for p in parts)
    return ""


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request as OpenCode sent it.

    Attributes:
        body: the parsed JSON body, unchanged (``model``, ``messages``, ``tools``, ``stream``...).
        headers: the HTTP headers, names in lower case.
        received_at: ``time.monotonic()`` on arrival, seconds.
    """

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    received_at: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array (dicts with ``role`` and ``content``, tool calls, ...)."""
        return list(self.body.get("messages") or [])

    def texts(self, role: str) -> list[str]:
        """The text of every message with ``role`` (``system``, ``user``, ``assistant``,
        ``tool``), in order."""
        return [content_text(m.get("content")) for m in self.messages if m.get("role") == role]

    @property
    def system(self) -> list[str]:
        """The system messages' texts, in order (OpenCode sends at most two)."""
        return self.texts("system")

    @property
    def tool_names(self) -> list[str]:
        """The names in the ``tools`` list, in order (e.g. ``["bash", ..., "memoryd_memory"]``)."""
        tools = self.body.get("tools") or []
        return [str((t.get("function") or {}).get("name", "")) for t in tools]

    @property
    def user_text(self) -> str:
        """The text of the last ``role=user`` message (``""`` when there is none)."""
        users = self.texts("user")
        return users[-1] if users else ""

    @property
    def step(self) -> int:
        """The number of assistant messages after the last user message (0 = turn start)."""
        msgs = self.messages
        last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
        return sum(1 for m in msgs[last_user + 1 :] if m.get("role") == "assistant")

    @property
    def is_title(self) -> bool:
        """True for OpenCode's title-generation request (sent to the small model)."""
        return "title generator" in "\n".join(self.system).lower()


class StubModel:
    """The stand-in model server. ``with StubModel() as model: ...`` starts and stops it.

    Thread-safe: OpenCode may send the title request and the first chat request at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: dict[str, tuple[Step | StepFn, ...]] = {}
        self._requests: list[ModelRequest] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the provider's ``baseURL``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[ModelRequest]:
        """A snapshot of every chat-completions request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def script(self, match: str, *steps: Step | StepFn) -> None:
        """Answer turns whose last user message contains ``match`` with ``steps``, one per
        model call of the turn (a :data:`StepFn` is called with the request it answers).
        A later rule with the same ``match`` replaces the earlier one."""
        with self._lock:
            self._rules[match] = steps

    def plan(self, request: ModelRequest) -> Step:
        """Record ``request`` and choose its answer (see the module docstring)."""
        with self._lock:
            self._requests.append(request)
            if request.is_title:
                return reply(TITLE)
            text = request.user_text
            hits = [m for m in self._rules if m in text]
            steps = self._rules[max(hits, key=len)] if hits else ()
        if request.step >= len(steps):
            return reply(DEFAULT_TEXT)
        step = steps[request.step]
        return step if isinstance(step, Step) else step(request)

    def __enter__(self) -> StubModel:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _tool_calls(step: Step) -> list[dict[str, Any]]:
    return [
        {"index": i, "id": "call_" + uuid.uuid4().hex[:20], "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
        for i, c in enumerate(step.tool_calls)
    ]


def _chunks(step: Step, model: str) -> Iterator[dict[str, Any]]:
    """The streaming chunks of one answer (see the module docstring for the order)."""
    base = {"id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}

    yield delta({"role": "assistant", "content": ""})
    for i in range(0, len(step.text), 16):
        yield delta({"content": step.text[i : i + 16]})
    calls = _tool_calls(step)
    for c in calls:
        args = c["function"]["arguments"]
        half = len(args) // 2
        yield delta({"tool_calls": [c | {"function": {"name": c["function"]["name"],
                                                      "arguments": args[:half]}}]})
        yield delta({"tool_calls": [{"index": c["index"], "function": {"arguments": args[half:]}}]})
    yield delta({}, "tool_calls" if calls else "stop")
    yield base | {"choices": [], "usage": _USAGE}


_USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}


def _make_handler(stub: StubModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Keep the test output quiet."""

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                models = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"}
                          for m in MODELS]
                self._json(200, {"object": "list", "data": models})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": "not found"}})
                return
            body = json.loads(raw or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            step = stub.plan(ModelRequest(body, headers, time.monotonic()))
            model = str(body.get("model", ""))
            if body.get("stream"):
                self._stream(step, model)
            else:
                self._plain(step, model)

        def _plain(self, step: Step, model: str) -> None:
            calls = [{k: v for k, v in c.items() if k != "index"} for c in _tool_calls(step)]
            message: dict[str, Any] = {"role": "assistant", "content": step.text}
            if calls:
                message["tool_calls"] = calls
            self._json(200, {
                "id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion",
                "created": int(time.time()), "model": model, "usage": _USAGE,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}],
            })

        def _stream(self, step: Step, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in _chunks(step, model):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
