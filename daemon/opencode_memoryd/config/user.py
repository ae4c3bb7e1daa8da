"""``[user]``: the user identity of the user scope.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import Section

__all__ = ["UserConfig"]


class UserConfig(Section):
    """``[user]``: whose user-scope memories these are (project memories are shared)."""

    id: str = Field(
        default="", max_length=128, pattern=r"^\S*$",
        description=(
            "Your identity in the store: user-scope memories are written with it and only "
            "yours are read, so people sharing a Qdrant server share project memories but "
            "not personal ones. Empty = the first 16 hex digits of the SHA-256 of `git "
            "config --global user.email`, else of your login name. No spaces; at most 128 "
            "characters."
        ),
    )
