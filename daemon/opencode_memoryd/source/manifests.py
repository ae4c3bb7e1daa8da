"""The names a project's manifests, lockfiles and task files declare: dependencies and
scripts, parsed with real parsers (``json``, ``tomllib``, YAML), names only.

Pure: texts in, names out. :func:`names_of` reads one file's text by its name:

* dependencies: ``package.json`` (``dependencies``, ``devDependencies``,
  ``peerDependencies``, ``optionalDependencies``), ``pyproject.toml`` (PEP 621
  ``dependencies`` and ``optional-dependencies``, PEP 735 ``dependency-groups``, Poetry's
  ``dependencies``, ``dev-dependencies`` and groups), ``requirements*.txt``, ``Cargo.toml``
  (``dependencies``, ``dev-``, ``build-``, per target and ``workspace``), ``go.mod``
  (``require``); the lockfiles ``package-lock.json``, ``pnpm-lock.yaml``, ``yarn.lock``,
  ``uv.lock``, ``poetry.lock`` and ``Cargo.lock``;
* scripts: ``package.json`` ``scripts``, ``pyproject.toml`` ``[project.scripts]`` and
  ``[tool.poetry.scripts]``, ``Makefile`` targets, ``justfile`` recipes.

Python names are compared as PEP 503 normalises them (``Flask_Login`` = ``flask-login``);
other names lower-cased. A file that does not parse is ``None``: unknown, never empty.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

#: Files read for dependencies (``requirements*.txt`` are matched by :func:`is_known`).
DEPENDENCY_FILES = ("package.json", "pyproject.toml", "Cargo.toml", "go.mod",
                    "package-lock.json", "pnpm-lock.yaml", "yarn.lock", "uv.lock",
                    "poetry.lock", "Cargo.lock")
#: The lockfiles among :data:`DEPENDENCY_FILES`.
LOCKFILES = frozenset(DEPENDENCY_FILES[4:])
#: Files read for scripts.
SCRIPT_FILES = ("package.json", "pyproject.toml", "Makefile", "makefile", "GNUmakefile",
                "justfile", "Justfile", ".justfile")
_REQUIREMENTS = re.compile(r"^requirements[\w.-]*\.txt$")
# PEP 508: a distribution name starts a requirement
_PEP508_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_MAKE_RULE = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)")
_JUST_RECIPE = re.compile(r"^@?([A-Za-z_][A-Za-z0-9_-]*)(?:\s+[^:]*)?:(?!=)")
_JUST_KEYWORDS = frozenset({"set", "alias", "export", "import", "mod"})
_YARN_ENTRY = re.compile(r'^"?(@?[^@\s",]+)@')


@dataclass(frozen=True, slots=True)
class Names:
    """What one file declares. Attributes: ``deps`` and ``scripts``, normalised names
    (:func:`norm_dep`; scripts as written)."""

    deps: frozenset[str] = field(default_factory=frozenset)
    scripts: frozenset[str] = field(default_factory=frozenset)


def is_known(name: str) -> bool:
    """Whether ``name`` (a file name directly in the worktree) is a file this module reads."""
    return (name in DEPENDENCY_FILES or name in SCRIPT_FILES
            or _REQUIREMENTS.match(name) is not None)


def norm_dep(name: str) -> str:
    """A dependency name as compared: lower-cased, and runs of ``-``, ``_``, ``.`` one
    ``-`` (PEP 503; the same on both sides for npm and Cargo names) unless it is a path
    (a Go module such as ``golang.org/x/sync``, which keeps its dots)."""
    name = name.strip().lower()
    return name if "/" in name and not name.startswith("@") else re.sub(r"[-_.]+", "-", name)


def _keys(table: Any) -> list[str]:
    return [str(k) for k in table] if isinstance(table, dict) else []


def _pep508(items: Any) -> list[str]:
    out = []
    for item in items if isinstance(items, list) else []:
        m = _PEP508_NAME.match(item) if isinstance(item, str) else None
        if m:
            out.append(m.group(1))
    return out


def _package_json(text: str) -> Names:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not an object")
    deps = [k for t in ("dependencies", "devDependencies", "peerDependencies",
                        "optionalDependencies") for k in _keys(data.get(t))]
    return _names(deps, _keys(data.get("scripts")))


def _pyproject(text: str) -> Names:
    data = tomllib.loads(text)
    project = data.get("project") or {}
    deps = _pep508(project.get("dependencies"))
    for group in (project.get("optional-dependencies") or {}).values():
        deps += _pep508(group)
    for group in (data.get("dependency-groups") or {}).values():
        deps += _pep508(group)
    poetry = (data.get("tool") or {}).get("poetry") or {}
    deps += _keys(poetry.get("dependencies")) + _keys(poetry.get("dev-dependencies"))
    for group in (poetry.get("group") or {}).values():
        deps += _keys(group.get("dependencies") if isinstance(group, dict) else None)
    deps = [d for d in deps if d.lower() != "python"]
    return _names(deps, _keys(project.get("scripts")) + _keys(poetry.get("scripts")))


def _cargo_toml(text: str) -> Names:
    data = tomllib.loads(text)
    tables = [data, data.get("workspace") or {}, *(data.get("target") or {}).values()]
    deps = [k for t in tables if isinstance(t, dict)
            for kind in ("dependencies", "dev-dependencies", "build-dependencies")
            for k in _keys(t.get(kind))]
    return _names(deps, [])


def _go_mod(text: str) -> Names:
    deps, block = [], False
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if block:
            if line == ")":
                block = False
            elif line:
                deps.append(line.split()[0])
        elif line.startswith("require"):
            rest = line[len("require"):].strip()
            if rest == "(":
                block = True
            elif rest:
                deps.append(rest.split()[0])
    return _names(deps, [])


def _requirements(text: str) -> Names:
    deps = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            m = _PEP508_NAME.match(line)
            if m and "://" not in line.split(";")[0].split("@")[0]:
                deps.append(m.group(1))
    return _names(deps, [])


def _package_lock(text: str) -> Names:
    data = json.loads(text)
    keys = _keys(data.get("packages")) + _keys(data.get("dependencies"))
    return _names([k.rsplit("node_modules/", 1)[-1] for k in keys if k], [])


def _pnpm_lock(text: str) -> Names:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(text, Loader=loader)
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    deps = []
    for key in _keys(data.get("packages")) + _keys(data.get("snapshots")):
        key = key.lstrip("/").split("(", 1)[0]
        at = key.rfind("@")
        deps.append(key[:at] if at > 0 else key)
    for importer in (data.get("importers") or {}).values():
        for kind in ("dependencies", "devDependencies", "optionalDependencies"):
            deps += _keys(importer.get(kind) if isinstance(importer, dict) else None)
    return _names(deps, [])


def _yarn_lock(text: str) -> Names:
    deps = []
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#") and line.endswith(":"):
            for spec in line[:-1].split(","):
                m = _YARN_ENTRY.match(spec.strip())
                if m:
                    deps.append(m.group(1))
    return _names(deps, [])


def _toml_lock(text: str) -> Names:
    data = tomllib.loads(text)
    return _names([str(p["name"]) for p in data.get("package") or []
                   if isinstance(p, dict) and "name" in p], [])


def _makefile(text: str) -> Names:
    targets = []
    for line in text.splitlines():
        m = _MAKE_RULE.match(line)
        if m and "$" not in m.group(1):
            targets += [t for t in m.group(1).split() if not t.startswith(".") and "%" not in t]
    return _names([], targets)


def _justfile(text: str) -> Names:
    recipes = []
    for line in text.splitlines():
        m = _JUST_RECIPE.match(line)
        if m and m.group(1) not in _JUST_KEYWORDS:
            recipes.append(m.group(1))
    return _names([], recipes)


def _names(deps: Iterable[str], scripts: Iterable[str]) -> Names:
    return Names(frozenset(norm_dep(d) for d in deps if d.strip()),
                 frozenset(s for s in scripts if s.strip()))


_PARSERS = {"package.json": _package_json, "pyproject.toml": _pyproject,
            "Cargo.toml": _cargo_toml, "go.mod": _go_mod, "package-lock.json": _package_lock,
            "pnpm-lock.yaml": _pnpm_lock, "yarn.lock": _yarn_lock, "uv.lock": _toml_lock,
            "poetry.lock": _toml_lock, "Cargo.lock": _toml_lock, "Makefile": _makefile,
            "makefile": _makefile, "GNUmakefile": _makefile, "justfile": _justfile,
            "Justfile": _justfile, ".justfile": _justfile}


def names_of(name: str, text: str) -> Names | None:
    """What the file ``name`` (a file name, no folder) with text ``text`` declares, or
    ``None`` when it does not parse or is not a known file (:func:`is_known`)."""
    parse = _requirements if _REQUIREMENTS.match(name) else _PARSERS.get(name)
    if parse is None:
        return None
    try:
        return parse(text)
    except (ValueError, TypeError, AttributeError, KeyError, yaml.YAMLError):
        return None
