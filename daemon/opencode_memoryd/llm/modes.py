"""Structured-output modes, and how a refused one is told apart and fallen back from.

The chat client (:class:`~opencode_memoryd.llm.chat.ChatClient`) starts from the configured
``json_mode`` (or the mode remembered for the endpoint and model, :class:`ModeMemory`) and,
when the server refuses the ``response_format`` it was sent (:func:`refuses_format`), moves
down :data:`JSON_MODES` (:func:`next_mode`). Below ``json_schema`` the schema goes into the
system prompt (:func:`schema_instructions`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

import openai

from opencode_memoryd.errors import UpstreamError
from opencode_memoryd.models import NegotiatedMode

#: The accepted values of ``json_mode``, strongest first: negotiation moves down the list.
JSON_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")
#: An error message that says the server refused the structured-output request.
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|structured[ _-]?output",
                             re.IGNORECASE)
#: The statuses such a refusal comes with (llama.cpp's server answers 500).
_FORMAT_STATUSES = frozenset({400, 422, 500, 501})


class ModeMemory(Protocol):
    """Where the structured-output mode that works is remembered, per endpoint and model.

    Implemented by :class:`~opencode_memoryd.state.llm.LlmModeTable` (``StateDB.llm``).
    """

    def llm_mode(self, base_url: str, model: str) -> NegotiatedMode | None:
        """The mode remembered for ``(base_url, model)``, or ``None``."""
        ...

    def remember_llm_mode(self, mode: NegotiatedMode) -> None:
        """Remember ``mode`` for its ``(base_url, model)`` (replacing what was there)."""
        ...


def response_format(json_mode: str, schema: dict[str, Any], schema_name: str) -> Any:
    """The ``response_format`` argument for ``json_mode``, or ``openai.omit`` for ``none``."""
    if json_mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }
    if json_mode == "json_object":
        return {"type": "json_object"}
    return openai.omit


def schema_instructions(schema: dict[str, Any]) -> str:
    """The paragraph added to the system prompt below ``json_schema`` mode: the answer's
    JSON schema, since the server does not enforce it."""
    return ("Answer with one JSON object and nothing else (no prose, no code fence). It must "
            "match this JSON schema:\n" + json.dumps(schema, separators=(",", ":")))


def refuses_format(error: UpstreamError) -> bool:
    """Whether ``error`` is the server refusing the ``response_format`` it was sent."""
    return error.status in _FORMAT_STATUSES and bool(_FORMAT_REFUSAL.search(str(error)))


def next_mode(mode: str) -> str | None:
    """The mode after ``mode`` in :data:`JSON_MODES`, or ``None`` after the last."""
    i = JSON_MODES.index(mode)
    return JSON_MODES[i + 1] if i + 1 < len(JSON_MODES) else None
