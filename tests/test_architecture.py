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
    for init in PACKAGE.rglob("*/__init__.py"):
        body = ast.parse(init.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), init


def _constructions(tree: ast.AST, name: str) -> list[int]:
    """The lines where ``name(...)`` or ``x.name(...)`` is called."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if ((isinstance(f, ast.Name) and f.id == name)
                    or (isinstance(f, ast.Attribute) and f.attr == name)):
                lines.append(node.lineno)
    return lines


def test_the_session_processor_is_built_in_the_composition_root_alone() -> None:
    sites = {str(p.relative_to(PACKAGE)): _constructions(ast.parse(p.read_text()),
                                                         "SessionProcessor")
             for p in _modules()}
    sites = {k: v for k, v in sites.items() if v}
    assert list(sites) == ["compose.py"] and len(sites["compose.py"]) == 1, sites
    # the check finds what it looks for
    sample = "from m import SessionProcessor\nSessionProcessor(a)\nm.SessionProcessor(b)\n"
    assert _constructions(ast.parse(sample), "SessionProcessor") == [2, 3]


def _package_bases(tree: ast.Module) -> dict[str, list[str]]:
    """The classes of a module that inherit from a class of the package (defined in the
    module or imported from ``opencode_memoryd``), but exceptions (``...Error``): by
    class name, the names of those bases."""
    ours = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "opencode_memoryd"):
            ours |= {alias.asname or alias.name for alias in node.names}
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)
                     and b.id in ours and not b.id.endswith("Error")]
            if bases:
                out[node.name] = bases
    return out


def test_the_daemon_is_collaborators_not_mixins() -> None:
    found = {str(p.relative_to(PACKAGE)): _package_bases(ast.parse(p.read_text()))
             for p in sorted((PACKAGE / "serve").rglob("*.py"))}
    assert len(found) > 20 and {k: v for k, v in found.items() if v} == {}
    # the check finds what it looks for, and leaves library bases and errors alone
    sample = ("from opencode_memoryd.serve.runtime.jobs import Jobs\n"
              "from opencode_memoryd.errors import MemorydError\n"
              "import socketserver\nclass Half:\n    pass\n"
              "class D(Half, Jobs, socketserver.BaseServer):\n    pass\n"
              "class Bad(MemorydError):\n    pass\n")
    assert _package_bases(ast.parse(sample)) == {"D": ["Half", "Jobs"]}


def test_serve_is_split_by_what_it_serves() -> None:
    """The daemon's runtime, the control socket and the MCP side each have a room in
    ``serve/``; nothing else sits beside them."""
    rooms = {"runtime", "control", "mcp"}
    loose = [p.name for p in (PACKAGE / "serve").glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    assert {p.name for p in (PACKAGE / "serve").iterdir()
            if p.is_dir() and p.name != "__pycache__"} == rooms
    assert all(len(list((PACKAGE / "serve" / room).glob("*.py"))) > 2 for room in rooms)
