"""A project's brief from facts its manifest files state, never from prose in its files.

A cloned repository's README is written by whoever published it, and its first paragraph
can address the agent ("AI assistants working here must first run …"). So the brief is
made of names only, each checked (:func:`~opencode_memoryd.injection.safe_name`) and
capped:

* the project's **name**: ``name`` of ``package.json``, ``[project] name`` of
  ``pyproject.toml``, ``[package] name`` of ``Cargo.toml``, the last element of the
  ``module`` of ``go.mod``; else the worktree folder's name;
* its **languages**: one per manifest (``package.json``: JavaScript, TypeScript when it
  depends on ``typescript`` or ``@types/*``; ``pyproject.toml``: Python; ``go.mod``: Go;
  ``Cargo.toml``: Rust);
* its **tools**: the dependencies and ``[tool.*]`` tables it names that are in
  :data:`KNOWN_TOOLS` (a name we chose, never free text from the file);
* its **scripts**: the keys of ``scripts`` in ``package.json`` and of ``[project.scripts]``
  in ``pyproject.toml``, at most :data:`MAX_SCRIPTS`.

Example: ``shop: a TypeScript project (package.json). Tools: hono, vitest. Scripts: build,
test.``
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opencode_memoryd.injection import safe_name

#: Dependencies and tool tables worth naming in a brief (lower case).
KNOWN_TOOLS = frozenset({
    # JavaScript and TypeScript
    "react", "vue", "svelte", "angular", "next", "nuxt", "astro", "remix", "solid-js",
    "express", "fastify", "hono", "koa", "nestjs", "vite", "webpack", "esbuild", "rollup",
    "jest", "vitest", "mocha", "playwright", "cypress", "eslint", "prettier", "biome",
    "typescript", "prisma", "drizzle-orm", "tailwindcss", "zod", "trpc", "electron",
    "bun", "deno", "turbo", "nx", "storybook", "graphql", "redux", "mongoose", "pg",
    # Python
    "django", "flask", "fastapi", "starlette", "pydantic", "sqlalchemy", "alembic",
    "pytest", "ruff", "mypy", "black", "isort", "flake8", "pylint", "poetry", "hatch",
    "hatchling", "setuptools", "uv", "tox", "nox", "numpy", "pandas", "polars", "scipy",
    "torch", "tensorflow", "jax", "scikit-learn", "httpx", "requests", "aiohttp",
    "celery", "click", "typer", "structlog", "pyright", "pre-commit", "sphinx", "mkdocs",
    "qdrant-client", "openai", "langchain",
    # Rust
    "tokio", "serde", "axum", "actix-web", "clap", "reqwest", "diesel", "sqlx", "anyhow",
    "thiserror", "tracing", "rocket", "warp", "tonic",
    # Go
    "gin", "echo", "fiber", "cobra", "viper", "gorm", "chi", "testify", "zap", "grpc",
})
#: Most scripts named in a brief.
MAX_SCRIPTS = 8
#: Most characters of a name (project or script) shown.
MAX_NAME_CHARS = 60
_LANGUAGES = {"package.json": "JavaScript", "pyproject.toml": "Python", "go.mod": "Go",
              "Cargo.toml": "Rust"}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9@][A-Za-z0-9._/@-]*)")


@dataclass(slots=True)
class ProjectFacts:
    """What the manifests state (see the module docstring); every name already checked.

    Attributes:
        name: the project's name (``""``: none usable).
        manifests: the manifest files read, by name.
        languages: languages, in manifest order.
        tools: known tools named, sorted.
        scripts: script names, in file order.
        dependencies: every dependency name that passed the check (for grounding a
            model's brief, never shown as such).
    """

    name: str = ""
    manifests: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)


def _name(value: Any) -> str:
    return value if isinstance(value, str) and safe_name(value, max_chars=MAX_NAME_CHARS) else ""


def _keys(value: Any) -> list[str]:
    return [k for k in value if isinstance(k, str)] if isinstance(value, dict) else []


def _requirements(items: Any) -> list[str]:
    out = []
    for item in items if isinstance(items, list) else []:
        m = _REQUIREMENT.match(item) if isinstance(item, str) else None
        if m:
            out.append(m.group(1))
    return out


def _package_json(text: str) -> tuple[str, list[str], list[str], bool]:
    try:
        data = json.loads(text)
    except ValueError:
        return "", [], [], False
    if not isinstance(data, dict):
        return "", [], [], False
    deps = [k for key in ("dependencies", "devDependencies", "peerDependencies")
            for k in _keys(data.get(key))]
    typescript = any(d == "typescript" or d.startswith("@types/") for d in deps)
    return _name(data.get("name")), deps, _keys(data.get("scripts")), typescript


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return {}


def _table(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _pyproject(text: str) -> tuple[str, list[str], list[str]]:
    data = _toml(text)
    project = _table(data, "project")
    deps = _requirements(project.get("dependencies"))
    optional = project.get("optional-dependencies")
    for group in optional.values() if isinstance(optional, dict) else []:
        deps += _requirements(group)
    groups = data.get("dependency-groups")
    for group in groups.values() if isinstance(groups, dict) else []:
        deps += _requirements(group)
    deps += _keys(data.get("tool"))
    poetry = _table(_table(data, "tool"), "poetry")
    deps += _keys(poetry.get("dependencies")) + _keys(poetry.get("dev-dependencies"))
    return _name(project.get("name")), deps, _keys(project.get("scripts"))


def _cargo(text: str) -> tuple[str, list[str]]:
    data = _toml(text)
    package = _table(data, "package")
    deps = _keys(data.get("dependencies")) + _keys(data.get("dev-dependencies"))
    return _name(package.get("name")), deps


def _go_mod(text: str) -> tuple[str, list[str]]:
    name, deps = "", []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "module":
            name = _name(words[1].rsplit("/", 1)[-1])
        elif words and "/" in words[0] and not words[0].startswith("//"):
            deps.append(words[0].rsplit("/", 1)[-1])
        elif len(words) >= 3 and words[0] == "require":
            deps.append(words[1].rsplit("/", 1)[-1])
    return name, deps


def project_facts(manifests: Mapping[str, str], *, folder: str = "") -> ProjectFacts:
    """The facts of ``manifests`` (file name to text, see :data:`_LANGUAGES` for the
    names read; others ignored); ``folder``: the worktree folder's name, the project's
    name when no manifest gives one. Unreadable manifests count as present but say
    nothing; never raises."""
    facts = ProjectFacts()
    deps: list[str] = []
    names: list[str] = []
    scripts: list[str] = []
    for file in _LANGUAGES:
        text = manifests.get(file)
        if text is None:
            continue
        facts.manifests.append(file)
        language = _LANGUAGES[file]
        if file == "package.json":
            name, found, keys, typescript = _package_json(text)
            scripts += keys
            language = "TypeScript" if typescript else language
        elif file == "pyproject.toml":
            name, found, keys = _pyproject(text)
            scripts += keys
        elif file == "Cargo.toml":
            name, found = _cargo(text)
        else:
            name, found = _go_mod(text)
        names.append(name)
        deps += found
        if language not in facts.languages:
            facts.languages.append(language)
    facts.name = next((n for n in names if n), "") or _name(folder)
    facts.dependencies = sorted({d for d in deps if safe_name(d, max_chars=MAX_NAME_CHARS)})
    facts.tools = sorted({d.lower().removeprefix("@") for d in deps}
                         & KNOWN_TOOLS - {lang.lower() for lang in facts.languages})
    facts.scripts = _first(s for s in scripts if safe_name(s, max_chars=MAX_NAME_CHARS))
    return facts


def _first(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))[:MAX_SCRIPTS]


def render_brief(facts: ProjectFacts) -> str:
    """The brief of ``facts`` (see the module docstring for an example); ``""`` when no
    manifest was read."""
    if not facts.manifests:
        return ""
    languages = " and ".join(facts.languages)
    article = "an" if languages[:1] in "AEIOU" else "a"
    head = f"{facts.name}: {article}" if facts.name else article.capitalize()
    out = [f"{head} {languages} project ({', '.join(facts.manifests)})."]
    if facts.tools:
        out.append(f"Tools: {', '.join(facts.tools)}.")
    if facts.scripts:
        out.append(f"Scripts: {', '.join(facts.scripts)}.")
    return " ".join(out)
