"""The root of the config schema: :class:`Config`, one attribute per TOML section.

Adding a section: define a :class:`~opencode_memoryd.config.fields.Section` subclass in a
module of its own, named after the TOML table (as :mod:`~opencode_memoryd.config.daemon`
for ``[daemon]``), whose fields all have defaults and a ``description`` (numbers with both
bounds), then add one field to :class:`Config` with
``Field(default_factory=TheSection, description=...)``. The example file, the docs comments
and the validation follow from the schema; regenerate ``config.example.toml`` with
``python -m opencode_memoryd.config.example config.example.toml``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from opencode_memoryd.config.context import ContextConfig
from opencode_memoryd.config.daemon import DaemonConfig
from opencode_memoryd.config.dedup import DedupConfig
from opencode_memoryd.config.dream import DreamConfig
from opencode_memoryd.config.embedding import EmbeddingConfig
from opencode_memoryd.config.extraction import ExtractionConfig
from opencode_memoryd.config.fields import Section
from opencode_memoryd.config.llm import LlmConfig
from opencode_memoryd.config.log import LogConfig
from opencode_memoryd.config.opencode import OpencodeConfig
from opencode_memoryd.config.qdrant import QdrantConfig
from opencode_memoryd.config.search import SearchConfig
from opencode_memoryd.config.state import StateConfig
from opencode_memoryd.config.summaries import SummariesConfig
from opencode_memoryd.config.user import UserConfig
from opencode_memoryd.config.web import WebConfig

__all__ = ["Config"]


class Config(Section):
    """The whole configuration: one attribute per TOML section, all with defaults.

    ``Config()`` is the all-defaults configuration. Instances are frozen and hashable;
    use :func:`~opencode_memoryd.config.loader.apply_overrides` to derive a changed copy.
    """

    opencode: OpencodeConfig = Field(
        default_factory=OpencodeConfig,
        description="Where OpenCode's SQLite databases are, and how to read them.",
    )
    extraction: ExtractionConfig = Field(
        default_factory=ExtractionConfig,
        description="How memories are extracted from session transcripts.",
    )
    llm: LlmConfig = Field(
        default_factory=LlmConfig,
        description="The chat model that extracts memories (any OpenAI-compatible API).",
    )
    embedding: EmbeddingConfig = Field(
        default_factory=EmbeddingConfig,
        description="The model that turns memories into vectors for semantic search.",
    )
    search: SearchConfig = Field(
        default_factory=SearchConfig,
        description="How a search query is read: query expansion by category of tools.",
    )
    qdrant: QdrantConfig = Field(
        default_factory=QdrantConfig,
        description="Where memories are stored: a Qdrant server, or an embedded store on disk.",
    )
    dedup: DedupConfig = Field(
        default_factory=DedupConfig,
        description="When a new memory counts as a duplicate of a stored one.",
    )
    daemon: DaemonConfig = Field(
        default_factory=DaemonConfig,
        description="The long-running daemon (`opencode-memoryd run`): debounce and pacing.",
    )
    dream: DreamConfig = Field(
        default_factory=DreamConfig,
        description="Dreaming: scheduled consolidation of the memory store.",
    )
    summaries: SummariesConfig = Field(
        default_factory=SummariesConfig,
        description="Session summaries and project briefs: memories about what sessions did.",
    )
    context: ContextConfig = Field(
        default_factory=ContextConfig,
        description="The block of memories given to the OpenCode agent in each new session.",
    )
    user: UserConfig = Field(
        default_factory=UserConfig,
        description="Whose user-scope memories these are.",
    )
    web: WebConfig = Field(
        default_factory=WebConfig,
        description="The local web page to browse, search, edit and forget memories.",
    )
    state: StateConfig = Field(default_factory=StateConfig, description="The daemon's own state.")
    log: LogConfig = Field(default_factory=LogConfig, description="Logging.")

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        if self.extraction.mode == "llm" and not self.llm.base_url:
            return [("llm.base_url", 'required when extraction.mode is "llm"')]
        return []

    @property
    def extraction_mode(self) -> Literal["llm", "rules"]:
        """The extractor to use: ``extraction.mode`` with ``auto`` resolved."""
        mode = self.extraction.mode
        if mode == "auto":
            return "llm" if self.llm.base_url else "rules"
        return mode

