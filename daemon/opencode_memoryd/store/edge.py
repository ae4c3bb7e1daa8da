"""The embedded memory store: a Qdrant Edge shard in-process (``qdrant-edge-py``).

Apart from :mod:`opencode_memoryd.store.bm25`, the only module that imports ``qdrant_edge``.

The store's folder is 0700 and its files 0600 (repaired on open). Qdrant Edge writes its
segments through memory-mapped sparse files, and a write that finds the disk full kills
the process with ``SIGBUS``; so every write first checks the free space
(:func:`~opencode_memoryd.disk.require_free`, :data:`~opencode_memoryd.disk.STORE_MIN_FREE_BYTES`)
and raises :class:`~opencode_memoryd.errors.DiskFullError` instead, before anything changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from opencode_memoryd.disk import (
    STORE_MIN_FREE_BYTES,
    FreeBytes,
    free_bytes,
    make_private,
    require_free,
)
from opencode_memoryd.errors import MemorydError, StoreError, StoreInUseError
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import (
    DENSE_NAME,
    FACET_LIMIT,
    KEYWORD_FIELDS,
    SPARSE_NAME,
    Embedder,
    MemoryFilter,
)
from opencode_memoryd.store.base import PAGE_SIZE, Row, StoreBase
from opencode_memoryd.store.bm25 import Bm25Encoder, SparseVector
from opencode_memoryd.store.edge_filter import edge_filter
from opencode_memoryd.store.fusion import DENSE_WEIGHT, SPARSE_WEIGHT, candidates, rrf_fuse
from opencode_memoryd.store.meta import (
    OPEN_LOCK_FILE,
    REBUILD_HINT,
    opening_lock,
    read_meta_file,
    write_meta_file,
)

#: Metadata file of an :class:`EdgeStore`, next to its ``shard/`` directory.
EDGE_META_FILE = "store.json"
EDGE_SHARD_DIR = "shard"


def _payload(point: qe.Record | qe.ScoredPoint) -> dict[str, Any]:
    return point.payload or {}


class EdgeStore(StoreBase):
    """The embedded store: a Qdrant Edge shard under ``path``.

    Layout: ``path/store.json`` (schema version, embedder, BM25 settings; written
    atomically, :func:`~opencode_memoryd.store.meta.write_meta_file`) and ``path/shard/``
    (the Edge shard). Created on first open. Points carry
    the sparse vector ``"bm25"`` (IDF modifier) and, with an embedder, the dense cosine
    vector ``"dense"``; keyword payload indexes on the ``KEYWORD_FIELDS`` of
    :mod:`~opencode_memoryd.store.api`.
    Hybrid fusion runs in Python (:func:`~opencode_memoryd.store.fusion.rrf_fuse`): two
    searches, one per vector.

    Only one process may open a store (Edge locks the shard's WAL); the same applies to two
    ``EdgeStore`` objects in one process. Methods are serialised by a lock, so one object
    may be shared by threads.

    Args:
        path: the store directory (created with mode 0700 if missing).
        embedder: dense embedder, or ``None`` for BM25 only.
        bm25: the BM25 encoder (default: :func:`~opencode_memoryd.store.bm25.default_encoder`).
        allow_mismatch: open even when the store was built with another embedder or other
            BM25 settings — to call :meth:`reembed`. Until then upserts raise
            :class:`EmbedderMismatchError` and search uses only the vectors still valid.
        free: the free-space probe (injectable for tests).

    Raises:
        DiskFullError: the folder's disk has too little free space to open the store
            (every write raises it too, before writing anything).
        EmbedderMismatchError: the store was built with another embedder (name or
            dimensions, or one vs none) or other BM25 settings.
        StoreError: another process holds the store; the directory is unusable; the
            metadata file is missing or unreadable while a shard exists.
    """

    single_writer = True  # Qdrant Edge allows one process at a time

    backend = "edge"

    def __init__(
        self,
        path: Path | str,
        embedder: Embedder | None = None,
        *,
        bm25: Bm25Encoder | None = None,
        allow_mismatch: bool = False,
        free: FreeBytes = free_bytes,
    ) -> None:
        super().__init__(embedder, bm25, allow_mismatch)
        self.path = Path(path).expanduser()
        self._meta_path = self.path / EDGE_META_FILE
        self._shard_path = self.path / EDGE_SHARD_DIR
        self._shard_or_none: qe.EdgeShard | None = None
        self._free = free
        self._require_space()  # opening fills preallocated pages too
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as e:
            raise StoreError(f"cannot create memory store directory {self.path}: {e}") from e
        # one process at a time creates or loads the shard: two that both find no shard
        # would create it over each other (Edge's own lock comes only with a loaded shard)
        with opening_lock(self.path):
            make_private(self.path, (EDGE_META_FILE, EDGE_SHARD_DIR, OPEN_LOCK_FILE))
            shard_exists = self._shard_path.is_dir() and any(self._shard_path.iterdir())
            if self._meta_path.exists():
                self._meta = read_meta_file(self._meta_path)
            elif shard_exists:
                raise StoreError(
                    f"memory store {self.path}: {EDGE_SHARD_DIR}/ exists but {EDGE_META_FILE} "
                    "is missing, so the embedder and BM25 settings it was built with are "
                    "unknown. Restore the file, or move the directory away to start a new "
                    "store."
                )
            else:
                self._meta = self._new_meta()
                self._write_meta(self._meta)

            self._check_meta()
            if shard_exists:
                self._shard_or_none = self._open(
                    lambda: qe.EdgeShard.load(str(self._shard_path)))
            else:
                self._shard_or_none = self._open(self._create_shard)

    # -- opening ------------------------------------------------------------------------

    def _where(self) -> str:
        return str(self.path)

    def _require_space(self) -> None:
        """Raise :class:`DiskFullError` unless a write cannot run out of space."""
        require_free(self.path, STORE_MIN_FREE_BYTES, free=self._free)

    @property
    def _shard(self) -> qe.EdgeShard:
        shard = self._shard_or_none
        if shard is None:
            raise StoreError(f"memory store {self.path} is closed")
        return shard

    def _write_meta(self, meta: dict[str, Any]) -> None:
        self._require_space()
        write_meta_file(self._meta_path, meta)

    def _create_shard(self) -> qe.EdgeShard:
        meta_embedder = self._meta.get("embedder")
        vectors: dict[str, qe.EdgeVectorParams] = {}
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

    def _open(self, opener: Callable[[], qe.EdgeShard]) -> qe.EdgeShard:
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
            hint = f"; {REBUILD_HINT}" if self._shard_path.is_dir() else ""
            raise StoreError(f"cannot open memory store {self.path}: {text}{hint}") from e

    @contextmanager
    def _edge(self, action: str) -> Iterator[None]:
        try:
            yield
        except MemorydError:
            raise
        except Exception as e:
            raise StoreError(f"memory store {self.path}: {action} failed: {e}") from e

    # -- primitives ---------------------------------------------------------------------

    _filter = staticmethod(edge_filter)

    def _vectors(self, sparse: SparseVector, dense: list[float] | None) -> dict[str, Any]:
        vec: dict[str, Any] = {SPARSE_NAME: qe.SparseVector(sparse.indices, sparse.values)}
        if dense is not None:
            vec[DENSE_NAME] = dense
        return vec

    def _upsert_rows(self, rows: list[Row]) -> None:
        points = [qe.Point(pid, self._vectors(s, d), payload) for pid, payload, s, d in rows]
        self._require_space()
        with self._edge("upsert"):
            self._shard.update(qe.UpdateOperation.upsert_points(points))
        if not self._deferring():
            self._flush()

    def _update_vectors(self, rows: list[Row]) -> None:
        pvs = [qe.PointVectors(pid, self._vectors(s, d)) for pid, _p, s, d in rows]
        self._require_space()
        with self._edge("re-embedding"):
            self._shard.update(qe.UpdateOperation.update_vectors(pvs))

    def _reset_dense(self, embedder: Embedder | None) -> None:
        self._require_space()
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
        point_ids: list[qe.PointId] = list(ids)
        with self._edge("get"):
            records = self._shard.retrieve(point_ids, True, False)
        return [Memory.from_payload(_payload(r)) for r in records]

    def _delete_ids(self, ids: list[str]) -> None:
        point_ids: list[qe.PointId] = list(ids)
        self._require_space()
        with self._edge("delete"):
            self._shard.update(qe.UpdateOperation.delete_points(point_ids))
        if not self._deferring():
            self._flush()

    def _set_payload(self, ids: list[str], fields: dict[str, Any]) -> None:
        point_ids: list[qe.PointId] = list(ids)
        with self._edge("set payload"):
            existing = {str(r.id) for r in self._shard.retrieve(point_ids, False, False)}
            point_ids = [i for i in point_ids if str(i) in existing]  # unknown ids: ignored
            if not point_ids:
                return
            self._shard.update(qe.UpdateOperation.set_payload(point_ids, fields))
        if not self._deferring():
            self._flush()

    def _scroll_all(self, flt: MemoryFilter | None) -> Iterator[Memory]:
        f = self._filter(flt)
        offset: qe.PointId | None = None
        while True:
            with self._edge("scroll"):
                records, offset = self._shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=PAGE_SIZE, filter=f,
                                     with_payload=True, with_vector=False)
                )
            for r in records:
                yield Memory.from_payload(_payload(r))
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
                return int(self._shard.count(qe.CountRequest(exact=True,
                                                             filter=self._filter(flt))))

    def count_by_type(self, flt: MemoryFilter | None = None) -> dict[str, int]:
        """See :meth:`~opencode_memoryd.store.api.MemoryStore.count_by_type` (a facet
        on the indexed ``type`` field).

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._edge("count"):
                got = self._shard.facet(qe.FacetRequest(
                    "type", limit=FACET_LIMIT, exact=True, filter=self._filter(flt)))
        return {str(h.value): int(h.count) for h in got.hits if h.count}

    def _query(self, query: qe.NamedVector, using: str, flt: MemoryFilter | None,
               limit: int, payload: bool = True) -> list[qe.ScoredPoint]:
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
        hits = self._query(qe.SparseVector(sparse.indices, sparse.values), SPARSE_NAME,
                           flt, limit)
        return [(Memory.from_payload(_payload(h)), float(h.score)) for h in hits]

    def _search_hybrid(self, sparse: SparseVector, dense: list[float],
                       flt: MemoryFilter | None, limit: int) -> list[tuple[Memory, float]]:
        # ranked ids only, then the payloads of the fused best: reading a payload costs
        # more than ranking the point (most of the 4 * limit dense candidates are dropped)
        sparse_n, dense_n = candidates(limit)
        sparse_hits = (
            self._query(qe.SparseVector(sparse.indices, sparse.values), SPARSE_NAME, flt,
                        sparse_n, payload=False)
            if sparse else []
        )
        dense_hits = self._query(dense, DENSE_NAME, flt, dense_n, payload=False)
        fused = rrf_fuse(
            [[str(h.id) for h in sparse_hits], [str(h.id) for h in dense_hits]],
            [SPARSE_WEIGHT, DENSE_WEIGHT],
        )[:limit]
        with self._edge("get"):
            records = self._shard.retrieve([pid for pid, _ in fused], True, False)
        payloads = {str(r.id): _payload(r) for r in records}
        return [(Memory.from_payload(payloads[pid]), score) for pid, score in fused
                if pid in payloads]

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
            self._require_space()
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
            "needs_reembed": bool, "reembed_interrupted": bool}``.

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
                **self._meta_info(),
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
            shard, self._shard_or_none = self._shard_or_none, None
            if shard is None:
                return
            try:
                shard.flush()
            except Exception as e:
                shard.close()
                raise StoreError(f"memory store {self.path}: final flush failed: {e}") from e
            shard.close()


__all__ = ["EDGE_META_FILE", "EDGE_SHARD_DIR", "EdgeStore"]
