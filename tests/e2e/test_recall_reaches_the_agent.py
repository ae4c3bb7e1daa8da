"""Per-message recall in the genuine OpenCode: a later user message of a session gets the
memories that match it and that the session's block left out, in a part after the block,
the same bytes in every step of its turn; the block stays the same prefix.

A real ``opencode-memoryd run`` on a seeded store whose block holds two memories
(``[context] max_entries = 2``), wired up with the real ``install-opencode``; the stand-in
model logs every request body.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from opencode_memoryd.models import Memory

from .memoryd_side import Memoryd, memory
from .opencode_sandbox import OpenCodeSandbox
from .stub_model import ModelRequest, call_tool, reply

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


def parts(request: ModelRequest) -> tuple[str | None, str | None]:
    """The context block and the recall part a request's system prompt carries."""
    text = "\n".join(request.system)
    assert text.count(MARKER) <= 1 and text.count(RECALL) <= 1, request.system
    block = recall = None
    if MARKER in text:
        block = text[text.index(MARKER):]
        block = block[: block.index("-->", block.index("context end")) + 3]
    if RECALL in text:
        recall = text[text.index(RECALL):]
        recall = recall[: recall.index("-->", recall.index("recall end")) + 3]
    return block, recall


def test_a_later_message_gets_what_the_block_left_out_in_every_step_of_its_turn(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    sandbox.script("what is the staging database called",
                   call_tool(TOOL, mode="search", query="package manager"),
                   reply("heron-staging."))

    first = sandbox.run("which package manager should I use here")
    second = sandbox.run("what is the staging database called", session=first.session_id)

    assert first.session_id and second.session_id == first.session_id
    turn1, turn2 = first.chat_requests, second.chat_requests
    assert len(turn1) == 1 and len(turn2) == 2  # the second turn: a tool step, then the reply
    block, recall1 = parts(turn1[0])
    assert block is not None and PNPM in block and BRITISH in block
    assert STAGING not in block and PORT not in block
    # every request of the session: the same block, first, then the turn's part
    found = [parts(r) for r in turn2]
    assert [b for b, _ in found] == [block, block]
    recall2 = found[0][1]
    assert recall2 is not None and f'- 2026-01-10: "{STAGING}"' in recall2
    assert found[1][1] == recall2  # byte for byte in the tool step
    # 1.18.33 joins what plugins push into the second system message: the block, then
    # the part; the first turn's system prompt is a prefix of the second's
    assert [len(r.system) for r in turn1 + turn2] == [2, 2, 2]
    assert turn2[0].system[1] == turn2[1].system[1] == f"{block}\n\n{recall2}\n"
    assert turn2[0].system[1].startswith(turn1[0].system[1].rstrip("\n"))
    # nothing the block holds comes again, nor what the first turn's part gave
    for text in (PNPM, BRITISH):
        assert text not in recall2
    if recall1 is not None:
        assert recall1 != recall2
        assert not any(line in recall2 for line in recall1.split("\n") if line.startswith("- "))
    titles = [r for r in sandbox.requests if r.is_title]
    assert titles and all(MARKER not in t and RECALL not in t
                          for r in titles for t in r.system)
