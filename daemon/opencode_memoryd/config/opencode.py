"""``[opencode]``: where OpenCode's databases are and how they are read.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import DAY, HOUR, PathStr, Section

__all__ = ["OpencodeConfig"]


class OpencodeConfig(Section):
    """``[opencode]``: where OpenCode's databases are and how to read them."""

    db_paths: tuple[PathStr, ...] = Field(
        default=(),
        strict=False,  # TOML arrays arrive as lists; stored as a tuple so Config is hashable
        description=(
            "OpenCode database files to read. Empty = every opencode*.db file in data_dir, "
            "plus the file named by $OPENCODE_DB."
        ),
    )
    data_dir: PathStr = Field(
        default="",
        description=(
            "OpenCode's data directory, searched for databases when db_paths is empty. "
            "Empty = $XDG_DATA_HOME/opencode."
        ),
    )
    include_archived: bool = Field(
        default=True, description="Also extract memories from archived sessions."
    )
    abandoned_turn_seconds: int = Field(
        default=1800,
        gt=0,
        le=366 * DAY,
        description=(
            "An assistant message still in flight after this many seconds counts as "
            "finished (a crashed OpenCode leaves one open forever). 1 to 31622400 (a year)."
        ),
    )
    settle_seconds: float = Field(
        default=2.0,
        ge=0,
        le=HOUR,
        description=(
            "A finished turn is read only once it is at least this many seconds old, so "
            "OpenCode's trailing writes land first. 0 to 3600."
        ),
    )
    unconfirmed_turn_seconds: float = Field(
        default=60.0,
        ge=0,
        le=366 * DAY,
        description=(
            "An OpenCode 2.x turn whose last step ended (completed, not a tool call) is read "
            "after this many seconds without a write even when OpenCode has not marked the "
            "session idle (it does so only once queued prompts and background work are done). "
            "0 to 31622400."
        ),
    )
    busy_timeout_ms: int = Field(
        default=3000,
        ge=0,
        le=60_000,
        description=(
            "How long to wait, in milliseconds, when OpenCode holds the database lock "
            "(SQLite busy timeout). 0 to 60000."
        ),
    )
