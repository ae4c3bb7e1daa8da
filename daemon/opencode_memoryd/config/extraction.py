"""``[extraction]``: how memories are extracted from the user's turns (rules or an LLM).

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from opencode_memoryd.config.fields import Section

__all__ = ["ExtractionConfig"]


class ExtractionConfig(Section):
    """``[extraction]``: how memories are drawn from transcripts."""

    mode: Literal["auto", "llm", "rules"] = Field(
        default="auto",
        description=(
            'How memories are extracted: "llm" (the model in [llm]), "rules" (built-in '
            'heuristics, no network) or "auto" (llm when llm.base_url is set, else rules).'
        ),
    )
    max_chunk_tokens: int = Field(
        default=6000,
        ge=500,
        le=1_000_000,
        description=(
            "Transcript budget per LLM call, in tokens; longer sessions are split into "
            "chunks. 500 to 1000000."
        ),
    )
    max_memories_per_chunk: int = Field(
        default=12,
        ge=1,
        le=100,
        description="At most this many memories are kept from one chunk (1-100).",
    )
    max_memory_chars: int = Field(
        default=400,
        ge=20,
        le=10_000,
        description="Longest accepted memory, in characters. 20 to 10000.",
    )
    tool_output_chars: int = Field(
        default=160,
        ge=0,
        le=100_000,
        description=(
            "Tool outputs are cut to this many characters in the transcript shown to the "
            "extractor; 0 = leave them out. 0 to 100000."
        ),
    )
    max_identical_failures: int = Field(
        default=3,
        ge=0,
        le=1000,
        description=(
            "A chunk of turns whose extraction fails the same way this many times in a row "
            "(the same refused answer or request; never a timeout or server error) is given "
            "up: the rules capture its explicit directives, the session moves on, and "
            "`maintain --retry-failed` extracts it again. 0 = never give up (0-1000)."
        ),
    )
