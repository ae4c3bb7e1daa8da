"""Whose user scope: the identity, two identities on one shared server store, the filter on
both adapters, dreams of one identity, and the migration of user-scope points written
before identities existed."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, PIPELINE, cli_json
from opencode_memoryd.compose import App
from opencode_memoryd.config.identity import user_identity
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.errors import ConfigError, NotFoundError
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.store.server import ServerStore
from opencode_memoryd.usecases.identity import migrate_user_scope
from opencode_memoryd.usecases.service import Service
from opencode_writer import OpenCodeWriter

KEYS = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
RULES = "[opencode]\nsettle_seconds = 0\n[extraction]\nmode = \"rules\"\n"
TABS = "Remember for all my projects: I use tabs, not spaces."


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mem(content: str, *, scope: str = "user", type_: str = "feedback",
        project: str | None = None, user: str | None = None, minutes: int = 0,
        status: str = "active") -> Memory:
    """A memory as the writer stores it; ``user`` None = written before identities."""
    pkey = project if scope == "project" else None
    t = T0 + timedelta(minutes=minutes)
    return Memory(
        id=point_id(scope, pkey, type_, content, user),  # type: ignore[arg-type]
        content=content, type=type_, scope=scope,  # type: ignore[arg-type]
        project_id=pkey, project_root=ACME if pkey else None, session_id="ses_1",
        message_ids=["msg_1"], source="llm", created_at=t, updated_at=t,
        session_ids=["ses_1"], content_hash=content_hash(content), user_id=user,
        status=status,  # type: ignore[arg-type]
        retired_reason="forgotten" if status == "retired" else None,
    )


# --------------------------------------------------------------------------- identity


def test_identity_is_configured_else_the_git_email_else_the_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "PATH": "/usr/bin:/bin", "LOGNAME": "alice", "USER": "someone-else"}
    assert user_identity("", env) == sha16("alice")  # no e-mail set: LOGNAME, as getpass
    subprocess.run(["git", "config", "--global", "user.email", "Alice@Example.COM"],
                   env=env, check=True)
    assert user_identity("", env) == sha16("alice@example.com")
    assert user_identity("", {**env, "PATH": str(tmp_path / "no-git")}) == sha16("alice")
    assert user_identity("alice-at-work", env) == "alice-at-work"
    cfg = tmp_path / "c.toml"
    cfg.write_text(RULES)
    assert App(config=load_config(cfg, env), env=env).user_id == sha16("alice@example.com")
    cfg.write_text(RULES + '[user]\nid = "alice-at-work"\n')
    assert App(config=load_config(cfg, env), env=env).user_id == "alice-at-work"
    cfg.write_text(RULES + '[user]\nid = "alice at work"\n')
    with pytest.raises(ConfigError, match=r"user\.id"):
        load_config(cfg, env)


# --------------------------------------------------------------------------- the filter


@pytest.fixture(params=["edge", "server_local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s: MemoryStore = (EdgeStore(tmp_path / "store") if request.param == "edge"
                      else ServerStore(path=str(tmp_path / "store")))
    yield s
    s.close()


MIXED = [
    mem("The API lives under /api/v2.", scope="project", type_="project", project="P",
        minutes=1),
    mem("Alice prefers tabs.", user="alice", minutes=2),
    mem("Bob prefers spaces.", user="bob", minutes=3),
    mem("Someone prefers short answers.", minutes=4),  # from before identities
    mem("The ETL runs nightly.", scope="project", type_="project", project="Q", minutes=5),
    mem("Alice once liked emoji.", user="alice", minutes=6, status="retired"),
]


@pytest.mark.parametrize(("flt", "expected"), [
    (MemoryFilter(scope="user", user_id="alice"), [1]),
    (MemoryFilter(scope="user", user_id="alice", include_retired=True), [1, 5]),
    (MemoryFilter(project_id="P", user_id="alice"), [0, 1]),
    (MemoryFilter(project_id="P", include_user_scope=False, user_id="alice"), [0]),
    (MemoryFilter(user_id="bob"), [0, 2, 4]),
    (MemoryFilter(scope="project", user_id="bob"), [0, 4]),
    (MemoryFilter(scope="user"), [1, 2, 3]),
    (MemoryFilter(scope="user", without_user_id=True), [3]),
    (MemoryFilter(project_id="P"), [0, 1, 2, 3]),
])
def test_user_filter_on_both_adapters(store: MemoryStore, flt: MemoryFilter,
                                      expected: list[int]) -> None:
    store.upsert(MIXED)
    assert [m.id for m in store.scroll(flt)] == [MIXED[i].id for i in expected]
    assert store.count(flt) == len(expected)


def test_user_filter_applies_to_search(store: MemoryStore) -> None:
    store.upsert(MIXED)
    hits = store.search("prefers tabs spaces answers", flt=MemoryFilter(user_id="alice"))
    assert {m.id for m, _ in hits} == {MIXED[1].id}
    with pytest.raises(ValueError, match="empty"):
        MemoryFilter(user_id="")
    with pytest.raises(ValueError, match="exclude"):
        MemoryFilter(user_id="a", without_user_id=True)


# --------------------------------------------------------------------------- one server


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[MemoryStore, Service, Service]]:
    """One Qdrant store (qdrant-client local mode standing in for a shared server) used by
    two people, each with their own config and state file."""
    store = ServerStore(location=":memory:", collection="team")
    services: list[Service] = []
    for name in ("alice", "bob"):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(RULES + f'[user]\nid = "{name}"\n')
        env = {"HOME": str(tmp_path / name), "PATH": "/usr/bin:/bin",
               "XDG_STATE_HOME": str(tmp_path / name / "state")}
        app = App(config=load_config(cfg, env), env=env)
        services.append(Service(app, app.open_state(), store))
    yield store, services[0], services[1]
    for s in services:
        s.state.close()
    store.close()


def contents(ms: Sequence[dict[str, Any]]) -> list[str]:
    return sorted(m["content"] for m in ms)


def test_two_identities_on_one_server_store(shared: tuple[MemoryStore, Service, Service],
                                            sample_db: Path) -> None:
    store, alice, bob = shared
    w = OpenCodeWriter(sample_db)
    w.append_turn("ses_dfec3906affe7mNz9acnHRC1kP", TABS, "OK.")
    w.close()
    for who in (alice, bob):
        assert who.maintain(directory=None, db=str(sample_db))["failed"] == 0
    # the same facts: project memories are one point each, shared
    project = list(store.scroll(MemoryFilter(scope="project")))
    assert project and len({m.content for m in project}) == len(project)
    assert alice.list(directory=ACME, db=str(sample_db)) == \
        bob.list(directory=ACME, db=str(sample_db))
    # the user directive: one point per person, each seeing only their own
    a_user, b_user = alice.list(user=True), bob.list(user=True)
    assert [m["user_id"] for m in a_user] == ["alice"]
    assert [m["user_id"] for m in b_user] == ["bob"]
    assert a_user[0]["content"] == b_user[0]["content"] and a_user[0]["id"] != b_user[0]["id"]
    assert store.count(MemoryFilter(scope="user")) == 2
    # manual memories: the same text twice is two people's two memories
    a_add = alice.add(content="I like dark mode.", type="user", scope="user")
    b_add = bob.add(content="I like dark mode.", type="user", scope="user")
    assert a_add["status"] == b_add["status"] == "added"
    assert a_add["memory"]["id"] != b_add["memory"]["id"]
    p_add = bob.add(content="Staging deploys need a green CI run.", type="feedback",
                    scope="project", directory=PIPELINE, db=str(sample_db))
    assert alice.add(content="Staging deploys need a green CI run.", type="feedback",
                     scope="project", directory=PIPELINE,
                     db=str(sample_db))["status"] == "duplicate"
    # every read: list, search, profile, status
    for me, other in ((alice, bob), (bob, alice)):
        mine = {m["id"] for m in me.list(user=True)}
        theirs = {m["id"] for m in other.list(user=True)}
        assert not mine & theirs
        everything = {m["id"] for m in me.list()}
        assert mine <= everything and not theirs & everything
        hits = me.search(query="dark mode tabs spaces", directory=ACME, db=str(sample_db))
        assert hits and {h["id"] for h in hits} <= mine | {m.id for m in project}
        assert me.profile()["total"] == 2
        assert me.status()["memories"]["user/user"] + \
            me.status()["memories"].get("user/feedback", 0) == 2
        found = {m["id"] for m in me.list(directory=PIPELINE, db=str(sample_db))}
        assert p_add["memory"]["id"] in found
    flt = MemoryFilter(project_id=KEYS[ACME], include_user_scope=True, user_id="alice")
    assert {m.id for m in store.scroll(flt) if m.scope == "user"} == \
        {m["id"] for m in alice.list(user=True)}
    # one person cannot forget another's user-scope memory; a shared project one, yes
    with pytest.raises(NotFoundError):
        bob.forget(memory_id=a_add["memory"]["id"])
    assert bob.show(memory_id=a_add["memory"]["id"]) is None
    assert alice.show(memory_id=a_add["memory"]["id"]) is not None
    assert store.get([a_add["memory"]["id"]])[0].is_active
    assert alice.forget(memory_id=p_add["memory"]["id"])["status"] == "forgotten"
    assert p_add["memory"]["id"] not in {m["id"] for m in bob.list()}


def test_a_user_scope_dream_consolidates_only_its_owner(
        shared: tuple[MemoryStore, Service, Service]) -> None:
    store, alice, bob = shared
    for who in ("alice", "bob"):
        store.upsert([mem("The user prefers concise answers without emoji.", user=who,
                          minutes=1),
                      mem("The user prefers concise answers without any emoji.", user=who,
                          minutes=2, type_="feedback"),
                      *(mem(text, user=who, minutes=3 + i, type_="user") for i, text in
                        enumerate(["The user works in the Europe/Berlin time zone.",
                                   "The user reviews every diff before committing.",
                                   "The user writes Python with type hints."]))])
    bob_before = bob.list(user=True, include_retired=True)
    entry = alice.dream(project_key=None)
    assert entry["status"] == "ok" and entry["counts"]["before"] == 5
    assert entry["counts"]["after"] == 4 and entry["counts"]["merged"] == 1
    assert bob.list(user=True, include_retired=True) == bob_before
    assert len(alice.list(user=True)) == 4
    assert all(m["user_id"] == "alice" for m in alice.list(user=True, include_retired=True))


# --------------------------------------------------------------------------- migration


class CountingStore(ServerStore):
    """A real local-mode store that counts the points written."""

    written = 0

    def upsert(self, memories: Sequence[Memory]) -> None:
        self.written += len(memories)
        super().upsert(memories)


def test_migration_is_batched_idempotent_and_keeps_ids() -> None:
    store = CountingStore(location=":memory:")
    legacy = [mem(f"Preference number {i} of the user.", minutes=i) for i in range(5)]
    tomb = mem("An old preference.", minutes=9, status="retired")
    others = [mem("Bob prefers spaces.", user="bob"),
              mem("The API lives under /api/v2.", scope="project", type_="project",
                  project="P")]
    store.upsert([*legacy, tomb, *others])
    store.written = 0
    assert migrate_user_scope(store, "alice", batch_size=2) == 6
    assert store.written == 6
    after = {m.id: m for m in store.scroll(MemoryFilter(include_retired=True))}
    assert {after[m.id].user_id for m in [*legacy, tomb]} == {"alice"}
    assert after[tomb.id].status == "retired"
    assert after[others[0].id].user_id == "bob" and after[others[1].id].user_id is None
    assert [after[m.id].content for m in legacy] == [m.content for m in legacy]
    assert migrate_user_scope(store, "alice") == 0  # nothing left: no write at all
    assert store.written == 6
    store.close()


def test_old_user_scope_points_become_this_users_on_open(
        config_file: Path, isolated_env: dict[str, str]) -> None:
    env = dict(isolated_env)
    where = store_dir(load_config(config_file, env), env)
    old = mem("The user prefers concise answers without emoji.")
    gone = mem("The user liked long answers.", minutes=1, status="retired")
    shared_fact = mem("The API lives under /api/v2.", scope="project", type_="project",
                      project=KEYS[ACME])
    s = EdgeStore(where)
    s.upsert([old, gone, shared_fact])
    s.close()
    me = App(config=load_config(config_file, env), env=env).user_id
    listed = cli_json("--config", str(config_file), "list", "--user")
    assert [(m["id"], m["user_id"]) for m in listed] == [(old.id, me)]
    everything = {m["id"]: m for m in cli_json("--config", str(config_file), "list",
                                                "--all")}
    assert everything[gone.id]["user_id"] == me and everything[gone.id]["status"] == "retired"
    assert everything[shared_fact.id]["user_id"] is None
    # the same fact added again is the migrated memory (its id predates identities)
    again = cli_json("--config", str(config_file), "add",
                     "The user prefers concise answers without emoji.", "--user",
                     "--type", "feedback")
    assert again["status"] == "duplicate" and again["memory"]["id"] == old.id
    s = EdgeStore(where)
    try:
        assert migrate_user_scope(s, me) == 0
        assert s.count(MemoryFilter(scope="user", include_retired=True)) == 2
    finally:
        s.close()
