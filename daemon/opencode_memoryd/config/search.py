"""``[search]``: how a search query is read before the store is searched."""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import Section


class SearchConfig(Section):
    """``[search]``: query expansion by category."""

    expansion: bool = Field(
        default=True,
        description=(
            'Expand a question that names a kind of tool ("which package manager?") with '
            "the tools of that kind (pnpm, npm, yarn, ...), so it finds a memory that names "
            "only the tool. false = search the question's own words alone."
        ),
    )
