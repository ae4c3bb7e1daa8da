"""The documentation site: it builds with no warning (a broken link or anchor fails the
build), and its reference pages are generated from the code they describe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.reference import (
    cli_reference,
    config_reference,
    exit_codes,
    exit_codes_reference,
    rest_reference,
)
from opencode_memoryd.config.schema import Config
from opencode_memoryd.web.openapi import openapi_document

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built by ``mkdocs build --strict`` (every warning an error)."""
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_the_site_builds_with_the_generated_reference(site: Path) -> None:
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for name in COMMANDS:
        assert f"opencode-memoryd {name}" in cli, name
    config = (site / "reference" / "config" / "index.html").read_text()
    for section, sfield in Config.model_fields.items():
        assert f"[{section}]" in config
        for key in getattr(sfield.annotation, "model_fields", {}):
            assert f"<code>{key}</code>" in config, (section, key)
    assert (site / "reference" / "config.example.toml").read_text().startswith("#")
    for path in openapi_document()["paths"]:
        assert path in (site / "reference" / "rest" / "index.html").read_text()


def test_every_exit_code_of_the_help_is_in_the_reference() -> None:
    page = exit_codes_reference()
    codes = [code for code, _ in exit_codes()]
    assert codes == [0, 1, 2, 3, 4, 5, 6, 78, 130]
    for code, meaning in exit_codes():
        assert f"| {code} | {meaning.split()[0]}" in page


def test_the_reference_pages_follow_the_code() -> None:
    # a command, a key or a route added to the code is on its page without an edit
    assert "## opencode-memoryd history" in cli_reference()
    assert "### opencode-memoryd history sessions" in cli_reference()
    assert "| `quiet_period_seconds` |" in config_reference()
    assert "## `POST /api/memories`" in rest_reference()
    # the envelope the page states is the one the API answers in
    assert '`{"result": …}`' in rest_reference() and '"success"' not in rest_reference()


def test_the_readme_is_the_short_way_in() -> None:
    # the pitch, what leaves the machine, what to expect, the quick start and links; the
    # rest lives on the site (its links are checked by the build: the home page is made
    # from the README)
    readme = (ROOT / "README.md").read_bytes()
    assert len(readme) <= 10 * 1024
    for heading in (b"## What leaves your machine", b"## What to expect", b"## Quick start"):
        assert heading in readme
