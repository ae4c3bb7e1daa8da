"""The logic both store adapters share: id checks, encoding, locking and the public methods.

:class:`StoreBase` implements :class:`~opencode_memoryd.store.api.MemoryStore` on top of a
few primitives each adapter supplies (write rows, retrieve, delete, scroll, search, reset
the dense vector, write metadata). It encodes texts into BM25 and dense vectors, checks the
store's metadata (:mod:`opencode_memoryd.store.meta`) and serialises calls with one lock;
embedding calls, which may go over the network, run outside it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Self

from opencode_memoryd.errors import EmbedderMismatchError, StoreError
from opencode_memoryd.models import Memory, iso_utc
from opencode_memoryd.store import meta as store_meta
from opencode_memoryd.store.api import ALL, FIXED_FIELDS, Embedder, MemoryFilter
from opencode_memoryd.store.batching import WriteBatching
from opencode_memoryd.store.bm25 import Bm25Encoder, SparseVector, default_encoder
from opencode_memoryd.store.expansion import MembersVectors, expand_query
from opencode_memoryd.store.fusion import prefer_current_facts

#: Points read per scroll request.
PAGE_SIZE = 256

#: One point to write: (id, payload, BM25 vector, dense vector or None).
Row = tuple[str, dict[str, Any], SparseVector, list[float] | None]


def check_ids(ids: Sequence[str]) -> list[str]:
    """Normalise memory ids to canonical UUID strings, first occurrence only, in order.

    Raises:
        TypeError: ``ids`` is one string rather than a sequence of them.
        ValueError: an id is not a UUID.
    """
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


def _sort_key(m: Memory) -> tuple[datetime, str]:
    return (m.created_at, m.id)


class StoreBase(WriteBatching):
    """Shared logic: metadata checks, encoding, the public methods. Adapters supply the
    primitives (the methods below that raise :class:`NotImplementedError`), ``backend``,
    ``count``, ``info`` and ``close``.

    Args:
        embedder: dense embedder, or ``None`` for BM25 only.
        bm25: the BM25 encoder (``None``: :func:`~opencode_memoryd.store.bm25.default_encoder`).
        allow_mismatch: open a store of other embedder or BM25 settings, to re-embed it.
    """

    backend = ""
    #: Whether :meth:`search` expands a query naming a category of tools (off: compare).
    query_expansion = True

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
        self._generation = 0
        self._members = MembersVectors()

    #: Whether this process is the store's only writer (so :attr:`generation` sees every
    #: change). True for the embedded store; a server store is shared.
    single_writer = False

    @property
    def embedder(self) -> Embedder | None:
        """The embedder this store encodes with (``None``: BM25 only)."""
        return self._embedder

    @property
    def generation(self) -> int:
        """Counts the writes through this object (upsert, delete, payload, re-embedding):
        equal values mean this process wrote nothing in between."""
        return self._generation

    # -- metadata ---------------------------------------------------------------------

    def _where(self) -> str:
        raise NotImplementedError

    def _new_meta(self) -> dict[str, Any]:
        return store_meta.new_meta(self._embedder, self._bm25.settings)

    def _check_meta(self) -> None:
        check = store_meta.check_meta(self._meta, self._embedder, self._bm25.settings,
                                      self._where())
        self._dense_ok, self._sparse_ok = check.dense_ok, check.sparse_ok
        if check.message and not self._allow_mismatch:
            raise EmbedderMismatchError(check.message)
        self._mismatch = check.message

    def _meta_info(self) -> dict[str, Any]:
        """The metadata part of ``info()`` (:func:`~opencode_memoryd.store.meta.meta_info`)."""
        needs_reembed = not (self._dense_ok and self._sparse_ok)
        return store_meta.meta_info(self._meta, self._embedder, needs_reembed)

    def _set_meta(self, meta: dict[str, Any]) -> None:  # written, then kept
        self._write_meta(meta)
        self._meta = meta

    def migrations(self) -> list[dict[str, Any]]:
        """See :meth:`opencode_memoryd.store.api.MemoryStore.migrations`."""
        with self._lock:
            return store_meta.recorded_migrations(self._meta)

    def record_migration(self, version: int, name: str, applied_at: str) -> None:
        """See :meth:`opencode_memoryd.store.api.MemoryStore.record_migration`."""
        with self._lock:
            self._require_open()
            self._set_meta(store_meta.with_migration(self._meta, version, name, applied_at))

    def _require_writable(self) -> None:
        self._require_open()
        if not (self._dense_ok and self._sparse_ok):
            raise EmbedderMismatchError(self._mismatch or "store needs re-embedding")

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {self._where()} is closed")

    # -- encoding ---------------------------------------------------------------------

    def _dense(self, embedder: Embedder, texts: Sequence[str], *,
               query: bool = False) -> list[list[float]]:
        vectors = (embedder.embed_query if query else embedder.embed)(list(texts))
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

    def _encode(self, memories: Sequence[Memory], embedder: Embedder | None) -> list[Row]:
        texts = [m.content for m in memories]
        sparse = self._bm25.embed_documents(texts)
        dense: list[list[float] | None] = [None] * len(texts) if embedder is None else [
            *self._dense(embedder, texts)]
        return [
            (str(uuid.UUID(m.id)), m.to_payload(), s, d)
            for m, s, d in zip(memories, sparse, dense, strict=True)
        ]

    # -- public API shared by both adapters ---------------------------------------------

    def upsert(self, memories: Sequence[Memory]) -> None:
        """Insert or replace ``memories`` (point id = :attr:`Memory.id`).

        Computes the BM25 vector of each ``content`` and, with an embedder, its dense vector
        (one ``embed`` call for the batch). Durable when it returns (inside :meth:`batch`:
        when the batch ends).

        Raises:
            ValueError: a memory id is not a UUID.
            EmbedderMismatchError: the store still needs :meth:`reembed`.
            StoreError: the backend failed, or the embedder returned the wrong shape.
            UpstreamError: from the embedder, unchanged.
        """
        if not memories:
            return
        check_ids([m.id for m in memories])
        with self._lock:
            self._require_writable()
            embedder = self._embedder
        rows = self._encode(memories, embedder)  # outside the lock: may call the network
        with self._lock:
            self._require_writable()
            if self._embedder is not embedder:  # re-embedded meanwhile: encode again
                rows = self._encode(memories, self._embedder)
            self._generation += 1
            self._upsert_rows(rows)

    def get(self, ids: Sequence[str]) -> list[Memory]:
        """Return the stored memories with these ids, in the order given (duplicates once,
        missing ids skipped). Retired memories (tombstones) are returned too.

        Raises:
            ValueError: an id is not a UUID.
            StoreError: the backend failed.
        """
        wanted = check_ids(ids)
        if not wanted:
            return []
        with self._lock:
            self._require_open()
            found = {m.id: m for m in self._retrieve(wanted)}
        return [found[i] for i in wanted if i in found]

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the points with these ids; unknown ids are ignored. Durable on return
        (inside :meth:`batch`: when the batch ends).

        Raises:
            ValueError: an id is not a UUID.
            StoreError: the backend failed.
        """
        wanted = check_ids(ids)
        if not wanted:
            return
        with self._lock:
            self._require_open()
            self._generation += 1
            self._delete_ids(wanted)

    def set_fields(self, ids: Sequence[str], fields: dict[str, Any]) -> None:
        """Set payload ``fields`` of the points with these ids; vectors and the other
        fields stay as they are (nothing is encoded or embedded). Unknown ids are ignored.
        Durable on return.

        Raises:
            ValueError: an id is not a UUID, or a field is one of
                :data:`~opencode_memoryd.store.api.FIXED_FIELDS` (the id, or the text the
                vectors are computed from: use :meth:`upsert`).
            StoreError: the backend failed.
        """
        fixed = sorted(FIXED_FIELDS & set(fields))
        if fixed:
            raise ValueError(f"set_fields cannot change {', '.join(fixed)}; use upsert")
        wanted = check_ids(ids)
        if not wanted or not fields:
            return
        with self._lock:
            self._require_open()
            self._generation += 1
            self._set_payload(wanted, dict(fields))

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
        self, query: str, *, flt: MemoryFilter | None = None, limit: int = 10,
        as_document: bool = False,
    ) -> list[tuple[Memory, float]]:
        """Return the ``limit`` best memories for ``query`` with their scores, best first.

        Retired memories never match unless ``flt.include_retired``. The dense side embeds
        ``query`` with the embedder's ``embed_query``, or with ``embed`` when
        ``as_document`` (``query`` is a memory's text: a memory-to-memory look-up).

        BM25 sparse search always, a query naming a category of tools ("which package
        manager?") expanded by its members (:mod:`~.expansion`, the dense side by blending
        vectors; not ``as_document``, nor with :attr:`query_expansion` off). With an
        embedder, a dense search too, fused by weighted reciprocal rank fusion
        (:mod:`~.fusion`: k = 1, sparse weight 1, dense weight 0.6; ``limit`` and
        ``4 * limit`` candidates). Scores: BM25 scores (>= 0) without an embedder, RRF
        scores (at most 1.6) with one. A query of stopwords alone has no BM25 terms: ``[]``
        without an embedder. While a store opened with ``allow_mismatch=True`` awaits
        :meth:`reembed`, only its still-valid vector is searched. Then summaries and retired
        memories are scored down (:func:`~.fusion.prefer_current_facts`).

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
        sparse, members = expand_query(self._bm25, query, sparse=use_sparse,
                                       expand=self.query_expansion and not as_document)
        dense = None if embedder is None else self._members.query_vector(  # unlocked: network
            lambda texts: self._dense(embedder, texts, query=not as_document),
            embedder.name, query, members)
        with self._lock:
            self._require_open()
            hits = (self._search_hybrid(sparse, dense, flt, limit) if dense is not None
                    else self._search_sparse(sparse, flt, limit) if sparse else [])
        return prefer_current_facts(hits)

    def reembed(self, embedder: Embedder | None, *, batch_size: int = 64,
                progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild every point's vectors from the ``content`` in its payload.

        Drops the dense vector and creates it again for ``embedder`` (none for ``None``),
        recomputes the BM25 vectors, then records the new embedder and BM25 settings.
        Nothing is re-extracted; payloads are unchanged. An interrupted run is recorded, and
        the store refuses to open without ``allow_mismatch=True`` until ``reembed`` ends.

        Args:
            embedder: the embedder to build dense vectors with (``None``: BM25 only). It
                becomes this store's embedder.
            batch_size: memories per ``embed`` call and per write.
            progress: called after each batch with (points done, points in all).

        Returns:
            The number of points re-embedded.

        Raises:
            ValueError: ``batch_size`` is not positive.
            StoreError: the backend failed.
            UpstreamError: from the embedder, unchanged (the store stays marked as
                re-embedding; run again).
        """
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        with self._lock:
            self._require_open()
            target = store_meta.embedder_record(embedder)
            self._set_meta({**self._meta, "reembed_in_progress": {"embedder": target}})
            self._dense_ok = self._sparse_ok = False
            self._mismatch = store_meta.interrupted_message(self._where(), target)
            self._reset_dense(embedder)
            # ids first: no scrolling while writing; tombstones are re-embedded too
            memories = list(self._scroll_all(ALL))
            for i in range(0, len(memories), batch_size):
                self._update_vectors(self._encode(memories[i : i + batch_size], embedder))
                if progress is not None:
                    progress(min(i + batch_size, len(memories)), len(memories))
            self._flush()
            self._set_meta({**self._meta, "embedder": target, "bm25": dict(self._bm25.settings),
                            "reembed_in_progress": None,
                            "reembedded_at": iso_utc(datetime.now(UTC))})
            self._embedder = embedder
            self._dense_ok = self._sparse_ok = True
            self._mismatch = None
            return len(memories)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        """Release the store; idempotent. Adapters override it."""
        raise NotImplementedError

    # -- adapter primitives -----------------------------------------------------------

    def _upsert_rows(self, rows: list[Row]) -> None:
        raise NotImplementedError

    def _update_vectors(self, rows: list[Row]) -> None:
        raise NotImplementedError

    def _retrieve(self, ids: list[str]) -> list[Memory]:
        raise NotImplementedError

    def _delete_ids(self, ids: list[str]) -> None:
        raise NotImplementedError

    def _set_payload(self, ids: list[str], fields: dict[str, Any]) -> None:
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


__all__ = ["PAGE_SIZE", "Row", "StoreBase", "check_ids"]
