"""Composition root: builds the real adapters from a :class:`~opencode_memoryd.config.Config`.

Only this module constructs stores, extractors and readers; the CLI calls it.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd import config as cfgmod
from opencode_memoryd.capture.processor import Extractor, Limits, SessionProcessor, SessionReport
from opencode_memoryd.errors import SourceError, UpstreamError
from opencode_memoryd.extract.rules import RulesExtractor
from opencode_memoryd.models import iso_utc
from opencode_memoryd.source.reader import OpenCodeDB, SessionRow, discover_databases
from opencode_memoryd.state import StateDB
from opencode_memoryd.store.qdrant import EdgeStore, MemoryFilter, MemoryStore, ServerStore

log = structlog.get_logger(__name__)

STATE_FILE_NAME = "state.db"
#: Written by a running daemon: its pid and control socket.
DAEMON_INFO_FILE = "daemon.json"
JOURNAL_FILE_NAME = "dream-journal.jsonl"


def normalize_dir(directory: str) -> str:
    """An absolute, normalised folder path (``~`` expanded); the folder need not exist."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(directory)))


@dataclass(slots=True)
class App:
    """The configured application: paths, settings and lazily built adapters."""

    config: Any
    env: Mapping[str, str]
    config_path: Path | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    # -- paths -----------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """``$XDG_STATE_HOME/opencode-memoryd`` unless ``state.dir`` is set."""
        return cfgmod.state_dir(self.config, self.env)

    @property
    def journal_path(self) -> Path:
        """The append-only dream journal: ``<state dir>/dream-journal.jsonl``."""
        return self.state_dir / JOURNAL_FILE_NAME

    def database_paths(self, override: str | None = None) -> list[Path]:
        """The OpenCode databases to read: ``--db``, else ``opencode.db_paths``, else found.

        Raises:
            SourceError: none was given and none was found (the message says where we looked).
        """
        if override:
            return [Path(normalize_dir(override))]
        configured = cfgmod.configured_db_paths(self.config, self.env)
        if configured:
            return configured
        data_dir = cfgmod.opencode_data_dir(self.config, self.env)
        found = discover_databases(data_dir, self.env)
        if not found:
            raise SourceError(
                f"no OpenCode database found: looked for {data_dir}/opencode*.db and "
                "$OPENCODE_DB; pass --db PATH or set opencode.db_paths"
            )
        return found

    # -- adapters --------------------------------------------------------------------

    def open_state(self) -> StateDB:
        """Open (or create) the state file in the state dir."""
        return StateDB(self.state_dir / STATE_FILE_NAME)

    def open_source(self, path: Path) -> OpenCodeDB:
        """Open one OpenCode database read-only."""
        return OpenCodeDB(path, busy_timeout_ms=self.config.opencode.busy_timeout_ms)

    def _secret(self, env_name: str) -> str | None:
        return (self.env.get(env_name) or None) if env_name else None

    def build_embedder(self) -> Any | None:
        """The dense embedder of ``[embedding]``, or ``None`` (BM25 only)."""
        e = self.config.embedding
        if e.provider == "none":
            return None
        if e.provider == "openai":
            from opencode_memoryd.store.embedders import OpenAIEmbedder

            return OpenAIEmbedder(base_url=e.base_url, api_key=self._secret(e.api_key_env),
                                  model=e.model, dimensions=e.dimensions,
                                  timeout_seconds=e.timeout_seconds)
        from opencode_memoryd.store.embedders import FastEmbedEmbedder

        return FastEmbedEmbedder(model=e.model or None)

    def open_store(self) -> MemoryStore:
        """Open the memory store: Qdrant Edge on disk, or a Qdrant server by URL."""
        q = self.config.qdrant
        embedder = self.build_embedder()
        if q.url:
            return ServerStore(url=q.url, api_key=self._secret(q.api_key_env),
                               collection=q.collection, embedder=embedder,
                               timeout_seconds=q.timeout_seconds)
        return EdgeStore(cfgmod.store_dir(self.config, self.env), embedder=embedder)

    def extraction_mode(self) -> str:
        """``llm`` or ``rules``: ``auto`` picks llm when an endpoint is configured."""
        return str(self.config.extraction_mode)

    def build_extractor(self) -> Extractor:
        """The extractor for :meth:`extraction_mode`."""
        x = self.config.extraction
        if self.extraction_mode() == "rules":
            return RulesExtractor(max_chars=x.max_memory_chars)
        from opencode_memoryd.extract.chat import ChatClient
        from opencode_memoryd.extract.llm_extractor import LlmExtractor

        llm = self.config.llm
        chat = ChatClient(base_url=llm.base_url, api_key=self._secret(llm.api_key_env),
                          model=llm.model, timeout_seconds=llm.timeout_seconds,
                          max_retries=llm.max_retries, temperature=llm.temperature,
                          json_mode=llm.json_mode)
        return LlmExtractor(chat, max_memories=x.max_memories_per_chunk,
                            max_chars=x.max_memory_chars)

    def limits(self) -> Limits:
        """Reader and chunking limits from the config."""
        o, x = self.config.opencode, self.config.extraction
        return Limits(
            abandoned_ms=int(o.abandoned_turn_seconds * 1000),
            settle_ms=int(o.settle_seconds * 1000),
            max_chunk_tokens=x.max_chunk_tokens,
            tool_output_chars=x.tool_output_chars,
            near_duplicate_similarity=self.config.dedup.near_duplicate_similarity,
        )

    @contextmanager
    def resources(self) -> Iterator[tuple[StateDB, MemoryStore]]:
        """Open the state file and the store; close both on exit."""
        state = self.open_state()
        try:
            store = self.open_store()
            try:
                yield state, store
            finally:
                store.close()
        finally:
            state.close()

    # -- use cases -------------------------------------------------------------------

    def project_keys_for_dir(self, directory: str, db_override: str | None = None) -> set[str]:
        """The memory scopes (project keys) of the sessions ``--dir DIR`` selects."""
        keys: set[str] = set()
        try:
            paths = self.database_paths(db_override)
        except SourceError:
            return keys
        for path in paths:
            try:
                with self.open_source(path) as db:
                    keys.update(s.project_key for s in db.sessions(directory=directory,
                                                                   include_subagents=True))
            except SourceError as exc:
                log.warning("source_unreadable", db=str(path), error=str(exc))
        return keys

    def maintain(
        self,
        *,
        directory: str | None,
        db_override: str | None = None,
        progress: Callable[[list[SessionRow]], Any] | None = None,
        resources: tuple[StateDB, MemoryStore, Extractor] | None = None,
        lock_for: Callable[[str], Any] | None = None,
    ) -> dict[str, Any]:
        """Process every eligible session (of ``directory``'s project, or all) up to now.

        Args:
            directory: a normalised folder (see :func:`normalize_dir`), or ``None`` for all.
            db_override: ``--db PATH``.
            progress: wraps the session list (a progress bar on a terminal).
            resources: the daemon's open state, store and extractor; when ``None`` they
                are opened here and closed on return.
            lock_for: the daemon's per-project lock factory; held while a session of that
                project is processed, so this never overlaps the daemon's own work.

        Returns:
            ``{"run_id", "mode", "databases": [...], "sessions": [SessionReport dicts],
            "totals": {...}, "failed": int}``.

        Raises:
            SourceError: no database, or one that cannot be opened (schema errors included).
            UpstreamError: the LLM endpoint refused our credentials or model (kind ``auth``
                or ``not_found``): every session would fail the same way.
        """
        if resources is None:
            with self.resources() as (state, store):
                return self.maintain(directory=directory, db_override=db_override,
                                     progress=progress,
                                     resources=(state, store, self.build_extractor()))
        state, store, extractor = resources
        run_id = uuid.uuid4().hex[:12]
        mode = self.extraction_mode()
        log.info("maintain_started", run_id=run_id, mode=mode,
                 directory=directory or "(all)")
        paths = self.database_paths(db_override)
        reports: list[SessionReport] = []
        dbs: list[dict[str, Any]] = []
        state.start_run(run_id, "maintain", iso_utc(self.clock()))
        try:
            for path in paths:
                with self.open_source(path) as db:
                    sessions = db.sessions(
                        directory=directory,
                        include_archived=self.config.opencode.include_archived,
                    )
                    dbs.append({"path": str(path), "schema": db.schema.describe(),
                                "sessions": len(sessions)})
                    proc = SessionProcessor(db, state, store, extractor, self.limits(),
                                            clock=self.clock)
                    for s in (progress(sessions) if progress else sessions):
                        if lock_for is None:
                            reports.append(proc.process(s))
                            continue
                        with lock_for(s.project_key):
                            reports.append(proc.process(s))
        finally:
            summary = _summary(run_id, mode, dbs, reports)
            state.end_run(run_id, summary["totals"], iso_utc(self.clock()))
        log.info("maintain_finished", run_id=run_id, **summary["totals"])
        return summary

    # -- queries (shared by the CLI and the daemon's control endpoint) -----------------

    def filters_for_dir(self, directory: str, db: str | None, *, include_user: bool
                        ) -> list[MemoryFilter]:
        """Store filters for DIR's project(s), optionally with user-scope memories."""
        keys = self.project_keys_for_dir(normalize_dir(directory), db)
        if not keys:
            return [MemoryFilter(scope="user")] if include_user else []
        return [MemoryFilter(project_id=k, include_user_scope=include_user)
                for k in sorted(keys)]

    def list_memories(self, store: MemoryStore, *, user: bool = False,
                      directory: str | None = None, db: str | None = None,
                      include_retired: bool = False) -> list[dict[str, Any]]:
        """Memories as payload dicts, oldest first: all, user scope, or DIR's project.

        With ``include_retired`` the tombstones a dream left (``status`` ``retired``,
        ``superseded_by``, ``retired_reason``) are listed too.
        """
        if user:
            flts: list[MemoryFilter] = [MemoryFilter(scope="user")]
        elif directory:
            flts = list(self.filters_for_dir(directory, db, include_user=False))
        else:
            flts = [MemoryFilter()]
        seen: dict[str, Any] = {}
        for flt in flts:
            for m in store.scroll(replace(flt, include_retired=include_retired)):
                seen.setdefault(m.id, m)
        ordered = sorted(seen.values(), key=lambda m: (m.created_at, m.id))
        return [m.to_payload() for m in ordered]

    def search(self, store: MemoryStore, query: str, *, directory: str | None = None,
               db: str | None = None, limit: int = 10, include_retired: bool = False
               ) -> list[dict[str, Any]]:
        """Search results as payload dicts with a ``score``, best first.

        With ``directory``: DIR's project memories and user-scope memories only. With
        ``include_retired``: tombstones can match too (they say ``status: retired``).
        """
        flts: list[MemoryFilter] = (
            list(self.filters_for_dir(directory, db, include_user=True)) if directory
            else [MemoryFilter()])
        hits: dict[str, tuple[Any, float]] = {}
        for flt in flts:
            for m, score in store.search(query, flt=replace(flt, include_retired=include_retired),
                                         limit=limit):
                if m.id not in hits or hits[m.id][1] < score:
                    hits[m.id] = (m, score)
        ranked = sorted(hits.values(), key=lambda h: -h[1])[:limit]
        return [{**m.to_payload(), "score": round(score, 6)} for m, score in ranked]

    def status_info(self, state: StateDB, store: MemoryStore) -> dict[str, Any]:
        """Where things are, what is stored, and what the last runs did (JSON-safe)."""
        info: dict[str, Any] = {
            "config_path": str(self.config_path) if self.config_path else None,
            "config_file_exists": bool(self.config_path and self.config_path.exists()),
            "state_dir": str(self.state_dir),
            "extraction_mode": self.extraction_mode(),
        }
        dbs: list[dict[str, Any]] = []
        try:
            for path in self.database_paths():
                try:
                    with self.open_source(path) as db:
                        dbs.append({"path": str(path), "schema": db.schema.describe(),
                                    "sessions": len(db.sessions())})
                except SourceError as exc:
                    dbs.append({"path": str(path), "error": str(exc)})
        except SourceError as exc:
            info["databases_error"] = str(exc)
        info["databases"] = dbs
        info["store"] = store.info()
        counts: dict[str, int] = {}
        for m in store.scroll(None):
            key = f"{m.scope}/{m.type}"
            counts[key] = counts.get(key, 0) + 1
        info["memories"] = counts
        info["state"] = state.counts()
        info["last_runs"] = state.last_runs(5)
        return info

    # -- dreams ----------------------------------------------------------------------

    def build_dreamer(self, state: StateDB, store: MemoryStore) -> Any:
        """The consolidation engine: LLM plans in llm mode, duplicate collapse in rules mode."""
        from opencode_memoryd.dream.dreamer import Dreamer
        from opencode_memoryd.dream.model import DreamSettings

        planner = None
        if self.extraction_mode() == "llm":
            from opencode_memoryd.extract.chat import ChatClient

            llm = self.config.llm
            planner = ChatClient(base_url=llm.base_url, api_key=self._secret(llm.api_key_env),
                                 model=llm.model, timeout_seconds=llm.timeout_seconds,
                                 max_retries=llm.max_retries, temperature=llm.temperature,
                                 json_mode=llm.json_mode)
        settings = DreamSettings(
            max_retire_share=self.config.dream.max_retire_share,
            near_duplicate_similarity=self.config.dedup.near_duplicate_similarity,
        )
        return Dreamer(store, state, planner=planner, settings=settings, clock=self.clock)

    def dream_scopes(self, store: MemoryStore) -> dict[str | None, str | None]:
        """Every scope that holds memories: project key -> project root (``None`` = user)."""
        scopes: dict[str | None, str | None] = {}
        for m in store.scroll(None):
            if m.scope == "user":
                scopes.setdefault(None, None)
            else:
                scopes.setdefault(m.project_id, m.project_root)
        return scopes

    def dream_gate(self, journal: Any, store: MemoryStore, project_key: str | None
                   ) -> tuple[bool, str]:
        """Whether a scope's dream gate is open, and why not.

        Open when at least ``dream.min_hours_between_dreams`` passed since the scope's last
        dream (journal status ``ok``, not a dry run) and at least
        ``dream.min_new_memories`` memories were added or changed since then.
        """
        d = self.config.dream
        entries = (journal.entries(user=True) if project_key is None
                   else journal.entries(project_key=project_key))
        last = next((e for e in entries if e.get("status") == "ok" and not e.get("dry_run")),
                    None)
        since = None
        if last is not None:
            from opencode_memoryd.models import parse_iso

            since = parse_iso(str(last.get("ended_at") or last.get("started_at")))
            hours = (self.clock() - since).total_seconds() / 3600
            if hours < d.min_hours_between_dreams:
                return False, (f"last dream {hours:.1f} h ago; the minimum is "
                               f"{d.min_hours_between_dreams:g} h")
        flt = (MemoryFilter(scope="user") if project_key is None
               else MemoryFilter(project_id=project_key, include_user_scope=False))
        new = sum(1 for m in store.scroll(flt) if since is None or m.updated_at > since)
        if new < d.min_new_memories:
            return False, f"{new} new memories since the last dream; the minimum is " \
                          f"{d.min_new_memories}"
        return True, "gate open"

    def run_dream(self, dreamer: Any, journal: Any, project_key: str | None,
                  project_root: str | None, *, trigger: str, dry_run: bool = False
                  ) -> dict[str, Any]:
        """Dream one scope and append the result to the journal; return the journal entry."""
        result = dreamer.dream(project_key, project_root=project_root, trigger=trigger,
                               dry_run=dry_run)
        entry = dict(result.to_journal())
        journal.append(entry)
        log.info("dream_finished", run_id=entry.get("run_id"), status=entry.get("status"),
                 trigger=trigger, dry_run=dry_run, counts=entry.get("counts"))
        return entry

    def show_memory(self, store: MemoryStore, journal: Any, memory_id: str
                    ) -> dict[str, Any] | None:
        """One memory (retired ones too) with its lineage: where it came from and the
        dreams that merged or superseded it. ``None`` when no such memory exists."""
        try:
            found = store.get([memory_id])
        except ValueError:  # not a UUID: no memory can have that id
            return None
        if not found:
            return None
        m = found[0]
        payload = m.to_payload()
        runs = set(getattr(m, "dream_runs", []) or [])
        if getattr(m, "retired_by_run", None):
            runs.add(str(m.retired_by_run))
        dreams = [e for e in journal.entries()
                  if e.get("run_id") in runs or any(
                      memory_id in (op.get("memory_ids") or []) or memory_id == op.get("new_id")
                      for op in e.get("operations") or [])]
        merged_from = list(getattr(m, "merged_from", []) or [])
        return {"memory": payload,
                "lineage": {"sessions": payload.get("session_ids"),
                            "message_ids": payload.get("message_ids"),
                            "merged_from": [x.to_payload() for x in store.get(merged_from)],
                            "superseded_by": getattr(m, "superseded_by", None),
                            "dreams": dreams}}

    def daemon_socket(self) -> Path | None:
        """The control socket of a running daemon, from ``daemon.json``, or ``None``."""
        path = self.state_dir / DAEMON_INFO_FILE
        try:
            return Path(json.loads(path.read_text())["socket"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _summary(run_id: str, mode: str, dbs: list[dict[str, Any]],
             reports: list[SessionReport]) -> dict[str, Any]:
    rows = [r.as_dict() for r in reports]
    totals = {
        "sessions": len(rows),
        "turns_read": sum(r["turns_read"] for r in rows),
        "llm_calls": sum(r["llm_calls"] for r in rows),
        "added": sum(r["added"] for r in rows),
        "skipped": sum(sum(r["skipped"].values()) for r in rows),
        "tokens_in": sum(r["tokens_in"] for r in rows),
        "tokens_out": sum(r["tokens_out"] for r in rows),
        "redactions": sum(sum(r["redactions"].values()) for r in rows),
        "failed": sum(1 for r in rows if r["error"]),
    }
    return {"run_id": run_id, "mode": mode, "databases": dbs, "sessions": rows,
            "totals": totals, "failed": totals["failed"]}


__all__ = ["App", "UpstreamError", "normalize_dir"]
