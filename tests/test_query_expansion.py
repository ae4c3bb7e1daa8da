"""Query expansion by category (``store/expansion.py``, ``store/categories.toml``): a
question that names a kind of tool finds the memory that names only the tool, in both
stores and through the product's search over a database the genuine OpenCode wrote, with
the default model and with BM25 alone; a question naming no category is searched exactly as
without expansion."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import ACME, cli_json, write_config
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.bm25 import default_encoder
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.expansion import (
    DENSE_MEMBERS,
    EXPANSION_WEIGHT,
    CategoryLexicon,
    blend,
    default_lexicon,
    expand_query,
)
from opencode_memoryd.store.server import ServerStore
from test_hybrid_fusion import WordEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import natural_queries as nq

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
#: A project's memories: each names a tool, none names the tool's kind.
TEXTS = ["All installs go through pnpm.", "Lint with golangci-lint before pushing.",
         "Secrets come from Doppler.", "Production runs on Fly.io.",
         "The API listens on port 8088.", "Alice reviews the billing changes.",
         "Branch names start with the ticket number.", "Prices are integer cents.",
         "The changelog is written by hand.", "Use tabs in Go files.",
         "The nightly export writes to /var/exports.", "Bob owns the mobile app.",
         *(f"Module {i} keeps its fixtures in testdata/{i} and Carol signs it off."
           for i in range(30))]
#: A question naming a category -> the memory naming only a member of it.
ASKED = {"which package manager do we use?": "All installs go through pnpm.",
         "what static analysis tool runs?": "Lint with golangci-lint before pushing.",
         "where are credentials kept?": "Secrets come from Doppler.",
         "where is the app hosted?": "Production runs on Fly.io."}
#: Questions naming no category.
PLAIN = ["who is Bob?", "what port does the API listen on?", "how are prices stored?",
         "what does Alice look at?", "the", "where does the nightly export go"]


def memory(text: str, n: int) -> Memory:
    t = T0 + timedelta(minutes=n)
    return Memory(id=point_id("project", "p1", "project", text), content=text, type="project",
                  scope="project", project_id="p1", project_root="/tmp/p1", session_id="s",
                  message_ids=["m"], source="rules", created_at=t, updated_at=t,
                  session_ids=["s"], content_hash=content_hash(text))


@pytest.fixture(params=["edge", "server", "edge-bm25", "server-bm25"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    embedder = None if request.param.endswith("bm25") else WordEmbedder()
    s: MemoryStore = (EdgeStore(tmp_path / "edge", embedder=embedder)
                      if request.param.startswith("edge") else
                      ServerStore(path=str(tmp_path / "local"), collection="memories",
                                  embedder=embedder))
    try:
        s.upsert([memory(t, i) for i, t in enumerate(TEXTS)])
        yield s
    finally:
        s.close()


def top(store: MemoryStore, query: str, limit: int = 3) -> list[str]:
    return [m.content for m, _ in store.search(query, flt=MemoryFilter(project_id="p1"),
                                               limit=limit)]


def test_a_question_naming_a_category_finds_a_memory_naming_a_member(
        store: MemoryStore) -> None:
    for question, answer in ASKED.items():
        assert answer in top(store, question), question
    store.query_expansion = False  # type: ignore[attr-defined]
    assert [q for q, a in ASKED.items() if a in top(store, q)] == []


def test_a_question_naming_no_category_is_searched_as_without_expansion(
        store: MemoryStore) -> None:
    flt = MemoryFilter(project_id="p1")
    on = {q: [(m.id, s) for m, s in store.search(q, flt=flt, limit=10)] for q in PLAIN}
    store.query_expansion = False  # type: ignore[attr-defined]
    off = {q: [(m.id, s) for m, s in store.search(q, flt=flt, limit=10)] for q in PLAIN}
    assert on == off
    assert all(default_lexicon().members_for(q) == [] for q in PLAIN)


@pytest.mark.parametrize("provider", ["local", "none"])
def test_the_product_answers_category_questions_over_a_real_opencode_database(
        provider: str) -> None:
    db = nq.ROOT / "tests" / "fixtures" / "opencode-natural.db"
    directory = nq.worktrees(db)["ledger-api"]
    asked = {"which package manager?": "We use pnpm in the ledger-api repo, never npm or yarn.",
             "where are credentials kept?": "Secrets come from Doppler and nobody commits a "
                                            ".env file.",
             "where is the service hosted?": "Production deploys go to Fly.io with "
                                             "`fly deploy` from the release branch."}
    with nq.captured(db, provider) as (svc, copy):
        for question, answer in asked.items():
            hits = svc.search(query=question, directory=directory, db=str(copy), limit=3)
            assert answer in [h["content"] for h in hits], question


class RecordingEmbedder(WordEmbedder):
    """:class:`WordEmbedder` keeping the texts of every ``embed_query`` call."""

    def __init__(self) -> None:
        self.queries: list[list[str]] = []

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.queries.append(list(texts))
        return self.embed(texts)


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_the_model_embeds_the_question_alone_and_each_members_text_once(
        backend: str, tmp_path: Path) -> None:
    emb = RecordingEmbedder()
    s: MemoryStore = (EdgeStore(tmp_path / "edge", embedder=emb) if backend == "edge" else
                      ServerStore(path=str(tmp_path / "local"), collection="memories",
                                  embedder=emb))
    try:
        s.upsert([memory(t, i) for i, t in enumerate(TEXTS)])
        asked = ["which package manager do we use?", "which package managers are allowed?",
                 "who is Bob?"]
        found = [top(s, q) for q in asked]
    finally:
        s.close()
    members = default_lexicon().members_for(asked[0])[:DENSE_MEMBERS]
    assert emb.queries == [[asked[0], ", ".join(members)], [asked[1]], [asked[2]]]
    assert found[0][0] == found[1][0] == "All installs go through pnpm."


def test_the_blended_query_vector_is_a_unit_vector_between_its_parts() -> None:
    assert blend([1.0, 0.0], [0.0, 1.0]) == pytest.approx([2 ** -0.5, 2 ** -0.5])
    assert blend([1.0, 0.0], [0.0, 1.0], weight=0.0) == [1.0, 0.0]
    assert blend([0.6, 0.8], [0.6, 0.8]) == pytest.approx([0.6, 0.8])


def test_search_expansion_false_in_the_config_searches_the_question_s_words_alone(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str]) -> None:
    rules = '[extraction]\nmode = "rules"\n'
    on = write_config(tmp_path / "on.toml", rules)
    off = write_config(tmp_path / "off.toml", rules + "[search]\nexpansion = false\n")
    answer = "We use pnpm for every install."
    for text in (answer, "Tabs in Go files.", "The API listens on port 8088."):
        cli_json("--config", str(on), "add", text, "--dir", ACME, "--db", str(sample_db))

    def found(cfg: Path) -> list[str]:
        return [h["content"] for h in cli_json("--config", str(cfg), "search",
                                               "which package manager?", "--dir", ACME,
                                               "--db", str(sample_db))]

    assert found(on)[:1] == [answer]
    assert answer not in found(off)  # the same store, read without expansion
    assert found(on)[:1] == [answer]


def test_phrases_match_on_word_boundaries_with_plurals_and_verb_endings() -> None:
    lex = default_lexicon()

    def names(q: str) -> set[str]:
        return {c.name for c in lex.named_in(q)}

    assert "linter" in names("Which LINTERS do we run?")
    assert "deploy" in names("how is it deployed?") & names("who is deploying today")
    assert "continuous integration" in names("does CI run on forks?")
    assert names("what did the client say?") == set()  # "ci" inside a word
    assert names("") == set()
    assert "pnpm" in lex.members_for("which package managers are allowed?")


def test_the_lexicon_is_broad() -> None:
    lex = default_lexicon()
    members = {m for c in lex.categories for m in c.members}
    assert len(lex.categories) >= 40 and len(members) >= 500
    for tool in ("pnpm", "poetry", "cargo", "vitest", "pytest", "rspec", "eslint", "ruff",
                 "clippy", "prettier", "github actions", "terraform", "kafka", "sentry"):
        assert tool in members, tool


def test_members_weigh_less_than_the_question_s_words() -> None:
    enc = default_encoder()
    own = enc.embed_query("which package manager")
    vector, text = expand_query(enc, "which package manager")
    assert vector.indices[:len(own.indices)] == own.indices
    assert vector.values[:len(own.values)] == own.values == [1.0] * len(own.values)
    assert set(vector.values[len(own.values):]) == {EXPANSION_WEIGHT} and EXPANSION_WEIGHT < 1
    assert text.startswith("pnpm, npm, yarn")
    assert expand_query(enc, "which package manager", expand=False) == (own, "")


def test_a_malformed_lexicon_is_refused_with_the_category_it_names() -> None:
    with pytest.raises(ValueError, match="category 2"):
        CategoryLexicon.from_toml('[[category]]\nname = "a"\nphrases = ["x"]\nmembers = ["y"]\n'
                                  '[[category]]\nname = "b"\nphrases = "x"\nmembers = ["y"]\n')
    with pytest.raises(ValueError, match="needs at least one phrase"):
        CategoryLexicon.from_toml('[[category]]\nname = "a"\nphrases = []\nmembers = ["y"]\n')


def test_a_long_query_expands_the_first_three_categories_it_names() -> None:
    lex = default_lexicon()
    query = ("fix the CI pipeline: the linter fails, the formatter changed and the database "
             "migrations break the deploy")
    assert len(lex.named_in(query)) > 3
    assert lex.members_for(query) == lex.members_for(
        "fix the CI pipeline: the linter fails, the formatter changed")
    assert "prettier" in lex.members_for(query) and "postgres" not in lex.members_for(query)
