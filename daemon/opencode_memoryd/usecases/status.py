"""``status``: where things are, what is stored, and what the last runs did."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import MEMORY_TYPES, SCOPES
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.local_embedder import local_model_problem
from opencode_memoryd.usecases.ports import AppPort


def embedding_info(app: AppPort) -> dict[str, Any]:
    """``{"provider": str, "unavailable": str | None}``: the configured provider and, for
    ``local`` where its model cannot run, why (search is then BM25 alone)."""
    provider = app.config.embedding.provider
    unavailable = local_model_problem() if provider == "local" else None
    return {"provider": provider, "unavailable": unavailable}


def status_info(app: AppPort, state: StateDB, store: MemoryStore) -> dict[str, Any]:
    """The status report (JSON-safe), without the daemon's own part.

    ``unread_tables`` names the tables of a shape this version cannot read that received
    rows in the last days (their turns are not captured).

    Returns:
        ``{"config_path", "config_file_exists", "state_dir", "extraction_mode",
        "databases": [{"path", "schema", "sessions", "unread_tables"} | {"path", "error"}],
        "databases_error"?, "store": {...}, "embedding": :func:`embedding_info`,
        "user_id": this user's identity,
        "memories": {"scope/type": count} (user scope: this user's only),
        "state": {...}, "llm": {"modes": [{"base_url", "model", "json_mode", "start",
        "detail", "updated_at"}], "given_up": [failure dicts, at most 10]},
        "last_runs": [...]}``. ``llm.modes`` are the structured-output modes negotiated
        per endpoint and model; ``llm.given_up`` the chunks given up after repeated
        identical failures (``state.chunks_given_up`` counts them all).
    """
    info: dict[str, Any] = {
        "config_path": str(app.config_path) if app.config_path else None,
        "config_file_exists": bool(app.config_path and app.config_path.exists()),
        "state_dir": str(app.state_dir),
        "extraction_mode": app.extraction_mode(),
    }
    dbs: list[dict[str, Any]] = []
    try:
        for path in app.database_paths():
            try:
                with app.open_source(path) as db:
                    now_ms = int(app.clock().timestamp() * 1000)
                    dbs.append({"path": str(path), "schema": db.schema.describe(),
                                "sessions": db.session_count(),
                                "unread_tables": [t.name for t in db.unknown_tables()
                                                  if t.recent(now_ms)]})
            except SourceError as exc:
                dbs.append({"path": str(path), "error": str(exc)})
    except SourceError as exc:
        info["databases_error"] = str(exc)
    info["databases"] = dbs
    info["store"] = store.info()
    info["embedding"] = embedding_info(app)
    info["user_id"] = app.user_id
    counts: dict[str, int] = {}
    for scope in SCOPES:
        by_type = store.count_by_type(MemoryFilter(user_id=app.user_id, scope=scope))
        for type_ in MEMORY_TYPES:
            if by_type.get(type_):
                counts[f"{scope}/{type_}"] = by_type[type_]
    info["memories"] = counts
    info["state"] = state.outbox.counts()
    info["llm"] = {
        "modes": [asdict(m) for m in state.llm.llm_modes()],
        "given_up": [f.as_dict()
                     for f in state.failures.chunk_failures(status="given_up", limit=10)],
    }
    info["last_runs"] = state.runs.last_runs(5)
    return info
