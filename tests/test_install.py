"""`install` and `uninstall [--purge]` in a sandbox HOME: trees before and after, dry runs,
idempotence, the service manager's order, and LLM mode through OpenCode's own provider
(the OpenAI-compatible fake on 127.0.0.1 set up as an OpenCode provider)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLE_DB, cli, cli_json
from fake_openai import FakeOpenAI

NOTES = "/tmp/projects/sample/notes-app"
KEY = "stub-key-not-secret-0123456789"

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def tree(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: folders as None, links as their target, files as their
    bytes and permission bits."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            found[rel] = None
        else:
            found[rel] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return found


def opencode_dir(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "opencode"


def our_config(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "opencode-memoryd" / "config.toml"


def lived_in_home(env: dict[str, str]) -> None:
    """A HOME that already has an OpenCode config with comments, another plugin and a
    unit of someone else's."""
    oc = opencode_dir(env)
    (oc / "plugin").mkdir(parents=True)
    (oc / "opencode.jsonc").write_text('{\n  // mine\n  "theme": "dark",\n}\n')
    (oc / "plugin" / "other.js").write_text("export default {}\n")
    units = Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "other.service").write_text("[Service]\nExecStart=/bin/true\n")


# --------------------------------------------------------------------------------------
# Install, uninstall --purge, dry runs, idempotence
# --------------------------------------------------------------------------------------


def test_install_then_purge_leaves_the_home_as_it_was(isolated_env: dict[str, str]) -> None:
    home = Path(isolated_env["HOME"])
    lived_in_home(isolated_env)
    before = tree(home)
    code, out = cli("install", "--yes")
    assert code == 0, out
    assert our_config(isolated_env).is_file()
    assert stat.S_IMODE(our_config(isolated_env).stat().st_mode) == 0o600
    assert (opencode_dir(isolated_env) / "plugin" / "opencode-memoryd.js").is_file()
    assert '"memoryd"' in (opencode_dir(isolated_env) / "opencode.jsonc").read_text()
    assert (Path(isolated_env["XDG_CONFIG_HOME"]) / "systemd/user/opencode-memoryd.service"
            ).is_file()
    # no systemd user manager in the sandbox: the commands are printed, not run
    assert "systemctl --user enable --now opencode-memoryd.service" in out
    # what the daemon makes as it works: state, log, journal, store
    code, out = cli("add", "we deploy with a blue-green switch", "--user")
    assert code == 0, out
    assert (home / ".local/state/opencode-memoryd").is_dir()
    assert (home / ".local/share/opencode-memoryd/qdrant").is_dir()

    code, out = cli("uninstall", "--purge", "--yes")
    assert code == 0, out
    assert "purge deletes:" in out and str(home / ".local/state/opencode-memoryd") in out
    assert tree(home) == before


def test_dry_runs_write_nothing(isolated_env: dict[str, str]) -> None:
    home = Path(isolated_env["HOME"])
    lived_in_home(isolated_env)
    before = tree(home)
    code, out = cli("install", "--dry-run")
    assert code == 0, out
    assert tree(home) == before
    for path in (our_config(isolated_env), opencode_dir(isolated_env) / "opencode.jsonc",
                 opencode_dir(isolated_env) / "plugin" / "opencode-memoryd.js"):
        assert f"would create: {path}" in out or f"would update: {path}" in out
    assert '+      "command": [' in out  # the diff of the OpenCode config
    assert "dry run: nothing was written" in out

    assert cli("install", "--yes")[0] == 0
    installed = tree(home)
    code, out = cli("uninstall", "--purge", "--dry-run")
    assert code == 0, out
    assert tree(home) == installed
    assert "purge would delete:" in out and str(our_config(isolated_env)) in out


def test_a_second_install_changes_nothing_and_says_so(isolated_env: dict[str, str]) -> None:
    home = Path(isolated_env["HOME"])
    assert cli("install", "--yes")[0] == 0
    first = tree(home)
    code, out = cli("install", "--yes")
    assert code == 0, out
    assert "nothing to change" in out
    assert not re.search(r"^(create|update|remove):", out, re.MULTILINE)
    assert tree(home) == first


def test_install_without_a_terminal_or_yes_refuses_and_writes_nothing(
        isolated_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    home = Path(isolated_env["HOME"])
    before = tree(home)
    code, _ = cli("install")
    assert code == 6
    assert tree(home) == before


def test_install_keeps_the_comments_of_an_existing_config(
        isolated_env: dict[str, str]) -> None:
    path = our_config(isolated_env)
    path.parent.mkdir(parents=True)
    path.write_text('# my notes\n[extraction]\nmode = "llm"  # tried it\n\n'
                    '[log]\nlevel = "debug"\n')
    code, out = cli("install", "--yes", "--mode", "rules")
    assert code == 0, out
    assert path.read_text() == ('# my notes\n[extraction]\nmode = "rules"  # tried it\n\n'
                                '[log]\nlevel = "debug"\n')


# --------------------------------------------------------------------------------------
# The service manager: a stand-in systemctl that records each call and the unit's presence
# --------------------------------------------------------------------------------------

SYSTEMCTL = """#!/bin/sh
if [ -e "$UNIT" ]; then there=present; else there=absent; fi
echo "$* | $there" >> "$CALLS"
case "$*" in *is-enabled*|*is-active*) exit "${STATE_RC:-1}";; esac
exit 0
"""


@pytest.fixture
def systemd(isolated_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The environment of a login whose systemd user manager answers (a stand-in
    ``systemctl`` first on PATH, the manager's socket path present)."""
    bin_dir, run = tmp_path / "bin", tmp_path / "run"
    bin_dir.mkdir()
    (run / "systemd").mkdir(parents=True)
    (run / "systemd" / "private").touch()
    tool = bin_dir / "systemctl"
    tool.write_text(SYSTEMCTL)
    tool.chmod(0o755)
    env = dict(isolated_env, PATH=f"{bin_dir}:{isolated_env['PATH']}",
               XDG_RUNTIME_DIR=str(run), CALLS=str(tmp_path / "calls"),
               UNIT=str(Path(isolated_env["XDG_CONFIG_HOME"])
                        / "systemd/user/opencode-memoryd.service"))
    return env


def calls(env: dict[str, str]) -> list[str]:
    path = Path(env["CALLS"])
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return [line for line in lines if "is-enabled" not in line and "is-active" not in line]


def test_install_enables_and_starts_the_service_once(systemd: dict[str, str]) -> None:
    code, out = cli("install", "--yes", env=systemd)
    assert code == 0, out
    assert calls(systemd) == ["--user daemon-reload | present",
                              "--user enable --now opencode-memoryd.service | present"]
    code, out = cli("install", "--yes", env={**systemd, "STATE_RC": "0"})  # now running
    assert code == 0, out
    assert "nothing to change" in out
    assert calls(systemd) == []


def test_uninstall_service_stops_the_service_before_removing_its_file(
        systemd: dict[str, str]) -> None:
    assert cli("install-service", env=systemd)[0] == 0
    calls(systemd)
    code, out = cli("uninstall-service", env=systemd)
    assert code == 0, out
    assert calls(systemd) == ["--user disable --now opencode-memoryd.service | present",
                              "--user daemon-reload | absent"]
    assert not Path(systemd["UNIT"]).exists()


def test_without_a_manager_uninstall_removes_the_enablement_link(
        isolated_env: dict[str, str]) -> None:
    assert cli("install", "--yes")[0] == 0
    unit = Path(isolated_env["XDG_CONFIG_HOME"]) / "systemd/user/opencode-memoryd.service"
    wants = unit.parent / "default.target.wants"
    wants.mkdir()
    (wants / unit.name).symlink_to(unit)  # what `systemctl --user enable` made
    code, out = cli("uninstall", "--yes")
    assert code == 0, out
    assert not unit.exists() and not wants.exists()
    assert not (Path(isolated_env["XDG_CONFIG_HOME"]) / "systemd").exists()


# --------------------------------------------------------------------------------------
# LLM mode through OpenCode's provider
# --------------------------------------------------------------------------------------


def implicit_fact_responder(body: dict[str, Any]) -> Any:
    """A scripted model: a summary for a summary request; for an extraction, the fact
    implied by "rewrite notes.py to store notes in sqlite" (no trigger phrase)."""
    name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    prompt = "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    if name == "summary":
        return {"summary": "Worked on the notes app."}
    found = re.search(r"^\[(msg_\w+)\] user: rewrite notes\.py to store notes in sqlite",
                      prompt, re.MULTILINE)
    if not found:
        return {"memories": []}
    return {"memories": [{"content": "The notes app keeps its notes in SQLite.",
                          "type": "project", "scope": "project",
                          "message_ids": [found.group(1)]}]}


@pytest.fixture
def provider(isolated_env: dict[str, str]) -> Iterator[FakeOpenAI]:
    """The fake model set up as an OpenCode provider, as the shared fixture tool does: a
    custom OpenAI-compatible ``stub`` whose port comes from ``{env:STUB_LLM_PORT}`` and
    whose key is written in OpenCode's config."""
    with FakeOpenAI(responder=implicit_fact_responder) as fake:
        oc = opencode_dir(isolated_env)
        oc.mkdir(parents=True)
        (oc / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "model": "stub/stub-coder", "small_model": "stub/stub-small",
            "provider": {"stub": {
                "npm": "@ai-sdk/openai-compatible", "name": "Stub",
                "options": {"baseURL": "http://127.0.0.1:{env:STUB_LLM_PORT}/v1",
                            "apiKey": KEY},
                "models": {"stub-coder": {}, "stub-small": {}}}}}, indent=2))
        os.environ["STUB_LLM_PORT"] = fake.base_url.rsplit(":", 1)[1].split("/")[0]
        try:
            yield fake
        finally:
            del os.environ["STUB_LLM_PORT"]


def test_llm_mode_through_opencodes_provider_stores_an_implicit_fact(
        isolated_env: dict[str, str], provider: FakeOpenAI) -> None:
    data = Path(isolated_env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True)
    shutil.copyfile(SAMPLE_DB, data / "opencode.db")
    # the key is OpenCode's: not read without consent
    code, out = cli("install", "--yes", "--mode", "llm")
    assert code == 6 and not our_config(isolated_env).exists()

    code, out = cli("install", "--yes", "--mode", "llm", "--opencode-key")
    assert code == 0, out
    text = our_config(isolated_env).read_text()
    assert KEY not in text
    llm = tomllib.loads(text)["llm"]
    assert (llm["base_url"], llm["model"]) == (provider.base_url, "stub-small")
    assert (llm["api_key_env"], llm["api_key_from"]) == ("", "opencode:stub")
    assert tomllib.loads(text)["extraction"]["mode"] == "llm"
    assert provider.requests[0].path == "/v1/models"  # the endpoint was asked first

    code, out = cli("maintain", "--dir", NOTES)
    assert code == 0, out
    chats = [r for r in provider.requests if r.path == "/v1/chat/completions"]
    keys = {v for r in chats for k, v in r.headers.items() if k.lower() == "authorization"}
    assert chats and keys == {f"Bearer {KEY}"}
    assert {r.json["model"] for r in chats} == {"stub-small"}
    texts = [m["content"] for m in cli_json("list", "--dir", NOTES)]
    assert "The notes app keeps its notes in SQLite." in texts


def test_an_endpoint_that_does_not_answer_leaves_rules_mode(
        isolated_env: dict[str, str], provider: FakeOpenAI) -> None:
    os.environ["STUB_LLM_PORT"] = "9"  # discard: nothing listens
    code, out = cli("install", "--yes", "--mode", "llm", "--opencode-key")
    assert code == 6 and not our_config(isolated_env).exists()
    code, out = cli("install", "--yes", "--opencode-key")
    assert code == 0, out
    assert "extraction: rules" in out and "endpoint unreachable" in out
    assert tomllib.loads(our_config(isolated_env).read_text())["llm"]["base_url"] == ""


def test_on_a_terminal_install_asks_before_reading_opencodes_key(
        isolated_env: dict[str, str], provider: FakeOpenAI,
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    answers = iter(["y", "", ""])  # read OpenCode's key: yes; LLM mode: default; apply: default

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", answer)
    code, out = cli("install")
    assert code == 0, out
    assert "read that key from OpenCode" in asked[0] and asked[0].endswith("[y/N] ")
    assert "LLM mode" in asked[1] and "Apply" in asked[2]
    config = tomllib.loads(our_config(isolated_env).read_text())
    assert config["llm"]["api_key_from"] == "opencode:stub"
    assert config["extraction"]["mode"] == "llm"
    # without consent, nothing of OpenCode's is read: rules mode, and it says why
    our_config(isolated_env).unlink()
    answers = iter(["", ""])
    asked.clear()
    code, out = cli("install")
    assert code == 0, out
    assert len(asked) == 2 and "extraction: rules" in out and "--opencode-key" in out
    assert tomllib.loads(our_config(isolated_env).read_text())["llm"]["api_key_from"] == ""


def test_on_a_terminal_a_rules_config_is_offered_opencodes_model(
        isolated_env: dict[str, str], provider: FakeOpenAI,
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("install", "--yes")[0] == 0  # no --opencode-key: rules mode
    assert tomllib.loads(our_config(isolated_env).read_text())["llm"]["base_url"] == ""
    answers = iter(["y", "y", ""])  # switch: yes; OpenCode's key: yes; apply: default
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    code, out = cli("install")
    assert code == 0, out
    llm = tomllib.loads(our_config(isolated_env).read_text())["llm"]
    assert (llm["base_url"], llm["api_key_from"]) == (provider.base_url, "opencode:stub")


def test_a_key_named_by_a_variable_is_kept_as_its_name(
        isolated_env: dict[str, str], provider: FakeOpenAI) -> None:
    path = opencode_dir(isolated_env) / "opencode.json"
    path.write_text(path.read_text().replace(KEY, "{env:STUB_KEY}"))
    code, out = cli("install", "--yes", env={**os.environ, "STUB_KEY": KEY})
    assert code == 0, out
    text = our_config(isolated_env).read_text()
    assert KEY not in text
    llm = tomllib.loads(text)["llm"]
    assert (llm["api_key_env"], llm["api_key_from"]) == ("STUB_KEY", "")
    keys = {v for k, v in provider.requests[0].headers.items() if k.lower() == "authorization"}
    assert keys == {f"Bearer {KEY}"}
    service_env = Path(isolated_env["XDG_CONFIG_HOME"]) / "opencode-memoryd" / "service.env"
    assert f"put STUB_KEY=... in {service_env}" in out
