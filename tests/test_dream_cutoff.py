"""A dream plan cut off at the output token cap is not a settled group: it is asked again
with a larger cap, then planned as smaller groups (real EdgeStore, real state file, the
fake OpenAI server honouring ``max_tokens``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI
from opencode_memoryd.dream.dreamer import Dreamer
from opencode_memoryd.dream.grouping import group_signature
from opencode_memoryd.dream.model import DreamSettings
from opencode_memoryd.dream.planning import plan_token_cap
from opencode_memoryd.llm.chat import ChatClient
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.edge import EdgeStore

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
PROJECT = "lint-rules"
KEY = f"project:{PROJECT}"
TEXTS = [
    "Run the linter with `make lint` before every commit.",
    "Run the linter with `make lint` before each commit.",
    "Always run the linter with `make lint` before every commit.",
    "Run the linter with `make lint` before every single commit.",
]


def mem(i: int, text: str) -> Memory:
    t = T0 + timedelta(minutes=i)
    return Memory(id=point_id("project", PROJECT, "feedback", text), content=text,
                  type="feedback", scope="project", project_id=PROJECT,
                  project_root=f"/tmp/projects/{PROJECT}", session_id="ses_1",
                  message_ids=[f"msg_{i}"], source="llm", created_at=t, updated_at=t,
                  session_ids=["ses_1"], content_hash=content_hash(text))


MEMS = [mem(i, t) for i, t in enumerate(TEXTS)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "store")
    s.upsert(MEMS)
    yield s
    s.close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state.db")
    yield db
    db.close()


def ids_in(body: dict[str, Any]) -> list[str]:
    user = body["messages"][1]["content"]
    return [m.id for m in MEMS if f"[{m.id}]" in user]


def keep(ids: list[str], reason: str = "distinct enough") -> dict[str, Any]:
    return {"operations": [{"op": "keep", "memory_ids": ids, "new_content": None,
                            "superseded_ids": [], "reason": reason}]}


def rambler(max_members: int) -> Any:
    """A model whose plan of a group bigger than ``max_members`` never fits the cap."""
    return lambda body: keep(ids_in(body), "so " * 20000 if len(ids_in(body)) > max_members
                             else "distinct enough")


def dreamer(store: EdgeStore, state: StateDB, fake: FakeOpenAI, cap: int = 0) -> Dreamer:
    planner = ChatClient(base_url=fake.base_url, api_key=None, model="m", max_retries=0)
    return Dreamer(store, state, planner=planner,
                   settings=DreamSettings(max_output_tokens=cap, max_retire_share=1.0))


def test_a_plan_is_capped_to_the_group(store: EdgeStore, state: StateDB) -> None:
    with FakeOpenAI(responder=lambda body: keep(ids_in(body))) as fake:
        res = dreamer(store, state, fake).dream(PROJECT)
        assert res.status == "ok" and res.counts["groups"] == 1
        (body,) = fake.chat_requests
        assert body["max_tokens"] == plan_token_cap(4, 300) == 64 + 4 * (100 + 60)


def test_a_cut_off_plan_is_asked_again_with_twice_the_cap_then_halved(
        store: EdgeStore, state: StateDB) -> None:
    with FakeOpenAI(responder=rambler(max_members=2)) as fake:
        res = dreamer(store, state, fake, cap=200).dream(PROJECT)
        assert res.status == "ok", res.reason
        sizes = [(len(ids_in(b)), b["max_tokens"]) for b in fake.chat_requests]
        assert sizes == [(4, 200), (4, 400), (2, 200), (2, 200)]
        # both halves were planned (kept whole): the whole group is settled too
        settled = state.runs.dream_settled(KEY)
        assert group_signature(MEMS) in settled
        assert group_signature(MEMS[:2]) in settled and group_signature(MEMS[2:]) in settled
        assert res.tokens_out >= 200 + 400
        # the next dream plans nothing
        res = dreamer(store, state, fake, cap=200).dream(PROJECT)
        assert res.status == "skipped" and len(fake.chat_requests) == 4


def test_a_group_too_small_to_halve_is_not_settled_when_its_plan_is_cut_off(
        store: EdgeStore, state: StateDB, tmp_path: Path) -> None:
    small = EdgeStore(tmp_path / "small")
    try:
        small.upsert(MEMS[:3])
        with FakeOpenAI(responder=rambler(max_members=0)) as fake:
            res = dreamer(small, state, fake, cap=150).dream(PROJECT)
            assert [b["max_tokens"] for b in fake.chat_requests] == [150, 300]
            (rejected,) = res.rejected
            assert rejected["reason"].startswith("plan cut off")
            assert state.runs.dream_settled(KEY) == set()
            # a model that fits: the group is planned again by the next dream
            fake.responder = lambda body: keep(ids_in(body))
            res = dreamer(small, state, fake, cap=150).dream(PROJECT)
            assert res.status == "ok" and res.rejected == []
            assert len(fake.chat_requests) == 3
            assert group_signature(MEMS[:3]) in state.runs.dream_settled(KEY)
    finally:
        small.close()
