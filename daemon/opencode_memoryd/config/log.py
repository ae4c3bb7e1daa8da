"""``[log]``: the structured log.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from opencode_memoryd.config.fields import Section

__all__ = ["LogConfig"]


class LogConfig(Section):
    """``[log]``: logging."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description='Lowest level logged: "debug", "info", "warning" or "error".',
    )
    file_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=0,
        le=1024**4,
        description="Size, in bytes, at which the log file is rotated; 0 = never rotate. "
                    "At most 1 TiB.",
    )
    file_backups: int = Field(
        default=5, ge=0, le=1000, description="Number of rotated log files kept (0-1000)."
    )
