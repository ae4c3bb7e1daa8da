"""Corrections said days after the facts they correct, on databases the genuine OpenCode
1.18.33 wrote in both storage shapes (``opencode-corrections.db``: ``message``/``part``;
``opencode-corrections-v2.db``: ``session_message``; ``tests/fixtures/make_corrections.py``,
scenario ``tests/fixtures/corrections_scenario.py``).

In rules mode and in LLM mode (a scripted model that proposes each fact and names what a
correction replaces), after one backfill: every correction is stored, dated by its
message; the fact it corrects is retired (superseded by it) and shown in no later session's
context block (the ``context`` use case the plugin calls) nor in the top 3 of a natural
search; ``dream --undo`` of the supersede run brings it back. The distractors retire
nothing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, cli, cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from llm_corpus_models import transcript_lines
from opencode_memoryd.models import iso_utc, utc_from_ms

SHAPES = {"message": "opencode-corrections.db", "session_message": "opencode-corrections-v2.db"}
MANIFESTS = {k: json.loads((FIXTURES / f"{v}.manifest.json").read_text())
             for k, v in SHAPES.items()}
SCENARIO = MANIFESTS["message"]
CORRECTIONS = SCENARIO["corrections"]
DISTRACTORS = SCENARIO["distractors"]
FACT_TYPES = ("user", "feedback", "project", "reference")

pytestmark = pytest.mark.slow


#: What the scripted model proposes for each user sentence: (content, scope, replaces).
PROPOSALS: dict[str, tuple[str, str, list[str]]] = {}
for _c in CORRECTIONS:
    PROPOSALS[_c["old"]] = (_c["old_fact"], _c.get("scope", "project"), [])
    PROPOSALS[_c["new"]] = (_c["new_fact"], _c.get("scope", "project"), [_c["term"]])
for _d, _term in zip(DISTRACTORS, ["Docker Compose", "Lodash", "RabbitMQ", "Redis"],
                     strict=True):
    PROPOSALS[_d["old"]] = (_d["old_fact"], "project", [])
    if _d["new_fact"]:
        PROPOSALS[_d["new"]] = (_d["new_fact"], "project", [_term])


def scripted_model(body: dict[str, Any]) -> dict[str, Any]:
    """A model that gives good answers: each user sentence's fact, and for a correction
    what it replaces."""
    memories = []
    for mid, role, text in transcript_lines(body):
        if role != "user" or text not in PROPOSALS:
            continue
        content, scope, replaces = PROPOSALS[text]
        memories.append({"content": content, "type": "user" if scope == "user" else "project",
                         "scope": scope, "section": "conventions", "message_ids": [mid],
                         "replaces": replaces})
    return {"memories": memories, "more": False}


@dataclass
class Backfilled:
    """One backfill of a fixture, kept to be copied into each test's own home."""

    manifest: dict[str, Any]
    db: Path
    home: Path
    config: Path
    requests: list[dict[str, Any]]


_CACHE: dict[tuple[str, str], Backfilled] = {}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corrections")


def _backfill(shape: str, mode: str, cache: Path, home: Path) -> Backfilled:
    where = cache / f"{shape}-{mode}"
    db = where / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / SHAPES[shape], db)
    requests: list[dict[str, Any]] = []
    common = "[summaries]\nsession_summaries = false\nproject_brief = false\n"
    if mode == "rules":
        cfg = write_config(where / "config.toml", common + '[extraction]\nmode = "rules"\n')
        report = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
    else:
        with FakeOpenAI(responder=scripted_model) as fake:
            cfg = write_config(where / "config.toml", common + '[extraction]\nmode = "llm"\n'
                               + llm_section(fake) + "\n")
            report = cli_json("--config", str(cfg), "maintain", "--all", "--db", str(db))
            requests = list(fake.chat_requests)
    assert report["totals"]["failed"] == 0, report
    shutil.copytree(home, where / "home", symlinks=True)
    return Backfilled(MANIFESTS[shape], db, where / "home", cfg, requests)


@pytest.fixture(params=list(SHAPES))
def shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["rules", "llm"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(shape: str, mode: str, cache_dir: Path, isolated_env: dict[str, str]
          ) -> Iterator[Backfilled]:
    """This test's own copy of the store and state after one backfill of ``shape`` in
    ``mode`` (the backfill runs once per module)."""
    home = Path(isolated_env["HOME"])
    key = (shape, mode)
    if key not in _CACHE:
        _CACHE[key] = _backfill(shape, mode, cache_dir, home)
    done = _CACHE[key]
    shutil.rmtree(home)
    shutil.copytree(done.home, home, symlinks=True)
    yield done


def run(b: Backfilled, *args: str) -> Any:
    return cli_json("--config", str(b.config), *args)


def project(b: Backfilled, name: str) -> dict[str, Any]:
    return next(p for p in b.manifest["projects"] if p["name"] == name)


def listed(b: Backfilled, name: str | None, *extra: str) -> list[dict[str, Any]]:
    """The facts of project ``name`` (``None``: of the user scope)."""
    where = ["--user"] if name is None else ["--dir", project(b, name)["directory"]]
    rows = run(b, "list", *where, "--db", str(b.db), *extra)
    return [m for m in rows if m["type"] in FACT_TYPES]


def by_message(rows: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    return [m for m in rows if m["message_ids"] == [message_id]]


def later_blocks(b: Backfilled) -> dict[str, str]:
    """The context block of every session said after the corrections, by project name, as
    the plugin asks for it (the session, its folder, its first turn)."""
    out = {}
    for s in b.manifest["sessions"]:
        if s["key"].endswith("-later"):
            block = run(b, "context", "--dir", s["directory"], "--session", s["id"],
                        "--query", s["turns"][0]["text"])
            out[s["project"]] = str(block["text"])
    return out


def message_time(b: Backfilled, message_id: str) -> str:
    turn = next(t for s in b.manifest["sessions"] for t in s["turns"]
                if t["message_id"] == message_id)
    return iso_utc(utc_from_ms(int(turn["time_created"])))


def test_the_fixtures_hold_every_phrasing_across_days() -> None:
    for manifest in MANIFESTS.values():
        assert manifest["opencode_version"] == "1.18.33"
        days = {s["key"]: s["day"] for s in manifest["sessions"]}
        assert len({c["phrasing"] for c in manifest["corrections"]}) >= 8
        assert {c.get("scope", "project") for c in manifest["corrections"]} == {"project",
                                                                               "user"}
        assert len({c["project"] for c in manifest["corrections"]}) == 3
        for c in manifest["corrections"]:  # the correction said days after the fact
            times = {t["message_id"]: t["time_created"] for s in manifest["sessions"]
                     for t in s["turns"]}
            assert times[c["new_message_id"]] - times[c["old_message_id"]] > 2 * 86_400_000
        assert max(days.values()) > min(days.values()) + 4
    assert MANIFESTS["session_message"]["stored_in"] == "session_message"


@pytest.mark.parametrize("item", CORRECTIONS, ids=[c["phrasing"] for c in CORRECTIONS])
def test_a_correction_said_days_later_retires_what_it_corrects(
        store: Backfilled, mode: str, item: dict[str, Any]) -> None:
    item = next(c for c in store.manifest["corrections"] if c["phrasing"] == item["phrasing"])
    name = item["project"]
    scope = None if item.get("scope") == "user" else name
    rows = listed(store, scope, "--all")
    new = by_message(rows, item["new_message_id"])
    old = by_message(rows, item["old_message_id"])
    assert [m["content"] for m in new] == [item["new_fact"]], rows  # stored, once
    assert [m["status"] for m in new] == ["active"]
    assert new[0]["said_at"] == message_time(store, item["new_message_id"])
    assert new[0]["scope"] == item.get("scope", "project")
    assert [m["content"] for m in old] == [item["old_fact"]], rows
    tomb = old[0]
    assert tomb["status"] == "retired" and tomb["superseded_by"] == new[0]["id"]
    assert item["term"].split()[0] in tomb["retired_reason"]
    assert tomb["id"] not in {m["id"] for m in listed(store, scope)}
    for proj, text in later_blocks(store).items():
        assert item["old_fact"] not in text, (proj, text)
        if proj == name or item.get("scope") == "user":
            assert item["new_fact"] in text, (proj, text)
    hits = run(store, "search", item["query"], "--dir", project(store, name)["directory"],
               "--db", str(store.db), "--limit", "3")
    assert tomb["id"] not in {h["id"] for h in hits}
    # undo of the supersede run brings the fact back, the correction stays
    code, out = cli("--config", str(store.config), "dream", "--undo", tomb["retired_by_run"])
    assert code == 0, out
    active = {m["id"] for m in listed(store, scope)}
    assert {tomb["id"], new[0]["id"]} <= active
    if mode == "llm":  # the model was asked for what each proposal replaces
        schema = store.requests[-1]["response_format"]["json_schema"]["schema"]
        assert "replaces" in schema["properties"]["memories"]["items"]["required"]


@pytest.mark.parametrize("item", DISTRACTORS, ids=[d["kind"] for d in DISTRACTORS])
def test_a_distractor_retires_nothing(store: Backfilled, item: dict[str, Any]) -> None:
    item = next(d for d in store.manifest["distractors"] if d["kind"] == item["kind"])
    rows = listed(store, item["project"], "--all")
    old = by_message(rows, item["old_message_id"])
    assert [(m["content"], m["status"]) for m in old] == [(item["old_fact"], "active")]
    said_in = item.get("said_in", item["project"])
    new = by_message(listed(store, said_in, "--all"), item["new_message_id"])
    assert [m["content"] for m in new] == ([item["new_fact"]] if item["new_fact"] else [])
    assert item["old_fact"] in later_blocks(store)[item["project"]]


def test_no_later_block_shows_a_superseded_fact(store: Backfilled) -> None:
    retired = {m["content"] for name in [None, *(p["name"] for p in store.manifest["projects"])]
               for m in listed(store, name, "--all") if m["status"] == "retired"}
    assert retired == {c["old_fact"] for c in CORRECTIONS}
    for proj, text in later_blocks(store).items():
        assert not [r for r in retired if r in text], proj
