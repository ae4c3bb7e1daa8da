"""``[summaries]``: the memories opencode-memoryd writes about sessions and projects."""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import DAY, Section


class SummariesConfig(Section):
    """``[summaries]``: session summaries and project briefs."""

    session_summaries: bool = Field(
        default=True,
        description=(
            "Keep each compaction summary OpenCode writes as a session-summary memory, and "
            "when a session without one goes idle, the state it ended in (rules: files "
            "changed, commands still failing) or a short summary of it (llm)."
        ),
    )
    idle_seconds: float = Field(
        default=900.0,
        gt=0,
        le=7 * DAY,
        description=(
            "A session is summarised once it has had no new message for this many seconds "
            "(it is summarised again if it goes on later); 0 < x <= 604800 (7 days)."
        ),
    )
    max_chars: int = Field(
        default=1200,
        ge=100,
        le=20_000,
        description="Longest session summary, in characters (100-20000).",
    )
    project_brief: bool = Field(
        default=True,
        description=(
            "Keep a project-brief memory of each git project whose worktree is on this "
            "machine: what its package.json/pyproject.toml/go.mod/Cargo.toml state (name, "
            "languages, known tools, script names; rules) or a short summary of those and "
            "its README held to those facts (llm), made again when one of these files "
            "changes. Never prose from the README. Files git ignores or outside the "
            "worktree are never read."
        ),
    )
    brief_max_chars: int = Field(
        default=600,
        ge=100,
        le=5000,
        description="Longest project brief, in characters (100-5000).",
    )
