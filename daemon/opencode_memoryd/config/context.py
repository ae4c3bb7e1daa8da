"""``[context]``: the block of memories given to the OpenCode agent at the start of a session."""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import Section


class ContextConfig(Section):
    """``[context]``: the size of the context block, its "relevant to the task" part and the
    per-message recall part."""

    max_chars: int = Field(
        default=5000,
        ge=200,
        le=100_000,
        description=(
            "Budget of the context block in characters (about 4 characters per token), "
            "headers included; entries are taken most important first until it is spent."
        ),
    )
    max_entries: int = Field(
        default=30,
        ge=1,
        le=500,
        description="At most this many memories in the context block.",
    )
    relevant_entries: int = Field(
        default=5,
        ge=0,
        le=50,
        description=(
            "At most this many search hits for the session's first message, in the "
            "\"Relevant to the task\" section (0: no such section)."
        ),
    )
    recall_entries: int = Field(
        default=5,
        ge=0,
        le=20,
        description=(
            "At most this many memories in the part each later user message of a session "
            "gets: search hits for its text the session was not given yet, added to the "
            "message (0: no such part)."
        ),
    )
    recall_chars: int = Field(
        default=600,
        ge=100,
        le=10_000,
        description=(
            "Budget of that part's entry lines in characters; its fixed header and "
            "closing lines (about 320 characters) come on top."
        ),
    )
    capture_first_seconds: float = Field(
        default=0.3,
        ge=0,
        le=60,
        description=(
            "When a session asks for its block for the first time, the daemon first "
            "captures what its project said last (sessions still in their quiet period), "
            "waiting at most this long; what does not fit goes on in the background. "
            "0: no waiting."
        ),
    )
    toasts: bool = Field(
        default=True,
        description=(
            "Show a toast in OpenCode's terminal UI once per session (\"memory: 8 notes for "
            "this project\") and when the agent saves a memory (OpenCode 1.x)."
        ),
    )
