"""Locating the genuine OpenCode binary and preparing what its first start would download.

See ``opencode_sandbox.py`` for the harness; ``install-opencode.sh`` beside this file installs
the binary and ripgrep.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

OPENCODE_VERSION = "1.18.33"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO_ROOT / ".cache" / "opencode-ai" / "bin" / "opencode"
PLUGIN_DEPENDENCY = "@opencode-ai/plugin"


def find_opencode(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The OpenCode binary: ``$OPENCODE_BIN``, else the repository's ``.cache`` prefix.

    Returns ``None`` when that file is not an executable.
    """
    path = Path(environ.get("OPENCODE_BIN") or DEFAULT_BIN)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def missing_requirement(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why the end-to-end tests cannot run here (a sentence), or ``None`` when they can."""
    if find_opencode(environ) is None:
        where = environ.get("OPENCODE_BIN") or DEFAULT_BIN
        return f"no OpenCode binary at {where}: run tests/e2e/install-opencode.sh"
    for tool in ("rg", "git", "npm"):
        if shutil.which(tool, path=environ.get("PATH")) is None:
            return f"{tool} is not on PATH: run tests/e2e/install-opencode.sh"
    return None


def opencode_version(binary: Path) -> str:
    """``opencode --version`` (e.g. ``"1.18.33"``), run in a throw-away HOME."""
    with tempfile.TemporaryDirectory(prefix="oc-version-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
               "XDG_CONFIG_HOME": f"{home}/c", "XDG_DATA_HOME": f"{home}/d",
               "XDG_STATE_HOME": f"{home}/s", "XDG_CACHE_HOME": f"{home}/k"}
        out = subprocess.run([str(binary), "--version"], env=env, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL, check=True)
    return out.stdout.strip()


def install_plugin_dependency(base: Path, version: str = OPENCODE_VERSION) -> Path:
    """Install ``@opencode-ai/plugin@version`` with npm into ``base`` (created), as OpenCode
    does in its config folder: ``package.json``, ``package-lock.json``, ``node_modules/``.

    npm's cache and HOME stay inside ``base``. Returns ``base``.
    Raises ``subprocess.CalledProcessError`` when npm fails (e.g. no registry).
    """
    base.mkdir(parents=True, exist_ok=True)
    (base / "package.json").write_text(json.dumps({"dependencies": {PLUGIN_DEPENDENCY: version}}))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(base / ".home"),
           "npm_config_cache": str(base / ".npm-cache")}
    subprocess.run(["npm", "install", "--no-fund", "--no-audit", "--loglevel=error"], cwd=base,
                   env=env, check=True, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    for scratch in (".home", ".npm-cache"):
        shutil.rmtree(base / scratch, ignore_errors=True)
    return base


def link_tree(src: Path, dest: Path) -> None:
    """Copy ``src``'s entries into ``dest`` as hard links (plain copies across filesystems)."""
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    for entry in src.iterdir():
        target = dest / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True, copy_function=link)
        else:
            link(str(entry), str(target))
