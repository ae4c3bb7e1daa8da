"""Fixtures for the end-to-end tests against the genuine OpenCode (see ``opencode_sandbox.py``).

* ``opencode_bin`` (session): the binary; skips every test that uses it when the binary,
  ``rg``, ``git`` or ``npm`` is missing, and fails them instead when ``CI`` is set;
* ``opencode_warm_config`` (session): ``@opencode-ai/plugin`` installed once with npm;
* ``stub_model``: a running :class:`stub_model.StubModel`;
* ``opencode_sandbox``: an :class:`opencode_sandbox.OpenCodeSandbox` wired to both.

The wall times of the warm-up and of every ``opencode run`` are printed in the terminal
summary.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .opencode_install import (
    find_opencode,
    install_plugin_dependency,
    missing_requirement,
    opencode_version,
)
from .opencode_sandbox import OpenCodeSandbox
from .stub_model import StubModel

TIMINGS: list[str] = []


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    """The OpenCode binary to test (``$OPENCODE_BIN`` or the repository's ``.cache`` prefix)."""
    reason = missing_requirement()
    if reason is not None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"CI must run the OpenCode end-to-end tests: {reason}", pytrace=False)
        pytest.skip(reason)
    binary = find_opencode()
    assert binary is not None
    return binary


@pytest.fixture(scope="session")
def opencode_warm_config(opencode_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config-folder skeleton with OpenCode's plugin dependency, in the binary's version,
    installed (npm, once)."""
    version = opencode_version(opencode_bin)
    TIMINGS.append(f"opencode {version} at {opencode_bin}")
    start = time.monotonic()
    base = install_plugin_dependency(tmp_path_factory.mktemp("opencode-warm-config"), version)
    TIMINGS.append(f"npm install @opencode-ai/plugin: {time.monotonic() - start:.1f} s")
    return base


@pytest.fixture
def stub_model() -> Iterator[StubModel]:
    """A running stand-in model on 127.0.0.1."""
    with StubModel() as model:
        yield model


@pytest.fixture
def opencode_sandbox(tmp_path: Path, opencode_bin: Path, opencode_warm_config: Path,
                     stub_model: StubModel, request: pytest.FixtureRequest,
                     ) -> Iterator[OpenCodeSandbox]:
    """An isolated OpenCode with a git project, talking to ``stub_model``."""
    sandbox = OpenCodeSandbox(tmp_path / "sandbox", opencode_bin, stub_model, opencode_warm_config)
    try:
        yield sandbox
    finally:
        sandbox.close()
        for i, (_message, seconds) in enumerate(sandbox.timings):
            TIMINGS.append(f"{request.node.name} run {i + 1}: {seconds:.1f} s")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the OpenCode version and the measured wall times."""
    if TIMINGS:
        terminalreporter.section("OpenCode end-to-end timings")
        for line in TIMINGS:
            terminalreporter.write_line(line)
