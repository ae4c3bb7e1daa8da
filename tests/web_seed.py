"""Seeds for the web page's tests: memories written straight into a store, with a pair of
duplicates that a rules-mode dream collapses (so the journal has a dream to undo)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.store.api import MemoryStore

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
DUPLICATE = "Run the unit tests with `pnpm vitest --run`."
FACTS = (
    "The dev database is PostgreSQL 16 on port 5433.",
    "Feature flags live in config/flags.yaml and are read at startup.",
    "The frontend is built with Vite and React 18.",
)


def memory(content: str, *, key: str | None, root: str | None, minutes: int,
           id_: str | None = None, scope: str = "project", type_: str = "project",
           user_id: str | None = None) -> Memory:
    """A memory as an extractor would have written it (session ``ses_seed``)."""
    t = T0 + timedelta(minutes=minutes)
    return Memory(id=id_ or point_id(scope, key, type_, content),  # type: ignore[arg-type]
                  content=content, type=type_, scope=scope,  # type: ignore[arg-type]
                  project_id=key, project_root=root, session_id="ses_seed",
                  message_ids=[f"msg_seed{minutes}"], source="llm", created_at=t,
                  updated_at=t, session_ids=["ses_seed"], content_hash=content_hash(content),
                  user_id=user_id)


def seed(store: MemoryStore, key: str, root: str, user_id: str) -> dict[str, str]:
    """Write the seed; returns the ids by name (``dup1``, ``dup2``, ``fact0``…, ``user``)."""
    ms = {"dup1": memory(DUPLICATE, key=key, root=root, minutes=1),
          "dup2": memory(DUPLICATE, key=key, root=root, minutes=2,
                         id_=str(uuid.UUID(int=0x5EED, version=4))),
          "user": memory("The user prefers concise answers without emoji.", key=None,
                         root=None, minutes=3, scope="user", type_="feedback",
                         user_id=user_id)}
    for i, text in enumerate(FACTS):
        ms[f"fact{i}"] = memory(text, key=key, root=root, minutes=10 + i)
    store.upsert(list(ms.values()))
    return {name: m.id for name, m in ms.items()}
