"""Whose user scope: the identity user-scope memories are written with and read by.

Project memories are shared by everyone whose daemon writes to the same store (the same
OpenCode project id: the same repository); user-scope memories belong to one person. The
identity is ``[user] id`` when set, else the first :data:`ID_HEX_DIGITS` hex digits of the
SHA-256 of ``git config --global user.email`` (trimmed, lower-cased), else of the login
name. Only the hash reaches the store, never the address or the name.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping

__all__ = ["GIT_TIMEOUT_SECONDS", "ID_HEX_DIGITS", "git_user_email", "login_name",
           "user_identity"]

#: Hex digits of the SHA-256 kept as the derived identity (64 bits).
ID_HEX_DIGITS = 16
#: How long ``git config`` may take before the login name is used instead (seconds).
GIT_TIMEOUT_SECONDS = 2.0


def git_user_email(env: Mapping[str, str], *, timeout_seconds: float = GIT_TIMEOUT_SECONDS
                   ) -> str | None:
    """``git config --global user.email`` run with ``env`` (its ``HOME`` and
    ``XDG_CONFIG_HOME`` pick the file), or ``None``: no git on ``env``'s ``PATH``, no
    address set, git failed or took longer than ``timeout_seconds``."""
    git = shutil.which("git", path=env.get("PATH") or os.defpath)
    if git is None:
        return None
    try:
        done = subprocess.run([git, "config", "--global", "user.email"], env=dict(env),
                              capture_output=True, text=True, timeout=timeout_seconds,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    email = done.stdout.strip()
    return email if done.returncode == 0 and email else None


def login_name(env: Mapping[str, str]) -> str:
    """The login name: ``LOGNAME``, ``USER``, ``LNAME`` or ``USERNAME`` from ``env`` (as
    :func:`getpass.getuser` reads them), else the password database, else ``uid-<uid>``."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if env.get(name):
            return env[name]
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return f"uid-{os.getuid()}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_HEX_DIGITS]


def user_identity(configured: str, env: Mapping[str, str], *,
                  timeout_seconds: float = GIT_TIMEOUT_SECONDS) -> str:
    """The user identity (see the module docstring).

    Args:
        configured: ``[user] id`` (empty: derive it).
        env: the environment git runs with and the login name is read from.
        timeout_seconds: the limit on ``git config``.

    Returns:
        ``configured`` when set, else 16 lower-case hex digits.
    """
    if configured:
        return configured
    email = git_user_email(env, timeout_seconds=timeout_seconds)
    if email:
        return _digest(email.lower())
    return _digest(login_name(env))
