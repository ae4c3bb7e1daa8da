"""The layout's promises that no linter checks: output only from the CLI, modules under a
size ceiling, and ``daemon/`` as a plain source root."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "daemon" / "opencode_memoryd"
#: A ceiling, far above the usual module (most are under 400 lines): a module that
#: reaches it holds more than one responsibility. Function size is held by ruff's
#: complexity budget (``max-complexity = 10`` in pyproject.toml, with its allow-list).
MAX_MODULE_LINES = 800


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_source_root_is_a_plain_folder() -> None:
    assert not (PACKAGE.parent / "__init__.py").exists()
    assert (PACKAGE / "__init__.py").exists()


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
             for p in _modules()}
    assert len(sizes) > 50
    assert {k: v for k, v in sizes.items() if v > MAX_MODULE_LINES} == {}


def _writes_output(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                lines.append(node.lineno)
            if (isinstance(f, ast.Attribute) and f.attr == "write"
                    and isinstance(f.value, ast.Attribute) and f.value.attr == "stdout"):
                lines.append(node.lineno)
    return lines


def test_only_the_cli_prints() -> None:
    offenders = {str(p.relative_to(PACKAGE)): _writes_output(ast.parse(p.read_text()))
                 for p in _modules() if p.relative_to(PACKAGE).parts[0] != "cli"}
    assert {k: v for k, v in offenders.items() if v} == {}
    # the check finds what it looks for
    assert _writes_output(ast.parse("import sys\nprint(1)\nsys.stdout.write('x')\n")) == [2, 3]


def test_subpackage_inits_hold_a_docstring_only() -> None:
    for init in PACKAGE.glob("*/__init__.py"):
        body = ast.parse(init.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), init
