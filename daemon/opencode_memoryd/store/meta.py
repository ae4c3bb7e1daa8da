"""Store metadata: the record of what a store's vectors were built with, and its check.

Each store keeps one metadata dict (the Edge store in ``store.json``, read and written by
:func:`read_meta_file` and :func:`write_meta_file`; the server store in the collection's
``metadata``)::

    {"schema_version": int, "created_at": ISO-8601 UTC str,
     "embedder": {"name": str, "dimensions": int} | None,
     "bm25": dict (Bm25Encoder.settings), "reembed_in_progress": {"embedder": ...} | None,
     "reembedded_at": str (after a re-embedding),
     "migrations": [{"version": int, "name": str, "applied_at": str}, …] (the data
     migrations the store has had, see :func:`with_migration`; absent on an old store)}

:func:`check_meta` compares it with the running configuration: the dense vectors are
usable only with the same embedder, the sparse vectors only with the same BM25 settings
(:func:`~opencode_memoryd.store.bm25.settings_mismatch`), and neither while a re-embedding
is unfinished.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opencode_memoryd.errors import StoreError, StoreInUseError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.store.api import Embedder
from opencode_memoryd.store.bm25 import settings_mismatch

#: Version of the on-disk layout / metadata written by the store adapters.
SCHEMA_VERSION = 1
#: What a mismatch message tells the user to do.
REEMBED_HINT = ("run `opencode-memoryd reembed` with the daemon stopped (the memory texts "
                "are kept in the store, nothing is re-extracted)")

#: What a damaged store's message tells the user to do.
REBUILD_HINT = ("if the store is damaged, run `opencode-memoryd rebuild` with the daemon "
                "stopped: it moves the store aside and rebuilds it from OpenCode's databases "
                "and the journal of manual changes")


def embedder_record(embedder: Embedder | None) -> dict[str, Any] | None:
    """The metadata record of ``embedder``: ``{"name": str, "dimensions": int}``, or
    ``None`` for no embedder (BM25 only)."""
    if embedder is None:
        return None
    return {"name": str(embedder.name), "dimensions": int(embedder.dimensions)}


def embedder_desc(record: Mapping[str, Any] | None) -> str:
    """A human description of an :func:`embedder_record` for error messages."""
    if not record:
        return "no embedder (BM25 only)"
    return f"embedder {record['name']!r} ({record['dimensions']} dimensions)"


def new_meta(embedder: Embedder | None, bm25_settings: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a store created now for ``embedder`` and these BM25 settings."""
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": iso_utc(datetime.now(UTC)),
        "embedder": embedder_record(embedder),
        "bm25": dict(bm25_settings),
        "reembed_in_progress": None,
    }


@dataclass(frozen=True)
class MetaCheck:
    """What :func:`check_meta` found.

    Attributes:
        dense_ok: the stored dense vectors (or their absence) fit the configured embedder.
        sparse_ok: the stored BM25 vectors fit the configured BM25 settings.
        message: why the store must be re-embedded before use, or ``None`` when it need not.
    """

    dense_ok: bool
    sparse_ok: bool
    message: str | None


def check_meta(
    meta: Mapping[str, Any],
    embedder: Embedder | None,
    bm25_settings: Mapping[str, Any],
    where: str,
) -> MetaCheck:
    """Compare a store's metadata with the configured embedder and BM25 settings.

    Args:
        meta: the store's metadata (see the module docstring).
        embedder: the configured embedder (``None``: BM25 only).
        bm25_settings: the configured encoder's ``settings``.
        where: the store's location, for messages.

    Returns:
        Which vectors are usable, and the message explaining a mismatch (how to re-embed).

    Raises:
        StoreError: the metadata has another schema version than :data:`SCHEMA_VERSION`.
    """
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(
            f"memory store {where} has schema version "
            f"{meta.get('schema_version')!r}; this version reads {SCHEMA_VERSION}"
        )
    problems = []
    interrupted = meta.get("reembed_in_progress")
    if interrupted:
        problems.append(
            "a re-embedding was interrupted "
            f"(target: {embedder_desc(interrupted.get('embedder'))})"
        )
    stored = meta.get("embedder")
    configured = embedder_record(embedder)
    dense_ok = stored == configured and not interrupted
    if stored != configured:
        problems.append(
            f"it was built with {embedder_desc(stored)} "
            f"but {embedder_desc(configured)} is configured"
        )
    diffs = settings_mismatch(dict(meta.get("bm25") or {}), dict(bm25_settings))
    sparse_ok = not diffs and not interrupted
    if diffs:
        problems.append("its BM25 settings differ (" + "; ".join(diffs) + ")")
    if not problems:
        return MetaCheck(dense_ok, sparse_ok, None)
    # configuring the former embedder helps only when the embedder is all that differs
    alternative = (" — or configure the embedder it was built with"
                   if stored != configured and not diffs and not interrupted else "")
    return MetaCheck(dense_ok, sparse_ok, (
        f"memory store {where}: " + "; ".join(problems) + ". Its vectors must be "
        f"rebuilt before it can be used with this configuration: re-embed it — "
        f"{REEMBED_HINT}{alternative}."
    ))


def interrupted_message(where: str, target: Mapping[str, Any] | None) -> str:
    """The mismatch message of a store whose re-embedding towards ``target`` (an
    :func:`embedder_record`) is under way or did not complete."""
    return (
        f"memory store {where}: a re-embedding (target: "
        f"{embedder_desc(target)}) did not complete; re-embed it again: {REEMBED_HINT}"
    )


def meta_info(meta: Mapping[str, Any], embedder: Embedder | None,
              needs_reembed: bool) -> dict[str, Any]:
    """The metadata part of a store's ``info()``: the stored and the configured embedder
    records, BM25 settings, schema version, creation time and re-embedding state."""
    return {"embedder": meta.get("embedder"), "configured_embedder": embedder_record(embedder),
            "bm25": meta.get("bm25"), "schema_version": meta.get("schema_version"),
            "created_at": meta.get("created_at"), "needs_reembed": needs_reembed,
            "reembed_interrupted": bool(meta.get("reembed_in_progress"))}


def recorded_migrations(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The data migrations recorded in ``meta`` (``[{"version": int, "name": str,
    "applied_at": str}]``, by version; ``[]`` for a store that records none)."""
    got = meta.get("migrations")
    if not isinstance(got, list):
        return []
    return sorted((dict(m) for m in got if isinstance(m, dict)
                   and isinstance(m.get("version"), int)), key=lambda m: m["version"])


def with_migration(meta: Mapping[str, Any], version: int, name: str,
                   applied_at: str) -> dict[str, Any]:
    """A copy of ``meta`` that records data migration ``version`` (named ``name``, run at
    ``applied_at``, ISO-8601 UTC), replacing an earlier record of the same version."""
    kept = [m for m in recorded_migrations(meta) if m["version"] != version]
    entry = {"version": version, "name": name, "applied_at": applied_at}
    return {**meta, "migrations": sorted([*kept, entry], key=lambda m: m["version"])}


def read_meta_file(path: Path) -> dict[str, Any]:
    """Read a metadata file (a JSON object).

    Raises:
        StoreError: the file cannot be read, is not JSON, or holds no JSON object.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise StoreError(f"cannot read memory store metadata {path}: {e}") from e
    if not isinstance(data, dict):
        raise StoreError(f"memory store metadata {path} is not a JSON object")
    return data


def write_meta_file(path: Path, meta: dict[str, Any]) -> None:
    """Write ``meta`` to ``path`` as JSON, atomically (:func:`_write_json_atomic`).

    Raises:
        StoreError: the file cannot be written.
    """
    try:
        _write_json_atomic(path, meta)
    except OSError as e:
        raise StoreError(f"cannot write memory store metadata {path}: {e}") from e


#: The lock file in an embedded store's folder, held while one process creates or loads it.
OPEN_LOCK_FILE = "open.lock"
#: How long (s) opening waits for another process that is creating or loading the store.
OPEN_LOCK_SECONDS = 60.0


@contextmanager
def opening_lock(folder: Path, timeout: float = OPEN_LOCK_SECONDS) -> Iterator[None]:
    """Hold ``folder/open.lock`` (a kernel ``flock`` through ``filelock``) while the store in
    ``folder`` is created or loaded: a daemon and a command starting at the same moment
    would otherwise both find no shard and create it over each other (a store whose
    payload indexes or sparse-vector files are missing for good).

    Raises:
        StoreInUseError: another process kept it longer than ``timeout`` seconds.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(folder / OPEN_LOCK_FILE), timeout=timeout, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise StoreInUseError(
            f"memory store {folder} is in use: another process has been opening it for "
            f"{timeout:.0f} s") from None
    try:
        yield
    finally:
        lock.release()


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically: temp file in the same directory,
    fsync, rename over ``path``, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


__all__ = [
    "OPEN_LOCK_FILE",
    "OPEN_LOCK_SECONDS",
    "REBUILD_HINT",
    "REEMBED_HINT",
    "SCHEMA_VERSION",
    "MetaCheck",
    "check_meta",
    "embedder_desc",
    "embedder_record",
    "interrupted_message",
    "meta_info",
    "new_meta",
    "opening_lock",
    "read_meta_file",
    "recorded_migrations",
    "with_migration",
    "write_meta_file",
]
