"""A memory store in a Qdrant server collection, through ``qdrant-client``.

The only module that imports ``qdrant_client``; it does so when a :class:`ServerStore` is
opened, so importing this module stays cheap for code that never talks to a server.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opencode_memoryd.errors import MemorydError, StoreError
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import (
    ACTIVE,
    DENSE_NAME,
    FACET_LIMIT,
    KEYWORD_FIELDS,
    RETIRED,
    SPARSE_NAME,
    Embedder,
    MemoryFilter,
)
from opencode_memoryd.store.base import PAGE_SIZE, Row, StoreBase
from opencode_memoryd.store.bm25 import Bm25Encoder, SparseVector
from opencode_memoryd.store.fusion import DENSE_WEIGHT, RRF_K, SPARSE_WEIGHT, candidates

#: Key of our metadata in a server collection's ``metadata``.
SERVER_META_KEY = "opencode_memoryd"


class ServerStore(StoreBase):
    """A memory store in a Qdrant server collection, through ``qdrant-client``.

    Give exactly one of ``url`` (a server), ``path`` (qdrant-client local mode on disk) or
    ``location`` (``":memory:"`` for local mode in memory, or a server URL). Local mode is
    brute force and meant for tests. The collection is created on first open with the
    sparse vector ``"bm25"`` (``Modifier.IDF``), the dense cosine vector ``"dense"`` when an
    embedder is configured, keyword payload indexes on the ``KEYWORD_FIELDS`` (server
    only; local mode has none), and the store metadata
    (:mod:`opencode_memoryd.store.meta`: embedder, BM25 settings, schema version) under the
    collection's ``metadata["opencode_memoryd"]``. Hybrid search is one ``query_points``
    call: two prefetches (``limit`` BM25 and ``4 * limit`` dense candidates) fused by the
    server's weighted RRF (``Rrf(k=RRF_K, weights=[SPARSE_WEIGHT, DENSE_WEIGHT])`` of
    :mod:`~opencode_memoryd.store.fusion`, the same formula and settings as
    :func:`~opencode_memoryd.store.fusion.rrf_fuse`). Weighted
    RRF, collection metadata and (for :meth:`reembed`) adding named vectors need a server as
    recent as qdrant-client 1.20's API; an older server's refusal surfaces as
    :class:`StoreError`. Writes use ``wait=True``.

    Args:
        url: server URL, e.g. ``http://localhost:6333``.
        api_key: the server's API key, if any.
        collection: collection name.
        path: local-mode storage directory (tests).
        location: ``":memory:"`` or a URL.
        embedder: dense embedder, or ``None`` for BM25 only.
        timeout_seconds: per-request timeout (seconds, rounded up to whole seconds).
        bm25: the BM25 encoder (default: the shared default encoder).
        allow_mismatch: as for :class:`~opencode_memoryd.store.edge.EdgeStore`.

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
        flt = flt or ACTIVE
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
        if flt.user_id is not None and flt.scope != "project":
            # project memories are shared; user-scope ones must be this user's
            must.append(m.Filter(should=[
                m.FieldCondition(key="scope", match=m.MatchValue(value="project")),
                m.FieldCondition(key="user_id", match=m.MatchValue(value=flt.user_id)),
            ]))
        if flt.without_user_id:
            must.append(m.IsEmptyCondition(is_empty=m.PayloadField(key="user_id")))
        if flt.without_section:
            must.append(m.IsEmptyCondition(is_empty=m.PayloadField(key="section")))
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

    def _upsert_rows(self, rows: list[Row]) -> None:
        m = self._m
        points = [m.PointStruct(id=pid, vector=self._vectors(s, d), payload=payload)
                  for pid, payload, s, d in rows]
        with self._call("upsert"):
            self._client.upsert(self.collection, points=points, wait=True)

    def _update_vectors(self, rows: list[Row]) -> None:
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

    def _set_payload(self, ids: list[str], fields: dict[str, Any]) -> None:
        with self._call("set payload"):
            found = self._client.retrieve(self.collection, ids=list(ids), with_payload=False,
                                          with_vectors=False)
            known: list[Any] = [str(r.id) for r in found]  # unknown ids: ignored
            if known:
                self._client.set_payload(self.collection, payload=fields, points=known,
                                         wait=True)

    def _scroll_all(self, flt: MemoryFilter | None) -> Iterator[Memory]:
        f = self._filter(flt)
        offset = None
        while True:
            with self._call("scroll"):
                records, offset = self._client.scroll(
                    self.collection, scroll_filter=f, limit=PAGE_SIZE, offset=offset,
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

    def count_by_type(self, flt: MemoryFilter | None = None) -> dict[str, int]:
        """See :meth:`~opencode_memoryd.store.api.MemoryStore.count_by_type`.

        Raises:
            StoreError: the backend failed or the store is closed.
        """
        with self._lock:
            self._require_open()
            with self._call("count"):
                got = self._client.facet(self.collection, "type",
                                         facet_filter=self._filter(flt), limit=FACET_LIMIT,
                                         exact=True)
        return {str(h.value): int(h.count) for h in got.hits if h.count}

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
        sparse_n, dense_n = candidates(limit)
        prefetch = []
        weights = []
        if sparse:
            prefetch.append(m.Prefetch(
                query=m.SparseVector(indices=sparse.indices, values=sparse.values),
                using=SPARSE_NAME, filter=f, limit=sparse_n,
            ))
            weights.append(SPARSE_WEIGHT)
        prefetch.append(m.Prefetch(query=dense, using=DENSE_NAME, filter=f, limit=dense_n))
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
            "needs_reembed": bool, "reembed_interrupted": bool}``.

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
                **self._meta_info(),
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


__all__ = ["SERVER_META_KEY", "ServerStore"]
