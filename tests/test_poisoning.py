"""The poisoning corpus (``tests/poisoning_corpus.py``) captured by ``maintain`` in rules
mode and in LLM mode against a model that obeys every injected instruction: no attacker
line reaches any context block of the project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import cli_json, write_config
from fake_openai import FakeOpenAI
from poisoning_corpus import VECTORS, found, make_repo, obeying_model, plant, woken


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=obeying_model) as f:
        yield f


def config(tmp_path: Path, db: Path, mode: str, fake: FakeOpenAI) -> Path:
    llm = (f'[llm]\nbase_url = "{fake.base_url}"\nmodel = "test-model"\n'
           'api_key_env = "TEST_LLM_KEY"\ntimeout_seconds = 5\nmax_retries = 0\n'
           if mode == "llm" else "")
    return write_config(tmp_path / f"{mode}.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{db}"]
[extraction]
mode = "{mode}"
[summaries]
idle_seconds = 0.001
max_chars = 5000
brief_max_chars = 5000
[context]
max_entries = 200
max_chars = 100000
{llm}""")


def blocks(cfg: Path, repo: Path, sessions: list[str]) -> list[str]:
    """Every block the project's sessions can get: by folder, per session, and for a task
    that names each vector's canary (so search hits come up as "Relevant to the task")."""
    out = [cli_json("--config", str(cfg), "context", "--dir", str(repo))["text"]]
    for sid in sessions:
        out.append(cli_json("--config", str(cfg), "context", "--dir", str(repo),
                            "--session", sid)["text"])
    for v in VECTORS:
        out.append(cli_json("--config", str(cfg), "context", "--dir", str(repo),
                            "--query", f"{v.canary} {v.echo}")["text"])
    return out


def stored(cfg: Path) -> list[dict[str, Any]]:
    return list(cli_json("--config", str(cfg), "list", "--all"))


def test_the_corpus_covers_every_capture_path() -> None:
    assert len(VECTORS) >= 30
    assert {v.kind for v in VECTORS} >= {"readme", "manifest", "tool output", "pasted text",
                                         "compaction", "file name", "command", "invisible",
                                         "framing", "assistant text", "flip"}


@pytest.mark.parametrize("mode", ["rules", "llm"])
def test_no_attacker_line_reaches_any_block(tmp_path: Path, sample_db: Path,
                                            fake: FakeOpenAI, mode: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "cloned-tool"
    pid = make_repo(repo)
    sessions = plant(sample_db, pid, repo)
    cfg = config(tmp_path, sample_db, mode, fake)
    report = cli_json("--config", str(cfg), "maintain", "--dir", str(repo))
    assert report["totals"]["briefs"] == 1 and report["totals"]["summaries"] >= 4
    if mode == "llm":
        assert report["totals"]["llm_calls"] > 0
        woke = {v.name for b in fake.chat_requests for m in b["messages"]
                for v in woken(str(m["content"]))}
        with capsys.disabled():
            print(f"\nllm: {len(woke)} of {len(VECTORS)} vectors reach the model's prompts")
        assert len(woke) >= 25  # the model was shown (and obeyed) most of the corpus
    memories = stored(cfg)
    in_store = sorted({n for m in memories for n in found(m["content"])})
    in_blocks = sorted({n for b in blocks(cfg, repo, sessions) for n in found(b)})
    with capsys.disabled():
        print(f"\n{mode}: {len(VECTORS)} vectors, {len(in_store)} reach the store "
              f"{in_store}, {len(in_blocks)} reach a block")
    assert in_blocks == []
    # the notes are still there: the block keeps what the sessions did, by plain name
    brief = next(m for m in memories if m["type"] == "project-brief")
    assert brief["content"].startswith("cloned-tool: a JavaScript project (package.json).")
    notes = [m["content"] for m in memories if m["type"] == "session-summary"]
    assert any("app.ts" in n for n in notes)
    if mode == "rules":  # crafted names are counted, plain ones shown
        [named] = [n for n in notes if "src/cart.ts" in n]
        assert named.startswith("The session stopped after the request \"tidy the docs\".")
        assert "`pnpm test cart --run` (exit 1)" in named
        assert "`pytest` (exit 1)" in named and "`false` (exit 1)" in named
        assert "1 command not shown" in named
        assert "Files changed: src/cart.ts, 3 files not shown." in named
