"""Cost of the freshness check of a dream: wall time over a project of N memories.

The project: a real git worktree in a temporary folder with ``--commits`` commits (200),
each adding ten source files, a ``package.json`` declaring 40 packages and 10 scripts, and
a ``pnpm-lock.yaml`` of ``--lock-packages`` (3000) entries (about 140 KB, re-written by
every tenth commit as a real lockfile is). The memories: N (``--sizes``, 1000 and 10000)
facts said at times spread over the commits, a third naming a source file, a third a
package ("we use X", a code span), a sixth a script (``pnpm X``), the rest plain prose of
the rules corpus. Before the check a tenth of the files, 4 of the 40 packages (from the
manifest and the lockfile) and 1 of the 10 scripts are removed from the worktree (no
commit: an uncommitted change).

Timed: :func:`~opencode_memoryd.dream.freshness.check_freshness` as a dream runs it, the
marks collected in memory (the store's payload writes are not included; each is one
``set_fields``). Printed per size: memories, distinct commits they were said at, seconds,
milliseconds per memory, marked; then the peak RSS of the process (``getrusage``).
Nothing is asserted.

Run: ``.venv/bin/python bench/freshness.py [--sizes 1000,10000] [--commits 200]
[--lock-packages 3000] [--seed 7]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from opencode_memoryd.dream.freshness import check_freshness  # noqa: E402
from opencode_memoryd.models import Memory  # noqa: E402
from rules_scoring import load  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def git(repo: Path, *args: str, when: datetime = T0) -> None:
    stamp = when.isoformat()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.test",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.test",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def build(repo: Path, commits: int, lock_packages: int, rng: random.Random
          ) -> tuple[list[str], list[str], list[str]]:
    """The worktree and its history; returns (files, packages, scripts)."""
    repo.mkdir()
    git(repo, "init", "-q")
    packages = [f"pkg-{i}" for i in range(40)]
    scripts = [f"task:{i}" for i in range(10)]
    (repo / "package.json").write_text(json.dumps({
        "name": "bench", "scripts": dict.fromkeys(scripts, "x"),
        "dependencies": dict.fromkeys(packages, "1.0.0")}))
    files: list[str] = []
    for c in range(commits):
        for k in range(10):
            name = f"src/mod{c % 17}/file_{c}_{k}.ts"
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(f"export const x{k} = {c};\n")
            files.append(name)
        if c % 10 == 0:
            lock = [f"dep{rng.randrange(lock_packages * 2)}" for _ in range(lock_packages)]
            (repo / "pnpm-lock.yaml").write_text(
                "lockfileVersion: '9.0'\npackages:\n" + "".join(
                    f"  {d}@1.{c}.0:\n    resolution: {{integrity: sha512-{c}}}\n"
                    for d in sorted(set(lock + packages))))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"c{c}", when=T0 + timedelta(hours=c))
    return files, packages, scripts


def memories(n: int, root: Path, files: list[str], packages: list[str], scripts: list[str],
             commits: int, rng: random.Random) -> list[Memory]:
    prose = [f for case in load() for f, _ in case.expected]
    out = []
    for i in range(n):
        kind = i % 6
        if kind in (0, 1):
            text = f"The handler lives in `{rng.choice(files[: max(10, len(files) // 2)])}`."
        elif kind in (2, 3):
            text = f"We use {rng.choice(packages)} for the `{rng.choice(packages)}` layer."
        elif kind == 4:
            text = f"Always run `pnpm {rng.choice(scripts)}` before pushing."
        else:
            text = rng.choice(prose)
        said = T0 + timedelta(hours=rng.uniform(commits / 2, commits + 5))
        out.append(Memory(id=str(i), content=text, type="project", scope="project",
                          project_id="bench", project_root=str(root), session_id="s",
                          message_ids=[], source="rules", created_at=said, updated_at=said,
                          said_at=said))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--lock-packages", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "project"
        files, packages, scripts = build(repo, args.commits, args.lock_packages, rng)
        for name in rng.sample(files, len(files) // 10):
            (repo / name).unlink()
        pkg = json.loads((repo / "package.json").read_text())
        for name in packages[:4]:
            del pkg["dependencies"][name]
        del pkg["scripts"][scripts[0]]
        (repo / "package.json").write_text(json.dumps(pkg))
        lock = (repo / "pnpm-lock.yaml").read_text()
        for name in packages[:4]:  # and `pnpm install` took them out of the lockfile
            lock = lock.replace(f"  {name}@1.", f"  gone-{name}@1.")
        (repo / "pnpm-lock.yaml").write_text(lock)
        lock_kb = (repo / "pnpm-lock.yaml").stat().st_size / 1024
        print(f"worktree: {args.commits} commits, {len(files)} files, lockfile {lock_kb:.0f} KB")
        print(f"{'memories':>9} {'commits':>8} {'seconds':>8} {'ms/memory':>10} {'marked':>7}")
        for n in (int(s) for s in args.sizes.split(",")):
            mems = memories(n, repo, files, packages, scripts, args.commits, rng)
            marks: dict[str, list[dict[str, str]]] = {}
            t0 = time.perf_counter()
            report = check_freshness(mems, datetime.now(UTC), marks.__setitem__)
            dt = time.perf_counter() - t0
            said_at = {int(m.said.timestamp() // 3600) for m in mems}
            print(f"{n:>9} {len(said_at):>8} {dt:>8.2f} {1000 * dt / n:>10.3f} "
                  f"{len(report.marked):>7}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
