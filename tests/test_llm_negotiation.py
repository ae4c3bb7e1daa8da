"""The chat client against endpoints as they really are (the fake server, real HTTP):
structured-output negotiation remembered per endpoint and model, the output token cap,
cut-off answers and the tokens of failed calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from fake_openai import LLAMA_CPP_FORMAT_ERROR, FakeOpenAI, Reply, Status
from opencode_memoryd.errors import ExtractionError, ReplyCutOff, UpstreamError
from opencode_memoryd.extract.llm_extractor import LlmExtractor, reply_token_cap
from opencode_memoryd.extract.reply import MEMORY_SCHEMA
from opencode_memoryd.llm.chat import ChatClient
from opencode_memoryd.models import TranscriptLine
from opencode_memoryd.state.db import StateDB

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
LINES = [TranscriptLine("msg_u1", "user", "remember that the API runs on port 8443"),
         TranscriptLine("msg_a1", "assistant", "Noted.")]


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state" / "state.db")
    yield db
    db.close()


def client(fake: FakeOpenAI, state: StateDB | None = None, **kwargs: Any) -> ChatClient:
    options: dict[str, Any] = {"api_key": None, "model": "small-gguf", "max_retries": 0,
                               "modes": state.llm if state is not None else None}
    options.update(kwargs)
    return ChatClient(base_url=fake.base_url, **options)


def ask(chat: ChatClient, **kwargs: Any) -> Any:
    return chat.complete_json(system="sys", user="hello", schema=SCHEMA,
                              schema_name="check", **kwargs)


def formats(fake: FakeOpenAI) -> list[str]:
    return [(body.get("response_format") or {}).get("type", "none")
            for body in fake.chat_requests]


# -- structured output ---------------------------------------------------------------------


def test_llama_cpp_refusing_json_schema_falls_back_to_json_object_and_is_remembered(
        state: StateDB) -> None:
    with FakeOpenAI(reject_json_schema=True) as fake:
        fake.script(Reply({"ok": True}))
        reply = ask(client(fake, state))
        assert json.loads(reply.content) == {"ok": True}
        assert formats(fake) == ["json_schema", "json_object"]
        # below json_schema, the schema travels in the system prompt instead
        system = fake.chat_requests[1]["messages"][0]["content"]
        assert system.startswith("sys\n\n") and json.dumps(SCHEMA, separators=(",", ":")) in system
        remembered = state.llm.llm_mode(fake.base_url, "small-gguf")
        assert remembered is not None
        assert (remembered.json_mode, remembered.start) == ("json_object", "json_schema")
        assert "json_schema refused: HTTP 500" in remembered.detail
        assert LLAMA_CPP_FORMAT_ERROR.format("json_schema")[:40] in remembered.detail
        # a later client (a later run) asks in the mode that works straight away
        ask(client(fake, state))
        assert formats(fake) == ["json_schema", "json_object", "json_object"]
        # another model on the same endpoint is negotiated on its own
        ask(client(fake, state, model="other-model"))
        assert formats(fake)[3:] == ["json_schema", "json_object"]


def test_a_server_refusing_both_json_modes_gets_instructions_only(state: StateDB) -> None:
    with FakeOpenAI(reject_json_schema=True, reject_json_object=True) as fake:
        fake.script(Reply('Here you go: {"ok": true} Hope that helps.'))
        chat = client(fake, state)
        reply = ask(chat)
        assert formats(fake) == ["json_schema", "json_object", "none"]
        assert chat.json_mode == "none"
        assert "response_format" not in fake.chat_requests[-1]
        got = state.llm.llm_mode(fake.base_url, "small-gguf")
        assert got is not None and got.json_mode == "none"
    # the extractor validates an instructions-only answer the same way (prose tolerated)
    assert "Here you go" in reply.content


def test_a_working_mode_is_remembered_too_and_the_config_start_overrides(
        state: StateDB) -> None:
    with FakeOpenAI() as fake:
        ask(client(fake, state))
        got = state.llm.llm_mode(fake.base_url, "small-gguf")
        assert got is not None and (got.json_mode, got.detail) == ("json_schema", "works")
        # a configured start other than the remembered one's: negotiation starts there
        ask(client(fake, state, json_mode="json_object"))
        assert formats(fake) == ["json_schema", "json_object"]
        got = state.llm.llm_mode(fake.base_url, "small-gguf")
        assert got is not None and got.start == "json_object"


def test_other_server_errors_do_not_change_the_mode(state: StateDB) -> None:
    with FakeOpenAI() as fake:
        fake.script(Status(500, body="CUDA out of memory"))
        with pytest.raises(UpstreamError) as info:
            ask(client(fake, state))
        assert info.value.kind == "server"
        assert formats(fake) == ["json_schema"]
        assert state.llm.llm_mode(fake.base_url, "small-gguf") is None


def test_forgetting_the_modes_negotiates_again(state: StateDB) -> None:
    with FakeOpenAI(reject_json_schema=True) as fake:
        ask(client(fake, state))
        assert state.llm.forget_llm_modes() == 1
        fake.reject_json_schema = False
        ask(client(fake, state))
        assert formats(fake) == ["json_schema", "json_object", "json_schema"]


# -- the output token cap ------------------------------------------------------------------


def test_the_extractor_sends_a_cap_sized_to_the_expected_answer() -> None:
    assert reply_token_cap(12, 400) == 32 + 12 * (134 + 40) == 2120
    with FakeOpenAI() as fake:
        LlmExtractor(client(fake), max_memories=12, max_chars=400).extract(LINES)
        LlmExtractor(client(fake), max_memories=12, max_chars=400,
                     max_output_tokens=777).extract(LINES)
        assert [b["max_tokens"] for b in fake.chat_requests] == [2120, 777]


def test_a_server_that_wants_max_completion_tokens_gets_it() -> None:
    refusal = ("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
               "'max_completion_tokens' instead.")
    with FakeOpenAI() as fake:
        fake.script(Status(400, body=refusal))
        chat = client(fake)
        ask(chat, max_tokens=300)
        ask(chat, max_tokens=300)
        first, second, third = fake.chat_requests
        assert first["max_tokens"] == 300 and "max_completion_tokens" not in first
        assert second["max_completion_tokens"] == 300 and "max_tokens" not in second
        assert third["max_completion_tokens"] == 300


def test_a_cut_off_answer_is_reply_cut_off_with_its_tokens() -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply({"memories": [{"content": "x" * 400, "type": "project",
                                         "scope": "project", "message_ids": ["msg_u1"]}],
                           "more": False}, tokens_in=500))
        extractor = LlmExtractor(client(fake), max_memories=3, max_chars=400,
                                 max_output_tokens=40)
        with pytest.raises(ReplyCutOff) as info:
            extractor.extract(LINES)
        assert info.value.tokens_in == 500 and info.value.tokens_out == 40
        assert info.value.reply_digest and "cut off at 40 tokens" in str(info.value)


def test_an_empty_answer_at_the_cap_is_cut_off_and_counted() -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply("", tokens_in=70, tokens_out=2000, finish_reason="length"))
        with pytest.raises(ReplyCutOff) as info:
            ask(client(fake), max_tokens=2000)
        assert (info.value.tokens_in, info.value.tokens_out) == (70, 2000)


def test_a_bad_answer_carries_its_tokens_and_digest() -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply("I am sorry, I cannot do that.", tokens_in=90, tokens_out=3000),
                    Reply("I am sorry, I cannot do that.", tokens_in=90, tokens_out=3000))
        extractor = LlmExtractor(client(fake), max_memories=3, max_chars=200)
        errors = []
        for _ in range(2):
            with pytest.raises(ExtractionError) as info:
                extractor.extract(LINES)
            errors.append(info.value)
        assert not isinstance(errors[0], ReplyCutOff)
        assert (errors[0].tokens_in, errors[0].tokens_out) == (90, 3000)
        assert errors[0].reply_digest == errors[1].reply_digest is not None


def test_usage_in_an_error_body_is_counted() -> None:
    with FakeOpenAI() as fake:
        fake.script(Status(500, body="generation failed", usage=(120, 900)))
        with pytest.raises(UpstreamError) as info:
            ask(client(fake))
        assert (info.value.tokens_in, info.value.tokens_out) == (120, 900)


# -- answers hitting the memory cap, refused proposals ---------------------------------------


def memory(text: str, mid: str = "msg_u1") -> dict[str, Any]:
    return {"content": text, "type": "project", "scope": "project", "message_ids": [mid]}


def test_an_answer_at_the_memory_cap_or_saying_more_is_saturated() -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply({"memories": [memory("The API runs on port 8443."),
                                        memory("The API is written in Go.")], "more": False}),
                    Reply({"memories": [memory("The API runs on port 8443.")], "more": True}),
                    Reply({"memories": [memory("The API runs on port 8443.")], "more": False}))
        extractor = LlmExtractor(client(fake), max_memories=2, max_chars=200)
        assert [extractor.extract(LINES).saturated for _ in range(3)] == [True, True, False]


def test_each_refused_proposal_is_logged_redacted_at_debug() -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
    with FakeOpenAI() as fake:
        fake.script(Reply({"memories": [memory(f"The deploy token is {secret} ok", "msg_zz")],
                           "more": False}))
        with capture_logs() as logs:
            result = LlmExtractor(client(fake), max_memories=3, max_chars=200).extract(LINES)
    assert result.rejected[0][0] == "unknown message_id"
    refused = [e for e in logs if e["event"] == "memory_refused"]
    assert len(refused) == 1 and refused[0]["log_level"] == "debug"
    assert refused[0]["reason"] == "unknown message_id"
    assert "The deploy token is" in refused[0]["proposed"]
    assert secret not in repr(logs)


def test_the_memory_schema_asks_whether_there_was_more() -> None:
    assert MEMORY_SCHEMA["properties"]["more"] == {"type": "boolean"}
    assert "more" in MEMORY_SCHEMA["required"]
