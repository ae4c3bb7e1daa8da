"""``reembed``: a store built BM25-only, then opened with an embedder configured, is refused
until ``opencode-memoryd reembed`` rebuilds its vectors from the kept memory texts; a
failure half-way leaves it marked, and the next run finishes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import ACME, cli, cli_json, write_config
from fake_openai import FakeOpenAI

RULES = '[extraction]\nmode = "rules"\n'


def dense_config(path: Path, fake: FakeOpenAI) -> Path:
    """A rules-mode config with the fake's embeddings endpoint."""
    return write_config(path, RULES + f"""
[embedding]
provider = "openai"
base_url = "{fake.base_url}"
model = "test-embed"
api_key_env = ""
""")


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
        check = doctor_check(dense, "embedder")
        assert check["status"] == "fail" and "opencode-memoryd reembed" in check["fix"]

        report = cli_json("--config", str(dense), "reembed")
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
