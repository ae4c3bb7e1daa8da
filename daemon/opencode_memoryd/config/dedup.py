"""``[dedup]``: when a new memory is a duplicate of one stored.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import Section

__all__ = ["DedupConfig"]


class DedupConfig(Section):
    """``[dedup]``: when a new memory counts as one already stored."""

    near_duplicate_similarity: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description=(
            "Text similarity (0 < x <= 1) above which a new memory of the same type and "
            "scope is treated as a duplicate of a stored one."
        ),
    )
