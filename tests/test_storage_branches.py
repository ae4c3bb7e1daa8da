"""OpenCode's storages are strategies: code outside ``source/storages/`` (and the schema
detection that says which tables exist) asks the session's storage and never branches on
which storage or session table a session lives in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opencode_memoryd.errors import SourceError
from opencode_memoryd.models import STORAGE_MESSAGE, STORAGE_SESSION_MESSAGE
from opencode_memoryd.source.storages import registry

PACKAGE = Path(__file__).resolve().parent.parent / "daemon" / "opencode_memoryd"
#: Where a storage branch belongs: the strategies, and the schema detection.
ALLOWED = ("source/storages/", "source/schema.py")
#: A branch on the storage or the session table: a comparison with a storage's name or a
#: table's, a presence flag of the schema, or the names such branches went by.
BRANCH = re.compile(r"""
    [!=]=\s*STORAGE_\w+ | \bSTORAGE_\w+\s*[!=]=
  | [!=]=\s*["'](?:message|session_message|session_v2)["']
  | ["'](?:message|session_message|session_v2)["']\s*[!=]=
  | \.table\s*[!=]= | \bhas_(?:v1_messages|v1_sessions|session_message|v2_sessions)\b
  | \bis_v2\b | \b_in_v2\b | \bstorage_of\([^)]*\)\s*[!=]=
""", re.VERBOSE)


def branches(text: str) -> list[int]:
    """The numbers of the lines of ``text`` that branch on a storage."""
    return [n for n, line in enumerate(text.splitlines(), 1) if BRANCH.search(line)]


def test_no_storage_branch_outside_the_storages() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if "__pycache__" in rel or rel.startswith(ALLOWED):
            continue
        lines = branches(path.read_text(encoding="utf-8"))
        if lines:
            found[rel] = lines
    assert found == {}


def test_the_check_finds_what_it_looks_for() -> None:
    text = "\n".join([
        "if storage == STORAGE_MESSAGE:",
        "x = a if STORAGE_SESSION_MESSAGE != b.storage else c",
        'if session.table == "session_v2":',
        "if db.schema.has_session_message:",
        'if mark.storage == "session_message":',
        "if _in_v2(db, sid):",
        "ok = mark.storage != last.storage",  # two marks compared: not a branch
        "storage: str = STORAGE_MESSAGE",  # a default: not a branch
    ])
    assert branches(text) == [1, 2, 3, 4, 5, 6]


def test_the_storages_are_registered_once_by_name() -> None:
    names = [s.name for s in registry.STORAGES]
    assert names == [STORAGE_SESSION_MESSAGE, STORAGE_MESSAGE]
    assert all(registry.named(n).name == n for n in names)
    with pytest.raises(SourceError, match="unknown OpenCode storage 'turns_v3'"):
        registry.named("turns_v3")
    # every conversation table a storage reads has its generation for ``doctor``
    assert dict(registry.SHAPES) == {"message": "1.x", "part": "1.x",
                                     "session_message": "v2", "session_v2": "v2"}
