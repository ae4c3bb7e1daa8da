"""``embedder``: the store was built with the embedder (name and dimensions) and BM25
settings the config names (:mod:`opencode_memoryd.store.meta`).

While a daemon runs it owns the embedded store, so its ``status`` answer is judged; when
none runs the store is opened here for a moment (an embedded store that does not exist yet
is not created).
"""

from __future__ import annotations

from typing import Any

from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.errors import (
    DiskFullError,
    EmbedderMismatchError,
    StoreError,
    StoreInUseError,
    UpstreamError,
)
from opencode_memoryd.store.edge import EDGE_META_FILE
from opencode_memoryd.store.meta import embedder_desc
from opencode_memoryd.usecases.doctor.model import FAIL, OK, SKIP, WARN, Check, Context

_MISMATCH_FIX = ("run `opencode-memoryd reembed` with the daemon stopped (memory texts are "
                 "kept, nothing is re-extracted), or configure the embedder the store was "
                 "built with ([embedding])")


def embedder_check(ctx: Context) -> Check:
    """The ``embedder`` check."""
    daemon = ctx.probes.daemon
    if daemon.status is not None:
        return judge(daemon.status.get("store") or {}, "the daemon's store")
    cfg = ctx.app.config
    if not cfg.qdrant.url:
        path = store_dir(cfg, ctx.app.env)
        if not (path / EDGE_META_FILE).exists():
            return Check("embedder", SKIP,
                         f"no store at {path} yet (the first capture creates it)")
    try:
        store = ctx.app.open_store()
    except EmbedderMismatchError as exc:
        return Check("embedder", FAIL, str(exc).split(". Its vectors", 1)[0], _MISMATCH_FIX)
    except DiskFullError as exc:  # the disk-space check says what to do
        return Check("embedder", SKIP, f"the store was not opened: {exc}")
    except StoreInUseError:
        return Check("embedder", WARN, "the store is held by another opencode-memoryd "
                                       "process, so it could not be checked",
                     "run doctor again once that command has finished")
    except UpstreamError as exc:
        return Check("embedder", FAIL, f"the configured embedder cannot be used: {exc}",
                     "check [embedding] in the config")
    except StoreError as exc:
        return Check("embedder", FAIL, str(exc), "see the message; the store was not changed")
    try:
        info = store.info()
    finally:
        store.close()
    return judge(info, "the store")


def judge(info: dict[str, Any], whose: str) -> Check:
    """The verdict on a store's ``info()`` (``embedder``, ``configured_embedder``,
    ``needs_reembed``, ``points``, ``path`` or ``url``)."""
    stored, configured = info.get("embedder"), info.get("configured_embedder")
    where = info.get("path") or info.get("url") or "?"
    if stored != configured or info.get("needs_reembed"):
        return Check("embedder", FAIL,
                     f"{whose} ({where}) was built with {embedder_desc(stored)}, but "
                     f"{embedder_desc(configured)} is configured"
                     + (" (or its BM25 settings differ, or a re-embedding is unfinished)"
                        if stored == configured else ""),
                     _MISMATCH_FIX)
    return Check("embedder", OK, f"{whose} ({where}, {info.get('points', '?')} points) "
                                 f"matches the config: {embedder_desc(stored)}")
