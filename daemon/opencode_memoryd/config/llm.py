"""``[llm]``: the OpenAI-compatible chat endpoint of LLM mode and dreams.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from opencode_memoryd.config.fields import HOUR, EnvVarName, Section, UrlStr

__all__ = ["LlmConfig"]


class LlmConfig(Section):
    """``[llm]``: the chat model that extracts memories (any OpenAI-compatible API)."""

    base_url: UrlStr = Field(
        default="",
        description=(
            'OpenAI-compatible API endpoint, e.g. "http://127.0.0.1:11434/v1" (Ollama). '
            "Empty = no LLM."
        ),
    )
    model: str = Field(
        default="gpt-4o-mini", min_length=1, description="Model name sent to the endpoint."
    )
    api_key_env: EnvVarName = Field(
        default="OPENAI_API_KEY",
        description=(
            "Name of the environment variable holding the API key (never the key itself). "
            "Empty = send no key."
        ),
    )
    api_key_from: str = Field(
        default="", pattern=r"^(opencode:[A-Za-z0-9._-]+)?$",
        description=(
            'Where the key comes from instead: "opencode:PROVIDER" reads the key OpenCode '
            "holds for PROVIDER (its config's options.apiKey, else its auth.json) at each "
            "start; it is never copied here (`install` offers it). Empty = api_key_env."
        ),
    )
    timeout_seconds: float = Field(
        default=60.0, gt=0, le=HOUR,
        description="Timeout of one LLM call, in seconds (0 < x <= 3600).",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=20,
        description=(
            "Immediate retries of a call the endpoint cannot have answered (connection "
            "refused, rate limit, server error). A call that timed out or lost its "
            "connection after the prompt was sent is not resent at once (the endpoint may "
            "have answered and billed it): the session is retried later. 0 to 20."
        ),
    )
    temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        description="Sampling temperature (0-2); 0 gives the most repeatable extractions.",
    )
    json_mode: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema",
        description=(
            'Where structured-output negotiation starts: "json_schema" (a strict JSON '
            'schema), "json_object" (any JSON object) or "none" (the schema in the prompt '
            "only). A server that refuses a mode gets the next one; the mode that works is "
            "remembered per endpoint and model (see `status`)."
        ),
    )
    max_output_tokens: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description=(
            "Cap on the tokens of one answer (sent as max_tokens). 0 = sized to the "
            "expected answer: 32 + max_memories_per_chunk x (max_memory_chars / 3 + 40) "
            "for an extraction (2120 with the defaults), and the like for a dream plan. "
            "Raise it for models that think aloud before they answer (0-1000000)."
        ),
    )
