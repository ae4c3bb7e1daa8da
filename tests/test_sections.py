"""A section for every memory: the rules' choice, the writer, and the one-time migration of
stores written before sections existed (payload only: no re-extraction, no re-embedding)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import cli_json
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.extract.sections import section_for
from opencode_memoryd.models import SECTIONS, Memory, content_hash, point_id
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.server import ServerStore
from opencode_memoryd.usecases.section_migration import migrate_sections

PY39_FACT = "The data-pipeline service must stay compatible with Python 3.9."

T0 = datetime(2025, 5, 1, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(("type_", "scope", "text", "section"), [
    ("project-brief", "project", "Shop is the order service.", "brief"),
    ("session-summary", "project", "Files changed: a.py.", "progress"),
    ("feedback", "user", "Never use emoji.", "user"),
    ("user", "project", "I maintain the ingest service.", "user"),
    ("feedback", "project", "Squash commits before merging.", "conventions"),
    ("reference", "project", "Deploys go through GitHub Actions.", "reference"),
    ("project", "project", "The runbook is at https://wiki.acme.test/ops.", "reference"),
    ("project", "project", "The API docs live in docs/api.md.", "reference"),
    ("project", "project", "We always use pnpm, never npm.", "conventions"),
    ("project", "project", PY39_FACT, "conventions"),
    ("project", "project", "The Postgres 16 migration is halfway done.", "progress"),
    ("project", "project", "The frontend is built with Vite and React 18.", "architecture"),
    ("project", "project", "Our API base path is /api/v2.", "architecture"),
    # a folder layout: where things of a kind go, a relative path after a placing word
    ("project", "project", "React components live in src/components and use CSS modules.",
     "conventions"),
    ("project", "project", "HTTP handlers go in internal/httpapi, one file per resource.",
     "conventions"),
    ("project", "project", "Airflow DAGs live in dags/ and each file defines one DAG.",
     "conventions"),
    ("project", "project", "The orders API is served under /api/v2/orders.", "architecture"),
    ("project", "project", "The quota module lives in lib/quota/.", "architecture"),
    ("project", "project", "CI runs on ubuntu-latest/arm64 runners.", "architecture"),
])
def test_the_rules_choose_a_section(type_: str, scope: str, text: str, section: str) -> None:
    assert section_for(type_, scope, text) == section
    assert section in SECTIONS


def test_rules_mode_memories_are_written_with_a_section(sample_db: Path,
                                                        config_file: Path) -> None:
    cli_json("--config", str(config_file), "maintain", "--all", "--db", str(sample_db))
    facts = {m["content"]: m["section"] for m in cli_json("--config", str(config_file), "list")
             if m["type"] not in ("session-summary", "project-brief")}
    assert facts == {"We always use pnpm, never npm.": "conventions",
                     "Our API base path is /api/v2.": "architecture",
                     PY39_FACT: "conventions"}
    assert all(m["section"] for m in cli_json("--config", str(config_file), "list"))


def old(content: str, *, type_: str = "project", scope: str = "project", minutes: int = 0,
        user_id: str | None = None) -> Memory:
    """A memory as a store written before sections existed holds it (no section)."""
    pkey = None if scope == "user" else "proj-a"
    t = T0 + timedelta(minutes=minutes)
    return Memory(id=point_id(scope, pkey, type_, content, user_id),  # type: ignore[arg-type]
                  content=content, type=type_, scope=scope,  # type: ignore[arg-type]
                  project_id=pkey, project_root="/srv/a" if pkey else None,
                  session_id="ses_1", message_ids=["msg_1"], source="rules", created_at=t,
                  updated_at=t, session_ids=["ses_1"], content_hash=content_hash(content),
                  user_id=user_id)


OLD = [
    old("We always use pnpm, never npm.", type_="feedback", minutes=1),
    old("The frontend is built with Vite and React 18.", minutes=2),
    old("Deploys go through GitHub Actions.", type_="reference", minutes=3),
    old("I prefer short answers.", type_="user", scope="user", minutes=4, user_id="u-1"),
    old("I write Go at work.", type_="user", scope="user", minutes=5, user_id="u-2"),
]


@pytest.fixture(params=["edge", "server_local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s: MemoryStore = (EdgeStore(tmp_path / "edge") if request.param == "edge"
                      else ServerStore(path=str(tmp_path / "srv"), collection="memories"))
    retired = replace(old("The backend used MySQL.", minutes=6), status="retired",
                      superseded_by=OLD[1].id, retired_reason="superseded")
    s.upsert([*OLD, retired])
    yield s
    s.close()


def payloads(memories: Iterable[Memory]) -> dict[str, dict[str, object]]:
    return {m.id: m.to_payload() for m in memories}


def test_the_migration_sets_sections_once_and_touches_nothing_else(store: MemoryStore) -> None:
    everything = MemoryFilter(include_retired=True)
    before = payloads(store.scroll(everything))
    assert store.count(MemoryFilter(without_section=True, include_retired=True)) == 6
    assert migrate_sections(store, batch_size=2) == 6
    after = payloads(store.scroll(everything))
    assert after.keys() == before.keys()
    for pid, p in after.items():
        assert {k: v for k, v in p.items() if k != "section"} == \
            {k: v for k, v in before[pid].items() if k != "section"}
    got = {p["content"]: p["section"] for p in after.values()}
    assert got == {"We always use pnpm, never npm.": "conventions",
                   "The frontend is built with Vite and React 18.": "architecture",
                   "Deploys go through GitHub Actions.": "reference",
                   "I prefer short answers.": "user", "I write Go at work.": "user",
                   "The backend used MySQL.": "architecture"}
    assert store.count(MemoryFilter(without_section=True, include_retired=True)) == 0
    assert migrate_sections(store) == 0  # idempotent: one count, nothing to do
    # the vectors were left alone: search finds what it found before
    assert [m.content for m, _ in store.search("pnpm npm", limit=1)] == [OLD[0].content]


def test_set_fields_refuses_the_text_and_ignores_unknown_ids(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="content"):
        store.set_fields([OLD[0].id], {"content": "changed"})
    unknown = point_id("project", "nowhere", "project", "never stored")
    store.set_fields([unknown, OLD[0].id], {"section": "progress"})
    assert store.get([unknown]) == []
    assert store.get([OLD[0].id])[0].section == "progress"
    assert store.get([OLD[0].id])[0].content == OLD[0].content


def test_an_old_store_gets_sections_when_a_command_opens_it(
        config_file: Path, isolated_env: dict[str, str]) -> None:
    where = store_dir(load_config(config_file, isolated_env), isolated_env)
    s = EdgeStore(where)
    s.upsert(OLD[:3])
    s.close()
    listed = cli_json("--config", str(config_file), "list")
    assert {m["content"]: m["section"] for m in listed} == {
        "We always use pnpm, never npm.": "conventions",
        "The frontend is built with Vite and React 18.": "architecture",
        "Deploys go through GitHub Actions.": "reference"}
    assert {m["updated_at"] for m in listed} == {
        (T0 + timedelta(minutes=i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for i in (1, 2, 3)}
