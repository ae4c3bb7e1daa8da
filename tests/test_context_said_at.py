"""The context block orders the entries of a section by when they were said (``said_at``;
``updated_at`` for a memory without it), newest first, and stays the same bytes for the
same store: a fact edited or merged today does not move ahead of one said after it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from conftest import ACME
from opencode_memoryd.usecases.context import render, select
from test_context import T0, cfg, context, mem, seed

__all__ = ["cfg"]  # the fixture, used by name

#: Said 10 days before T0 but merged an hour after it (updated last).
OLD = replace(mem("The API base path is /api/v2.", minutes=60),
              said_at=T0 - timedelta(days=10))
#: Said 2 days before T0, stored a minute after it.
NEW = replace(mem("The frontend is built with Vite and React 18.", minutes=1),
              said_at=T0 - timedelta(days=2))
#: No said_at: ordered by its update, 30 minutes after T0.
UNDATED = mem("The worker queue is backed by Redis streams.", minutes=30)


def test_a_section_shows_the_fact_said_last_first() -> None:
    chosen = select([OLD, NEW, UNDATED], [], max_chars=5000, max_entries=30)
    assert [m.id for m in chosen["architecture"]] == [UNDATED.id, NEW.id, OLD.id]
    text = render(chosen)
    positions = [text.index(m.content) for m in (UNDATED, NEW, OLD)]
    assert positions == sorted(positions)
    assert f"- {(T0 - timedelta(days=10)).date()}:" in text


def test_the_block_of_a_session_is_ordered_by_said_at_and_byte_stable(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    seed(cfg, isolated_env, [OLD, UNDATED, NEW])
    first = str(context(cfg, "--dir", ACME)["text"])
    positions = [first.index(m.content) for m in (UNDATED, NEW, OLD)]
    assert positions == sorted(positions), first
    assert str(context(cfg, "--dir", ACME)["text"]) == first
