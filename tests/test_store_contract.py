"""One contract, two adapters: EdgeStore (Qdrant Edge) and ServerStore (qdrant-client local
mode standing in for a server). Every test runs against both and asserts outcomes."""

from __future__ import annotations

import hashlib
import math
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from opencode_memoryd.errors import EmbedderMismatchError, StoreError
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.store.api import Embedder, MemoryFilter, MemoryStore
from opencode_memoryd.store.bm25 import BM25_SETTINGS, Bm25Encoder, default_encoder
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.fusion import DENSE_WEIGHT, RRF_K, SPARSE_WEIGHT, rrf_fuse
from opencode_memoryd.store.server import ServerStore

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
ACME = "acme-web"
PIPE = "data-pipeline"

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic test embedder: hashed bag of words, L2-normalised.

    Words listed in ``concepts`` are replaced by their concept first, so paraphrases that
    share no word (``yarn`` / ``pnpm``) land on the same dimension — what a real embedding
    model does and BM25 cannot.
    """

    def __init__(self, name: str = "test-hash-64", dimensions: int = 64,
                 concepts: dict[str, str] | None = None) -> None:
        self.name = name
        self.dimensions = dimensions
        self.concepts = concepts or {}
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = [0.0] * self.dimensions
            for w in _WORD.findall(text.lower()):
                w = self.concepts.get(w, w)
                h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "big")
                v[h % self.dimensions] += 1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


PKG_CONCEPTS = {w: "package-tooling" for w in
                ("pnpm", "npm", "yarn", "bun", "install", "installs", "dependencies")}


def mem(content: str, *, type_: str = "project", scope: str = "project",
        project: str | None = ACME, minutes: int = 0, session: str = "ses_1") -> Memory:
    """A memory as the pipeline writes it (deterministic id, provenance filled in)."""
    pkey = None if scope == "user" else project
    t = T0 + timedelta(minutes=minutes)
    return Memory(
        id=point_id(scope, pkey, type_, content),  # type: ignore[arg-type]
        content=content,
        type=type_,  # type: ignore[arg-type]
        scope=scope,  # type: ignore[arg-type]
        project_id=pkey,
        project_root=f"/tmp/projects/{pkey}" if pkey else None,
        session_id=session,
        message_ids=["msg_1"],
        source="llm",
        created_at=t,
        updated_at=t,
        session_ids=[session],
        content_hash=content_hash(content),
    )


CODING = [
    mem("The project always uses pnpm as its package manager, never npm.", minutes=1),
    mem("Run the unit tests with `pnpm vitest --run`; CI fails on snapshot drift.", minutes=2),
    mem("The dev database is PostgreSQL 16 on port 5433, started by docker compose.",
        minutes=3),
    mem("Deploys go through GitHub Actions; the prod workflow needs manual approval.",
        type_="reference", minutes=4),
    mem("The user prefers concise answers without emoji.", type_="feedback", scope="user",
        minutes=5),
    mem("The user writes Python with type hints and runs ruff before committing.",
        type_="user", scope="user", minutes=6),
    mem("Feature flags live in config/flags.yaml and are read at startup.", minutes=7),
    mem("The ETL job loads parquet files from s3://acme-raw into DuckDB nightly.",
        project=PIPE, minutes=8),
    mem("Airflow DAGs for the pipeline are in dags/; never edit generated ones.",
        project=PIPE, type_="feedback", minutes=9),
]


# --------------------------------------------------------------------------- fixtures

StoreFactory = Callable[..., MemoryStore]


@pytest.fixture(params=["edge", "server_local"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(backend: str, tmp_path: Path) -> Iterator[StoreFactory]:
    """Open (or reopen) the test's store at a fixed place under tmp_path; closes all."""
    opened: list[MemoryStore] = []
    where = tmp_path / "store"

    def factory(embedder: Embedder | None = None, **kw: Any) -> MemoryStore:
        s: MemoryStore
        if backend == "edge":
            s = EdgeStore(where, embedder=embedder, **kw)
        else:
            s = ServerStore(path=str(where), collection="memories", embedder=embedder, **kw)
        opened.append(s)
        return s

    yield factory
    for s in opened:
        s.close()


@pytest.fixture
def store(open_store: StoreFactory) -> MemoryStore:
    s = open_store()
    s.upsert(CODING)
    return s


def ids(memories: Sequence[Memory]) -> list[str]:
    return [m.id for m in memories]


# --------------------------------------------------------------------------- contract


def test_upsert_then_get_scroll_count(open_store: StoreFactory) -> None:
    s = open_store()
    assert s.count() == 0
    assert list(s.scroll()) == []
    s.upsert(CODING)
    assert s.count() == len(CODING)
    # get: same records back, in the order asked, unknown ids skipped
    ask = [CODING[3].id, "00000000-0000-5000-8000-000000000000", CODING[0].id]
    assert s.get(ask) == [CODING[3], CODING[0]]
    assert s.get([]) == []
    # scroll: everything, ordered by created_at then id
    assert list(s.scroll()) == sorted(CODING, key=lambda m: (m.created_at, m.id))


def test_scroll_orders_ties_by_id_and_pages(open_store: StoreFactory) -> None:
    s = open_store()
    same_time = [mem(f"Fact number {i} about module m{i}.", minutes=0) for i in range(300)]
    earlier = mem("An earlier fact.", minutes=-10)
    s.upsert([*same_time, earlier])
    got = list(s.scroll())
    assert got[0] == earlier
    assert ids(got[1:]) == sorted(m.id for m in same_time)
    assert s.count() == 301


def test_reupsert_same_id_overwrites(store: MemoryStore) -> None:
    m = CODING[0]
    later = T0 + timedelta(days=2)
    changed = Memory(**{**{f: getattr(m, f) for f in m.__slots__},  # type: ignore[attr-defined]
                        "session_ids": ["ses_1", "ses_9"],
                        "message_ids": ["msg_1", "msg_42"],
                        "updated_at": later})
    store.upsert([changed])
    assert store.count() == len(CODING)
    (back,) = store.get([m.id])
    assert back.session_ids == ["ses_1", "ses_9"]
    assert back.message_ids == ["msg_1", "msg_42"]
    assert back.updated_at == later
    assert back.created_at == m.created_at


def test_delete(store: MemoryStore) -> None:
    store.delete([CODING[0].id, CODING[1].id, "00000000-0000-5000-8000-000000000000"])
    assert store.count() == len(CODING) - 2
    assert store.get([CODING[0].id]) == []
    assert all(h.id != CODING[0].id for h, _ in store.search("pnpm package manager"))


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (MemoryFilter(project_id=ACME), [0, 1, 2, 3, 4, 5, 6]),
        (MemoryFilter(project_id=ACME, include_user_scope=False), [0, 1, 2, 3, 6]),
        (MemoryFilter(project_id=PIPE), [4, 5, 7, 8]),
        (MemoryFilter(project_id="unknown-project"), [4, 5]),
        (MemoryFilter(project_id="unknown-project", include_user_scope=False), []),
        (MemoryFilter(scope="user"), [4, 5]),
        (MemoryFilter(scope="project"), [0, 1, 2, 3, 6, 7, 8]),
        (MemoryFilter(types=("feedback",)), [4, 8]),
        (MemoryFilter(types=("feedback", "reference")), [3, 4, 8]),
        (MemoryFilter(project_id=PIPE, types=("feedback",)), [4, 8]),
        (MemoryFilter(project_id=PIPE, scope="project", types=("feedback",)), [8]),
        (MemoryFilter(), list(range(9))),
    ],
)
def test_filters(store: MemoryStore, flt: MemoryFilter, expected: list[int]) -> None:
    want = sorted((CODING[i] for i in expected), key=lambda m: (m.created_at, m.id))
    assert list(store.scroll(flt)) == want
    assert store.count(flt) == len(expected)


def test_filter_validation() -> None:
    with pytest.raises(ValueError, match="scope"):
        MemoryFilter(scope="global")
    with pytest.raises(ValueError, match="type"):
        MemoryFilter(types=("note",))
    assert MemoryFilter(types=["user"]).types == ("user",)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("which package manager?", 0),
        ("how do I run the tests", 1),
        ("what port does the postgres database use", 2),
        ("deploy to production", 3),
        ("where are feature flags configured?", 6),
        ("ruff", 5),
    ],
)
def test_search_ranks_relevant_first(store: MemoryStore, query: str, expected: int) -> None:
    hits = store.search(query, flt=MemoryFilter(project_id=ACME), limit=5)
    assert hits, query
    assert hits[0][0] == CODING[expected]
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_respects_filter_and_limit(store: MemoryStore) -> None:
    # the parquet memory belongs to data-pipeline: invisible from acme-web
    hits = store.search("parquet files DuckDB", flt=MemoryFilter(project_id=ACME))
    assert CODING[7].id not in ids([m for m, _ in hits])
    hits = store.search("parquet files DuckDB", flt=MemoryFilter(project_id=PIPE))
    assert hits[0][0] == CODING[7]
    assert len(store.search("the project", limit=2)) <= 2
    assert store.search("pnpm", limit=0) == []
    # only stopwords: nothing to match without an embedder
    assert store.search("what is it?") == []


def test_reopen_keeps_points(open_store: StoreFactory) -> None:
    s = open_store()
    s.upsert(CODING)
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.count()
    again = open_store()
    assert again.count() == len(CODING)
    assert list(again.scroll()) == sorted(CODING, key=lambda m: (m.created_at, m.id))
    assert again.search("which package manager?")[0][0] == CODING[0]


def test_info(store: MemoryStore, backend: str) -> None:
    info = store.info()
    assert info["backend"] == ("edge" if backend == "edge" else "qdrant")
    assert info["points"] == len(CODING)
    assert info["embedder"] is None
    assert info["bm25"] == BM25_SETTINGS
    assert info["bm25"]["k1"] == 1.2 and info["bm25"]["b"] == 0.75
    assert info["needs_reembed"] is False


def test_invalid_ids_rejected(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="not a UUID"):
        store.get(["not-a-uuid"])
    with pytest.raises(ValueError, match="not a UUID"):
        store.delete(["nope"])


# --------------------------------------------------------------------------- embedders


def test_embedder_mismatch_raises(open_store: StoreFactory) -> None:
    emb = HashEmbedder("test-hash-64", 64)
    s = open_store(emb)
    s.upsert(CODING[:3])
    s.close()

    with pytest.raises(EmbedderMismatchError) as err:
        open_store(None)
    msg = str(err.value)
    assert "'test-hash-64' (64 dimensions)" in msg
    assert "no embedder" in msg
    assert "re-embed" in msg

    with pytest.raises(EmbedderMismatchError, match="'other-model' \\(32 dimensions\\)"):
        open_store(HashEmbedder("other-model", 32))
    with pytest.raises(EmbedderMismatchError, match="'test-hash-64-v2'"):
        open_store(HashEmbedder("test-hash-64-v2", 64))

    # the right embedder still opens it
    assert open_store(HashEmbedder("test-hash-64", 64)).count() == 3


def test_no_embedder_store_refuses_an_embedder(open_store: StoreFactory) -> None:
    open_store(None).close()
    with pytest.raises(EmbedderMismatchError, match="no embedder"):
        open_store(HashEmbedder())


def test_bm25_settings_mismatch_raises(open_store: StoreFactory) -> None:
    open_store(None).close()
    with pytest.raises(EmbedderMismatchError, match="BM25 settings differ"):
        open_store(None, bm25=Bm25Encoder(keep_question_words=True))


def test_hybrid_search(open_store: StoreFactory) -> None:
    emb = HashEmbedder(concepts=PKG_CONCEPTS)
    s = open_store(emb)
    s.upsert(CODING)
    assert s.info()["embedder"] == {"name": emb.name, "dimensions": 64}

    # lexical queries still rank the right memory first
    hits = s.search("which package manager?", flt=MemoryFilter(project_id=ACME))
    assert hits[0][0] == CODING[0]
    # RRF scores: at most first place on both sides
    best = (1 / (1 / SPARSE_WEIGHT + RRF_K - 1)) + 1 / (1 / DENSE_WEIGHT + RRF_K - 1)
    assert 0 < hits[0][1] <= best + 1e-6

    # a paraphrase BM25 cannot match ("yarn"/"install" are not in the memory) is found
    # through the dense side
    query = "should I install with yarn?"
    sparse_only = [m for m, _ in open_sparse_only_search(s, query)]
    assert CODING[0] not in sparse_only
    assert s.search(query, flt=MemoryFilter(project_id=ACME))[0][0] == CODING[0]

    # only stopwords: no BM25 terms, the dense side still answers
    assert s.search("what is it?", flt=MemoryFilter(project_id=ACME))
    # the filter applies to both sides
    pipe_ids = {CODING[7].id, CODING[8].id}
    got = {m.id for m, _ in s.search("yarn pnpm parquet", flt=MemoryFilter(project_id=ACME))}
    assert not got & pipe_ids


def open_sparse_only_search(s: MemoryStore, query: str) -> list[tuple[Memory, float]]:
    """BM25-only ranking of the same data: the query's sparse terms against the memories."""
    q = set(default_encoder().embed_query(query).indices)
    return [(m, 1.0) for m in s.scroll() if q & set(default_encoder().embed_document(
        m.content).indices)]


class AsymmetricEmbedder(HashEmbedder):
    """Embeds a query unlike a document, as e5-style models do: ``zeta`` means ``alpha`` in
    a query but ``beta`` in a document; ``omega`` means ``beta`` in a query."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([t.replace("zeta", "beta") for t in texts])

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([t.replace("zeta", "alpha").replace("omega", "beta")
                              for t in texts])


def test_search_embeds_the_query_as_a_query(open_store: StoreFactory) -> None:
    s = open_store(AsymmetricEmbedder("asym", 64))
    alpha = mem("alpha release notes")
    beta = mem("beta release notes")
    s.upsert([alpha, beta])
    # no BM25 term matches "zeta": the dense side alone decides, through embed_query ...
    assert [m.id for m, _ in s.search("zeta", limit=1)] == [alpha.id]
    # ... or through embed, for a memory-to-memory look-up
    assert [m.id for m, _ in s.search("zeta", limit=1, as_document=True)] == [beta.id]


def test_memories_are_embedded_as_documents(open_store: StoreFactory) -> None:
    s = open_store(AsymmetricEmbedder("asym", 64))
    zeta, beta_delta = mem("zeta"), mem("beta delta")
    s.upsert([zeta, beta_delta])
    # "omega" is "beta" as a query; stored as a document "zeta" is "beta" too (cosine 1),
    # "beta delta" only half (as a query, "zeta" would be "alpha": cosine 0)
    assert [m.id for m, _ in s.search("omega", limit=1)] == [zeta.id]


def test_reembed_rebuilds_vectors(open_store: StoreFactory) -> None:
    s = open_store(None)
    s.upsert(CODING)
    s.close()

    emb = HashEmbedder(concepts=PKG_CONCEPTS)
    s2 = open_store(emb, allow_mismatch=True)
    assert s2.info()["needs_reembed"] is True
    with pytest.raises(EmbedderMismatchError):
        s2.upsert([mem("A new fact about webpack.")])
    # BM25 still serves searches meanwhile
    assert s2.search("which package manager?")[0][0] == CODING[0]

    seen: list[tuple[int, int]] = []
    assert s2.reembed(emb, batch_size=4,
                      progress=lambda done, total: seen.append((done, total))) == len(CODING)
    n = len(CODING)
    assert seen == [(min(i + 4, n), n) for i in range(0, n, 4)]
    assert s2.info()["needs_reembed"] is False
    assert s2.search("should I install with yarn?",
                     flt=MemoryFilter(project_id=ACME))[0][0] == CODING[0]
    s2.close()

    # recorded: the new embedder opens it without allow_mismatch, the old config does not
    s3 = open_store(emb)
    assert s3.count() == len(CODING)
    assert list(s3.scroll()) == sorted(CODING, key=lambda m: (m.created_at, m.id))
    assert s3.info()["embedder"] == {"name": emb.name, "dimensions": 64}
    s3.upsert([mem("A new fact about webpack.", minutes=60)])
    assert s3.count() == len(CODING) + 1
    s3.close()
    with pytest.raises(EmbedderMismatchError):
        open_store(None)

    # and back to another dimension
    small = HashEmbedder("test-hash-16", 16, concepts=PKG_CONCEPTS)
    s4 = open_store(small, allow_mismatch=True)
    assert s4.reembed(small) == len(CODING) + 1
    assert s4.search("which package manager?")[0][0] == CODING[0]
    s4.close()
    s5 = open_store(small)
    assert s5.search("should I install with yarn?",
                     flt=MemoryFilter(project_id=ACME))[0][0] == CODING[0]


def test_interrupted_reembed_is_recorded(open_store: StoreFactory) -> None:
    class Failing(HashEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            raise RuntimeError("endpoint down")

    s = open_store(None)
    s.upsert(CODING)
    s.close()
    bad = Failing("flaky", 64)
    s2 = open_store(bad, allow_mismatch=True)
    with pytest.raises(RuntimeError, match="endpoint down"):
        s2.reembed(bad)
    with pytest.raises(EmbedderMismatchError, match="did not complete"):
        s2.search("which package manager?")
    s2.close()
    with pytest.raises(EmbedderMismatchError, match="interrupted"):
        open_store(None)
    good = HashEmbedder("flaky", 64)
    s3 = open_store(good, allow_mismatch=True)
    assert s3.reembed(good) == len(CODING)
    s3.close()
    assert open_store(good).search("which package manager?")[0][0] == CODING[0]


def test_embedder_wrong_shape_is_store_error(open_store: StoreFactory) -> None:
    class Liar(HashEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [v[:-1] for v in super().embed(texts)]

    s = open_store(Liar("liar", 8))
    with pytest.raises(StoreError, match="7-dimensional"):
        s.upsert(CODING[:1])
    assert s.count() == 0


# --------------------------------------------------------------------------- durability


def _run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_upsert_is_durable_without_close(backend: str, tmp_path: Path) -> None:
    """A process that upserts and dies without closing leaves the points on disk."""
    where = tmp_path / "store"
    opener = (f"EdgeStore({str(where)!r})" if backend == "edge"
              else f"ServerStore(path={str(where)!r})")
    child = _run_child(f"""
        import os
        from datetime import UTC, datetime
        from opencode_memoryd.models import Memory, content_hash, point_id
        from opencode_memoryd.store.edge import EdgeStore
        from opencode_memoryd.store.server import ServerStore
        s = {opener}
        t = datetime(2025, 1, 1, tzinfo=UTC)
        s.upsert([Memory(id=point_id("project", "p", "project", f"fact {{i}}"),
                         content=f"fact {{i}} about durability", type="project",
                         scope="project", project_id="p", project_root=None,
                         session_id="s", message_ids=["m"], source="manual",
                         created_at=t, updated_at=t) for i in range(5)])
        os._exit(0)
    """)
    assert child.returncode == 0, child.stderr
    s = EdgeStore(where) if backend == "edge" else ServerStore(path=str(where))
    try:
        assert s.count() == 5
        assert s.search("durability")
    finally:
        s.close()


@pytest.mark.slow
def test_edge_second_process_gets_store_error(tmp_path: Path) -> None:
    where = tmp_path / "store"
    s = EdgeStore(where)
    try:
        child = _run_child(f"""
            from opencode_memoryd.errors import StoreError
            from opencode_memoryd.store.edge import EdgeStore
            try:
                EdgeStore({str(where)!r})
            except StoreError as e:
                print("STORE_ERROR", e)
        """)
        assert "STORE_ERROR" in child.stdout, child.stderr
        assert str(where) in child.stdout
        assert "another opencode-memoryd process" in child.stdout
    finally:
        s.close()
    # released on close
    EdgeStore(where).close()


def test_edge_same_process_second_open_is_store_error(tmp_path: Path) -> None:
    s = EdgeStore(tmp_path / "store")
    try:
        with pytest.raises(StoreError, match="in use"):
            EdgeStore(tmp_path / "store")
    finally:
        s.close()


def test_edge_metadata_file(tmp_path: Path) -> None:
    import json

    EdgeStore(tmp_path / "store", embedder=HashEmbedder()).close()
    meta = json.loads((tmp_path / "store" / "store.json").read_text())
    assert meta["schema_version"] == 1
    assert meta["embedder"] == {"name": "test-hash-64", "dimensions": 64}
    assert meta["bm25"] == BM25_SETTINGS
    assert not list((tmp_path / "store").glob(".store.json.*"))  # no temp file left

    (tmp_path / "store" / "store.json").unlink()
    with pytest.raises(StoreError, match=r"store\.json is missing"):
        EdgeStore(tmp_path / "store")


def test_server_in_memory_mode() -> None:
    s = ServerStore(location=":memory:", embedder=HashEmbedder(concepts=PKG_CONCEPTS))
    try:
        s.upsert(CODING)
        assert s.count(MemoryFilter(project_id=ACME)) == 7
        assert s.search("which package manager?")[0][0] == CODING[0]
    finally:
        s.close()


def test_server_store_needs_one_location() -> None:
    with pytest.raises(ValueError):
        ServerStore()
    with pytest.raises(ValueError):
        ServerStore("http://localhost:6333", location=":memory:")


def test_rrf_fuse() -> None:
    fused = rrf_fuse([["a", "b", "c"], ["c", "d"]], [1.0, 0.5], k=60)
    got = dict(fused)
    assert got["a"] == pytest.approx(1 / 60)
    assert got["c"] == pytest.approx(1 / 62 + 1 / (1 / 0.5 + 59))
    assert got["d"] == pytest.approx(1 / (2 / 0.5 + 59))
    assert [pid for pid, _ in fused] == ["c", "a", "b", "d"]
    with pytest.raises(ValueError):
        rrf_fuse([["a"]], [1.0, 1.0])


# --------------------------------------------------------------------------- tombstones


def retire(m: Memory, by: Memory, *, run: str = "run_1") -> Memory:
    """``m`` as a dream leaves it: a tombstone pointing at ``by``."""
    return Memory(**{**{f: getattr(m, f) for f in m.__slots__},  # type: ignore[attr-defined]
                     "status": "retired", "superseded_by": by.id,
                     "retired_reason": "duplicate", "retired_by_run": run,
                     "dream_runs": [run]})


def test_payload_roundtrip_of_lineage_fields() -> None:
    m = CODING[0]
    assert m.status == "active" and m.superseded_by is None and m.merged_from == []
    p = m.to_payload()
    # the fields of the first payload version are unchanged
    for key in ("id", "content", "type", "scope", "project_id", "project_root", "session_id",
                "session_ids", "message_ids", "source", "created_at", "updated_at",
                "content_hash"):
        assert key in p
    assert p["status"] == "active" and p["merged_from"] == [] and p["dream_runs"] == []
    t = retire(m, CODING[1])
    t.merged_from = [CODING[2].id]
    assert Memory.from_payload(t.to_payload()) == t
    # a payload written before tombstones existed loads as an active memory
    old = {k: v for k, v in p.items() if k not in ("status", "superseded_by", "retired_reason",
                                                     "retired_by_run", "merged_from",
                                                     "dream_runs")}
    assert Memory.from_payload(old) == m


def test_retired_memories_are_hidden_unless_asked(store: MemoryStore) -> None:
    gone = retire(CODING[0], CODING[1])
    store.upsert([gone])
    acme = MemoryFilter(project_id=ACME)
    # scroll, count and search skip the tombstone, with or without a filter
    assert CODING[0].id not in ids(list(store.scroll()))
    assert CODING[0].id not in ids(list(store.scroll(acme)))
    assert store.count() == len(CODING) - 1
    assert store.count(acme) == 6
    assert store.count(MemoryFilter(types=("project",), scope="project")) == 4
    for flt in (None, acme):
        hits = store.search("which package manager?", flt=flt)
        assert CODING[0].id not in ids([h for h, _ in hits])
    # include_retired shows it, filters still apply
    every = MemoryFilter(include_retired=True)
    assert store.count(every) == len(CODING)
    assert list(store.scroll(every)) == sorted(
        [gone, *CODING[1:]], key=lambda m: (m.created_at, m.id))
    with_acme = MemoryFilter(project_id=ACME, include_retired=True)
    assert store.count(with_acme) == 7
    assert gone in list(store.scroll(with_acme))
    assert store.count(MemoryFilter(project_id=PIPE, include_retired=True)) == 4
    hits = store.search("which package manager?", flt=with_acme)
    assert hits[0][0] == gone
    # get returns tombstones
    assert store.get([CODING[0].id]) == [gone]
    # reactivating it makes it visible again
    store.upsert([CODING[0]])
    assert store.count() == len(CODING)
    assert store.search("which package manager?")[0][0] == CODING[0]


def test_payloads_without_status_count_as_active(backend: str, tmp_path: Path) -> None:
    """Points written by a version without tombstones (no ``status`` key) stay visible."""
    where = tmp_path / "store"
    s: MemoryStore = (EdgeStore(where) if backend == "edge"
                      else ServerStore(path=str(where)))
    try:
        s.upsert(CODING[:3])
        old = [m.to_payload() for m in CODING[:3]]
        for p in old:
            del p["status"]
        # rewrite the raw payloads without the key, as an older version left them
        rows = s._encode(CODING[:3], None)  # type: ignore[attr-defined]
        s._upsert_rows([(pid, payload, sp, d) for (pid, _p, sp, d), payload  # type: ignore
                        in zip(rows, old, strict=True)])
        assert s.count() == 3
        assert len(list(s.scroll(MemoryFilter(project_id=ACME)))) == 3
        assert s.search("which package manager?")[0][0] == CODING[0]
    finally:
        s.close()


def test_reembed_keeps_tombstones(open_store: StoreFactory) -> None:
    s = open_store(None)
    s.upsert(CODING)
    gone = retire(CODING[0], CODING[1])
    s.upsert([gone])
    s.close()
    emb = HashEmbedder(concepts=PKG_CONCEPTS)
    s2 = open_store(emb, allow_mismatch=True)
    assert s2.reembed(emb) == len(CODING)
    assert s2.get([gone.id]) == [gone]
    assert s2.count() == len(CODING) - 1
    hits = s2.search("which package manager?", flt=MemoryFilter(include_retired=True))
    assert gone.id in ids([h for h, _ in hits])
    assert gone.id not in ids([h for h, _ in s2.search("which package manager?")])


def test_count_by_type_is_count_per_type(open_store: StoreFactory) -> None:
    s = open_store()
    assert s.count_by_type() == {}
    s.upsert(CODING)
    user = mem("I prefer short answers.", type_="user", scope="user")
    s.upsert([user])
    types = {m.type for m in [*CODING, user]}
    assert s.count_by_type() == {t: s.count(MemoryFilter(types=(t,))) for t in types}
    for scope in ("project", "user"):
        flt = MemoryFilter(scope=scope)  # type: ignore[arg-type]
        want = {t: n for t in types
                if (n := s.count(MemoryFilter(scope=scope, types=(t,))))}  # type: ignore[arg-type]
        assert s.count_by_type(flt) == want
    assert s.count_by_type(MemoryFilter(scope="user"))["user"] >= 1
