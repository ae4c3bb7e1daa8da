"""The chat and embedding adapters against the fake OpenAI server (real HTTP on loopback)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx2
import openai
import pytest
from structlog.testing import capture_logs

from fake_openai import Drop, FakeOpenAI, Hang, Raw, Reply, Status, fake_vector
from opencode_memoryd.errors import ExtractionError, UpstreamError
from opencode_memoryd.llm.chat import ChatClient, ChatReply
from opencode_memoryd.llm.errors import map_openai_error, retry_after_seconds
from opencode_memoryd.store.embedders import BATCH_SIZE, OpenAIEmbedder

SCHEMA = {
    "type": "object",
    "properties": {"memories": {"type": "array", "items": {"type": "string"}}},
    "required": ["memories"],
    "additionalProperties": False,
}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def client(fake: FakeOpenAI, **kwargs: object) -> ChatClient:
    options: dict[str, object] = {"api_key": None, "model": "test-model", "max_retries": 0}
    options.update(kwargs)
    return ChatClient(base_url=fake.base_url, **options)  # type: ignore[arg-type]


def ask(chat: ChatClient, user: str = "hello") -> ChatReply:
    return chat.complete_json(system="sys", user=user, schema=SCHEMA, schema_name="memories")


# -- successful calls and the request body ------------------------------------------------


def test_good_reply_returns_content_tokens_model_and_finish_reason(fake: FakeOpenAI) -> None:
    fake.script(Reply({"memories": ["x"]}, tokens_in=120, tokens_out=9))
    reply = ask(client(fake))
    assert reply == ChatReply('{"memories": ["x"]}', 120, 9, "test-model", "stop")


def test_request_sends_model_messages_temperature_and_strict_schema(fake: FakeOpenAI) -> None:
    ask(client(fake, temperature=0.2), user="the transcript")
    body = fake.chat_requests[0]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "the transcript"},
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "memories", "schema": SCHEMA, "strict": True},
    }


def test_json_object_mode_and_none_mode(fake: FakeOpenAI) -> None:
    ask(client(fake, json_mode="json_object"))
    ask(client(fake, json_mode="none"))
    first, second = fake.chat_requests
    assert first["response_format"] == {"type": "json_object"}
    assert "response_format" not in second


def test_unknown_json_mode_is_refused(fake: FakeOpenAI) -> None:
    with pytest.raises(ValueError, match="json_mode"):
        client(fake, json_mode="yaml")


def test_missing_api_key_sends_a_placeholder_and_a_real_key_is_sent(fake: FakeOpenAI) -> None:
    ask(client(fake))
    ask(client(fake, api_key="k-123"))
    first, second = fake.requests_to("/chat/completions")
    assert first.headers["authorization"] == "Bearer not-needed"
    assert second.headers["authorization"] == "Bearer k-123"


def test_missing_usage_is_estimated_from_characters(fake: FakeOpenAI) -> None:
    body = {
        "id": "c1", "object": "chat.completion", "created": 0, "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x" * 40},
                     "finish_reason": "stop"}],
    }
    fake.script(Raw(body))
    reply = ask(client(fake), user="u" * 397)
    assert (reply.tokens_in, reply.tokens_out, reply.model) == (100, 10, "served-model")


def test_prompt_and_reply_never_reach_the_logs(fake: FakeOpenAI) -> None:
    fake.script(Reply("REPLY-CANARY-7f3a"), Status(500, body="boom"))
    chat = client(fake)
    with capture_logs() as logs:
        ask(chat, user="PROMPT-CANARY-91c2")
        with pytest.raises(UpstreamError):
            ask(chat, user="PROMPT-CANARY-91c2")
    assert logs, "the adapter logs its calls"
    text = repr(logs)
    assert "PROMPT-CANARY" not in text and "REPLY-CANARY" not in text


# -- answers that are not usable ----------------------------------------------------------


def test_no_choice_is_an_extraction_error(fake: FakeOpenAI) -> None:
    fake.script(Raw({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": []}))
    with pytest.raises(ExtractionError, match="without a choice"):
        ask(client(fake))


def test_null_content_is_an_extraction_error(fake: FakeOpenAI) -> None:
    fake.script(Raw({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": None,
                                              "refusal": "I can't help with that."}}]}))
    with pytest.raises(ExtractionError, match="refusal"):
        ask(client(fake))


# -- error mapping ------------------------------------------------------------------------


def test_server_error_after_sdk_retries(fake: FakeOpenAI) -> None:
    fake.script(Status(500), Status(502))
    with pytest.raises(UpstreamError) as info:
        ask(client(fake, max_retries=1))
    err = info.value
    assert (err.kind, err.retryable, err.status) == ("server", True, 502)
    assert len(fake.chat_requests) == 2


def test_sdk_retry_recovers_from_one_server_error(fake: FakeOpenAI) -> None:
    fake.script(Status(503, retry_after=0.05), Reply({"memories": []}))
    reply = ask(client(fake, max_retries=1))
    assert reply.content == '{"memories": []}'
    assert len(fake.chat_requests) == 2


def test_rate_limit_carries_retry_after(fake: FakeOpenAI) -> None:
    fake.script(Status(429, body="slow down", retry_after=7))
    with pytest.raises(UpstreamError) as info:
        ask(client(fake))
    err = info.value
    assert (err.kind, err.retryable, err.status, err.retry_after_seconds) == (
        "rate_limit", True, 429, 7.0)
    assert "slow down" in str(err)


def test_sdk_does_not_retry_a_retry_after_longer_than_two_minutes(fake: FakeOpenAI) -> None:
    fake.script(Status(429, retry_after=300))
    started = time.monotonic()
    with pytest.raises(UpstreamError) as info:
        ask(client(fake, max_retries=2))
    assert info.value.retry_after_seconds == 300.0
    assert len(fake.chat_requests) == 1
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "Incorrect API key provided", "auth"),
        (403, "forbidden", "auth"),
        (404, "The model `nope` does not exist", "not_found"),
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000",
         "context_length"),
        (400, "the request exceeds the available context size", "context_length"),
        (413, "payload too large", "context_length"),
        (400, "response_format json_schema is not supported", "bad_request"),
        (422, "unprocessable", "bad_request"),
    ],
)
def test_client_errors_are_not_retryable(
    fake: FakeOpenAI, status: int, message: str, kind: str
) -> None:
    fake.script(Status(status, body=message))
    with pytest.raises(UpstreamError) as info:
        # json_mode none: a refused response_format has no mode to fall back to
        ask(client(fake, max_retries=2, json_mode="none"))
    err = info.value
    assert (err.kind, err.retryable, err.status) == (kind, False, status)
    assert len(fake.chat_requests) == 1, "the SDK does not retry client errors"


def test_context_length_code_without_message(fake: FakeOpenAI) -> None:
    fake.script(Status(400, body={"error": {"message": "too big", "code":
                                            "context_length_exceeded"}}))
    with pytest.raises(UpstreamError) as info:
        ask(client(fake))
    assert info.value.kind == "context_length"


def test_hung_request_times_out(fake: FakeOpenAI) -> None:
    fake.script(Hang(30))
    started = time.monotonic()
    with pytest.raises(UpstreamError) as info:
        ask(client(fake, timeout_seconds=0.5))
    assert (info.value.kind, info.value.retryable) == ("timeout", True)
    assert time.monotonic() - started < 5


def test_refused_connection_is_retryable() -> None:
    with socket.socket() as bound:  # bound, never listening: no other test can take it
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        chat = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", api_key=None,
                          model="m", max_retries=0, timeout_seconds=2)
        with pytest.raises(UpstreamError) as info:
            ask(chat)
    assert (info.value.kind, info.value.retryable, info.value.status) == (
        "connection", True, None)


@pytest.mark.parametrize("behaviour", [
    pytest.param(Hang(1.5), id="slow-answer"),
    pytest.param(Drop(), id="dropped-after-sending"),
    pytest.param(Status(504), id="gateway-timeout"),
])
def test_a_prompt_the_endpoint_may_have_answered_is_never_resent(
        fake: FakeOpenAI, behaviour: object) -> None:
    """A slow answer (read timeout), a connection dropped while waiting, a 504: the
    endpoint has the prompt and may answer (and bill) it, so it is not sent again, though
    retries are allowed."""
    fake.script(behaviour, Reply({"memories": []}), Reply({"memories": []}))  # type: ignore
    sleeps: list[float] = []
    with pytest.raises(UpstreamError) as info:
        ask(client(fake, max_retries=2, timeout_seconds=0.4, sleep=sleeps.append))
    assert info.value.delivered and info.value.retryable
    assert len(fake.chat_requests) == 1 and sleeps == []


def test_a_prompt_the_endpoint_refused_is_resent_up_to_max_retries(fake: FakeOpenAI) -> None:
    fake.script(Status(429), Status(503), Reply({"memories": ["x"]}))
    sleeps: list[float] = []
    reply = ask(client(fake, max_retries=2, sleep=sleeps.append))
    assert reply.content == '{"memories": ["x"]}'
    assert len(fake.chat_requests) == 3
    assert len(sleeps) == 2 and 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0


def test_a_refused_connection_is_retried() -> None:
    with socket.socket() as bound:  # bound, never listening
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        sleeps: list[float] = []
        chat = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", api_key=None, model="m",
                          max_retries=2, timeout_seconds=2, sleep=sleeps.append)
        with pytest.raises(UpstreamError) as info:
            ask(chat)
    assert (info.value.kind, info.value.delivered) == ("connection", False)
    assert len(sleeps) == 2


_REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def _caused(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(("exc", "kind", "delivered"), [
    (_caused(openai.APITimeoutError(_REQUEST), httpx2.ReadTimeout("read")), "timeout", True),
    (_caused(openai.APITimeoutError(_REQUEST), httpx2.ConnectTimeout("c")), "timeout", False),
    (_caused(openai.APITimeoutError(_REQUEST), httpx2.PoolTimeout("pool")), "timeout", False),
    (_caused(openai.APITimeoutError(_REQUEST), httpx2.WriteTimeout("w")), "timeout", False),
    (openai.APITimeoutError(_REQUEST), "timeout", True),
    (_caused(openai.APIConnectionError(request=_REQUEST), httpx2.ConnectError("refused")),
     "connection", False),
    (_caused(openai.APIConnectionError(request=_REQUEST),
             httpx2.RemoteProtocolError("Server disconnected without sending a response")),
     "connection", True),
    (_caused(openai.APIConnectionError(request=_REQUEST), httpx2.ReadError("reset")),
     "connection", True),
])
def test_which_failures_may_have_been_answered(
        exc: BaseException, kind: str, delivered: bool) -> None:
    err = map_openai_error(exc)
    assert (err.kind, err.retryable, err.delivered) == (kind, True, delivered)


def test_server_closes_cleanly_with_a_hung_request() -> None:
    server = FakeOpenAI().start()
    server.script(Hang(60))
    chat = ChatClient(base_url=server.base_url, api_key=None, model="m", max_retries=0,
                      timeout_seconds=0.3)
    with pytest.raises(UpstreamError):
        ask(chat)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "12"}, 12.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_retry_after_as_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    value = retry_after_seconds({"retry-after": when})
    assert value is not None and 25 <= value <= 31


# -- embeddings ---------------------------------------------------------------------------


def embedder(fake: FakeOpenAI, **kwargs: object) -> OpenAIEmbedder:
    options: dict[str, object] = {"api_key": None, "model": "embed-model", "max_retries": 0}
    options.update(kwargs)
    return OpenAIEmbedder(base_url=fake.base_url, **options)  # type: ignore[arg-type]


def test_embed_batches_and_keeps_order(fake: FakeOpenAI) -> None:
    texts = [f"text {i}" for i in range(2 * BATCH_SIZE + 5)]
    vectors = embedder(fake, dimensions=32).embed(texts)
    assert vectors == [fake_vector(t, 32) for t in texts]
    sizes = [len(r.json["input"]) for r in fake.requests_to("/embeddings")]
    assert sizes == [BATCH_SIZE, BATCH_SIZE, 5]
    assert all(r.json["encoding_format"] == "float" for r in fake.requests_to("/embeddings"))


def test_prefixes_go_before_queries_and_documents(fake: FakeOpenAI) -> None:
    emb = embedder(fake, dimensions=32, query_prefix="query: ", document_prefix="passage: ")
    assert emb.embed(["uses pnpm"]) == [fake_vector("passage: uses pnpm", 32)]
    assert emb.embed_query(["package manager?"]) == [fake_vector("query: package manager?", 32)]
    sent = [r.json["input"] for r in fake.requests_to("/embeddings")]
    assert sent == [["passage: uses pnpm"], ["query: package manager?"]]
    # a new document prefix makes new stored vectors, so the store must see a new name
    assert emb.name == "openai:embed-model (document prefix 'passage: ')"
    assert embedder(fake, query_prefix="query: ").name == "openai:embed-model"


def test_embed_nothing_makes_no_request(fake: FakeOpenAI) -> None:
    assert embedder(fake, dimensions=32).embed([]) == []
    assert fake.requests == []


def test_dimensions_are_learned_from_the_first_answer(fake: FakeOpenAI) -> None:
    emb = embedder(fake)
    assert emb.name == "openai:embed-model"
    assert emb.dimensions == 32
    assert len(fake.requests_to("/embeddings")) == 1
    assert emb.dimensions == 32
    assert len(fake.requests_to("/embeddings")) == 1, "the probe runs once"


def test_wrong_vector_length_is_a_bad_request(fake: FakeOpenAI) -> None:
    with pytest.raises(UpstreamError) as info:
        embedder(fake, dimensions=16).embed(["a"])
    assert (info.value.kind, info.value.retryable) == ("bad_request", False)
    assert "32" in str(info.value) and "16" in str(info.value)


def test_send_dimensions_asks_the_server_for_that_length(fake: FakeOpenAI) -> None:
    vectors = embedder(fake, dimensions=8, send_dimensions=True).embed(["a", "b"])
    assert [len(v) for v in vectors] == [8, 8]
    assert fake.requests_to("/embeddings")[0].json["dimensions"] == 8


def test_missing_vectors_are_a_bad_request(fake: FakeOpenAI) -> None:
    fake.script_embeddings(Raw({"object": "list", "model": "e", "data": [
        {"object": "embedding", "index": 0, "embedding": [0.1] * 32}]}))
    with pytest.raises(UpstreamError, match="asked for 2 vectors, got 1"):
        embedder(fake, dimensions=32).embed(["a", "b"])


def test_embedding_errors_use_the_shared_mapping(fake: FakeOpenAI) -> None:
    fake.script_embeddings(Status(503), Status(401))
    emb = embedder(fake, dimensions=32)
    with pytest.raises(UpstreamError) as first:
        emb.embed(["a"])
    with pytest.raises(UpstreamError) as second:
        emb.embed(["a"])
    assert (first.value.kind, first.value.retryable) == ("server", True)
    assert (second.value.kind, second.value.retryable) == ("auth", False)


# -- the fake as a separate process -------------------------------------------------------


@pytest.mark.slow
def test_fake_runs_as_a_separate_process(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"status": 503, "retry_after": 4},
                                  {"reply": {"memories": []}, "tokens_in": 5, "tokens_out": 2}]))
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fake_openai.py")), "--port", "0",
         "--script", str(script), "--log", str(log)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        chat = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", api_key=None, model="m",
                          max_retries=0)
        with pytest.raises(UpstreamError) as info:
            ask(chat)
        assert (info.value.kind, info.value.retry_after_seconds) == ("server", 4.0)
        reply = ask(chat)
        assert (reply.tokens_in, reply.tokens_out) == (5, 2)
        assert ask(chat).content == '{"memories": []}', "the default answer once scripts end"
    finally:
        proc.kill()
        proc.wait(timeout=5)
    paths = [json.loads(line)["path"] for line in log.read_text().splitlines()]
    assert paths == ["/v1/chat/completions"] * 3
