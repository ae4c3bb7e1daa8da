"""The doctor tests' sandbox.

It is real: the OpenCode fixture database where OpenCode keeps it, a rules-mode config,
the state file and the embedded store written by `maintain --all`, the plugin and MCP
entry written by `install-opencode`, the unit written by `install-service`. CI machines
have no user systemd, so `systemctl`, `loginctl` and `launchctl` are stand-in scripts put
first on PATH, answering what each test chooses (the only edge replaced, with the disk).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import SAMPLE_DB, cli, write_config

#: A top-level session of the fixture (acme-web).
SID = "ses_dfec4032affe4TNn4bUt9e26HR"
#: What a healthy sandbox without a running daemon reports besides ``ok``.
BASELINE = {"daemon": "warn", "llm": "skip"}


@dataclass
class Sandbox:
    """Paths of one sandbox, and doctor runs against it."""

    cfg: Path
    db: Path
    state_dir: Path
    store_dir: Path
    bin: Path
    tmp: Path

    def fake(self, name: str, output: str, code: int = 0,
             cases: dict[str, tuple[str, int]] | None = None) -> None:
        """Make ``name`` on PATH print ``output`` and exit ``code``; ``cases``: other
        answers (output, code) for a command line that holds the key."""
        branches = "".join(f"  *{key}*) printf '%s\\n' '{out}'; exit {rc};;\n"
                           for key, (out, rc) in (cases or {}).items())
        path = self.bin / name
        path.write_text(f"#!/bin/sh\ncase \"$*\" in\n{branches}esac\n"
                        f"printf '%s\\n' '{output}'\nexit {code}\n")
        path.chmod(0o755)

    def config(self, text: str) -> Path:
        """Another config file: the sandbox's rules-mode settings plus ``text``."""
        return write_config(self.tmp / f"cfg-{time.monotonic_ns()}.toml", text)

    def doctor(self, cfg: Path | None = None) -> tuple[int, dict[str, dict[str, str]]]:
        """Run `doctor --json`: exit code and the checks by name (one database)."""
        code, out = cli("--config", str(cfg or self.cfg), "doctor", "--json")
        result = json.loads(out)
        checks = {c["name"]: c for c in result["checks"]}
        assert len(checks) == len(result["checks"])
        assert result["failed"] == (code == 1)
        return code, checks

    def text(self, cfg: Path | None = None) -> tuple[int, str]:
        """Run `doctor` (text)."""
        return cli("--config", str(cfg or self.cfg), "doctor")


def problems(checks: dict[str, dict[str, str]]) -> dict[str, str]:
    """Every check whose status is not ``ok``."""
    return {n: c["status"] for n, c in checks.items() if c["status"] != "ok"}


def make_sandbox(tmp_path: Path, isolated_env: dict[str, str],
                 monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    """Build the sandbox (see the module docstring) in ``tmp_path``."""
    data = Path(isolated_env["XDG_DATA_HOME"])
    db = data / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(SAMPLE_DB.read_bytes())
    cfg = write_config(tmp_path / "config.toml", '[extraction]\nmode = "rules"\n')
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    monkeypatch.setenv("PATH", f"{fake_bin}:/usr/bin:/bin")
    sb = Sandbox(cfg, db, Path(isolated_env["XDG_STATE_HOME"]) / "opencode-memoryd",
                 data / "opencode-memoryd" / "qdrant", fake_bin, tmp_path)
    sb.fake("systemctl", "enabled", cases={"is-system-running": ("running", 0)})
    sb.fake("loginctl", "Linger=yes")
    sb.fake("launchctl", "")
    for command in (["maintain", "--all"], ["install-opencode"], ["install-service"]):
        code, out = cli("--config", str(cfg), *command)
        assert code == 0, out
    return sb
