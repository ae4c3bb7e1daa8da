"""What the rest of the daemon sees of the memory store: the interface, its filter, its names.

Two adapters implement :class:`MemoryStore`:

* :class:`~opencode_memoryd.store.edge.EdgeStore` — the embedded default: Qdrant Edge
  (``qdrant-edge-py``) in-process, one shard directory, single process.
* :class:`~opencode_memoryd.store.server.ServerStore` — a Qdrant server or cluster through
  ``qdrant-client`` (its local mode, ``path=`` / ``location=":memory:"``, stands in for a
  server in tests).

Every memory is one point: id = :attr:`Memory.id` (a UUID string), payload =
:meth:`Memory.to_payload`, a BM25 sparse vector ``"bm25"`` (IDF applied by Qdrant) and, when
an embedder is configured, a dense cosine vector ``"dense"``. Search is BM25 alone, or BM25
and dense fused with reciprocal rank fusion (dense weight 0.5;
:mod:`opencode_memoryd.store.fusion`).

Each store records the embedder (name, dimensions) and the BM25 settings it was built with
(:mod:`opencode_memoryd.store.meta`); opening it with another embedder raises
:class:`~opencode_memoryd.errors.EmbedderMismatchError` until :meth:`MemoryStore.reembed`
rebuilds the vectors from the memory texts kept in the payloads.

This module imports no Qdrant library: code that only talks to a store depends on it alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from opencode_memoryd.models import MEMORY_TYPES, SCOPES, Memory

#: Name of the BM25 sparse vector of every point.
SPARSE_NAME = "bm25"
#: Name of the dense vector of every point, present when the store has an embedder.
DENSE_NAME = "dense"
#: Payload fields with a keyword index (filters use only these). ``status``, ``user_id`` and
#: ``section`` are indexed in stores created since tombstones, user identities and sections
#: exist; older stores filter on them without an index.
KEYWORD_FIELDS: tuple[str, ...] = ("scope", "project_id", "type", "status", "user_id",
                                   "section")
#: The most distinct ``type`` values :meth:`MemoryStore.count_by_type` reports (the types
#: are a closed vocabulary, far fewer).
FACET_LIMIT = 64
#: Payload fields :meth:`MemoryStore.set_fields` refuses: they are the point's identity or
#: what its vectors are computed from.
FIXED_FIELDS: frozenset[str] = frozenset({"id", "content", "content_hash"})
#: The ``status`` payload value of a tombstone (see :class:`~opencode_memoryd.models.Memory`).
RETIRED = "retired"


@runtime_checkable
class Embedder(Protocol):
    """A dense text embedder."""

    @property
    def name(self) -> str:
        """Identifies the model (and provider); recorded with the store."""
        ...

    @property
    def dimensions(self) -> int:
        """The length of every vector :meth:`embed` returns."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector of ``dimensions`` floats per document text (a memory's content),
        in order. May raise :class:`~opencode_memoryd.errors.UpstreamError`; the store lets
        it propagate."""
        ...

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Like :meth:`embed`, for search queries. Asymmetric models embed a query unlike a
        document (e5's ``query: `` and ``passage: `` prefixes, fastembed's ``query_embed``);
        for symmetric models both methods give the same vectors."""
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
        user_id: whose user-scope memories match: a user-scope memory matches only when
            its ``user_id`` is this one; project memories are not affected (they are
            shared). ``None``: every user's (internal use: migration, maintenance).
        without_user_id: only memories that have no ``user_id`` (user-scope memories
            written before user identities existed, and project memories).
        without_section: only memories that have no ``section`` (written before sections
            existed).

    A ``None`` filter means ``MemoryFilter()``: every active memory.

    Examples: ``MemoryFilter(scope="user", user_id=u)`` is the user scope of ``u``;
    ``MemoryFilter(project_id=p, user_id=u)`` is project ``p`` plus the user scope of ``u``.

    Raises:
        ValueError: an unknown scope or type, an empty ``user_id``, or ``user_id``
            together with ``without_user_id``.
    """

    project_id: str | None = None
    include_user_scope: bool = True
    scope: str | None = None
    types: tuple[str, ...] = ()
    include_retired: bool = False
    user_id: str | None = None
    without_user_id: bool = False
    without_section: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", tuple(self.types))
        if self.user_id is not None and not self.user_id:
            raise ValueError("user_id must not be empty; use None for every user")
        if self.user_id is not None and self.without_user_id:
            raise ValueError("user_id and without_user_id exclude each other")
        if self.scope is not None and self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}; expected one of {SCOPES}")
        bad = [t for t in self.types if t not in MEMORY_TYPES]
        if bad:
            raise ValueError(f"unknown memory type(s) {bad}; expected some of {MEMORY_TYPES}")


#: The default filter: every active memory.
ACTIVE = MemoryFilter()
#: Every memory, tombstones included.
ALL = MemoryFilter(include_retired=True)


class MemoryStore(Protocol):
    """What the daemon needs from a memory store. Both adapters implement it.

    Every method raises :class:`~opencode_memoryd.errors.StoreError` when the backend fails
    or refuses; methods that write or search with vectors raise
    :class:`~opencode_memoryd.errors.EmbedderMismatchError` when the store was opened with
    ``allow_mismatch=True`` and has not been re-embedded yet.
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

    def set_fields(self, ids: Sequence[str], fields: dict[str, Any]) -> None:
        """Set payload fields of the points with these ids (unknown ids are ignored),
        their vectors and other fields untouched: no re-encoding, no embedder call. Raises
        ``ValueError`` for a field of :data:`FIXED_FIELDS`. Durable when it returns."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """Group the writes of the calling thread: inside, :meth:`upsert`,
        :meth:`set_fields` and :meth:`delete` are visible at once and survive a crash of
        the process, but are made durable (flushed to disk) only once, when the outermost
        ``batch`` ends."""
        ...

    def pending_flush(self) -> bool:
        """Whether the calling thread's :meth:`batch` holds writes not yet flushed."""
        ...

    def scroll(self, flt: MemoryFilter | None = None) -> Iterator[Memory]:
        """Every matching memory, ordered by ``created_at`` then ``id`` (active only unless
        ``flt.include_retired``)."""
        ...

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of matching memories (active only unless ``flt.include_retired``)."""
        ...

    def count_by_type(self, flt: MemoryFilter | None = None) -> dict[str, int]:
        """Exact number of matching memories per ``type`` (types with none left out), in
        one request: what :meth:`count` per type gives."""
        ...

    def search(
        self, query: str, *, flt: MemoryFilter | None = None, limit: int = 10,
        as_document: bool = False,
    ) -> list[tuple[Memory, float]]:
        """Best ``limit`` matches for ``query`` with their scores, best first (active only
        unless ``flt.include_retired``). ``as_document``: embed ``query`` as a memory, not
        as a search query (a memory-to-memory look-up, e.g. the near-duplicate check)."""
        ...

    @property
    def embedder(self) -> Embedder | None:
        """The embedder this store was opened with (the configured one; ``None``: BM25
        only); after :meth:`reembed`, the one it re-embedded with."""
        ...

    def reembed(self, embedder: Embedder | None, *, batch_size: int = 64,
                progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild every point's vectors from its stored text; returns the point count.
        ``progress`` gets (points done, points in all) after each batch."""
        ...

    def info(self) -> dict[str, Any]:
        """Backend, location, point count, embedder and BM25 settings."""
        ...

    def migrations(self) -> list[dict[str, Any]]:
        """The data migrations recorded in the store's metadata: ``[{"version": int,
        "name": str, "applied_at": str}]`` by version (``[]`` for a store that records
        none)."""
        ...

    def record_migration(self, version: int, name: str, applied_at: str) -> None:
        """Record data migration ``version`` (``applied_at``: ISO-8601 UTC) in the store's
        metadata.

        Raises:
            StoreError: the metadata cannot be written, or the store is closed.
        """
        ...

    def close(self) -> None:
        """Release the store; idempotent."""
        ...


__all__ = [
    "ACTIVE",
    "ALL",
    "DENSE_NAME",
    "FACET_LIMIT",
    "FIXED_FIELDS",
    "KEYWORD_FIELDS",
    "RETIRED",
    "SPARSE_NAME",
    "Embedder",
    "MemoryFilter",
    "MemoryStore",
]
