"""What a tool call is about: the terms an action-site look-up searches memories for.

A tool call that reads or edits a file is about the file's name, its folders and its file
type; a shell command is about its programs; a failed command also about the error it
printed. Each becomes a :class:`Term`: a few words, matched against a memory's words by
the store's tokenizer (stemmed, so ``migrations/`` matches "every migration ships a
downgrade"), with a weight by kind. A program also stands for the programs that do the same
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
WEIGHTS = {"file": 3.0, "error": 3.0, "folder": 2.0, "program": 2.0, "alternative": 1.5,
           "type": 1.0}
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


def programs(command: str) -> list[str]:
    """The programs a shell ``command`` runs, in order, each once: the first word of each
    part between ``&&``, ``||``, ``;``, ``|`` and line breaks, after ``NAME=value``
    assignments and :data:`WRAPPERS`; ``python -m X`` runs ``X`` too."""
    found: list[str] = []
    for segment in _SEGMENTS.split(command[:MAX_TEXT_CHARS]):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in WRAPPERS):
            words = words[1:]
        if not words:
            continue
        name = PurePosixPath(words[0]).name
        found.append(name)
        if name.startswith("python") and len(words) > 2 and words[1] == "-m":
            found.append(words[2])
    return list(dict.fromkeys(p for p in found if p))


def command_terms(command: str) -> list[Term]:
    """The terms of a shell ``command``: its :func:`programs` (``program``) and the
    programs that do the same job (``alternative``, :data:`ALTERNATIVES`)."""
    names = programs(command)
    terms = [Term("program", n) for n in names]
    others = {o for n in names for group in ALTERNATIVES if n in group for o in group}
    terms += [Term("alternative", o) for o in sorted(others - set(names))]
    return terms


def error_terms(error: str) -> list[Term]:
    """The terms of a failed command's output (its last :data:`MAX_TEXT_CHARS`
    characters): error names (``ModuleNotFoundError``, ``ENOENT``, ``ERR_X``,
    ``error[E0308]``) and missing modules, at most :data:`MAX_ERROR_TERMS`."""
    tail = error[-MAX_TEXT_CHARS:]
    found = [m.group(0) for m in _ERROR_NAMES.finditer(tail)]
    found += [a or b for a, b in _NO_MODULE.findall(tail)]
    return [Term("error", t) for t in list(dict.fromkeys(found))[:MAX_ERROR_TERMS]]


def action_terms(*, path: str = "", command: str = "", error: str = "",
                 directory: str | None = None) -> list[Term]:
    """Every term of a tool call: its file ``path``, its shell ``command`` and, for a
    failed command, its ``error`` output (each may be empty); each term once."""
    terms = path_terms(path, directory) + command_terms(command)
    if error:
        terms += error_terms(error)
    return list(dict.fromkeys(terms))
