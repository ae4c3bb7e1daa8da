"""`opencode-memoryd doctor`: the LLM endpoint (the repository's fake OpenAI server), the
store's embedder, file modes and disk space, each broken (the sandbox:
``doctor_sandbox.py``)."""

from __future__ import annotations

import socket
import stat
import subprocess
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doctor_sandbox import BASELINE, Sandbox, make_sandbox, problems
from fake_openai import FakeOpenAI, Status


@pytest.fixture
def sandbox(tmp_path: Path, isolated_env: dict[str, str],
            monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return make_sandbox(tmp_path, isolated_env, monkeypatch)


# --------------------------------------------------------------------------------------
# The LLM endpoint
# --------------------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _llm_config(sandbox: Sandbox, base_url: str) -> Path:
    return sandbox.config(f'[extraction]\nmode = "llm"\n[llm]\nbase_url = "{base_url}"\n'
                          'model = "fake-model"\napi_key_env = "DOCTOR_TEST_KEY"\n'
                          "timeout_seconds = 5\nmax_retries = 3\n")


def test_llm_endpoint_answering(sandbox: Sandbox, fake: FakeOpenAI,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCTOR_TEST_KEY", "sk-doctor")
    code, checks = sandbox.doctor(_llm_config(sandbox, fake.base_url))
    assert code == 0
    assert problems(checks) == {"daemon": "warn"}
    assert checks["llm-key"]["detail"] == "$DOCTOR_TEST_KEY is set"
    assert "answered in" in checks["llm-endpoint"]["detail"]
    [request] = fake.chat_requests
    assert request["model"] == "fake-model"
    assert fake.requests[0].headers.get("authorization") == "Bearer sk-doctor"


def test_llm_endpoint_refusing_the_key_fails(sandbox: Sandbox, fake: FakeOpenAI,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCTOR_TEST_KEY", "sk-wrong")
    fake.script(Status(401, {"error": {"message": "invalid api key"}}))
    code, checks = sandbox.doctor(_llm_config(sandbox, fake.base_url))
    assert code == 1
    assert problems(checks) == {"daemon": "warn", "llm-endpoint": "fail"}
    assert checks["llm-endpoint"]["detail"].startswith(f"{fake.base_url} (model fake-model): "
                                                       "auth:")
    assert "$DOCTOR_TEST_KEY" in checks["llm-endpoint"]["fix"]
    assert len(fake.chat_requests) == 1  # no retry


def test_llm_key_unset_and_endpoint_refusing_connections(sandbox: Sandbox) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    code, checks = sandbox.doctor(_llm_config(sandbox, url))
    assert code == 1
    assert problems(checks) == {"daemon": "warn", "llm-key": "warn", "llm-endpoint": "fail"}
    assert "export DOCTOR_TEST_KEY" in checks["llm-key"]["fix"]
    assert "connection" in checks["llm-endpoint"]["detail"]
    assert checks["llm-endpoint"]["fix"] == f"start the LLM server, or fix llm.base_url ({url})"


# --------------------------------------------------------------------------------------
# The store, files, disk
# --------------------------------------------------------------------------------------


def test_an_embedder_mismatch_fails_and_changes_nothing(sandbox: Sandbox) -> None:
    meta = (sandbox.store_dir / "store.json").read_bytes()
    cfg = sandbox.config('[extraction]\nmode = "rules"\n[embedding]\nprovider = "openai"\n'
                         'base_url = "http://127.0.0.1:9/v1"\nmodel = "text-embed"\n'
                         "dimensions = 32\n")
    code, checks = sandbox.doctor(cfg)
    assert code == 1
    assert problems(checks) == {**BASELINE, "embedder": "fail"}
    detail = checks["embedder"]["detail"]
    assert "no embedder (BM25 only)" in detail
    assert "embedder 'openai:text-embed' (32 dimensions) is configured" in detail
    assert (sandbox.store_dir / "store.json").read_bytes() == meta


def test_loose_file_modes_warn_with_the_chmod_that_fixes_them(sandbox: Sandbox) -> None:
    state = sandbox.state_dir / "state.db"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(sandbox.store_dir.stat().st_mode) == 0o700
    state.chmod(0o644)
    sandbox.store_dir.chmod(0o755)
    code, checks = sandbox.doctor()
    assert code == 0
    assert problems(checks) == {**BASELINE, "file-modes": "warn"}
    assert f"{state} (0644)" in checks["file-modes"]["detail"]
    fix = checks["file-modes"]["fix"]
    assert fix == f"chmod 700 {sandbox.store_dir} && chmod 600 {state}"
    # doctor looked before opening them; opening them (as any command does) repaired them
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(sandbox.store_dir.stat().st_mode) == 0o700
    assert problems(sandbox.doctor()[1]) == BASELINE
    subprocess.run(fix, shell=True, check=True)  # and the fix it gives is harmless
    assert problems(sandbox.doctor()[1]) == BASELINE


Usage = namedtuple("Usage", "total used free")


@pytest.mark.parametrize(("free_mb", "status", "code"), [(200, "warn", 0), (10, "fail", 1)])
def test_low_disk_space(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, free_mb: int,
                        status: str, code: int) -> None:
    seen: list[str] = []

    def disk_usage(path: Any) -> Usage:
        seen.append(str(path))
        return Usage(10**12, 10**12, free_mb * 1024 * 1024)

    monkeypatch.setattr("shutil.disk_usage", disk_usage)
    got, checks = sandbox.doctor()
    assert got == code
    # below the 64 MiB the embedded store needs to open safely, it is not opened
    store = {"embedder": "skip", "store": "skip"} if free_mb < 64 else {}
    assert problems(checks) == {**BASELINE, **store, "disk-space": status}
    assert f"{free_mb} MB free" in checks["disk-space"]["detail"]
    assert seen[-2:] == [str(sandbox.state_dir), str(sandbox.store_dir)]
