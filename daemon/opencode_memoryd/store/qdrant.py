"""The memory store: one interface, two Qdrant adapters.

* :class:`EdgeStore` — the embedded default: Qdrant Edge (``qdrant-edge-py``) in-process, one
  shard directory, single process.
* :class:`ServerStore` — a Qdrant server or cluster through ``qdrant-client`` (its local mode,
  ``path=`` / ``location=":memory:"``, stands in for a server in tests).

Every memory is one point: id = :attr:`Memory.id` (a UUID string), payload =
:meth:`Memory.to_payload`, a BM25 sparse vector ``"bm25"`` (IDF applied by Qdrant) and, when
an embedder is configured, a dense cosine vector ``"dense"``. Search is BM25 alone, or BM25
and dense fused with reciprocal rank fusion (dense weight 0.5).

Each store records the embedder (name, dimensions) and the BM25 settings it was built with;
opening it with another embedder raises :class:`EmbedderMismatchError` until
:meth:`reembed` rebuilds the vectors from the memory texts kept in the payloads.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from opencode_memoryd.errors import EmbedderMismatchError, MemorydError, StoreError, StoreInUseError
from opencode_memoryd.models import MEMORY_TYPES, SCOPES, Memory, iso_utc
from opencode_memoryd.store.bm25 import (
    Bm25Encoder,
    SparseVector,
    default_encoder,
    settings_mismatch,
)

#: Version of the on-disk layout / metadata written by this module.
SCHEMA_VERSION = 1
SPARSE_NAME = "bm25"
DENSE_NAME = "dense"
#: Payload fields with a keyword index (filters use only these). ``status`` is indexed in
#: stores created since tombstones exist; older stores filter on it without an index.
KEYWORD_FIELDS: tuple[str, ...] = ("scope", "project_id", "type", "status")
#: The ``status`` payload value of a tombstone (see :class:`~opencode_memoryd.models.Memory`).
RETIRED = "retired"
#: Reciprocal rank fusion constant (Cormack, Clarke & Büttcher, SIGIR 2009: k = 60).
RRF_K = 60
#: RRF weights of the two rankings: BM25 sparse 1.0, dense 0.5 (docs/retrieval.md).
SPARSE_WEIGHT = 1.0
DENSE_WEIGHT = 0.5
#: Metadata file of an :class:`EdgeStore`, next to its ``shard/`` directory.
EDGE_META_FILE = "store.json"
EDGE_SHARD_DIR = "shard"
#: Key of our metadata in a server collection's ``metadata``.
SERVER_META_KEY = "opencode_memoryd"

_PAGE = 256

#: One point to write: (id, payload, BM25 vector, dense vector or None).
_Row = tuple[str, dict[str, Any], SparseVector, list[float] | None]


# --------------------------------------------------------------------------- interface


@runtime_checkable
class Embedder(Protocol):
    """A dense text embedder.

    Attributes:
        name: identifies the model (and provider) — recorded with the store.
        dimensions: length of every vector ``embed`` returns.
    """

    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector of ``dimensions`` floats per text, in order. May raise
        :class:`~opencode_memoryd.errors.UpstreamError`; the store lets it propagate."""
        ...


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories an operation applies to. All set criteria must hold.

    Attributes:
        project_id: only memories of this project; with ``include_user_scope`` also every
            ``scope == "user"`` memory (user-scope memories are shared by all projects).
            ``None``: any project.
        include_user_scope: see ``project_id``; no effect when ``project_id`` is ``None``.
        scope: ``"user"`` or ``"project"`` only.
        types: only these memory types (any of them); empty means all types.
        include_retired: also match retired memories (tombstones). By default they are
            excluded — a payload without ``status`` counts as active — so search, scroll
            and count see active memories only. :meth:`MemoryStore.get` ignores filters and
            returns tombstones too.

    A ``None`` filter means ``MemoryFilter()``: every active memory.

    Raises:
        ValueError: an unknown scope or type.
    """

    project_id: str | None = None
    include_user_scope: bool = True
    scope: str | None = None
    types: tuple[str, ...] = ()
    include_retired: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", tuple(self.types))
        if self.scope is not None and self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}; expected one of {SCOPES}")
        bad = [t for t in self.types if t not in MEMORY_TYPES]
        if bad:
            raise ValueError(f"unknown memory type(s) {bad}; expected some of {MEMORY_TYPES}")


#: The default filter: every active memory.
_ACTIVE = MemoryFilter()
#: Every memory, tombstones included.
_ALL = MemoryFilter(include_retired=True)


class MemoryStore(Protocol):
    """What the daemon needs from a memory store. Both adapters implement it.

    Every method raises :class:`StoreError` when the backend fails or refuses; methods that
    write or search with vectors raise :class:`EmbedderMismatchError` when the store was
    opened with ``allow_mismatch=True`` and has not been re-embedded yet.
    """

    def upsert(self, memories: Sequence[Memory]) -> None:
        """Insert or replace memories by :attr:`Memory.id`; durable when it returns."""
        ...

    def get(self, ids: Sequence[str]) -> list[Memory]:
        """The stored memories with these ids, in the order asked; missing ids are skipped.
        Retired memories (tombstones) are returned too."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete these ids (unknown ids are ignored); durable when it returns."""
        ...

    def scroll(self, flt: MemoryFilter | None = None) -> Iterator[Memory]:
        """Every matching memory, ordered by ``created_at`` then ``id`` (active only unless
        ``flt.include_retired``)."""
        ...

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of matching memories (active only unless ``flt.include_retired``)."""
        ...

    def search(
        self, query: str, *, flt: MemoryFilter | None = None, limit: int = 10
    ) -> list[tuple[Memory, float]]:
        """Best ``limit`` matches for ``query`` with their scores, best first (active only
        unless ``flt.include_retired``)."""
        ...

    def reembed(self, embedder: Embedder | None, *, batch_size: int = 64) -> int:
        """Rebuild every point's vectors from its stored text; returns the point count."""
        ...

    def info(self) -> dict[str, Any]:
        """Backend, location, point count, embedder and BM25 settings."""
        ...

    def close(self) -> None:
        """Release the store; idempotent."""
        ...


# --------------------------------------------------------------------------- helpers


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float],
    *,
    k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion of ranked id lists.

    Reciprocal rank fusion: Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms
    Condorcet and individual Rank Learning Methods", SIGIR 2009 (k = 60). Weighted as Qdrant
    does it (``Rrf(k, weights)``), so both adapters rank alike: an item at 1-based rank ``r``
    in a ranking of weight ``w`` contributes ``1 / (r / w + k - 1)``; with ``w = 1`` that is
    ``1 / (k + r - 1)``.

    Args:
        rankings: id lists, best first.
        weights: one weight per ranking (> 0; a weight <= 0 ignores the ranking).
        k: the RRF constant.

    Returns:
        ``(id, fused score)`` pairs, best first; ties keep first-seen order.

    Raises:
        ValueError: ``len(weights) != len(rankings)``.
    """
    if len(weights) != len(rankings):
        raise ValueError("rrf_fuse: one weight per ranking")
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        if w <= 0:
            continue
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (rank / w + k - 1)
    order = {pid: i for i, pid in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def _embedder_desc(e: dict[str, Any] | None) -> str:
    if not e:
        return "no embedder (BM25 only)"
    return f"embedder {e['name']!r} ({e['dimensions']} dimensions)"


def _embedder_record(embedder: Embedder | None) -> dict[str, Any] | None:
    if embedder is None:
        return None
    return {"name": str(embedder.name), "dimensions": int(embedder.dimensions)}


def _sort_key(m: Memory) -> tuple[datetime, str]:
    return (m.created_at, m.id)


def _check_ids(ids: Sequence[str]) -> list[str]:
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of id strings, not one string")
    out: list[str] = []
    seen: set[str] = set()
    for i in ids:
        try:
            norm = str(uuid.UUID(str(i)))
        except ValueError:
            raise ValueError(f"memory id {i!r} is not a UUID") from None
        if norm not in seen:
            seen.add(norm)
            out.append(norm)
    return out


class _StoreBase:
    """Shared logic: metadata checks, encoding, fusion. Adapters supply the primitives."""

    backend = ""

    def __init__(self, embedder: Embedder | None, bm25: Bm25Encoder | None,
                 allow_mismatch: bool) -> None:
        self._embedder = embedder
        self._bm25 = bm25 or default_encoder()
        self._allow_mismatch = allow_mismatch
        self._meta: dict[str, Any] = {}
        self._dense_ok = True
        self._sparse_ok = True
        self._closed = False
        self._mismatch: str | None = None
        self._lock = threading.RLock()

    # -- metadata ---------------------------------------------------------------------

    def _where(self) -> str:
        raise NotImplementedError

    def _new_meta(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "created_at": iso_utc(datetime.now(UTC)),
            "embedder": _embedder_record(self._embedder),
            "bm25": dict(self._bm25.settings),
            "reembed_in_progress": None,
        }

    def _mismatch_message(self) -> str | None:
        meta = self._meta
        problems = []
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise StoreError(
                f"memory store {self._where()} has schema version "
                f"{meta.get('schema_version')!r}; this version reads {SCHEMA_VERSION}"
            )
        if meta.get("reembed_in_progress"):
            problems.append(
                "a re-embedding was interrupted "
                f"(target: {_embedder_desc(meta['reembed_in_progress'].get('embedder'))})"
            )
        stored = meta.get("embedder")
        configured = _embedder_record(self._embedder)
        self._dense_ok = stored == configured and not meta.get("reembed_in_progress")
        if stored != configured:
            problems.append(
                f"it was built with {_embedder_desc(stored)} "
                f"but {_embedder_desc(configured)} is configured"
            )
        diffs = settings_mismatch(meta.get("bm25") or {}, self._bm25.settings)
        self._sparse_ok = not diffs and not meta.get("reembed_in_progress")
        if diffs:
            problems.append("its BM25 settings differ (" + "; ".join(diffs) + ")")
        if not problems:
            return None
        return (
            f"memory store {self._where()}: " + "; ".join(problems) + ". Its vectors must be "
            "rebuilt before it can be used with this configuration: re-embed it (the memory "
            "texts are kept in the store, nothing is re-extracted) — open it with "
            "allow_mismatch=True and call reembed(embedder) — or configure the embedder it "
            "was built with."
        )

    def _check_meta(self) -> None:
        msg = self._mismatch_message()
        if msg and not self._allow_mismatch:
            raise EmbedderMismatchError(msg)
        self._mismatch = msg

    def _require_writable(self) -> None:
        self._require_open()
        if not (self._dense_ok and self._sparse_ok):
            raise EmbedderMismatchError(self._mismatch or "store needs re-embedding")

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {self._where()} is closed")

    # -- encoding ---------------------------------------------------------------------

    def _dense(self, embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
        vectors = embedder.embed(list(texts))
        if len(vectors) != len(texts):
            raise StoreError(
                f"embedder {embedder.name!r} returned {len(vectors)} vectors "
                f"for {len(texts)} texts"
            )
        for v in vectors:
            if len(v) != embedder.dimensions:
                raise StoreError(
                    f"embedder {embedder.name!r} returned a {len(v)}-dimensional vector; "
                    f"it declares {embedder.dimensions} dimensions"
                )
        return [[float(x) for x in v] for v in vectors]

    def _encode(
        self, memories: Sequence[Memory], embedder: Embedder | None
    ) -> list[_Row]:
        texts = [m.content for m in memories]
        sparse = self._bm25.embed_documents(texts)
        dense: list[list[float] | None] = (
            list(self._dense(embedder, texts)) if embedder is not None else [None] * len(texts)
        )
        return [
            (str(uuid.UUID(m.id)), m.to_payload(), s, d)
            for m, s, d in zip(memories, sparse, dense)
        ]

    # -- public API shared by both adapters ---------------------------------------------

    def upsert(self, memories: Sequence[Memory]) -> None:
        """Insert or replace ``memories`` (point id = :attr:`Memory.id`).

        Computes the BM25 vector of each ``content`` and, with an embedder, its dense vector
        (one ``embed`` call for the batch). Durable when it returns.

        Raises:
            ValueError: a memory id is not a UUID.
            EmbedderMismatchError: the store still needs :meth:`reembed`.
            StoreError: the backend failed, or the embedder returned the wrong shape.
            UpstreamError: from the embedder, unchanged.
        """
        if not memories:
            return
        _check_ids([m.id for m in memories])
        with self._lock:
            self._require_writable()
            embedder = self._embedder
        rows = self._encode(memories, embedder)  # outside the lock: may call the network
        with self._lock:
            self._require_writable()
            if self._embedder is not embedder:  # re-embedded meanwhile: encode again
                rows = self._encode(memories, self._embedder)
            self._upsert_rows(rows)

    def get(self, ids: Sequence[str]) -> list[Memory]:
        """Return the stored memories with these ids, in the order given (duplicates once,
        missing ids skipped). Retired memories (tombstones) are returned too.

        Raises:
            ValueError: an id is not a UUID.
            StoreError: the backend failed.
        """
        wanted = _check_ids(ids)
        if not wanted:
            return []
        with self._lock:
            self._require_open()
            found = {m.id: m for m in self._retrieve(wanted)}
        return [found[i] for i in wanted if i in found]

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the points with these ids; unknown ids are ignored. Durable on return.

        Raises:
            ValueError: an id is not a UUID.
            StoreError: the backend failed.
        """
        wanted = _check_ids(ids)
        if not wanted:
            return
        with self._lock:
            self._require_open()
            self._delete_ids(wanted)

    def scroll(self, flt: MemoryFilter | None = None) -> Iterator[Memory]:
        """Yield every memory matching ``flt``, ordered by ``created_at`` then ``id``.

        Retired memories are skipped unless ``flt.include_retired`` (``None`` = every
        active memory).

        The matching memories are read (payloads only) and sorted before the first one is
        yielded: memory use is proportional to the number of matches.

        Raises:
            StoreError: the backend failed (raised by the first ``next``).
        """
        with self._lock:
            self._require_open()
            found = list(self._scroll_all(flt))
        found.sort(key=_sort_key)
        yield from found

    def search(
        self, query: str, *, flt: MemoryFilter | None = None, limit: int = 10
    ) -> list[tuple[Memory, float]]:
        """Return the ``limit`` best memories for ``query`` with their scores, best first.

        Retired memories never match unless ``flt.include_retired``.

        BM25 sparse search always. With an embedder, a dense search too, fused by weighted
        reciprocal rank fusion (:func:`rrf_fuse`, k = 60, sparse weight 1, dense weight 0.5),
        each side taking ``max(4 * limit, 40)`` candidates. Scores: BM25 scores (unbounded,
        >= 0) without an embedder, RRF scores (at most 1/60 + 1/61, about 0.033) with one.
        A query made only of stopwords has no BM25 terms: it returns ``[]`` without an
        embedder. While a store opened with ``allow_mismatch=True`` awaits :meth:`reembed`,
        only its still-valid vector is searched.

        Raises:
            StoreError: the backend failed.
            EmbedderMismatchError: neither vector of the store is usable with this
                configuration (opened with ``allow_mismatch=True``, not re-embedded).
            UpstreamError: from the embedder, unchanged.
        """
        if limit <= 0:
            return []
        with self._lock:
            self._require_open()
            embedder = self._embedder if self._dense_ok else None
            use_sparse = self._sparse_ok
            if not use_sparse and embedder is None:
                raise EmbedderMismatchError(self._mismatch or "store needs re-embedding")
        sparse = self._bm25.embed_query(query) if use_sparse else SparseVector([], [])
        # the query embedding is computed outside the lock: it may call the network
        dense = self._dense(embedder, [query])[0] if embedder is not None else None
        with self._lock:
            self._require_open()
            if dense is None:
                return self._search_sparse(sparse, flt, limit) if sparse else []
            return self._search_hybrid(sparse, dense, flt, limit)

    def reembed(self, embedder: Embedder | None, *, batch_size: int = 64) -> int:
        """Rebuild every point's vectors from the ``content`` in its payload.

        Drops the dense vector and creates it again for ``embedder`` (or leaves none when
        ``embedder`` is ``None``), recomputes the BM25 vectors with this store's encoder,
        then records the new embedder and BM25 settings. Nothing is re-extracted; payloads
        are unchanged. An interrupted run is recorded, and the store then refuses to open
        without ``allow_mismatch=True`` until ``reembed`` completes.

        Args:
            embedder: the embedder to build dense vectors with (``None``: BM25 only). It
                becomes this store's embedder.
            batch_size: memories per ``embed`` call and per write.

        Returns:
            The number of points re-embedded.

        Raises:
            StoreError: the backend failed.
            UpstreamError: from the embedder, unchanged (the store stays marked as
                re-embedding; run again).
        """
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        with self._lock:
            self._require_open()
            target = _embedder_record(embedder)
            meta = dict(self._meta)
            meta["reembed_in_progress"] = {"embedder": target}
            self._write_meta(meta)
            self._meta = meta
            self._dense_ok = self._sparse_ok = False
            self._mismatch = (
                f"memory store {self._where()}: a re-embedding (target: "
                f"{_embedder_desc(target)}) did not complete; call reembed(embedder) again"
            )
            self._reset_dense(embedder)
            # ids first: no scrolling while writing; tombstones are re-embedded too
            memories = list(self._scroll_all(_ALL))
            for i in range(0, len(memories), batch_size):
                self._update_vectors(self._encode(memories[i : i + batch_size], embedder))
            self._flush()
            meta = dict(self._meta)
            meta.update(
                embedder=target,
                bm25=dict(self._bm25.settings),
                reembed_in_progress=None,
                reembedded_at=iso_utc(datetime.now(UTC)),
            )
            self._write_meta(meta)
            self._meta = meta
            self._embedder = embedder
            self._dense_ok = self._sparse_ok = True
            self._mismatch = None
            return len(memories)

    def __enter__(self) -> _StoreBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- adapter primitives -----------------------------------------------------------

    def _upsert_rows(self, rows: list[_Row]) -> None:
        raise NotImplementedError

    def _update_vectors(self, rows: list[_Row]) -> None:
        raise NotImplementedError

    def _retrieve(self, ids: list[str]) -> list[Memory]:
        raise NotImplementedError

    def _delete_ids(self, ids: list[str]) -> None:
        raise NotImplementedError

    def _scroll_all(self, flt: MemoryFilter | None) -> Iterator[Memory]:
        raise NotImplementedError

    def _search_sparse(self, sparse: SparseVector, flt: MemoryFilter | None,
                       limit: int) -> list[tuple[Memory, float]]:
        raise NotImplementedError

    def _search_hybrid(self, sparse: SparseVector, dense: list[float],
                       flt: MemoryFilter | None, limit: int) -> list[tuple[Memory, float]]:
        raise NotImplementedError

    def _reset_dense(self, embedder: Embedder | None) -> None:
        raise NotImplementedError

    def _write_meta(self, meta: dict[str, Any]) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        pass


def _candidates(limit: int) -> int:
    return max(4 * limit, 40)


# --------------------------------------------------------------------------- Qdrant Edge


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
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class EdgeStore(_StoreBase):
    """The embedded store: a Qdrant Edge shard under ``path``.

    Layout: ``path/store.json`` (schema version, embedder, BM25 settings; written
    atomically) and ``path/shard/`` (the Edge shard). Created on first open. Points carry
    the sparse vector ``"bm25"`` (IDF modifier) and, with an embedder, the dense cosine
    vector ``"dense"``; keyword payload indexes on ``scope``, ``project_id`` and ``type``.
    Hybrid fusion runs in Python (:func:`rrf_fuse`): two searches, one per vector.

    Only one process may open a store (Edge locks the shard's WAL); the same applies to two
    ``EdgeStore`` objects in one process. Methods are serialised by a lock, so one object
    may be shared by threads.

    Args:
        path: the store directory (created if missing).
        embedder: dense embedder, or ``None`` for BM25 only.
        bm25: the BM25 encoder (default: :func:`~opencode_memoryd.store.bm25.default_encoder`).
        allow_mismatch: open even when the store was built with another embedder or other
            BM25 settings — to call :meth:`reembed`. Until then upserts raise
            :class:`EmbedderMismatchError` and search uses only the vectors still valid.

    Raises:
        EmbedderMismatchError: the store was built with another embedder (name or
            dimensions, or one vs none) or other BM25 settings.
        StoreError: another process holds the store; the directory is unusable; the
            metadata file is missing or unreadable while a shard exists.
    """

    backend = "edge"

    def __init__(
        self,
        path: Path | str,
        embedder: Embedder | None = None,
        *,
        bm25: Bm25Encoder | None = None,
        allow_mismatch: bool = False,
    ) -> None:
        super().__init__(embedder, bm25, allow_mismatch)
        import qdrant_edge as qe  # imported here so ServerStore users never load it

        self._qe = qe
        self.path = Path(path).expanduser()
        self._meta_path = self.path / EDGE_META_FILE
        self._shard_path = self.path / EDGE_SHARD_DIR
        self._shard: Any = None
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create memory store directory {self.path}: {e}") from e

        shard_exists = self._shard_path.is_dir() and any(self._shard_path.iterdir())
        if self._meta_path.exists():
            self._meta = self._read_meta()
        elif shard_exists:
            raise StoreError(
                f"memory store {self.path}: {EDGE_SHARD_DIR}/ exists but {EDGE_META_FILE} is "
                "missing, so the embedder and BM25 settings it was built with are unknown. "
                "Restore the file, or move the directory away to start a new store."
            )
        else:
            self._meta = self._new_meta()
            self._write_meta(self._meta)

        self._check_meta()
        if shard_exists:
            self._shard = self._open(lambda: qe.EdgeShard.load(str(self._shard_path)))
        else:
            self._shard = self._open(self._create_shard)

    # -- opening ------------------------------------------------------------------------

    def _where(self) -> str:
        return str(self.path)

    def _read_meta(self) -> dict[str, Any]:
        try:
            data = json.loads(self._meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot read memory store metadata {self._meta_path}: {e}") from e
        if not isinstance(data, dict):
            raise StoreError(f"memory store metadata {self._meta_path} is not a JSON object")
        return data

    def _write_meta(self, meta: dict[str, Any]) -> None:
        try:
            _write_json_atomic(self._meta_path, meta)
        except OSError as e:
            raise StoreError(f"cannot write memory store metadata {self._meta_path}: {e}") from e

    def _create_shard(self) -> Any:
        qe = self._qe
        meta_embedder = self._meta.get("embedder")
        vectors = {}
        if meta_embedder:
            vectors[DENSE_NAME] = qe.EdgeVectorParams(
                size=int(meta_embedder["dimensions"]), distance=qe.Distance.Cosine
            )
        config = qe.EdgeConfig(
            vectors=vectors,
            sparse_vectors={SPARSE_NAME: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        shard = qe.EdgeShard.create(str(self._shard_path), config)
        for name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        shard.flush()
        return shard

    def _open(self, opener: Callable[[], Any]) -> Any:
        try:
            return opener()
        except Exception as e:
            text = str(e)
            if re.search(r"WouldBlock|\block(ed)?\b", text, re.IGNORECASE):
                raise StoreInUseError(
                    f"memory store {self.path} is in use: another opencode-memoryd process "
                    "(or another open store object) holds it, and Qdrant Edge allows one at a "
                    "time. Stop that process or go through the running daemon. "
                    f"(Qdrant Edge: {text})"
                ) from e
            raise StoreError(f"cannot open memory store {self.path}: {text}") from e

    @contextmanager
    def _edge(self, action: str) -> Iterator[None]:
        try:
            yield
        except MemorydError:
            raise
        except Exception as e:
            raise StoreError(f"memory store {self.path}: {action} failed: {e}") from e

    # -- primitives ---------------------------------------------------------------------

    def _filter(self, flt: MemoryFilter | None) -> Any:
        flt = flt or _ACTIVE
        qe = self._qe
        must: list[Any] = []
        if flt.scope is not None:
            must.append(qe.FieldCondition("scope", match=qe.MatchValue(flt.scope)))
        if flt.types:
            must.append(qe.FieldCondition("type", match=qe.MatchAny(list(flt.types))))
        if flt.project_id is not None:
            proj = qe.FieldCondition("project_id", match=qe.MatchValue(flt.project_id))
            if flt.include_user_scope:
                user = qe.FieldCondition("scope", match=qe.MatchValue("user"))
                must.append(qe.Filter(should=[proj, user]))
            else:
                must.append(proj)
        must_not: list[Any] = []
        if not flt.include_retired:
            must_not.append(qe.FieldCondition("status", match=qe.MatchValue(RETIRED)))
        if not (must or must_not):
            return None
        return qe.Filter(must=must or None, must_not=must_not or None)

    def _vectors(self, sparse: SparseVector, dense: list[float] | None) -> dict[str, Any]:
        vec: dict[str, Any] = {SPARSE_NAME: self._qe.SparseVector(sparse.indices, sparse.values)}
        if dense is not None:
            vec[DENSE_NAME] = dense
        return vec

    def _upsert_rows(self, rows: list[_Row]) -> None:
        qe = self._qe
        points = [qe.Point(pid, self._vectors(s, d), payload) for pid, payload, s, d in rows]
        with self._edge("upsert"):
            self._shard.update(qe.UpdateOperation.upsert_points(points))
            self._shard.flush()

    def _update_vectors(self, rows: list[_Row]) -> None:
        qe = self._qe
        pvs = [qe.PointVectors(pid, self._vectors(s, d)) for pid, _p, s, d in rows]
        with self._edge("re-embedding"):
            self._shard.update(qe.UpdateOperation.update_vectors(pvs))

    def _reset_dense(self, embedder: Embedder | None) -> None:
        qe = self._qe
        with self._edge("dropping the dense vector"):
            try:
                self._shard.update(qe.UpdateOperation.delete_vector_name(DENSE_NAME))
            except Exception as e:
                if "not exist" not in str(e).lower():
                    raise
        if embedder is not None:
            with self._edge("creating the dense vector"):
                self._shard.update(
                    qe.UpdateOperation.create_dense_vector(
                        DENSE_NAME, int(embedder.dimensions), qe.Distance.Cosine
                    )
                )
        self._flush()

    def _flush(self) -> None:
        with self._edge("flush"):
            self._shard.flush()

    def _retrieve(self, ids: list[str]) -> list[Memory]:
        with self._edge("get"):
            records = self._shard.retrieve(ids, True, False)
        return [Memory.from_payload(r.payload) for r in records]

    def _delete_ids(self, ids: list[str]) -> None:
        with self._edge("delete"):
            self._shard.update(self._qe.UpdateOperation.delete_points(ids))
            self._shard.flush()

    def _scroll_all(self, flt: MemoryFilter | None) -> Iterator[Memory]:
        qe = self._qe
        f = self._filter(flt)
        offset = None
        while True:
            with self._edge("scroll"):
                records, offset = self._shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=_PAGE, filter=f,
                                     with_payload=True, with_vector=False)
                )
            for r in records:
                yield Memory.from_payload(r.payload)
            if offset is None:
                return

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of memories matching ``flt``.

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._edge("count"):
                return int(self._shard.count(self._qe.CountRequest(exact=True,
                                                                    filter=self._filter(flt))))

    def _query(self, query: Any, using: str, flt: MemoryFilter | None, limit: int,
               payload: bool) -> list[Any]:
        qe = self._qe
        with self._edge("search"):
            return self._shard.query(
                qe.QueryRequest(
                    limit=limit,
                    query=qe.Query.Nearest(query, using=using),
                    filter=self._filter(flt),
                    with_payload=payload,
                    with_vector=False,
                )
            )

    def _search_sparse(self, sparse: SparseVector, flt: MemoryFilter | None,
                       limit: int) -> list[tuple[Memory, float]]:
        hits = self._query(self._qe.SparseVector(sparse.indices, sparse.values), SPARSE_NAME,
                           flt, limit, True)
        return [(Memory.from_payload(h.payload), float(h.score)) for h in hits]

    def _search_hybrid(self, sparse: SparseVector, dense: list[float],
                       flt: MemoryFilter | None, limit: int) -> list[tuple[Memory, float]]:
        n = _candidates(limit)
        sparse_hits = (
            self._query(self._qe.SparseVector(sparse.indices, sparse.values), SPARSE_NAME,
                        flt, n, True)
            if sparse else []
        )
        dense_hits = self._query(dense, DENSE_NAME, flt, n, True)
        payloads = {str(h.id): h.payload for h in dense_hits}
        payloads.update({str(h.id): h.payload for h in sparse_hits})
        fused = rrf_fuse(
            [[str(h.id) for h in sparse_hits], [str(h.id) for h in dense_hits]],
            [SPARSE_WEIGHT, DENSE_WEIGHT],
        )[:limit]
        return [(Memory.from_payload(payloads[pid]), score) for pid, score in fused]

    # -- maintenance --------------------------------------------------------------------

    def optimize(self) -> bool:
        """Run Qdrant Edge's segment optimizers now (blocking): merges segments, builds
        indexes, vacuums deleted points. Worth running after large imports or deletes.

        Returns:
            ``True`` if anything was optimized.

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._edge("optimize"):
                changed = bool(self._shard.optimize())
                self._shard.flush()
                return changed

    def info(self) -> dict[str, Any]:
        """Describe the store.

        Returns:
            ``{"backend": "edge", "path": str, "points": int, "segments": int,
            "embedder": {"name", "dimensions"} | None, "configured_embedder": ... | None,
            "bm25": dict, "schema_version": int, "created_at": str,
            "needs_reembed": bool}``.

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._edge("info"):
                shard_info = self._shard.info()
            return {
                "backend": self.backend,
                "path": str(self.path),
                "points": int(shard_info.points_count),
                "segments": int(shard_info.segments_count),
                "embedder": self._meta.get("embedder"),
                "configured_embedder": _embedder_record(self._embedder),
                "bm25": self._meta.get("bm25"),
                "schema_version": self._meta.get("schema_version"),
                "created_at": self._meta.get("created_at"),
                "needs_reembed": not (self._dense_ok and self._sparse_ok),
            }

    def close(self) -> None:
        """Flush and close the shard, releasing the directory lock. Idempotent.

        Raises:
            StoreError: the final flush failed (the shard is closed anyway).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shard, self._shard = self._shard, None
            if shard is None:
                return
            try:
                shard.flush()
            except Exception as e:
                shard.close()
                raise StoreError(f"memory store {self.path}: final flush failed: {e}") from e
            shard.close()


# --------------------------------------------------------------------------- qdrant-client


class ServerStore(_StoreBase):
    """A memory store in a Qdrant server collection, through ``qdrant-client``.

    Give exactly one of ``url`` (a server), ``path`` (qdrant-client local mode on disk) or
    ``location`` (``":memory:"`` for local mode in memory, or a server URL). Local mode is
    brute force and meant for tests. The collection is created on first open with the
    sparse vector ``"bm25"`` (``Modifier.IDF``), the dense cosine vector ``"dense"`` when an
    embedder is configured, keyword payload indexes on ``scope``, ``project_id`` and
    ``type`` (server only; local mode has none), and this module's metadata under the
    collection's ``metadata["opencode_memoryd"]`` (embedder, BM25 settings, schema
    version). Hybrid search is one ``query_points`` call: two prefetches fused by the
    server's weighted RRF (``Rrf(k=60, weights=[1.0, 0.5])``, the same formula as
    :func:`rrf_fuse`). Weighted RRF, collection metadata and (for :meth:`reembed`) adding
    named vectors need a server as recent as qdrant-client 1.20's API; an older server's
    refusal surfaces as :class:`StoreError`. Writes use ``wait=True``.

    Args:
        url: server URL, e.g. ``http://localhost:6333``.
        api_key: the server's API key, if any.
        collection: collection name.
        path: local-mode storage directory (tests).
        location: ``":memory:"`` or a URL.
        embedder: dense embedder, or ``None`` for BM25 only.
        timeout_seconds: per-request timeout (seconds, rounded up to whole seconds).
        bm25: the BM25 encoder (default: the shared default encoder).
        allow_mismatch: as for :class:`EdgeStore`.

    Raises:
        ValueError: not exactly one of ``url``, ``path``, ``location``.
        EmbedderMismatchError: the collection was built with another embedder or BM25
            settings.
        StoreError: the server cannot be reached or refuses; the collection exists but was
            not created by opencode-memoryd; the local path is held by another client.
    """

    backend = "qdrant"

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        collection: str = "memories",
        path: str | None = None,
        location: str | None = None,
        embedder: Embedder | None = None,
        timeout_seconds: float = 10,
        bm25: Bm25Encoder | None = None,
        allow_mismatch: bool = False,
    ) -> None:
        super().__init__(embedder, bm25, allow_mismatch)
        if sum(x is not None for x in (url, path, location)) != 1:
            raise ValueError("ServerStore needs exactly one of url, path or location")
        from qdrant_client import QdrantClient, models

        self._m = models
        self.url = url
        self.local_path = str(path) if path is not None else None
        self.location = location
        self.collection = collection
        self._is_local = path is not None or location == ":memory:"
        timeout = max(1, int(-(-float(timeout_seconds) // 1)))
        try:
            if url is not None:
                self._client = QdrantClient(url=url, api_key=api_key, timeout=timeout)
            elif path is not None:
                self._client = QdrantClient(path=str(path))
            else:
                self._client = QdrantClient(location=location, api_key=api_key, timeout=timeout)
        except Exception as e:
            if "already accessed" in str(e):
                raise StoreError(
                    f"memory store {self._where()} is in use by another process or client "
                    f"(qdrant-client local mode allows one): {e}"
                ) from e
            raise StoreError(f"cannot open memory store {self._where()}: {e}") from e

        try:
            with self._call("open"):
                exists = self._client.collection_exists(collection)
            if exists:
                with self._call("read collection"):
                    info = self._client.get_collection(collection)
                stored = (info.config.metadata or {}).get(SERVER_META_KEY)
                if not isinstance(stored, dict):
                    raise StoreError(
                        f"memory store {self._where()}: the collection exists but has no "
                        f"{SERVER_META_KEY!r} metadata, so it was not created by "
                        "opencode-memoryd (or by a version that predates it); choose another "
                        "collection name"
                    )
                self._meta = dict(stored)
            else:
                self._meta = self._new_meta()
                self._create_collection()
            self._check_meta()
        except BaseException:
            self._client.close()
            raise

    def _where(self) -> str:
        place = self.url or self.local_path or self.location
        return f"{place} collection {self.collection!r}"

    @contextmanager
    def _call(self, action: str) -> Iterator[None]:
        try:
            yield
        except MemorydError:
            raise
        except Exception as e:
            raise StoreError(f"memory store {self._where()}: {action} failed: {e}") from e

    def _create_collection(self) -> None:
        m = self._m
        vectors: dict[str, Any] = {}
        emb = self._meta.get("embedder")
        if emb:
            vectors[DENSE_NAME] = m.VectorParams(size=int(emb["dimensions"]),
                                                 distance=m.Distance.COSINE)
        with self._call("create collection"):
            self._client.create_collection(
                self.collection,
                vectors_config=vectors,
                sparse_vectors_config={SPARSE_NAME: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                metadata={SERVER_META_KEY: self._meta},
            )
            if not self._is_local:
                for name in KEYWORD_FIELDS:
                    self._client.create_payload_index(
                        self.collection, name, field_schema=m.PayloadSchemaType.KEYWORD,
                        wait=True,
                    )

    def _write_meta(self, meta: dict[str, Any]) -> None:
        with self._call("write metadata"):
            self._client.update_collection(self.collection, metadata={SERVER_META_KEY: meta})

    def _filter(self, flt: MemoryFilter | None) -> Any:
        flt = flt or _ACTIVE
        m = self._m
        must: list[Any] = []
        if flt.scope is not None:
            must.append(m.FieldCondition(key="scope", match=m.MatchValue(value=flt.scope)))
        if flt.types:
            must.append(m.FieldCondition(key="type", match=m.MatchAny(any=list(flt.types))))
        if flt.project_id is not None:
            proj = m.FieldCondition(key="project_id", match=m.MatchValue(value=flt.project_id))
            if flt.include_user_scope:
                user = m.FieldCondition(key="scope", match=m.MatchValue(value="user"))
                must.append(m.Filter(should=[proj, user]))
            else:
                must.append(proj)
        must_not: list[Any] = []
        if not flt.include_retired:
            must_not.append(m.FieldCondition(key="status", match=m.MatchValue(value=RETIRED)))
        if not (must or must_not):
            return None
        return m.Filter(must=must or None, must_not=must_not or None)

    def _vectors(self, sparse: SparseVector, dense: list[float] | None) -> dict[str, Any]:
        vec: dict[str, Any] = {
            SPARSE_NAME: self._m.SparseVector(indices=sparse.indices, values=sparse.values)
        }
        if dense is not None:
            vec[DENSE_NAME] = dense
        return vec

    def _upsert_rows(self, rows: list[_Row]) -> None:
        m = self._m
        points = [m.PointStruct(id=pid, vector=self._vectors(s, d), payload=payload)
                  for pid, payload, s, d in rows]
        with self._call("upsert"):
            self._client.upsert(self.collection, points=points, wait=True)

    def _update_vectors(self, rows: list[_Row]) -> None:
        m = self._m
        pvs = [m.PointVectors(id=pid, vector=self._vectors(s, d)) for pid, _p, s, d in rows]
        with self._call("re-embedding"):
            self._client.update_vectors(self.collection, points=pvs, wait=True)

    def _reset_dense(self, embedder: Embedder | None) -> None:
        m = self._m
        with self._call("read collection"):
            info = self._client.get_collection(self.collection)
        vectors = info.config.params.vectors
        if isinstance(vectors, dict) and DENSE_NAME in vectors:
            with self._call("dropping the dense vector"):
                self._client.delete_vector_name(self.collection, DENSE_NAME, wait=True)
        if embedder is not None:
            cfg = m.DenseVectorNameConfig(
                dense=m.DenseVectorConfig(size=int(embedder.dimensions),
                                          distance=m.Distance.COSINE)
            )
            with self._call("creating the dense vector"):
                self._client.create_vector_name(self.collection, DENSE_NAME, cfg, wait=True)

    def _retrieve(self, ids: list[str]) -> list[Memory]:
        with self._call("get"):
            records = self._client.retrieve(self.collection, ids=ids, with_payload=True,
                                            with_vectors=False)
        return [Memory.from_payload(r.payload or {}) for r in records]

    def _delete_ids(self, ids: list[str]) -> None:
        m = self._m
        with self._call("delete"):
            self._client.delete(self.collection,
                                points_selector=m.PointIdsList(points=list(ids)), wait=True)

    def _scroll_all(self, flt: MemoryFilter | None) -> Iterator[Memory]:
        f = self._filter(flt)
        offset = None
        while True:
            with self._call("scroll"):
                records, offset = self._client.scroll(
                    self.collection, scroll_filter=f, limit=_PAGE, offset=offset,
                    with_payload=True, with_vectors=False,
                )
            for r in records:
                yield Memory.from_payload(r.payload or {})
            if offset is None:
                return

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of memories matching ``flt``.

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._call("count"):
                return int(self._client.count(self.collection, count_filter=self._filter(flt),
                                              exact=True).count)

    def _search_sparse(self, sparse: SparseVector, flt: MemoryFilter | None,
                       limit: int) -> list[tuple[Memory, float]]:
        m = self._m
        with self._call("search"):
            res = self._client.query_points(
                self.collection,
                query=m.SparseVector(indices=sparse.indices, values=sparse.values),
                using=SPARSE_NAME,
                query_filter=self._filter(flt),
                limit=limit,
                with_payload=True,
                with_vectors=False,
            )
        return [(Memory.from_payload(p.payload or {}), float(p.score)) for p in res.points]

    def _search_hybrid(self, sparse: SparseVector, dense: list[float],
                       flt: MemoryFilter | None, limit: int) -> list[tuple[Memory, float]]:
        m = self._m
        f = self._filter(flt)
        n = _candidates(limit)
        prefetch = []
        weights = []
        if sparse:
            prefetch.append(m.Prefetch(
                query=m.SparseVector(indices=sparse.indices, values=sparse.values),
                using=SPARSE_NAME, filter=f, limit=n,
            ))
            weights.append(SPARSE_WEIGHT)
        prefetch.append(m.Prefetch(query=dense, using=DENSE_NAME, filter=f, limit=n))
        weights.append(DENSE_WEIGHT)
        with self._call("search"):
            res = self._client.query_points(
                self.collection,
                prefetch=prefetch,
                query=m.RrfQuery(rrf=m.Rrf(k=RRF_K, weights=weights)),
                query_filter=f,
                limit=limit,
                with_payload=True,
                with_vectors=False,
            )
        return [(Memory.from_payload(p.payload or {}), float(p.score)) for p in res.points]

    def info(self) -> dict[str, Any]:
        """Describe the store.

        Returns:
            ``{"backend": "qdrant", "url": str | None, "path": str | None,
            "location": str | None, "collection": str, "points": int,
            "embedder": {"name", "dimensions"} | None, "configured_embedder": ... | None,
            "bm25": dict, "schema_version": int, "created_at": str,
            "needs_reembed": bool}``.

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._call("count"):
                points = int(self._client.count(self.collection, exact=True).count)
            return {
                "backend": self.backend,
                "url": self.url,
                "path": self.local_path,
                "location": self.location,
                "collection": self.collection,
                "points": points,
                "embedder": self._meta.get("embedder"),
                "configured_embedder": _embedder_record(self._embedder),
                "bm25": self._meta.get("bm25"),
                "schema_version": self._meta.get("schema_version"),
                "created_at": self._meta.get("created_at"),
                "needs_reembed": not (self._dense_ok and self._sparse_ok),
            }

    def close(self) -> None:
        """Close the client (releases a local-mode path). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._client.close()
            except Exception as e:  # pragma: no cover - close of a dead connection
                raise StoreError(f"memory store {self._where()}: close failed: {e}") from e


__all__ = [
    "DENSE_NAME",
    "DENSE_WEIGHT",
    "RRF_K",
    "SPARSE_NAME",
    "SPARSE_WEIGHT",
    "EdgeStore",
    "Embedder",
    "MemoryFilter",
    "MemoryStore",
    "ServerStore",
    "rrf_fuse",
]
