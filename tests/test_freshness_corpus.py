"""False alarms of the freshness check over the rules corpus: every message and expected
memory of ``tests/rules_corpus`` and both texts of each pair of ``tests/flip_corpus.py``
(1,636 texts) judged against a real git worktree that
declares the common packages of a JavaScript and a Python project (and a lockfile full of
packages with plain-word names) and holds every path the texts name.

Nothing changed: nothing is flagged. Every dependency, lockfile package and script
removed: only texts that name one *as* a dependency or a script are flagged, never a
plain word that happens to be a package name ("next time", "100 requests per minute",
"?debug=1", "for the moment", "the `events` table")."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from flip_corpus import FAITHFUL, FLIPS
from opencode_memoryd.dream.freshness import check_freshness
from opencode_memoryd.dream.mentions import mentions
from opencode_memoryd.models import Memory
from rules_scoring import load


def words(text: str) -> list[str]:
    """The words of ``text``."""
    return text.split()


NPM = words("react react-dom next vite jest vitest mocha express debug commander chalk "
            "glob yargs ws cors dotenv zod lodash moment axios prettier eslint typescript "
            "webpack storybook playwright cypress tailwindcss redux hono prisma drizzle-orm "
            "turbo nx husky")
LOCK_ONLY = words("once which ms path semver color mime depd bytes statuses vary cookie send "
                  "fresh etag inherits wrappy util events buffer process test string-width "
                  "esbuild rollup")
PYTHON = words("requests flask django fastapi pytest black ruff mypy celery redis boto3 "
               "numpy pandas httpx pydantic attrs click rich sqlalchemy alembic uvicorn poetry")
SCRIPTS = words("build test lint dev start test:unit test:e2e typecheck format")
#: Texts of the corpus holding a package name above as a plain word, never used as one.
PLAIN = ("requests per minute", "ext time", "?debug=1", "for the moment", "`events` table",
         "when I click", "next to", "DEBUG", "while you debug", "Next, ")
EARLIER = "2026-01-02T10:00:00+00:00"


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test",
           "GIT_AUTHOR_DATE": EARLIER, "GIT_COMMITTER_DATE": EARLIER}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def _declare(repo: Path, npm: list[str], lock: list[str], python: list[str],
             scripts: list[str]) -> None:
    (repo / "package.json").write_text(json.dumps(
        {"name": "acme-web", "scripts": dict.fromkeys(scripts, "x"),
         "dependencies": dict.fromkeys(npm, "1.0.0")}))
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "acme"\ndependencies = [' + ", ".join(f'"{d}"' for d in python)
        + "]\n")
    (repo / "pnpm-lock.yaml").write_text(
        "lockfileVersion: '9.0'\npackages:\n" + "".join(
            f"  {d}@1.0.0:\n    resolution: {{integrity: sha512-x}}\n" for d in lock)
        if lock else "lockfileVersion: '9.0'\npackages: {}\n")
    (repo / "Makefile").write_text("".join(f"{t}:\n\techo {t}\n" for t in scripts
                                           if ":" not in t) or "all:\n\techo\n")


def test_the_rules_corpus_raises_no_false_alarm(tmp_path: Path) -> None:
    texts = [f for c in load() for f, _ in c.expected] + [c.text for c in load()]
    texts += [t for pair in FLIPS + FAITHFUL for t in pair]
    repo = tmp_path / "acme-web"
    repo.mkdir()
    git(repo, "init", "-q")
    for text in texts:  # the worktree holds every path the corpus names
        for p in mentions(text).paths:
            rel = os.path.normpath(p)
            if not p.startswith(("/", "~")) and not rel.startswith("..") and rel != ".":
                target = repo / rel / "keep" if p.endswith("/") else repo / rel
                if not target.parent.is_file() and not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if not target.is_dir():
                        target.write_text("x\n")
    _declare(repo, NPM, NPM + LOCK_ONLY, PYTHON, SCRIPTS)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    now = datetime.now(UTC)
    memories = [Memory(id=str(i), content=t, type="project", scope="project",
                       project_id="p", project_root=str(repo), session_id="s",
                       message_ids=[], source="rules", created_at=now, updated_at=now)
                for i, t in enumerate(texts)]
    assert len(memories) > 1400

    marks: dict[str, list[dict[str, str]]] = {}
    report = check_freshness(memories, now, marks.__setitem__)
    assert report.checked == len(memories) and report.stale == 0 and not marks

    _declare(repo, [], [], [], [])  # every package, lockfile entry and script gone
    report = check_freshness(memories, now, marks.__setitem__)
    flagged = {m["what"].lower() for found in marks.values() for m in found}
    flagged_texts = [memories[int(i)].content for i in marks]
    assert all(sum(p in t for t in texts) for p in PLAIN)  # the corpus holds each
    assert not [t for t in flagged_texts if any(p in t for p in PLAIN)]
    assert report.stale == len(marks) == 46  # each names a package as used, or a script
    assert flagged == {"alembic", "black", "build", "celery", "dev", "fastapi", "httpx",
                       "jest", "lint", "numpy", "nx", "poetry", "pytest", "react", "redis",
                       "requests", "test", "vite", "zod"}
    for found in marks.values():
        for m in found:
            assert m["kind"] in ("dependency", "script")
            assert m["where"] in ("package.json", "pyproject.toml", "Makefile")
