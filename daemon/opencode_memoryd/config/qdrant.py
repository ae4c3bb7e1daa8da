"""``[qdrant]``: the memory store: Qdrant embedded, or a server or cluster by URL.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import HOUR, EnvVarName, PathStr, Section, UrlStr

__all__ = ["QdrantConfig"]


class QdrantConfig(Section):
    """``[qdrant]``: where memories are stored."""

    url: UrlStr = Field(
        default="",
        description=(
            'Qdrant server URL, e.g. "http://127.0.0.1:6333". Empty = an embedded '
            "Qdrant Edge store on disk, at path."
        ),
    )
    api_key_env: EnvVarName = Field(
        default="",
        description=(
            "Name of the environment variable holding the Qdrant API key (never the key "
            "itself). Empty = send no key."
        ),
    )
    path: PathStr = Field(
        default="",
        description=(
            "Directory of the embedded store, used when url is empty. "
            "Empty = $XDG_DATA_HOME/opencode-memoryd/qdrant."
        ),
    )
    collection: str = Field(
        default="memories", min_length=1, description="Name of the collection holding memories."
    )
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=HOUR,
        description="Timeout of one Qdrant request, in seconds (0 < x <= 3600).",
    )

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        if self.url and self.path:
            return [("path", "only used by the embedded store; leave it empty when url is set")]
        return []
