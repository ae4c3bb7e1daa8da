"""What a memory names as a path, a dependency or a script, read conservatively from its
text for the freshness check (:mod:`opencode_memoryd.dream.freshness`).

Pure. Candidates, never facts: a candidate counts only when the project's tree or
manifests held it when the memory was said, so a word that happens to look like a path
or a package name is never judged on its own. And only a word written *as* a dependency
is one: over the rules corpus with every common package declared and then removed, a
plain word matched anywhere flagged "next" (next time), "requests" (100 requests per
minute), "debug", "moment", "click" (``tests/test_freshness_corpus.py``).

* paths: a code span, or a token with a ``/`` or a known file extension (``app.ts``,
  ``src/db/``), without a URL scheme, ``:line`` suffix or trailing punctuation;
* dependencies, checked against manifests and lockfiles (:attr:`Mentions.deps`): the
  packages of an install command (``pnpm add X``, ``npm install X``, ``yarn add X``,
  ``uv add X``, ``poetry add X``, ``pip install X``, ``cargo add X``, ``go get X``), and a
  code span in a text that speaks of packages (:data:`PACKAGE_WORDS`);
* dependencies, checked against the manifests only (:attr:`Mentions.words`: a lockfile
  holds thousands of packages with names such as ``once``, ``events`` or ``which``): any
  other code span, a word right after a word of use (:data:`USE_WORDS`: "we use X",
  "built with X", "runs on X") and a word right before a package noun ("the X library");
* scripts: a code span, and what a run command names (``pnpm test:unit``, ``npm run X``,
  ``yarn X``, ``make X``, ``just X``, ``uv run X``, ``poetry run X``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from opencode_memoryd.text import ENGLISH_STOPWORDS

_CODE = re.compile(r"`([^`\n]{1,200})`")
_EXTENSIONS = frozenset([
    "ts", "tsx", "js", "jsx", "mjs", "cjs", "json", "jsonc", "py", "pyi", "toml", "yaml",
    "yml", "md", "mdx", "rst", "txt", "cfg", "ini", "env", "sh", "bash", "zsh", "go", "rs",
    "rb", "java", "kt", "kts", "swift", "c", "h", "cc", "cpp", "hpp", "cs", "php", "sql",
    "graphql", "proto", "css", "scss", "html", "vue", "svelte", "lock", "xml", "gradle",
    "tf", "lua", "ex", "exs", "dart", "scala", "r", "ipynb", "dockerfile"])
_TOKEN = re.compile(r"[\w@~./+-]+(?:/[\w@~./+-]*)?")
_TRAIL = ".,;:!?)]}'\""
_LINE_SUFFIX = re.compile(r":\d+(?::\d+)?$")
_INSTALL = re.compile(
    r"\b(?:(?:pnpm|yarn|bun|uv|poetry|cargo)\s+add|npm\s+(?:install|i|add)|"
    r"pip3?\s+install|go\s+get)\b")
_RUN = re.compile(
    r"\b(?:(?:pnpm|npm|yarn|bun)\s+run|uv\s+run|poetry\s+run|make|just)\s+([\w:.-]+)"
    r"|\b(?:pnpm|yarn|bun)\s+([\w][\w:.-]*)|\bnpm\s+(test|start|stop|restart)\b")
_WORD = re.compile(r"@?[\w][\w.-]*(?:/[\w][\w.-]*)?")
#: Words after which the next word is a tool the text says is used.
USE_WORDS = frozenset(["use", "uses", "using", "used", "with", "via", "adopt", "adopted",
                       "prefer", "prefers", "over", "on", "to", "chose", "picked", "keep",
                       "keeps", "pin", "pins", "pinned", "need", "needs", "require",
                       "requires"])
#: Nouns before which a word is a package, and which make a code span one.
PACKAGE_WORDS = frozenset(["package", "packages", "library", "libraries", "lib", "crate",
                           "crates", "dependency", "dependencies", "dep", "deps", "module",
                           "plugin", "plugins", "sdk", "lockfile"])
_PM_NAMES = frozenset(["pnpm", "npm", "yarn", "bun", "uv", "poetry", "pip", "pip3", "cargo",
                       "go", "make", "just", "npx", "then"])
# words a package manager takes as its own command, never a script of the project
_PM_COMMANDS = frozenset([
    "add", "install", "i", "remove", "rm", "uninstall", "update", "up", "upgrade", "run",
    "exec", "dlx", "x", "create", "init", "why", "list", "ls", "outdated", "audit",
    "publish", "link", "unlink", "store", "patch", "import", "config", "set", "env",
    "version", "info", "view"])


@dataclass(frozen=True, slots=True)
class Mentions:
    """Candidates of one memory, as written. Attributes: ``paths`` (relative or absolute,
    cleaned), ``deps`` (judged against manifests and lockfiles), ``words`` (judged against
    manifests only) and ``scripts``."""

    paths: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()


def _clean(token: str) -> str:
    token = token.strip().rstrip(_TRAIL).lstrip("([{'\"")
    return _LINE_SUFFIX.sub("", token)


def _path_shaped(token: str) -> bool:
    if not token or "://" in token or token.startswith(("@", "-", "~")) or " " in token:
        return False
    if "/" in token:
        return any(ch.isalpha() for ch in token) and "//" not in token
    ext = token.rsplit(".", 1)[-1].lower() if "." in token.strip(".") else ""
    return ext in _EXTENSIONS or token.lower() in ("makefile", "dockerfile", "justfile")


def mentions(text: str) -> Mentions:
    """The paths, dependencies and scripts ``text`` may name (see the module docstring),
    each once, in order of appearance."""
    paths: list[str] = []
    deps: list[str] = []
    words: list[str] = []
    scripts: list[str] = []
    prose = _CODE.sub(lambda m: " " + m.group(1) + " ", text)
    tokens = [_clean(w) for w in _WORD.findall(prose)]
    lowered = [w.lower() for w in tokens]
    packages = any(w in PACKAGE_WORDS for w in lowered)
    for span in (_clean(s) for s in _CODE.findall(text)):
        if _path_shaped(span):
            paths.append(span)
        elif " " not in span:
            (deps if packages else words).append(span)
            scripts.append(span)
    for token in _TOKEN.findall(prose):
        token = _clean(token)
        if _path_shaped(token):
            paths.append(token)
    deps += _installed(prose)
    for m in _RUN.finditer(prose):
        name = _clean(next(g for g in m.groups() if g))
        if name and name not in _PM_COMMANDS:
            scripts.append(name)
    for i, w in enumerate(tokens):
        after_use = i > 0 and lowered[i - 1] in USE_WORDS
        before_noun = i + 1 < len(tokens) and lowered[i + 1] in PACKAGE_WORDS
        if (after_use or before_noun) and lowered[i] not in ENGLISH_STOPWORDS:
            words.append(w)
    words = [w for w in words if w not in deps]
    return Mentions(_unique(paths), _unique(deps), _unique(words), _unique(scripts))


def _installed(prose: str) -> list[str]:
    """The packages of the install commands of ``prose``."""
    found = []
    for m in _INSTALL.finditer(prose):
        for w in re.split(r"[\s,;]+", prose[m.end():].split("\n", 1)[0].strip()):
            if w.lower() in ENGLISH_STOPWORDS or w.lower() in _PM_NAMES:
                break  # the command's packages end where the sentence goes on
            if not w.startswith("-"):
                found.append(_clean(w))
            if w.endswith((".", ":", "!", "?", ")")):
                break
    return found


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))
