"""``[dream]``: the daemon's dreams (consolidation of the store).

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import Section

__all__ = ["DreamConfig"]


class DreamConfig(Section):
    """``[dream]``: periodic consolidation of the store (merges duplicates, retires stale facts)."""

    enabled: bool = Field(default=True, description="Let the daemon dream on its schedule.")
    check_interval_minutes: float = Field(
        default=30.0, gt=0, le=7 * 24 * 60,
        description="How often, in minutes, the daemon checks whether a scope should dream "
                    "(0 < x <= 10080, a week).",
    )
    min_hours_between_dreams: float = Field(
        default=24.0, ge=0, le=366 * 24,
        description="A scope dreams at most once per this many hours (0 to 8784, a year).",
    )
    min_new_memories: int = Field(
        default=10, ge=0, le=1_000_000,
        description="A scope dreams only when at least this many memories were added or "
                    "changed since its last dream.",
    )
    max_retire_share: float = Field(
        default=0.3, gt=0, le=1,
        description="No dream retires more than this share of a scope's memories (0 < x <= 1).",
    )
    check_freshness: bool = Field(
        default=True,
        description="At each dream of a project (and at most once per "
                    "min_hours_between_dreams when its gate stays closed), mark its memories "
                    "that name a path, dependency or script its worktree no longer has as "
                    "\"may be out of date\" (read-only; never retired for it).",
    )
