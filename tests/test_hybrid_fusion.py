"""EdgeStore (fusion in Python) and ServerStore (the server's Rrf) rank hybrid searches alike."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.store import fusion
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.fusion import rrf_fuse
from opencode_memoryd.store.server import ServerStore

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
_WORD = re.compile(r"[a-z0-9]+")


# ------------------------------------------------------------------ both stores alike


class WordEmbedder:
    """Hashed bag of words (64 dimensions, L2-normalised): deterministic dense vectors."""

    name = "test-words-64"
    dimensions = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = [0.0] * self.dimensions
            for w in _WORD.findall(text.lower()):
                h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "big")
                v[h % self.dimensions] += 1.0 + (h >> 8) % 7 / 10
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


TOPICS = ["pnpm", "postgres", "docker", "ruff", "pytest", "airflow", "parquet", "nginx",
          "redis", "kafka", "terraform", "grafana"]
VERBS = ["configures", "breaks", "replaces", "caches", "logs", "deploys"]
FILLER = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
          "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
          "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber",
          "basil", "cedar", "dune", "ember", "fjord", "grove", "heath", "islet", "jade", "knoll",
          "loch", "moor", "nook", "oasis", "pond", "quay"]


def memories() -> list[Memory]:
    out = []
    for i, topic in enumerate(TOPICS):
        for j, verb in enumerate(VERBS[: 2 + i % 4]):
            other = TOPICS[(i * 5 + j) % len(TOPICS)]
            # a different length for every memory: no two BM25 scores tie, so the two
            # engines' tie orders cannot differ
            filler = " ".join(FILLER[: len(out) % len(FILLER)])
            text = f"The {topic} setup {verb} the {other} service ({filler}) in {i}.{j}."
            t = T0 + timedelta(minutes=len(out))
            out.append(Memory(
                id=point_id("project", "p1", "project", text), content=text, type="project",
                scope="project", project_id="p1", project_root="/tmp/p1", session_id="s",
                message_ids=["m"], source="llm", created_at=t, updated_at=t,
                session_ids=["s"], content_hash=content_hash(text)))
    return out


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[MemoryStore, MemoryStore]]:
    edge = EdgeStore(tmp_path / "edge", embedder=WordEmbedder())
    server = ServerStore(path=str(tmp_path / "local"), collection="memories",
                         embedder=WordEmbedder())
    try:
        for s in (edge, server):
            s.upsert(memories())
        yield edge, server
    finally:
        edge.close()
        server.close()


QUERIES = ["which service does the postgres setup break?", "kafka deploys in staging",
           "grafana caches", "what logs nginx?", "echo foxtrot", "the", "why is it slow"]


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_edge_and_server_rank_alike(stores: tuple[MemoryStore, MemoryStore],
                                    limit: int) -> None:
    edge, server = stores
    for q in QUERIES:
        a = edge.search(q, flt=MemoryFilter(project_id="p1"), limit=limit)
        b = server.search(q, flt=MemoryFilter(project_id="p1"), limit=limit)
        assert len(a) == len(b) == limit, q
        assert [m.id for m, _ in a] == [m.id for m, _ in b], q
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-5), q


def test_edge_fuses_its_two_candidate_lists(stores: tuple[MemoryStore, MemoryStore]) -> None:
    import qdrant_edge as qe

    edge = stores[0]
    assert isinstance(edge, EdgeStore)
    q = "which service does the postgres setup break?"
    flt = MemoryFilter(project_id="p1")
    sparse_n, dense_n = fusion.candidates(5)
    sv = edge._bm25.embed_query(q)
    sparse = edge._query(qe.SparseVector(sv.indices, sv.values), "bm25", flt, sparse_n)
    dense = edge._query(WordEmbedder().embed([q])[0], "dense", flt, dense_n)
    expected = rrf_fuse([[str(h.id) for h in sparse], [str(h.id) for h in dense]],
                        [fusion.SPARSE_WEIGHT, fusion.DENSE_WEIGHT])[:5]
    got = edge.search(q, flt=flt, limit=5)
    assert [(m.id, pytest.approx(s)) for m, s in got] == [(p, s) for p, s in expected]
