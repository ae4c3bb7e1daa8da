"""A memory a dream merges is valid from the latest statement of its sources: its
``said_at`` is the newest ``said_at`` of the merged memories, in rules and LLM mode."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from opencode_memoryd.dream.dreamer import Dreamer
from opencode_memoryd.models import Memory, point_id
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.edge import EdgeStore
from test_dream import (
    ACME,
    API_1,
    API_2,
    API_MERGED,
    NOW,
    SEED,
    SETTINGS,
    T0,
    TESTS_1,
    TESTS_2,
    TESTS_3,
    chat,
    responder,
)

#: When each was said: days before it was stored, the newest not the last stored.
SAID = {TESTS_1.id: T0 - timedelta(days=9), TESTS_2.id: T0 - timedelta(days=2),
        TESTS_3.id: T0 - timedelta(days=5), API_1.id: T0 - timedelta(days=1),
        API_2.id: T0 - timedelta(days=7)}


def dated(m: Memory) -> Memory:
    return replace(m, said_at=SAID.get(m.id))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "store")
    s.upsert([dated(m) for m in SEED])
    yield s
    s.close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state.db")
    yield db
    db.close()


def test_a_rules_merge_keeps_the_newest_said_at(store: EdgeStore, state: StateDB) -> None:
    res = Dreamer(store, state, clock=lambda: NOW).dream(ACME, trigger="forced")
    assert res.status == "ok" and res.counts["merged"] == 2, res
    (survivor,) = store.get([TESTS_1.id])
    assert survivor.merged_from == [TESTS_2.id, TESTS_3.id]
    assert survivor.said_at == SAID[TESTS_2.id]
    assert survivor.created_at == TESTS_1.created_at  # stored first, said later


def test_an_llm_merge_keeps_the_newest_said_at(store: EdgeStore, state: StateDB) -> None:
    with FakeOpenAI(responder=responder()) as fake:
        dreamer = Dreamer(store, state, planner=chat(fake), settings=SETTINGS,
                          clock=lambda: NOW)
        res = dreamer.dream(ACME, project_root="/tmp/projects/acme-web", trigger="forced")
    assert res.status == "ok", res
    (merged,) = store.get([point_id("project", ACME, "project", API_MERGED)])
    assert merged.content == API_MERGED
    assert merged.said_at == SAID[API_1.id]
    (kept,) = store.get([TESTS_1.id])
    assert kept.said_at == SAID[TESTS_2.id]
