"""``[state]``: where the daemon keeps its state.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import PathStr, Section

__all__ = ["StateConfig"]


class StateConfig(Section):
    """``[state]``: the daemon's own bookkeeping."""

    dir: PathStr = Field(
        default="",
        description=(
            "Directory of the daemon's state (how far each database has been read). "
            "Empty = $XDG_STATE_HOME/opencode-memoryd."
        ),
    )
