"""The whole redaction corpus through LLM-mode extraction: no secret in any artifact.

Every case of ``tests/redaction_corpus.py`` (1,200+ secrets of every kind, passwords in
prose in 18 languages, each in user, assistant and tool text) is appended to a copy of the
real fixture database, a session per kind and a turn per template: the user case as the
user's words, the assistant case as the reply, the tool case as a bash tool's output.
After an LLM-mode `maintain` against the fake OpenAI server (real HTTP on 127.0.0.1) whose
model stores each "remember" line it is sent, no secret may be found in the text sent to
the model, in the stored memory texts, in the store's and the state's files or in the
debug log. The corpus's own recall test (``test_redaction_corpus.py``) measures
``redact`` alone; this one measures what the daemon writes and sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, MANIFEST, cli, cli_json, llm_section, write_config
from fake_openai import FakeOpenAI
from opencode_writer import OpenCodeWriter
from redaction_corpus import CASES, Case
from test_maintain_llm import LINE, user_prompt


def turns_per_kind() -> dict[str, list[tuple[Case, Case, Case]]]:
    """Per kind, ``(user, assistant, tool)`` cases of one template each: every case once."""
    by_role: dict[str, dict[str, list[Case]]] = {}
    for case in CASES:
        by_role.setdefault(case.kind, {}).setdefault(case.role, []).append(case)
    return {kind: list(zip(roles["user"], roles["assistant"], roles["tool"], strict=True))
            for kind, roles in by_role.items()}


def storing_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A model that stores every "remember" line it is sent, word for word."""
    return {"memories": [
        {"content": f"The user said: {text[9:]}", "type": "project", "scope": "project",
         "message_ids": [mid]}
        for mid, role, text in LINE.findall(user_prompt(body))
        if role == "user" and text.startswith("remember")]}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=storing_responder) as f:
        yield f


def _forms(secret: str) -> set[bytes]:
    """The bytes a secret may take in a file: as is, and escaped inside JSON."""
    return {secret.encode(), json.dumps(secret)[1:-1].encode(),
            json.dumps(secret, ensure_ascii=False)[1:-1].encode()}


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1,146 cases through the whole pipeline
def test_every_corpus_secret_is_redacted_in_every_artifact(
        tmp_path: Path, sample_db: Path, fake: FakeOpenAI, isolated_env: dict[str, str]
) -> None:
    config = write_config(tmp_path / "llm.toml", f"""
[opencode]
settle_seconds = 0
[extraction]
mode = "llm"
tool_output_chars = 4000
{llm_section(fake)}
[log]
level = "debug"
""")
    w = OpenCodeWriter(sample_db)
    project = {p["worktree"]: p["project_id"] for p in MANIFEST["projects"]}[ACME]
    secrets: set[str] = set()
    planted = 0
    for kind, kind_turns in turns_per_kind().items():  # a session per kind
        sid = w.new_session(project_id=project, directory=ACME, title=f"Deploy {kind}")
        for user, assistant, tool in kind_turns:
            w.append_turn(sid, f"remember {user.text}", assistant.text,
                          bash="cat deploy/.env", bash_output=tool.text)
            secrets.update(user.secrets + assistant.secrets + tool.secrets)
            planted += 3
    w.close()
    assert planted == len(CASES) and len(secrets) >= 1000

    code, out = cli("--config", str(config), "maintain", "--dir", ACME, "--db",
                    str(sample_db), "--json")
    assert code == 0, out
    sent = json.dumps([r.json for r in fake.requests], ensure_ascii=False).encode()
    assert sent.count(b"remember ") >= len(CASES) // 3  # every user turn reached the model
    stored = cli_json("--config", str(config), "list", "--dir", ACME, "--db",
                      str(sample_db))
    assert len(stored) >= 100
    places: dict[str, bytes] = {"sent to the model": sent, "stdout": out.encode(),
                                "stored memories": json.dumps(stored).encode()}
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME"):  # state file, log, store files
        for f in Path(isolated_env[name]).joinpath("opencode-memoryd").rglob("*"):
            if f.is_file():
                places[str(f)] = f.read_bytes()
    assert any(p.endswith(".log") for p in places)
    leaks = [(where, s[:12]) for s in sorted(secrets) for where, blob in places.items()
             if any(form in blob for form in _forms(s))]
    assert not leaks, leaks[:20]
