"""``reembed``: rebuild the store's vectors for the configured embedder and BM25 settings.

A store remembers the embedder (name, dimensions) and the BM25 settings its vectors were
built with (:mod:`opencode_memoryd.store.meta`), and refuses to open under another
configuration. This use case opens it anyway (``allow_mismatch=True``) and, when the
recorded and the configured ones differ or an earlier re-embedding did not complete,
rebuilds every point's vectors from the memory text kept in its payload
(:meth:`~opencode_memoryd.store.api.MemoryStore.reembed`): nothing is re-extracted, ids and
payloads stay as they were. An interrupted run is recorded in the store and finished by the
next one.

It must own the store: the CLI runs it only when no daemon runs (a daemon holds the
embedded store, and would write to a server store meanwhile). It is not a control route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.errors import StoreError, UpstreamError
from opencode_memoryd.store.edge import EDGE_META_FILE
from opencode_memoryd.store.meta import embedder_desc, read_meta_file
from opencode_memoryd.usecases.ports import AppPort

log = structlog.get_logger(__name__)

#: The advice at the end of a failed run's message.
MARKED = ("the store stays marked as needing a re-embed (capture and search refuse it "
          "until then)")
RUN_AGAIN = (f"{MARKED}; run `opencode-memoryd reembed` again once that is fixed — it "
             "starts over, the memories are kept")


def reembed(app: AppPort, *, force: bool = False,
            on_start: Callable[[dict[str, Any]], None] | None = None,
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Re-embed the memory store for the configured embedder, when it needs it.

    Args:
        app: the configured application (its ``open_store``).
        force: re-embed even when the store already matches the configuration.
        on_start: called with the report so far (``points``, ``from``, ``to``,
            ``reason``, ``store``) just before a re-embedding starts.
        progress: called after each batch with (memories done, memories in all).

    Returns:
        ``{"reembedded": bool, "points": int, "from": str, "to": str, "reason": str,
        "store": str}``: whether the vectors were rebuilt, the number of points (all of
        them, tombstones included: re-embedded, or present when nothing was done), the
        recorded and the configured embedder as
        :func:`~opencode_memoryd.store.meta.embedder_desc` words them, why it was (or was
        not) done, and the store's path or URL. An embedded store that does not exist yet
        is not created: ``points`` 0, ``reembedded`` false, ``from`` ``"no store"``.

    Raises:
        StoreInUseError: another process (the daemon, a command) holds the embedded store.
        UpstreamError: the configured embedder cannot be built, or failed during the
            re-embedding (the message says the store still needs a re-embed).
        StoreError: the store cannot be opened, or failed during the re-embedding.
    """
    cfg = app.config
    if not cfg.qdrant.url:
        path = store_dir(cfg, app.env)
        if not (path / EDGE_META_FILE).exists():
            return {"reembedded": False, "points": 0, "from": "no store",
                    "to": f"embedding provider {cfg.embedding.provider!r}",
                    "reason": "there is no store yet (the first capture creates it)",
                    "store": str(path)}
    store = app.open_store(allow_mismatch=True)
    try:
        info = store.info()
        stored, configured = info.get("embedder"), info.get("configured_embedder")
        where = str(info.get("path") or info.get("url") or "?")
        result: dict[str, Any] = {"reembedded": False, "points": int(info.get("points") or 0),
                                  "from": embedder_desc(stored),
                                  "to": embedder_desc(configured), "store": where}
        if info.get("reembed_interrupted"):
            result["reason"] = "an earlier re-embedding did not complete"
        elif stored != configured:
            result["reason"] = "the configured embedder differs from the store's"
        elif info.get("needs_reembed"):
            result["reason"] = "the BM25 settings differ from the store's"
        elif force:
            result["reason"] = "--force: the store already matched the configuration"
        else:
            result["reason"] = "the store already matches the configuration"
            return result
        log.info("reembed_started", store=where, points=result["points"],
                 source=result["from"], target=result["to"])
        if on_start is not None:
            on_start(dict(result))
        try:
            result["points"] = store.reembed(store.embedder, progress=progress)
        except UpstreamError as exc:
            log.warning("reembed_failed", store=where, error=str(exc))
            raise UpstreamError(f"re-embedding {where} failed: the embedder: {exc}; "
                                + RUN_AGAIN, kind=exc.kind, retryable=exc.retryable) from exc
        except StoreError as exc:
            log.warning("reembed_failed", store=where, error=str(exc))
            raise StoreError(f"re-embedding {where} failed: {exc}; {RUN_AGAIN}") from exc
        result["reembedded"] = True
        log.info("reembed_done", store=where, points=result["points"], target=result["to"])
        return result
    finally:
        store.close()


#: The provider whose stores built without dense vectors are re-embedded automatically.
MIGRATED_PROVIDER = "local"


def migration_due(app: AppPort) -> str | None:
    """Why :func:`migrate_store` would re-embed the store now, or ``None`` when it would not
    (see there). Reads the embedded store's metadata file; builds the embedder.

    Raises:
        StoreError: the metadata file cannot be read.
        UpstreamError: the local model's file is not the pinned one.
    """
    cfg = app.config
    if cfg.qdrant.url or cfg.embedding.provider != MIGRATED_PROVIDER:
        return None
    meta_path = store_dir(cfg, app.env) / EDGE_META_FILE
    if not meta_path.exists():
        return None
    meta = read_meta_file(meta_path)
    interrupted = meta.get("reembed_in_progress")
    target = (interrupted or {}).get("embedder") if interrupted else None
    if interrupted and not str((target or {}).get("name", "")).startswith("local:"):
        return None
    if not interrupted and meta.get("embedder") is not None:
        return None
    if app.build_embedder() is None:  # no local model here: BM25 alone, as before
        return None
    return ("a re-embedding for the local model did not complete" if interrupted
            else "the store has no dense vectors and the local model is the default")


def migrate_store(app: AppPort, *,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any] | None:
    """Re-embed an embedded store built before the local model was the default, when that
    is safe: run by the daemon as it starts and by ``maintain``, before they open the store.

    It runs only when ``[embedding] provider`` is ``local`` and the model runs here, the
    store is an embedded one (it then belongs to this process alone; a Qdrant server
    collection may be shared by several machines, so it keeps the advice to ``reembed``)
    and its vectors were built with no embedder (BM25 only), or a re-embedding towards the
    local model did not complete. A store built for another embedder is left as it is
    (opening it then reports the mismatch). The re-embedding is :func:`reembed`'s:
    memory ids, texts and payloads stay; interrupted, it is done again at the next start.

    Args:
        app: the configured application.
        progress: as for :func:`reembed`.

    Returns:
        :func:`reembed`'s report when the store was re-embedded, else ``None``.

    Raises:
        StoreInUseError, StoreError, UpstreamError: as for :func:`reembed`.
    """
    reason = migration_due(app)
    if reason is None:
        return None
    log.info("store_migration", store=str(store_dir(app.config, app.env)), reason=reason)
    result = reembed(app, progress=progress)
    if result["reembedded"]:
        log.info("store_migrated", store=result["store"], points=result["points"],
                 source=result["from"], target=result["to"])
    return result


__all__ = ["MARKED", "MIGRATED_PROVIDER", "RUN_AGAIN", "migrate_store", "migration_due",
           "reembed"]
