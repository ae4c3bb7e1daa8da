"""The state file's tables are repositories StateDB composes, not base classes it inherits:
each takes the shared StateFile, and a consumer can hold one alone."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import opencode_memoryd.state as state_package
from opencode_memoryd.models import STORAGE_MESSAGE, Mark
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.state.engine import StateFile
from opencode_memoryd.state.items import MarkTable


def test_no_class_in_state_inherits_one_of_the_package() -> None:
    inherited = []
    for info in pkgutil.iter_modules(state_package.__path__):
        module = importlib.import_module(f"{state_package.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            inherited += [f"{name}({base.__name__})" for base in cls.__bases__
                          if base.__module__.startswith("opencode_memoryd.")]
    assert inherited == []


def test_a_repository_alone_on_the_shared_file_sees_what_state_db_wrote(
        tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state.db")
    try:
        writes = state.write_count
        state.marks.set_mark("db", "ses", Mark(STORAGE_MESSAGE, (5, "msg_5")), "now", 7)
        marks = MarkTable(state.file)
        assert isinstance(state.file, StateFile)
        assert marks.get_mark_row("db", "ses") == (Mark(STORAGE_MESSAGE, (5, "msg_5")), 7)
        assert state.write_count == state.file.write_count == writes + 1
    finally:
        state.close()
