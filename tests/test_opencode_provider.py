"""OpenCode's model as an ``[llm]``: which model, which endpoint, where the key comes from
(read from real files in a sandbox HOME; the endpoint check against the fake on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.compose import App
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.install.opencode_provider import (
    check_endpoint,
    find_provider,
    opencode_api_key,
)


def opencode_config(env: dict[str, str], value: dict[str, Any], name: str = "opencode.json"
                    ) -> None:
    folder = Path(env["XDG_CONFIG_HOME"]) / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(value))


def auth(env: dict[str, str], value: dict[str, Any]) -> None:
    folder = Path(env["XDG_DATA_HOME"]) / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "auth.json").write_text(json.dumps(value))


def test_small_model_wins_and_an_env_reference_is_kept_as_a_name(
        isolated_env: dict[str, str]) -> None:
    opencode_config(isolated_env, {
        "model": "lan/big", "small_model": "lan/small",
        "provider": {"lan": {"npm": "@ai-sdk/openai-compatible",
                             "options": {"baseURL": "http://{env:LAN_HOST}:8080/v1/",
                                         "apiKey": "{env:LAN_KEY}"}}}})
    found = find_provider({**isolated_env, "LAN_HOST": "10.0.0.5"})
    assert (found.provider, found.model, found.source) == ("lan", "small", "small_model")
    assert found.base_url == "http://10.0.0.5:8080/v1"
    assert (found.api_key_env, found.api_key_from, found.needs_consent) == ("LAN_KEY", "", False)


def test_a_builtin_provider_takes_its_known_url_and_variable(
        isolated_env: dict[str, str]) -> None:
    opencode_config(isolated_env, {"model": "openai/gpt-4.1-mini"})
    found = find_provider({**isolated_env, "OPENAI_API_KEY": "sk-test"})
    assert found.usable
    assert (found.base_url, found.api_key_env) == ("https://api.openai.com/v1", "OPENAI_API_KEY")
    # no variable: OpenCode's stored key, with consent
    auth(isolated_env, {"openai": {"type": "api", "key": "sk-stored"}})
    found = find_provider(isolated_env)
    assert found.usable and found.needs_consent and found.api_key_from == "opencode:openai"
    assert "auth.json" in found.key_place
    assert opencode_api_key("opencode:openai", isolated_env) == "sk-stored"


@pytest.mark.parametrize(("config", "stored", "why"), [
    ({}, {}, "neither small_model nor model"),
    ({"model": "gpt-4"}, {}, "not written provider/model"),
    ({"model": "anthropic/claude"}, {}, "endpoint is not known"),
    ({"model": "openai/gpt-4.1"}, {}, "set OPENAI_API_KEY"),
    ({"model": "openai/gpt-4.1"}, {"openai": {"type": "oauth", "access": "x"}}, "OAuth"),
    ({"model": "x/m", "provider": {"x": {"npm": "@ai-sdk/anthropic"}}}, {},
     "does not speak the OpenAI API"),
])
def test_what_cannot_be_used_says_why(isolated_env: dict[str, str], config: dict[str, Any],
                                      stored: dict[str, Any], why: str) -> None:
    opencode_config(isolated_env, config)
    auth(isolated_env, stored)
    found = find_provider(isolated_env)
    assert not found.usable
    assert why in found.problem


def test_jsonc_files_merge_as_opencode_merges_them(isolated_env: dict[str, str]) -> None:
    opencode_config(isolated_env, {"model": "a/one"}, "config.json")
    folder = Path(isolated_env["XDG_CONFIG_HOME"]) / "opencode"
    (folder / "opencode.jsonc").write_text(
        '{\n  // the local model\n  "model": "lm/qwen",\n  "provider": {"lm": {\n'
        '    "npm": "@ai-sdk/openai-compatible",\n'
        '    "options": {"baseURL": "http://127.0.0.1:1234/v1"},\n  }},\n}\n')
    found = find_provider(isolated_env)
    assert (found.provider, found.base_url, found.api_key_env) == (
        "lm", "http://127.0.0.1:1234/v1", "")
    assert found.usable and not found.needs_consent  # a local endpoint without a key


def test_the_daemon_reads_opencodes_key_at_run_time(isolated_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    opencode_config(isolated_env, {"provider": {"p": {"options": {"apiKey": "k-one"}}}})
    cfg = write_config(tmp_path / "c.toml", '[llm]\nbase_url = "http://127.0.0.1:9/v1"\n'
                                            'api_key_from = "opencode:p"\n')
    app = App(config=load_config(cfg, isolated_env), env=isolated_env, config_path=cfg)
    assert app.llm_key() == "k-one"
    opencode_config(isolated_env, {"provider": {"p": {"options": {"apiKey": "k-two"}}}})
    assert app.llm_key() == "k-two"  # read again, never kept


def test_the_endpoint_check_says_what_went_wrong() -> None:
    with FakeOpenAI() as fake:
        assert check_endpoint(fake.base_url, "k") == ""
        assert fake.requests[-1].path == "/v1/models"
    assert "endpoint unreachable" in check_endpoint("http://127.0.0.1:9/v1", None,
                                                    timeout_seconds=2)
