"""Ranking after the fusion, in both stores (Qdrant Edge and a Qdrant server, here
qdrant-client's local mode), BM25 alone and fused with the default local model: a current
fact ranks above a session summary and above a retired (superseded) memory that the
retrieval alone ranks first."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import Embedder, MemoryFilter, MemoryStore
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.local_embedder import LocalEmbedder
from opencode_memoryd.store.server import ServerStore
from test_store_contract import mem

#: A session summary naming the question's words more often than the fact that answers it.
FACT = mem("Unit tests use Vitest, run with the jsdom environment in watch mode.")
SUMMARY = mem("Session summary: unit tests. Fixed the unit tests; unit tests pass now.",
              type_="session-summary")
#: A fact retired by a correction, shorter (so BM25 ranks it first) than its successor.
OLD = mem("Unit tests use Jest.", minutes=1)
NEW = mem("Unit tests use Vitest now, in place of Jest, with the jsdom environment.",
          minutes=2)


@pytest.fixture(params=["edge", "server_local"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["bm25", "local"])
def embedder(request: pytest.FixtureRequest) -> Embedder | None:
    return LocalEmbedder() if request.param == "local" else None


@pytest.fixture
def store(backend: str, embedder: Embedder | None, tmp_path: Path) -> Iterator[MemoryStore]:
    s: MemoryStore
    if backend == "edge":
        s = EdgeStore(tmp_path / "store", embedder=embedder)
    else:
        s = ServerStore(path=str(tmp_path / "store"), collection="memories", embedder=embedder)
    yield s
    s.close()


def contents(hits: list[tuple[Memory, float]]) -> list[str]:
    return [m.content for m, _ in hits]


def test_a_fact_ranks_above_a_session_summary(store: MemoryStore) -> None:
    store.upsert([SUMMARY, FACT])
    hits = store.search("unit tests", limit=5)
    assert contents(hits)[:2] == [FACT.content, SUMMARY.content]
    assert hits[0][1] > hits[1][1]


def test_a_superseded_fact_ranks_below_its_successor_with_all(store: MemoryStore) -> None:
    old = replace(OLD, status="retired", superseded_by=NEW.id,
                  retired_reason="superseded: we use Vitest now")
    store.upsert([old, NEW])
    assert contents(store.search("unit tests", limit=5)) == [NEW.content]  # hidden
    hits = store.search("unit tests", flt=MemoryFilter(include_retired=True), limit=5)
    assert contents(hits) == [NEW.content, OLD.content]
    assert hits[0][1] > hits[1][1]
