"""What the use cases need from the composition root, as Protocols.

The use cases never build an adapter themselves: :class:`~opencode_memoryd.compose.App`
(the composition root) satisfies :class:`AppPort` and hands out the OpenCode reader, the
state file, the store, the extractor and the dream planner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from opencode_memoryd.capture.notes import Summarizer
    from opencode_memoryd.capture.processor import Extractor, Limits, SessionProcessor
    from opencode_memoryd.config.schema import Config
    from opencode_memoryd.dream.planning import Planner
    from opencode_memoryd.llm.chat import ChatClient
    from opencode_memoryd.llm.modes import ModeMemory
    from opencode_memoryd.llm.recorded import ReplyMemory
    from opencode_memoryd.source.reader import OpenCodeDB
    from opencode_memoryd.state.batch import StateBatch
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.api import Embedder, MemoryStore


class AppPort(Protocol):
    """The configured application: settings, paths and adapter factories."""

    @property
    def config(self) -> Config:
        """The validated configuration."""
        ...

    @property
    def env(self) -> Mapping[str, str]:
        """The process environment the paths were resolved from."""
        ...

    @property
    def config_path(self) -> Path | None:
        """The config file read (``None``: defaults only)."""
        ...

    @property
    def clock(self) -> Callable[[], datetime]:
        """The current aware UTC time."""
        ...

    @property
    def user_id(self) -> str:
        """The identity of this user's user-scope memories (``Memory.user_id``)."""
        ...

    @property
    def state_dir(self) -> Path:
        """Our state folder (state file, journal, log, daemon files)."""
        ...

    @property
    def state_path(self) -> Path:
        """The state file."""
        ...

    @property
    def journal_path(self) -> Path:
        """The append-only dream journal file."""
        ...

    def database_paths(self, override: str | None = None) -> list[Path]:
        """The OpenCode databases to read.

        Raises:
            SourceError: none given and none found.
        """
        ...

    def open_source(self, path: Path) -> OpenCodeDB:
        """Open one OpenCode database read-only."""
        ...

    def session_processor(self, source: OpenCodeDB, state: StateDB, store: MemoryStore,
                          extractor: Extractor, *, summarizer: Summarizer | None = None,
                          batch: StateBatch | None = None,
                          raise_fatal: bool = True) -> SessionProcessor:
        """The capture pipeline for the sessions of ``source`` (the one construction
        site, in the composition root)."""
        ...

    def open_state(self) -> StateDB:
        """Open (or create) the state file."""
        ...

    def open_store(self, *, allow_mismatch: bool = False) -> MemoryStore:
        """Open the memory store; ``allow_mismatch``: even when it was built with another
        embedder or BM25 settings, or its re-embedding was interrupted (to re-embed it)."""
        ...

    def build_embedder(self) -> Embedder | None:
        """The configured dense embedder, or ``None`` (BM25 only)."""
        ...

    def build_extractor(self, modes: ModeMemory | None = None) -> Extractor:
        """The extractor of the configured mode (its chat client remembers the negotiated
        structured-output mode in ``modes``)."""
        ...

    def build_summarizer(self, modes: ModeMemory | None = None,
                         replies: ReplyMemory | None = None) -> Summarizer:
        """The writer of session summaries and project briefs (rules or LLM; its chat
        client remembers the negotiated structured-output mode in ``modes`` and records
        its answers in ``replies``)."""
        ...

    def build_chat_client(self, *, timeout_seconds: float | None = None,
                          max_retries: int | None = None,
                          modes: ModeMemory | None = None) -> ChatClient:
        """The chat client of ``[llm]``, optionally with another timeout and retry count,
        remembering its negotiated structured-output mode in ``modes``."""
        ...

    def build_planner(self, modes: ModeMemory | None = None) -> Planner | None:
        """The dream planner (an LLM chat client), or ``None`` in rules mode."""
        ...

    def extraction_mode(self) -> str:
        """``llm`` or ``rules``."""
        ...

    def limits(self) -> Limits:
        """Reader and chunking limits."""
        ...

    def ensure_space(self) -> None:
        """Raise :class:`~opencode_memoryd.errors.DiskFullError` unless the state dir and
        the store have room for an extraction's writes."""
        ...
