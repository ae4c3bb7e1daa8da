"""The context block: sections, budget, priority, determinism, the empty case, sub-agents,
and the daemon's ``GET /v1/context`` that the OpenCode plugin calls."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from conftest import ACME, MANIFEST, cli, cli_json, start_daemon, wait_until, write_config
from opencode_memoryd.compose import DAEMON_INFO_FILE, App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, store_dir
from opencode_memoryd.models import Memory, content_hash, point_id
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.usecases.context import MARKER, SECTIONS, build_context, render, select

ACME_KEY = next(p["project_id"] for p in MANIFEST["projects"] if p["worktree"] == ACME)
SUBAGENT = next(s["id"] for s in MANIFEST["sessions"] if s["kind"] == "subagent")
MAIN = next(s["id"] for s in MANIFEST["sessions"]
            if s["kind"] == "main" and s["project_id"] == ACME_KEY)
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def mem(content: str, *, minutes: int, type_: str = "project", scope: str = "project",
        project: str | None = ACME_KEY) -> Memory:
    pkey = None if scope == "user" else project
    t = T0 + timedelta(minutes=minutes)
    return Memory(
        id=point_id(scope, pkey, type_, content),  # type: ignore[arg-type]
        content=content, type=type_, scope=scope,  # type: ignore[arg-type]
        project_id=pkey, project_root=ACME if pkey else None, session_id="ses_x",
        message_ids=["msg_x"], source="rules", created_at=t, updated_at=t,
        session_ids=["ses_x"], content_hash=content_hash(content))


SEED = [
    mem("The API base path is /api/v2.", minutes=1),
    mem("The frontend is built with Vite and React 18.", minutes=2),
    mem("Deploys go through GitHub Actions.", minutes=3, type_="reference"),
    mem("We always use pnpm, never npm.", minutes=4, type_="feedback"),
    mem("Never commit directly to main.", minutes=5, type_="feedback"),
    mem("I prefer short answers without preamble.", minutes=6, type_="user", scope="user"),
    mem("Other project: uses Go 1.22.", minutes=7, project="other-project"),
]


@pytest.fixture
def cfg(tmp_path: Path, sample_db: Path) -> Path:
    return write_config(tmp_path / "cfg.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
""")


@pytest.fixture
def tight(tmp_path: Path, sample_db: Path) -> Path:
    """A config whose block shows 3 entries: the task's hits are memories it would not
    show anyway."""
    return write_config(tmp_path / "tight.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
[context]
max_entries = 3
""")


def seed(cfg: Path, env: dict[str, str], memories: list[Memory]) -> None:
    store = EdgeStore(store_dir(load_config(cfg, env), env))
    try:
        store.upsert(memories)
    finally:
        store.close()


def context(cfg: Path, *args: str) -> dict[str, object]:
    result: dict[str, object] = cli_json("--config", str(cfg), "context", *args)
    return result


def test_empty_store_gives_no_block(cfg: Path) -> None:
    block = context(cfg, "--dir", ACME)
    assert block["text"] == "" and block["entries"] == 0
    code, out = cli("--config", str(cfg), "context", "--dir", ACME)
    assert code == 0 and out == ""


def test_sections_in_fixed_order_with_dates_and_the_framing_line(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    seed(cfg, isolated_env, SEED)
    text = str(context(cfg, "--dir", ACME)["text"])
    lines = text.splitlines()
    assert lines[0] == MARKER
    assert "never instructions" in lines[2]
    titles = [line[4:] for line in lines if line.startswith("### ")]
    # the seeded memories have no section: opening the store gave them one by the rules
    # (the reference memory goes to "References")
    assert titles == ["Architecture and tech", "Conventions and feedback", "User preferences",
                      "References"]
    order = [title for _, title in SECTIONS]
    assert titles == sorted(titles, key=order.index)
    assert '- 2025-03-01: "We always use pnpm, never npm."' in lines
    assert "I prefer short answers without preamble." in text  # user scope goes everywhere
    assert "Go 1.22" not in text  # another project's memory never does
    # newest first inside a section
    conventions = lines[lines.index("### Conventions and feedback") + 1:]
    assert conventions[0].endswith('Never commit directly to main."')


def test_the_budget_takes_feedback_and_user_preferences_first() -> None:
    facts = [mem(f"Project fact number {i} about the build.", minutes=100 + i)
             for i in range(40)]
    fb = [mem(f"Feedback rule {i}: keep functions small.", minutes=i, type_="feedback")
          for i in range(3)]
    user = [mem("I work in Emacs.", minutes=1, type_="user", scope="user")]
    chosen = select(facts + fb + user, [], max_chars=5000, max_entries=6)
    assert [m.id for m in chosen["conventions"]] == [m.id for m in reversed(fb)]
    assert [m.id for m in chosen["user"]] == [user[0].id]
    assert len(chosen["architecture"]) == 2  # the two newest facts, after them
    assert {m.content for m in chosen["architecture"]} == {facts[-1].content, facts[-2].content}


def test_a_correction_is_a_convention_and_takes_a_place_before_newer_facts(
        tight: Path, isolated_env: dict[str, str]) -> None:
    # the user corrected a fact long ago; since then, more facts than the block holds
    old = mem("We install packages with Yarn.", minutes=1)
    new = mem("We switched from Yarn to pnpm.", minutes=2)
    tomb = replace(old, status="retired", superseded_by=new.id,
                   retired_reason='superseded: "switched from Yarn"')
    forgotten = mem("The cache lives on the NFS share.", minutes=3)
    merged = mem("Builds run on the fast runner.", minutes=4)
    facts = [mem(f"Service {i} is written in Kotlin.", minutes=100 + i) for i in range(6)]
    seed(tight, isolated_env, [tomb, new, *facts,
                               replace(forgotten, status="retired", retired_reason="forgotten"),
                               replace(merged, status="retired", superseded_by=facts[0].id,
                                       retired_reason="duplicate")])
    block = context(tight, "--dir", ACME)
    text = str(block["text"])
    # shown among the conventions, before the architecture's newer facts
    lines = text.splitlines()
    assert lines[lines.index("### Conventions and feedback") + 1] == (
        '- 2025-03-01: "We switched from Yarn to pnpm."')
    assert "We install packages with Yarn." not in text
    # a memory a duplicate was merged into is no correction: the newest facts follow
    sections = block["sections"]
    assert isinstance(sections, dict)
    assert sections["conventions"] == [new.id]
    assert sections["architecture"] == [facts[5].id, facts[4].id]


def test_a_users_correction_comes_first_among_their_preferences(
        tight: Path, isolated_env: dict[str, str]) -> None:
    old = mem("I format Python with Black.", minutes=1, type_="user", scope="user")
    new = mem("I use Ruff instead of Black to format Python.", minutes=2, type_="user",
              scope="user")
    prefs = [mem(f"I like answers with {n} examples.", minutes=100 + i, type_="user",
                 scope="user") for i, n in enumerate(("Go", "Rust", "Zig", "Elm"))]
    seed(tight, isolated_env, [replace(old, status="retired", superseded_by=new.id,
                                       retired_reason="superseded: \"instead of Black\""),
                               new, *prefs])
    block = context(tight, "--dir", ACME)
    assert block["sections"] == {"user": [new.id, prefs[3].id, prefs[2].id]}


def test_the_block_never_passes_its_character_and_entry_budget() -> None:
    facts = [mem("A fact with a long explanation " + "x" * (20 + i), minutes=i)
             for i in range(200)]
    for max_chars, max_entries in ((600, 100), (5000, 30), (20000, 7)):
        chosen = select(facts, [], max_chars=max_chars, max_entries=max_entries)
        text = render(chosen)
        assert len(text) <= max_chars
        assert sum(len(v) for v in chosen.values()) <= max_entries
        assert text.count("\n- ") == sum(len(v) for v in chosen.values())


def test_same_store_same_bytes_whatever_the_insertion_order(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    shuffled = SEED[:]
    random.Random(7).shuffle(shuffled)
    seed(cfg, isolated_env, shuffled)
    first = context(cfg, "--dir", ACME, "--query", "pnpm build")["text"]
    second = context(cfg, "--dir", ACME, "--query", "pnpm build")["text"]
    assert first and first == second
    a = render(select(SEED, [], max_chars=5000, max_entries=30))
    b = render(select(list(reversed(SEED)), [], max_chars=5000, max_entries=30))
    assert a == b


def test_relevant_hits_come_first_and_are_not_repeated(
        tight: Path, isolated_env: dict[str, str]) -> None:
    cfg = tight
    seed(cfg, isolated_env, SEED)
    block = context(cfg, "--dir", ACME, "--query", "which React version does the frontend use")
    text = str(block["text"])
    assert "### Relevant to the task" in text
    relevant = text[text.index("### Relevant to the task"):]
    assert "Vite and React 18" in relevant
    assert text.count("Vite and React 18") == 1


def test_a_known_session_is_searched_for_its_first_message_whatever_query_comes(
        tight: Path, isolated_env: dict[str, str]) -> None:
    # `opencode run --session ID` is a new process whose plugin first sees a later message
    cfg = tight
    seed(cfg, isolated_env, SEED)
    a = context(cfg, "--dir", ACME, "--session", MAIN, "--query", "React and Vite version")
    b = context(cfg, "--dir", ACME, "--session", MAIN, "--query", "GitHub Actions deploys")
    assert a["text"] and a == b
    c = context(cfg, "--dir", ACME, "--query", "React and Vite version")
    d = context(cfg, "--dir", ACME, "--query", "GitHub Actions deploys")
    assert c["sections"]["relevant"] != d["sections"]["relevant"]  # no session: the query


def test_a_subagent_session_gets_nothing(cfg: Path, isolated_env: dict[str, str]) -> None:
    seed(cfg, isolated_env, SEED)
    assert context(cfg, "--dir", ACME, "--session", SUBAGENT)["reason"] == "sub-agent session"
    assert context(cfg, "--dir", ACME, "--session", SUBAGENT)["text"] == ""
    assert context(cfg, "--dir", ACME, "--session", MAIN)["text"]


def test_a_new_folder_of_a_known_project_is_found_by_its_opencode_project_id(
        cfg: Path, isolated_env: dict[str, str]) -> None:
    seed(cfg, isolated_env, SEED)
    assert context(cfg, "--project", ACME_KEY)["project_keys"] == [ACME_KEY]
    assert "pnpm" in str(context(cfg, "--project", ACME_KEY)["text"])
    assert "pnpm" not in str(context(cfg, "--project", "global")["text"])


def _idle(cfg: Path) -> bool:
    """Whether the running daemon has caught up and has no session queued."""
    daemon = cli_json("--config", str(cfg), "status", "--json")["daemon"]
    return bool(daemon and not daemon.get("catching_up") and not daemon.get("pending_count"))


@pytest.mark.slow
def test_the_daemon_serves_the_block_on_get(cfg: Path, isolated_env: dict[str, str]) -> None:
    seed(cfg, isolated_env, SEED)
    proc = start_daemon(cfg, isolated_env)
    try:
        info = state_dir(load_config(cfg, isolated_env), isolated_env) / DAEMON_INFO_FILE
        assert wait_until(info.exists, timeout=60)
        # its first pass over the fixture stores memories: asked before it ends, the block
        # would change between the two requests (as it should after a store write)
        assert wait_until(lambda: _idle(cfg), timeout=60)
        sock = json.loads(info.read_text())["socket"]
        query = urlencode({"directory": ACME, "session": MAIN, "project": ACME_KEY,
                           "worktree": ACME, "query": ""})
        with httpx.Client(transport=httpx.HTTPTransport(uds=sock), trust_env=False) as http:
            r = http.get(f"http://opencode-memoryd/v1/context?{query}", timeout=10)
            again = http.get(f"http://opencode-memoryd/v1/context?{query}", timeout=10)
            sub = http.get("http://opencode-memoryd/v1/context?"
                           + urlencode({"directory": ACME, "session": SUBAGENT}), timeout=10)
        assert r.status_code == 200
        text = r.json()["result"]["text"]
        assert text.startswith(MARKER) and "We always use pnpm, never npm." in text
        assert again.json()["result"]["text"] == text
        assert sub.json()["result"]["text"] == ""
        # the CLI is served by the same daemon and gives the same bytes
        assert context(cfg, "--dir", ACME, "--session", MAIN)["text"] == text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_scroll_cache_serves_until_the_store_is_written(tmp_path: Path) -> None:
    from opencode_memoryd.store.api import MemoryFilter
    from opencode_memoryd.usecases.context import ScrollCache

    store = EdgeStore(tmp_path / "store")
    try:
        store.upsert(SEED[:2])
        cache = ScrollCache(store)
        flt = MemoryFilter(project_id=ACME_KEY, include_user_scope=False)
        first = cache(flt)
        assert [m.id for m in first] == [m.id for m in SEED[:2]]
        assert cache(flt) is first  # served from the cache: nothing was written
        store.upsert([SEED[3]])
        after = cache(flt)
        assert after is not first and SEED[3].id in {m.id for m in after}
        store.delete([SEED[0].id])
        assert SEED[0].id not in {m.id for m in cache(flt)}
    finally:
        store.close()



def test_a_block_asked_before_the_first_message_is_saved_is_the_one_asked_after(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    # the plugin asks in `chat.message`, before OpenCode saves the message; `opencode run
    # "…"` gives the text with a pair of double quotes that the database's reading drops:
    # the session's later requests (other OpenCode processes) must get the same bytes.
    # With the default local model the quotes would move the task's hits.
    cfg = write_config(tmp_path / "local.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
[context]
relevant_entries = 2
max_entries = 3
""", embedding="")
    app = App(config=load_config(cfg, isolated_env), env=isolated_env, config_path=cfg)
    store = app.open_store()
    try:
        store.upsert(SEED)
        before = build_context(app, store, directory=ACME, project=None, session=None,
                               query='"fix the flaky test"')
        after = build_context(app, store, directory=ACME, project=None, session=None,
                              query="fix the flaky test")
    finally:
        store.close()
    assert before.text and before.text == after.text


def test_the_tasks_places_go_to_memories_the_block_would_not_show_anyway(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    # a first message whose best hit is a convention the block shows anyway: the task's one
    # place goes to the next relevant hit, which the block would otherwise leave out
    cfg = write_config(tmp_path / "one.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
[context]
max_entries = 3
relevant_entries = 1
""")
    seed(cfg, isolated_env, SEED)
    plain = context(cfg, "--dir", ACME)
    assert "We always use pnpm" in str(plain["text"]) and "Vite" not in str(plain["text"])
    block = context(cfg, "--dir", ACME, "--query",
                    "we always use pnpm and never npm: which React version?")
    text = str(block["text"])
    assert "Vite and React 18" in text[text.index("### Relevant to the task"):]
    assert text.count("We always use pnpm") == 1
