"""Per-message recall in the genuine OpenCode: a later user message of a session gets the
memories that match it and that the session's block left out, in a synthetic part of the
message itself, the same bytes in every later request (the first message gets none: the
block answers it); the system prompt (the block) is byte-identical in every request of
the session; the part counts as given once it reached the message, and the capture never
learns from it.

A real ``opencode-memoryd run`` on a seeded store whose block holds two memories
(``[context] max_entries = 2``), wired up with the real ``install-opencode``; the stand-in
model logs every request body.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI
from opencode_memoryd.models import Memory

from .memoryd_side import Memoryd, memory
from .opencode_sandbox import OpenCodeSandbox
from .stub_model import ModelRequest, call_tool, content_text, reply

pytestmark = pytest.mark.slow

MARKER = "<!-- opencode-memoryd context -->"
RECALL = "<!-- opencode-memoryd recall -->"
TOOL = "memoryd_memory"
WHEN = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
PNPM = "Always use pnpm, never npm, in this repository."
BRITISH = "I prefer answers in British English."
STAGING = "The staging database is called heron-staging."
PORT = "The API server listens on port 8787."
# keyword search: the part's bytes do not depend on the model's timing (with the local
# model the part did not reach the request within the plugin's 1.5 s on a 2-core machine)
CONFIG = "[context]\nmax_entries = 2\nrelevant_entries = 1\n[embedding]\nprovider = \"none\"\n"


def seeds(sandbox: OpenCodeSandbox) -> list[Memory]:
    pid, root = sandbox.project_id, sandbox.project
    return [
        memory(PNPM, type_="feedback", project=pid, root=root, when=WHEN),
        memory(BRITISH, type_="user", scope="user", when=WHEN),
        memory(STAGING, type_="reference", project=pid, root=root, when=WHEN),
        memory(PORT, type_="reference", project=pid, root=root, when=WHEN),
    ]


@pytest.fixture
def memoryd(opencode_sandbox: OpenCodeSandbox) -> Iterator[Memoryd]:
    side = Memoryd(opencode_sandbox, CONFIG)
    side.seed(seeds(opencode_sandbox))
    side.start()
    side.install_opencode()
    try:
        yield side
    finally:
        side.close()


def block_of(request: ModelRequest) -> str | None:
    """The context block a request's system prompt carries."""
    text = "\n".join(request.system)
    assert text.count(MARKER) <= 1 and RECALL not in text, request.system
    if MARKER not in text:
        return None
    block = text[text.index(MARKER):]
    return block[: block.index("-->", block.index("context end")) + 3]


def recall_of(message: dict[str, Any]) -> str | None:
    """The recall part a user message of a request body carries."""
    text = content_text(message.get("content"))
    assert text.count(RECALL) <= 1 and MARKER not in text, text
    if RECALL not in text:
        return None
    part = text[text.index(RECALL):]
    return part[: part.index("-->", part.index("recall end")) + 3]


def users(request: ModelRequest) -> list[dict[str, Any]]:
    return [m for m in request.messages if m.get("role") == "user"]


def test_a_later_message_gets_what_the_block_left_out_in_its_own_user_message(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd, tmp_path: Path) -> None:
    sandbox = opencode_sandbox
    sandbox.script("what is the staging database called",
                   call_tool(TOOL, mode="search", query="package manager"),
                   reply("heron-staging."))

    first = sandbox.run("which package manager should I use here")
    second = sandbox.run("what is the staging database called", session=first.session_id)

    assert first.session_id and second.session_id == first.session_id
    turn1, turn2 = first.chat_requests, second.chat_requests
    assert len(turn1) == 1 and len(turn2) == 2  # the second turn: a tool step, then the reply
    block = block_of(turn1[0])
    assert block is not None and PNPM in block and BRITISH in block
    assert STAGING not in block and PORT not in block
    # the system prompt is byte-identical in every request of the session
    assert [r.body["messages"][:2] for r in turn2] == [turn1[0].body["messages"][:2]] * 2
    assert [len(r.system) for r in turn1 + turn2] == [2, 2, 2]
    assert [block_of(r) for r in turn2] == [block, block]
    # the part is in the second user message, after the user's words, and that message
    # is the same in the tool step
    asked = users(turn2[0])
    assert len(asked) == 2 and users(turn2[1]) == asked
    said, added = asked[1]["content"]  # OpenCode quotes a message given on the command line
    assert said["text"] == '"what is the staging database called"'
    recall2 = recall_of(asked[1])
    assert recall2 is not None and added["text"].rstrip("\n") == recall2
    assert recall2 is not None and f'- 2026-01-10: "{STAGING}"' in recall2
    # the first user message is sent as it was in the first turn, without a part: the
    # block answers a session's first message (and the title request gets no part)
    assert asked[0] == users(turn1[0])[0]
    assert recall_of(asked[0]) is None
    # nothing the block holds comes again
    for text in (PNPM, BRITISH):
        assert text not in recall2
    titles = [r for r in sandbox.requests if r.is_title]
    assert titles and all(MARKER not in t and RECALL not in t
                          for r in titles for t in r.system + r.texts("user"))
    # OpenCode keeps the part as a synthetic text part of the message; the daemon counts
    # it as given (the plugin confirmed it) ...
    kept = stored_parts(sandbox, first.session_id)
    ours = [p for p in kept if str(p.get("text", "")).startswith(RECALL)]
    assert ours and all(p.get("synthetic") is True for p in ours)
    assert any(p["text"].rstrip("\n") == recall2 for p in ours)
    assert given_messages(memoryd, first.session_id) == len(ours)
    memoryd.stop()
    # ... and never learns from it: the extraction model gets the user's words, not the part
    with FakeOpenAI() as fake:
        llm = Memoryd(sandbox, mode="llm", name="memoryd-llm", config=f"""
[state]
dir = "{tmp_path / 'llm-state'}"

[qdrant]
path = "{tmp_path / 'llm-store'}"

[llm]
base_url = "{fake.base_url}"
model = "extractor"
max_retries = 0
""")
        llm.cli("maintain", "--dir", str(sandbox.project), "--db", str(sandbox.db_path))
        prompts = json.dumps(fake.chat_requests)
    assert first.session_id in llm.marked_sessions()
    assert "what is the staging database called" in prompts
    for given in (RECALL, "recall end", "Relevant now", STAGING):
        assert given not in prompts, given


def stored_parts(sandbox: OpenCodeSandbox, session: str) -> list[dict[str, Any]]:
    """The text parts of the session's user messages as OpenCode stored them."""
    uri = f"file:{sandbox.db_path}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        rows = db.execute(
            "SELECT p.data FROM part p JOIN message m ON m.id = p.message_id "
            "WHERE p.session_id = ? AND json_extract(m.data, '$.role') = 'user' "
            "ORDER BY p.message_id, p.id", (session,)).fetchall()
    return [d for d in (json.loads(r[0]) for r in rows) if d.get("type") == "text"]


def given_messages(memoryd: Memoryd, session: str) -> int:
    """How many of the session's recall parts the daemon counts as given."""
    uri = f"file:{memoryd.state_dir / 'state.db'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        return int(db.execute("SELECT count(*) FROM recall_parts WHERE session_id = ? "
                              "AND given = 1 AND message_id NOT LIKE 'note:%'",
                              (session,)).fetchone()[0])
