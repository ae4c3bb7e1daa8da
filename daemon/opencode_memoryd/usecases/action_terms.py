"""What a tool call is about: the terms an action-site look-up searches memories for.

A tool call that reads or edits a file is about the file's name, its folders and its file
type; a shell command is about its programs and the script, target or subcommand each runs
(``npm run e2e``: ``e2e``; ``make test``: ``test``); a failed command also about the error
it printed (its error names, a missing module, a program or script it did not find). Each
becomes a :class:`Term`: a few words, matched against a memory's words by the store's
tokenizer (stemmed, so ``migrations/`` matches "every migration ships a downgrade"), with a
weight by kind. A program also stands for the programs that do the same
job (:data:`ALTERNATIVES`: ``npm install`` matches "we're a pnpm shop"), and a file type for
its language (:data:`LANGUAGES`: ``.py`` matches "Python").

The tool's arguments and output are untrusted: they only choose memories, and no term is
ever shown to the model.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

#: Weights by kind: a file's own name says most, a file type least.
WEIGHTS = {"file": 3.0, "error": 3.0, "folder": 2.0, "program": 2.0, "script": 2.0,
           "alternative": 1.5, "type": 1.0}
#: Programs that do the same job: a memory about one is about the others.
ALTERNATIVES: tuple[frozenset[str], ...] = (
    frozenset({"npm", "npx", "pnpm", "pnpx", "yarn", "bun", "bunx"}),
    frozenset({"pip", "pip3", "uv", "uvx", "poetry", "pipenv", "pdm", "conda"}),
    frozenset({"pytest", "unittest", "tox", "nox"}),
    frozenset({"docker", "podman", "nerdctl"}),
    frozenset({"make", "just", "task"}),
    frozenset({"jest", "vitest", "mocha"}),
    frozenset({"eslint", "biome", "prettier"}),
    frozenset({"ruff", "flake8", "pylint", "black", "isort"}),
    frozenset({"mypy", "pyright"}),
)
#: File types by extension and the language names memories use for them.
LANGUAGES: dict[str, tuple[str, ...]] = {
    "py": ("python",), "pyi": ("python",), "ts": ("typescript",), "tsx": ("typescript",),
    "js": ("javascript",), "jsx": ("javascript",), "mjs": ("javascript",),
    "rs": ("rust",), "rb": ("ruby",), "kt": ("kotlin",), "java": ("java",),
    "cs": ("csharp",), "cpp": ("c++",), "hpp": ("c++",), "sh": ("shell",),
    "sql": ("sql",), "md": ("markdown",), "yml": ("yaml",), "yaml": ("yaml",),
    "toml": ("toml",), "tf": ("terraform",), "proto": ("protobuf",), "go": ("golang",),
}
#: Extensions that are English words ("go"): only their language names are looked up.
WORD_EXTENSIONS = frozenset({"go", "in", "do", "as", "is", "it", "am", "me", "so", "no"})
#: Folder names too common to say anything about a file.
GENERIC_FOLDERS = frozenset({"src", "lib", "app", "home", "usr", "tmp", "var", "etc", "opt",
                             "root", "users", "bin", "pkg", "internal", "."})
#: Words that run another command (``sudo npm i``: the program is npm).
WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "exec", "command", "nice", "xargs"})
#: Programs whose first word after the options names what they run: a script
#: (``npm run e2e``, ``pnpm test``), a target (``make db-up``, ``just lint``) or a
#: subcommand (``cargo test``, ``terraform plan``, ``git push``).
RUNNERS = frozenset({
    "npm", "pnpm", "yarn", "bun", "deno", "make", "just", "task", "cargo", "go", "dotnet",
    "mvn", "mvnw", "gradle", "gradlew", "rake", "mix", "nox", "tox", "docker", "podman",
    "kubectl", "helm", "terraform", "tofu", "git", "dbt", "bundle", "rails", "composer",
    "flutter", "swift", "zig", "uv", "poetry", "pdm", "hatch", "pipenv", "rye", "npx", "bunx",
    "pnpx", "uvx", "pipx"})
#: A runner's words that run a script named next (``npm run e2e``, ``deno task dev``).
SCRIPT_WORDS = frozenset({"run", "run-script", "task"})
#: A runner's words that run a program named next (``uv run pytest``, ``npm exec tsc``);
#: for the runners of :data:`PROGRAM_RUNNERS` ``run`` does too.
PROGRAM_WORDS = frozenset({"exec", "x", "dlx"})
PROGRAM_RUNNERS = frozenset({"uv", "poetry", "pdm", "hatch", "pipenv", "rye"})
#: Runners whose first word is the program they run (``npx playwright test``).
PROGRAM_FIRST = frozenset({"npx", "bunx", "pnpx", "uvx", "pipx"})
#: The most folders of a path used (the nearest ones).
MAX_FOLDERS = 3
#: The most characters of a command or an error read.
MAX_TEXT_CHARS = 4000
#: The most terms taken from an error's text.
MAX_ERROR_TERMS = 4

_SEGMENTS = re.compile(r"&&|\|\||[;|\n]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ERROR_NAMES = re.compile(
    r"\b(?:[A-Z][A-Za-z0-9]*(?:Error|Exception)|E[A-Z]{3,}|ERR_[A-Z_]{3,}|error\[E\d{3,4}\])")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'|Cannot find module '([^']+)'")
#: A script's, target's or subcommand's name (no path, no option, no quoted text).
_NAME = re.compile(r"[A-Za-z0-9][\w:.+-]{0,63}")
_NAME_PARTS = re.compile(r"[:._+-]+")
#: What a shell or a runner prints for a program or script it did not find.
_NOT_FOUND = re.compile(
    r"command not found: ([\w.+-]+)|(?:^|[\s:])([\w.+-]+): (?:command )?not found(?!:)"
    r"|[Mm]issing script:? \"?([\w:.+-]+)|[Nn]o rule to make target '([\w:.+-]+)'"
    r"|[Rr]ecipe `([\w:.+-]+)` failed", re.MULTILINE)


@dataclass(frozen=True)
class Term:
    """One thing a tool call is about.

    Attributes:
        kind: ``file``, ``folder``, ``type``, ``program``, ``alternative`` or ``error``.
        text: the words, e.g. ``"migrations"``, ``"npm"``, ``"ModuleNotFoundError"``.
    """

    kind: str
    text: str

    @property
    def weight(self) -> float:
        """The kind's weight (:data:`WEIGHTS`)."""
        return WEIGHTS[self.kind]


def path_terms(path: str, directory: str | None = None) -> list[Term]:
    """The terms of a file ``path``: its name (``file``), its nearest folders
    (``folder``, at most :data:`MAX_FOLDERS`, none of :data:`GENERIC_FOLDERS` and none
    at or above ``directory``, the session's folder, when the path is inside it) and its
    file type (``type``: the extension, unless one of :data:`WORD_EXTENSIONS`, and its
    :data:`LANGUAGES` names)."""
    raw = path.strip()[:MAX_TEXT_CHARS]
    if not raw:
        return []
    p = PurePosixPath(raw)
    if directory and p.is_absolute():
        with contextlib.suppress(ValueError):
            p = p.relative_to(directory)
    terms = [Term("file", p.name)] if p.name else []
    folders = [part for part in p.parent.parts[::-1]
               if part != "/" and part.lower() not in GENERIC_FOLDERS]
    terms += [Term("folder", f) for f in folders[:MAX_FOLDERS]]
    ext = p.suffix.lstrip(".").lower()
    if ext:
        names = () if ext in WORD_EXTENSIONS else (ext,)
        terms += [Term("type", n) for n in (*names, *LANGUAGES.get(ext, ()))]
    return terms


def _segments(command: str) -> list[list[str]]:
    """The words of each part of ``command`` between ``&&``, ``||``, ``;``, ``|`` and line
    breaks, after ``NAME=value`` assignments and :data:`WRAPPERS` (empty parts left
    out)."""
    out = []
    for segment in _SEGMENTS.split(command[:MAX_TEXT_CHARS]):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in WRAPPERS):
            words = words[1:]
        if words:
            out.append(words)
    return out


def _runs(words: list[str]) -> tuple[str, str] | None:
    """What a runner's ``words`` (the program first) run: ``("program", name)``,
    ``("script", name)`` or ``None`` (not a runner, or nothing named)."""
    runner = PurePosixPath(words[0]).name
    if runner not in RUNNERS:
        return None
    rest = [w for w in words[1:] if not w.startswith("-")]
    if not rest or not _NAME.fullmatch(rest[0]):
        return None
    if runner in PROGRAM_FIRST:
        return "program", rest[0]
    first, then = rest[0], (rest[1] if len(rest) > 1 and _NAME.fullmatch(rest[1]) else "")
    if first in PROGRAM_WORDS or (first == "run" and runner in PROGRAM_RUNNERS):
        return ("program", then) if then else None
    return "script", (then if first in SCRIPT_WORDS and then else first)


def programs(command: str) -> list[str]:
    """The programs a shell ``command`` runs, in order, each once: the first word of each
    part between ``&&``, ``||``, ``;``, ``|`` and line breaks, after ``NAME=value``
    assignments and :data:`WRAPPERS`; ``python -m X``, ``uv run X``, ``npx X`` and
    ``npm exec X`` run ``X`` too."""
    found: list[str] = []
    for words in _segments(command):
        name = PurePosixPath(words[0]).name
        found.append(name)
        if name.startswith("python") and len(words) > 2 and words[1] == "-m":
            found.append(words[2])
        runs = _runs(words)
        if runs is not None and runs[0] == "program":
            found.append(PurePosixPath(runs[1]).name)
    return list(dict.fromkeys(p for p in found if p))


def scripts(command: str) -> list[str]:
    """The scripts, targets and subcommands a shell ``command`` runs through a runner of
    :data:`RUNNERS`, in order, each once: the first word after the runner's options
    (``make test``, ``cargo build``, ``git push``), or the one after ``run``/``task``
    (``npm run e2e``, ``bun run build``); none for a word that is a path or quoted text."""
    found = [runs[1] for words in _segments(command)
             if (runs := _runs(words)) is not None and runs[0] == "script"]
    return list(dict.fromkeys(found))


def _name_terms(kind: str, name: str) -> list[Term]:
    """``name`` as a term, and each of its parts when it has several (``test:e2e``:
    ``test:e2e``, ``test``, ``e2e``), so a memory naming one part is found too."""
    parts = [p for p in _NAME_PARTS.split(name) if p]
    return [Term(kind, name)] + ([Term(kind, p) for p in parts] if len(parts) > 1 else [])


def _program_terms(names: list[str]) -> list[Term]:
    terms = [Term("program", n) for n in names]
    others = {o for n in names for group in ALTERNATIVES if n in group for o in group}
    return terms + [Term("alternative", o) for o in sorted(others - set(names))]


def command_terms(command: str) -> list[Term]:
    """The terms of a shell ``command``: its :func:`programs` (``program``), the programs
    that do the same job (``alternative``, :data:`ALTERNATIVES`) and its :func:`scripts`
    (``script``, with their parts)."""
    terms = _program_terms(programs(command))
    return terms + [t for name in scripts(command) for t in _name_terms("script", name)]


def error_terms(error: str) -> list[Term]:
    """The terms of a failed command's output (its last :data:`MAX_TEXT_CHARS`
    characters): error names (``ModuleNotFoundError``, ``ENOENT``, ``ERR_X``,
    ``error[E0308]``) and missing modules, at most :data:`MAX_ERROR_TERMS` (``error``);
    and what it did not find: a program (``golangci-lint: command not found``:
    ``program``) or a script or target (``Missing script: "e2e"``, ``No rule to make
    target 'db-up'``, ``Recipe `lint` failed``: ``script``), at most as many again."""
    tail = error[-MAX_TEXT_CHARS:]
    found = [m.group(0) for m in _ERROR_NAMES.finditer(tail)]
    found += [a or b for a, b in _NO_MODULE.findall(tail)]
    terms = [Term("error", t) for t in list(dict.fromkeys(found))[:MAX_ERROR_TERMS]]
    missing: list[Term] = []
    for m in _NOT_FOUND.finditer(tail):
        program = m.group(1) or m.group(2)
        script = m.group(3) or m.group(4) or m.group(5)
        if program and program not in WRAPPERS and program not in ("sh", "bash", "zsh"):
            missing += _program_terms([program])
        elif script:
            missing += _name_terms("script", script)
    return terms + list(dict.fromkeys(missing))[:2 * MAX_ERROR_TERMS]


def action_terms(*, path: str = "", command: str = "", error: str = "",
                 directory: str | None = None) -> list[Term]:
    """Every term of a tool call: its file ``path``, its shell ``command`` and, for a
    failed command, its ``error`` output (each may be empty); each term once."""
    terms = path_terms(path, directory) + command_terms(command)
    if error:
        terms += error_terms(error)
    return list(dict.fromkeys(terms))
