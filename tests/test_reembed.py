"""``reembed``: a store built BM25-only, then opened with an embedder configured, is refused
until ``opencode-memoryd reembed`` rebuilds its vectors from the kept memory texts; a
failure half-way leaves it marked, and the next run finishes it."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, SAMPLE_DB, cli, cli_json, start_daemon, wait_until, write_config
from fake_openai import FakeOpenAI, Hang, Status

RULES = '[extraction]\nmode = "rules"\n'


def dense_config(path: Path, fake: FakeOpenAI, dimensions: int = 0) -> Path:
    """A rules-mode config with the fake's embeddings endpoint (``dimensions``: given, so
    no probe request is made; 0: probed)."""
    return write_config(path, RULES + f"""
[embedding]
provider = "openai"
base_url = "{fake.base_url}"
model = "test-embed"
api_key_env = ""
""" + (f"dimensions = {dimensions}\n" if dimensions else ""))


def memories(cfg: Path) -> dict[str, str]:
    """Every memory (tombstones too): id -> text."""
    return {m["id"]: m["content"] for m in cli_json("--config", str(cfg), "list", "--all")}


def doctor_check(cfg: Path, name: str) -> dict[str, Any]:
    _code, out = cli("--config", str(cfg), "doctor", "--json")
    return next(c for c in json.loads(out)["checks"] if c["name"] == name)


def test_reembed_turns_a_bm25_store_into_a_dense_one_and_keeps_every_memory(
        sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write_config(tmp_path / "rules.toml", RULES)
    cli_json("--config", str(rules), "maintain", "--all", "--db", str(sample_db))
    cli_json("--config", str(rules), "add", "Releases are tagged vX.Y.Z on main.",
             "--dir", ACME, "--db", str(sample_db))
    before = memories(rules)
    assert len(before) > 3
    with FakeOpenAI() as fake:
        dense = dense_config(tmp_path / "dense.toml", fake)
        capsys.readouterr()
        # refused as before, now naming the command that fixes it
        for args in (("status",), ("search", "pnpm")):
            code, _ = cli("--config", str(dense), *args)
            assert code == 1, args
            err = capsys.readouterr().err
            assert "was built with no embedder (BM25 only)" in err
            assert "run `opencode-memoryd reembed`" in err
            assert "allow_mismatch" not in err
            # only the embedder differs: configuring the former one is a way out too
            assert "or configure the embedder it was built with" in err
        check = doctor_check(dense, "embedder")
        assert check["status"] == "fail" and "opencode-memoryd reembed" in check["fix"]

        capsys.readouterr()
        report = cli_json("--config", str(dense), "reembed")
        assert f"re-embedding {len(before)} memories in " in capsys.readouterr().err
        assert report["reembedded"] is True
        assert report["points"] == len(before)
        assert report["from"] == "no embedder (BM25 only)"
        assert report["to"] == "embedder 'openai:test-embed' (32 dimensions)"
        embedded = [t for r in fake.requests_to("/embeddings") for t in r.json["input"]]
        assert set(before.values()) <= set(embedded)

        hits = cli_json("--config", str(dense), "search", "which package manager, npm?",
                        "--limit", "3")
        assert any("pnpm" in h["content"] for h in hits)
        assert memories(dense) == before  # same ids, same texts
        check = doctor_check(dense, "embedder")
        assert check["status"] == "ok" and f"{len(before)} points" in check["detail"]

        # nothing left to do: exit 0, nothing embedded
        asked = len(fake.requests_to("/embeddings"))
        code, out = cli("--config", str(dense), "reembed")
        assert code == 0 and out.startswith("nothing to do: the store already matches")
        again = cli_json("--config", str(dense), "reembed")
        assert again["reembedded"] is False and again["points"] == len(before)
        assert len(fake.requests_to("/embeddings")) - asked <= 2  # the dimension probes
        forced = cli_json("--config", str(dense), "reembed", "--force")
        assert forced["reembedded"] is True and forced["points"] == len(before)

    # and back to BM25 only: the dense vectors go, the memories stay
    code, _ = cli("--config", str(rules), "search", "pnpm")
    assert code == 1
    back = cli_json("--config", str(rules), "reembed")
    assert back["reembedded"] is True and back["to"] == "no embedder (BM25 only)"
    assert memories(rules) == before
    assert any("pnpm" in h["content"]
               for h in cli_json("--config", str(rules), "search", "pnpm"))


def test_reembed_without_a_store_creates_none(tmp_path: Path,
                                              isolated_env: dict[str, str]) -> None:
    rules = write_config(tmp_path / "rules.toml", RULES)
    report = cli_json("--config", str(rules), "reembed")
    assert report["reembedded"] is False and report["points"] == 0
    assert not Path(report["store"]).exists()


def seed_store(cfg: Path, env: dict[str, str], count: int) -> dict[str, str]:
    """Write ``count`` project memories into the embedded store of ``cfg`` (BM25 only)."""
    from opencode_memoryd.config.loader import load_config
    from opencode_memoryd.config.paths import store_dir
    from opencode_memoryd.models import Memory, content_hash, point_id
    from opencode_memoryd.store.edge import EdgeStore

    now = datetime.now(UTC)
    texts = [f"Service {i} listens on port {8000 + i} behind the gateway." for i in range(count)]
    rows = [Memory(id=point_id("project", "p1", "project", t), content=t, type="project",
                   scope="project", project_id="p1", project_root="/srv/p1",
                   session_id="ses_1", message_ids=[f"msg_{i}"], source="rules",
                   created_at=now, updated_at=now, content_hash=content_hash(t))
            for i, t in enumerate(texts)]
    store = EdgeStore(store_dir(load_config(cfg, env), env))
    try:
        store.upsert(rows)
    finally:
        store.close()
    return {m.id: m.content for m in rows}


def test_a_failure_half_way_leaves_the_store_marked_and_the_next_run_finishes_it(
        tmp_path: Path, isolated_env: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    rules = write_config(tmp_path / "rules.toml", RULES)
    before = seed_store(rules, isolated_env, 150)  # three writes of 64
    with FakeOpenAI() as fake:
        dense = dense_config(tmp_path / "dense.toml", fake, dimensions=32)
        # the first batch is embedded, then the endpoint fails (the client retries twice)
        fake.script_embeddings(Hang(0), Status(500), Status(500), Status(500))
        capsys.readouterr()
        code, out = cli("--config", str(dense), "reembed")
        assert code == 1 and out == ""
        err = capsys.readouterr().err
        assert "re-embedding" in err and "failed: the embedder" in err
        assert "run `opencode-memoryd reembed` again" in err
        assert [r.status for r in fake.requests_to("/embeddings")] == [200, 500, 500, 500]

        # still marked: refused under either configuration, doctor says what to do
        for cfg in (dense, rules):
            code, _ = cli("--config", str(cfg), "status")
            assert code == 1
            err = capsys.readouterr().err
            assert "a re-embedding was interrupted" in err
            assert "opencode-memoryd reembed" in err
            assert "configure the embedder it was built with" not in err
        check = doctor_check(dense, "embedder")
        assert check["status"] == "fail" and "opencode-memoryd reembed" in check["fix"]

        # the endpoint is back: the next run finishes it
        report = cli_json("--config", str(dense), "reembed")
        assert report["reembedded"] is True and report["points"] == 150
        assert "did not complete" in report["reason"]
        assert memories(dense) == before
        hits = cli_json("--config", str(dense), "search", "port 8042 gateway", "--limit", "20")
        assert before[hits[0]["id"]].startswith("Service 42 ")
        assert doctor_check(dense, "embedder")["status"] == "ok"


def test_refused_while_another_process_holds_the_store(
        tmp_path: Path, isolated_env: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    from opencode_memoryd.config.loader import load_config
    from opencode_memoryd.config.paths import store_dir
    from opencode_memoryd.store.edge import EdgeStore

    rules = write_config(tmp_path / "rules.toml", RULES)
    seed_store(rules, isolated_env, 3)
    held = EdgeStore(store_dir(load_config(rules, isolated_env), isolated_env))
    try:
        capsys.readouterr()
        code, out = cli("--config", str(rules), "reembed", "--force")
        assert code == 6 and out == ""
        err = capsys.readouterr().err
        assert "holds the memory store" in err and "nothing was changed" in err
        assert "systemctl --user stop opencode-memoryd" in err or "launchctl bootout" in err
    finally:
        held.close()
    assert cli_json("--config", str(rules), "reembed")["reembedded"] is False


def daemon_setup(tmp_path: Path, env: dict[str, str], extra: str = "") -> Path:
    """A daemon config (rules, fast timings) over a copy of the sample database."""
    data = Path(env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True, exist_ok=True)
    (data / "opencode.db").write_bytes(SAMPLE_DB.read_bytes())
    return write_config(tmp_path / "daemon.toml", RULES + """
[daemon]
quiet_period_seconds = 0.3
sweep_interval_seconds = 5
poll_interval_seconds = 0.2
""" + extra)


def test_a_running_daemon_is_not_re_embedded_under_it(
        tmp_path: Path, isolated_env: dict[str, str], state_db: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = daemon_setup(tmp_path, isolated_env)
    proc = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: (state_db.parent / "daemon.json").exists())
        capsys.readouterr()
        code, out = cli("--config", str(cfg), "reembed")
        assert code == 6 and out == ""
        err = capsys.readouterr().err
        assert f"the opencode-memoryd daemon is running (pid {proc.pid})" in err
        assert "Stop the daemon first" in err and "then start it again" in err
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert cli_json("--config", str(cfg), "reembed")["reembedded"] is False


def test_the_daemon_exits_78_on_a_store_built_for_another_embedder(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    seed_store(daemon_setup(tmp_path, isolated_env), isolated_env, 3)
    with FakeOpenAI() as fake:
        cfg = daemon_setup(tmp_path, isolated_env, f"""
[embedding]
provider = "openai"
base_url = "{fake.base_url}"
model = "test-embed"
api_key_env = ""
""")
        proc = start_daemon(cfg, isolated_env, capture=True)
        try:
            _out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 78  # RestartPreventExitStatus=78: systemd leaves it stopped
    assert "was built with no embedder (BM25 only)" in err
    assert "run `opencode-memoryd reembed`" in err

