"""How this copy of opencode-memoryd was installed, for hints that name a command that
works: adding a package to the environment it runs in.

The environment is ``sys.prefix``:

- a ``uv tool install`` environment holds ``uv-receipt.toml`` (uv's tool receipt): packages
  go in with ``uv pip install --python <its python>``;
- a ``pipx install`` environment holds ``pipx_metadata.json``: ``pipx inject`` adds a
  package and records it, so ``pipx upgrade`` keeps it;
- any other environment: ``<its python> -m pip install``, or ``uv pip install --python``
  when it has no pip (a venv made by uv) and ``uv`` is on ``PATH``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from importlib.util import find_spec

__all__ = ["install_kind", "package_install_command"]

_APP = "opencode-memoryd"


def install_kind(prefix: str | None = None) -> str:
    """``"uv-tool"``, ``"pipx"`` or ``"pip"``: how the environment at ``prefix`` (default
    ``sys.prefix``) was made (see the module docstring)."""
    prefix = sys.prefix if prefix is None else prefix
    if os.path.isfile(os.path.join(prefix, "uv-receipt.toml")):
        return "uv-tool"
    if os.path.isfile(os.path.join(prefix, "pipx_metadata.json")):
        return "pipx"
    return "pip"


def package_install_command(requirement: str, *, reinstall: bool = False,
                            prefix: str | None = None, python: str | None = None) -> str:
    """The shell command that installs ``requirement`` (e.g. ``"fastembed>=0.4"``) into
    the environment at ``prefix`` (default ``sys.prefix``) whose interpreter is ``python``
    (default ``sys.executable``); ``reinstall``: replace an installed copy."""
    python = python or sys.executable or "python3"
    kind = install_kind(prefix)
    if kind == "pipx":
        if reinstall:
            words = ["pipx", "runpip", _APP, "install", "--force-reinstall", requirement]
        else:
            words = ["pipx", "inject", _APP, requirement]
    elif kind == "uv-tool" or (find_spec("pip") is None and shutil.which("uv")):
        words = ["uv", "pip", "install", *(["--reinstall"] if reinstall else []),
                 "--python", python, requirement]
    else:
        words = [python, "-m", "pip", "install",
                 *(["--force-reinstall"] if reinstall else []), requirement]
    return shlex.join(words)
