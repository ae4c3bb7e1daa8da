"""Dream cost at scale: wall time and LLM tokens of a dream over stores of 1k and 10k memories.

Store: for each size N, a seeded store is built in a temporary folder — a real
``EdgeStore`` on disk and a real state file — with N memories spread over 10 projects
(``--projects``; Zipf-like sizes: the biggest holds ~28% of the project memories) and the
user scope (~8%). The texts are developer facts made deterministically from ``--seed`` by templates
(services, ports, paths, commands, versions, libraries, runbooks, user preferences). A
known share is redundant: ``--dup-share`` (10%) duplicates of an earlier memory of the same
scope and type (a third exact copies under another id, a third case/punctuation variants, a
third reworded by one word, e.g. a ``Note:`` prefix) and ``--supersede-share`` (5%) newer
facts replacing an older one (``... uses npm`` then ``... uses pnpm, not npm anymore``).
The memories are upserted directly (batches), not through ``write_memories``: write-time
dedup would fold most duplicates away, and the point is a store that needs consolidation
(e.g. memories written before dedup existed, or duplicates its top-5 search missed).

Dreams: the seeded store is copied before each run, and each run goes through the code the
CLI and daemon use: ``App.build_dreamer`` (default settings: ``max_retire_share`` 0.3,
``max_groups`` 50 per dream, groups of at most 8) and ``App.run_dream`` (dream, apply,
journal entry). Four runs per size:

* rules mode (no LLM), the biggest project, then every scope (``App.dream_scopes``, as the
  daemon's schedule does, without the gates);
* LLM mode against ``tests/fake_openai.py`` serving real HTTP on 127.0.0.1, same two
  targets. The fake plays a perfect model: it knows the seeded truth, so it merges the
  duplicates of a group into the original's text, supersedes an old fact by its newer
  replacement, and keeps everything else. It answers at once, so the times exclude model
  latency (a real model adds its own seconds per call). Tokens are the server's ``usage``
  as recorded in the dream result: the fake counts request body bytes / 4 in and
  answer bytes / 4 out.

With ``--repeat K`` (default 2) the biggest project is then dreamed K more times on the
same store, as later scheduled dreams would: each dream plans only the first ``max_groups``
groups (ordered by their oldest member), so this shows whether the deferred groups are ever
reached.

Printed per run: wall seconds, of which grouping (``Dreamer.groups``) and writing
(``store.upsert``); memories before and after; merged, superseded, and ``wrong`` (retired
memories the seed did not make redundant, i.e. distinct facts taken out of the active
store); groups planned / deferred / rejected; LLM calls, tokens in and out, tokens in per
memory. Then the ratio of the largest size to the smallest for time and tokens, and the
peak RSS of the process (``getrusage``). Nothing is asserted about time; the write phase
waits on disk flushes, so its seconds vary with the disk.

HOME, the XDG folders and TMPDIR point into the temporary folder (for this process too);
nothing leaves 127.0.0.1.

Run: ``.venv/bin/python bench/dream_scale.py [--sizes 1000,10000] [--modes rules,llm]
[--repeat 2] [--seed 7] [--keep]``
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "daemon"))
sys.path.insert(0, str(ROOT / "bench"))

from _daemon_common import home_dirs  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from opencode_memoryd import logs  # noqa: E402
from opencode_memoryd.compose import App  # noqa: E402
from opencode_memoryd.config.loader import parse_config  # noqa: E402
from opencode_memoryd.dream.dreamer import Dreamer  # noqa: E402
from opencode_memoryd.dream.journal import DreamJournal  # noqa: E402
from opencode_memoryd.models import Memory, content_hash, point_id  # noqa: E402
from opencode_memoryd.store.edge import EdgeStore  # noqa: E402
from opencode_memoryd.usecases.dreams import dream_scopes, run_dream  # noqa: E402
from opencode_memoryd.usecases.service import open_local  # noqa: E402

NAMESPACE = uuid.UUID("9a4e7c21-5b3d-5f08-8e6a-1c2d3e4f5a6b")  # bench-only ids of copies
T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SPAN = timedelta(days=180)
PROJECTS = ("acme-web", "data-pipeline", "billing-api", "mobile-app", "infra-terraform",
            "ml-platform", "docs-site", "cli-tools", "search-svc", "auth-gateway",
            "chat-bot", "geo-tiles", "ledger-core", "media-cdn", "admin-portal")
USER_SHARE = 0.08

# --------------------------------------------------------------------------- vocabulary

COMPONENTS = ("auth", "billing", "search", "gateway", "scheduler", "notifier", "ingest",
              "reporting", "checkout", "inventory", "profile", "media", "export", "webhook",
              "audit", "metrics", "cache", "mailer", "payments", "catalog", "session",
              "upload", "admin", "analytics", "sync", "pricing", "ledger", "geo", "chat",
              "feed", "invoice", "tenant", "quota", "thumbnail", "importer", "signup")
TEAMS = ("platform", "payments", "growth", "core", "data", "infra", "mobile", "search",
         "security", "frontend")
DIRS = ("src", "services", "packages", "apps", "internal", "lib", "cmd", "modules")
DBS = (("PostgreSQL", ("14", "15", "16")), ("MySQL", ("8.0", "8.4")),
       ("SQLite", ("3.45",)), ("MongoDB", ("6.0", "7.0")), ("Redis", ("7.2",)),
       ("ClickHouse", ("24.3",)))
RUNTIMES = (("Node.js", ("18", "20", "22")), ("Python", ("3.10", "3.11", "3.12")),
            ("Go", ("1.21", "1.22", "1.23")), ("Java", ("17", "21")),
            ("Ruby", ("3.2", "3.3")))
PURPOSES = (("HTTP requests", ("axios", "ky", "got", "undici")),
            ("caching", ("memcached", "Redis", "Valkey")),
            ("background jobs", ("Celery", "Dramatiq", "RQ", "BullMQ")),
            ("logging", ("log4js", "pino", "winston", "structlog")),
            ("input validation", ("Joi", "Zod", "Yup", "pydantic")),
            ("date handling", ("Moment.js", "date-fns", "Luxon", "dayjs")),
            ("feature flags", ("LaunchDarkly", "Unleash", "Flagsmith")),
            ("tracing", ("Jaeger", "OpenTelemetry", "Zipkin")),
            ("message queues", ("RabbitMQ", "Kafka", "NATS", "SQS")),
            ("ORM access", ("Prisma", "TypeORM", "SQLAlchemy", "Drizzle")),
            ("PDF rendering", ("wkhtmltopdf", "Puppeteer", "WeasyPrint")),
            ("e-mail delivery", ("SendGrid", "Postmark", "SES", "Mailgun")))
PACKAGE_MANAGERS = ("npm", "pnpm", "yarn", "poetry", "uv", "cargo", "bun")
TEST_CMDS = ("test", "test:unit", "test:int", "vitest --run", "jest --ci", "pytest -q",
             "go test ./...")
SCHEDULERS = ("cron", "a Kubernetes CronJob", "the Airflow DAG", "Temporal", "systemd timers")
LOG_DESTS = ("Loki", "CloudWatch", "Datadog", "stdout only", "Elasticsearch", "Papertrail")
QUEUES = ("a Kafka", "an SQS", "a RabbitMQ", "a NATS", "a Pub/Sub")
EVENTS = ("created", "updated", "deleted", "failed", "retried", "settled", "expired")
ENVS = ("staging", "production", "eu-west-1", "us-east-1", "the canary pool",
        "the blue cluster", "the green cluster", "Fly.io", "Render", "Heroku")
FLAGS = ("v2", "beta", "rollout", "new_ui", "fast_path", "batching", "async")
THINGS = ("rate limiter", "retry policy", "timeout", "batch size", "worker pool",
          "connection pool", "circuit breaker", "page size")
EXTS = ("yaml", "toml", "json", "env")
MIGRATORS = (("alembic", "upgrade head"), ("prisma", "migrate deploy"),
             ("goose", "up"), ("flyway", "migrate"), ("knex", "migrate:latest"))
TOPICS = ("architecture", "onboarding", "rollback", "scaling", "oncall", "data-model",
          "failover", "backfill", "capacity")
STYLES = ("early returns", "small pure functions", "explicit types", "dataclasses over dicts",
          "composition over inheritance", "table-driven tests", "descriptive names",
          "guard clauses", "immutable data")
LANGS = ("Python", "TypeScript", "Go", "Rust", "Kotlin", "Elixir", "C#", "Ruby", "Swift",
         "Haskell", "Java", "Zig")
EDITORS = ("Neovim", "VS Code", "Helix", "Emacs", "Zed", "IntelliJ IDEA", "Sublime Text")
KEYMAPS = ("vim", "emacs", "default", "kakoune-style")
TIMEZONES = ("Europe/Paris", "America/New_York", "Asia/Tokyo", "Europe/Berlin",
             "America/Los_Angeles", "Australia/Sydney", "Asia/Kolkata", "UTC")
OSES = ("Fedora 40", "macOS 14", "Ubuntu 24.04", "Arch Linux", "NixOS 24.05", "Debian 12")
MACHINES = ("ThinkPad X1", "MacBook Pro M3", "Framework 13", "desktop with 64 GB RAM",
            "Dell XPS 15")
ANSWER_STYLES = ("concise", "detailed", "bullet-point", "step-by-step", "code-first",
                 "short and direct")
SHELLS = ("zsh", "fish", "bash", "nushell")
DANGEROUS = ("git push --force", "rm -rf build", "terraform apply", "kubectl delete",
             "docker system prune", "npm publish", "git reset --hard")
TASKS = ("searching code", "formatting", "linting", "HTTP calls", "JSON processing",
         "benchmarks", "diffs")
TOOL_PAIRS = (("ripgrep", "grep"), ("ruff", "flake8"), ("biome", "eslint"), ("httpie", "curl"),
              ("jq", "python -c"), ("hyperfine", "time"), ("delta", "diff"), ("fd", "find"))
REWORD_PREFIXES = ("Note:", "Reminder:", "Remember:", "Important:", "Also:")


@dataclass
class Fact:
    """One memory to seed and what the fake model knows about it."""

    content: str
    type: str
    kind: str = "fact"  # fact, dup (of ``ref``), sup (supersedes ``ref``)
    ref: int | None = None  # index in the scope's fact list
    successor: tuple[str, str] | None = None  # (type, text) that can supersede this fact


@dataclass
class Truth:
    """The seeded truth by memory id: the fake model plans from it."""

    dup_of: dict[str, str] = field(default_factory=dict)  # copy id -> original id
    supersedes: dict[str, str] = field(default_factory=dict)  # new id -> old id
    content: dict[str, str] = field(default_factory=dict)


def _pick(rng: random.Random, seq: tuple[Any, ...]) -> Any:
    return seq[rng.randrange(len(seq))]


def _project_fact(rng: random.Random, profile: dict[str, Any]) -> Fact:
    """A fact of one project: (type, text) and, for some, the newer fact replacing it."""
    c = _pick(rng, COMPONENTS)
    pm = profile["pm"]
    k = rng.randrange(12)
    if k == 0:
        port = rng.randrange(3000, 9900)
        new_port = port + rng.randrange(1, 90)
        return Fact(f"The {c} service listens on port {port} in development.", "project",
                    successor=("project", f"The {c} service moved to port {new_port} in "
                                          f"development; port {port} is no longer used."))
    if k == 1:
        return Fact(f"The {c} module lives in {_pick(rng, DIRS)}/{c}/ and is owned by the "
                    f"{_pick(rng, TEAMS)} team.", "project")
    if k == 2:
        return Fact(f"Run the {c} tests with `{pm} {_pick(rng, TEST_CMDS)} {c}` from the "
                    f"repository root.", "project")
    if k == 3:
        db, versions = _pick(rng, DBS)
        return Fact(f"The {c} service stores its data in {db} {_pick(rng, versions)}, "
                    f"database `{c}_{_pick(rng, ('main', 'prod', 'app', 'core'))}`.", "project")
    if k == 4:
        env = f"{c.upper()}_{_pick(rng, ('TIMEOUT_MS', 'MAX_RETRIES', 'POOL_SIZE', 'URL'))}"
        return Fact(f"The environment variable {env} configures the {c} "
                    f"{_pick(rng, THINGS)}.", "project")
    if k == 5:
        old_v = rng.randrange(1, 4)
        return Fact(f"The {c} API is served under /api/v{old_v}/{c} behind the gateway.",
                    "project",
                    successor=("project", f"The {c} API is now served under "
                                          f"/api/v{old_v + 1}/{c} behind the gateway; "
                                          f"/api/v{old_v}/{c} is retired."))
    if k == 6:
        purpose, libs = _pick(rng, PURPOSES)
        old, new = rng.sample(libs, 2)
        return Fact(f"The {c} service uses {old} for {purpose}.", "project",
                    successor=("project", f"The {c} service now uses {new} for {purpose}, "
                                          f"replacing {old}."))
    if k == 7:
        rt, versions = _pick(rng, RUNTIMES)
        i = rng.randrange(len(versions))
        fact = Fact(f"The {c} worker runs on {rt} {versions[i]}.", "project")
        if i + 1 < len(versions):
            fact.successor = ("project", f"The {c} worker now runs on {rt} "
                                         f"{versions[i + 1]}, upgraded from {rt} "
                                         f"{versions[i]}.")
        return fact
    if k == 8:
        old, new = rng.sample(ENVS, 2)
        return Fact(f"Deploys of the {c} service go to {old} after review.", "project",
                    successor=("project", f"Deploys of the {c} service now go to {new} "
                                          f"after review, instead of {old}."))
    if k == 9:
        tool, cmd = _pick(rng, MIGRATORS)
        return Fact(f"Migrations for {c} are in migrations/{c}/ and run with "
                    f"`{tool} {cmd}`.", "project")
    if k == 10:
        return Fact(f"The {c} jobs run every {rng.choice((5, 10, 15, 30, 60))} minutes via "
                    f"{_pick(rng, SCHEDULERS)}.", "project")
    # reference and feedback facts of the project
    r = rng.randrange(6)
    if r == 0:
        return Fact(f"The design doc for {c} {_pick(rng, TOPICS)} is at "
                    f"https://wiki.{profile['org']}.dev/{c}/{_pick(rng, TOPICS)}.", "reference")
    if r == 1:
        return Fact(f"The runbook for {c} incidents is docs/runbooks/{c}-"
                    f"{_pick(rng, TOPICS)}.md.", "reference")
    if r == 2:
        return Fact(f"Logs of the {c} worker go to {_pick(rng, LOG_DESTS)}, "
                    f"index `{c}-{_pick(rng, EVENTS)}`.", "reference")
    if r == 3:
        smell = _pick(rng, ("deep nesting", "global state", "magic numbers", "long functions"))
        return Fact(f"Prefer {_pick(rng, STYLES)} in the {c} code; reviewers reject {smell}.",
                    "feedback")
    if r == 4:
        return Fact(f"Keep {c} pull requests under {rng.choice((200, 300, 400, 500))} changed "
                    f"lines and add a changelog entry.", "feedback")
    return Fact(f"Feature flag `{c}_{_pick(rng, FLAGS)}` gates the new {c} "
                f"{_pick(rng, THINGS)}; do not remove it before the rollout ends.", "feedback")


def _user_fact(rng: random.Random) -> Fact:
    k = rng.randrange(9)
    if k == 0:
        a, b = rng.sample(LANGS, 2)
        return Fact(f"The user writes mostly {a} and reads {b} fluently.", "user")
    if k == 1:
        old, new = rng.sample(EDITORS, 2)
        km = _pick(rng, KEYMAPS)
        return Fact(f"The user edits code in {old} with {km} keybindings.", "user",
                    successor=("user", f"The user now edits code in {new} with {km} "
                                       f"keybindings, no longer in {old}."))
    if k == 2:
        return Fact(f"The user's timezone is {_pick(rng, TIMEZONES)}; avoid scheduling "
                    f"before {rng.choice((8, 9, 10))}:00.", "user")
    if k == 3:
        return Fact(f"The user runs {_pick(rng, OSES)} on a {_pick(rng, MACHINES)} with "
                    f"{_pick(rng, SHELLS)} as the shell.", "user")
    if k == 4:
        return Fact(f"The user prefers {_pick(rng, ANSWER_STYLES)} answers with "
                    f"{_pick(rng, LANGS)} examples.", "feedback")
    if k == 5:
        return Fact(f"Never run `{_pick(rng, DANGEROUS)}` for the user without asking "
                    f"first.", "feedback")
    if k == 6:
        new, old = _pick(rng, TOOL_PAIRS)
        return Fact(f"Use {new} rather than {old} for {_pick(rng, TASKS)} on the user's "
                    f"machine.", "feedback")
    if k == 7:
        return Fact(f"The user likes {_pick(rng, STYLES)} and dislikes "
                    f"{_pick(rng, ('long comments', 'one-letter names', 'clever one-liners'))}"
                    f" in {_pick(rng, LANGS)}.", "feedback")
    handle = f"{_pick(rng, ('dev', 'code', 'hack', 'ops'))}{rng.randrange(10, 9999)}"
    return Fact(f"The user's GitHub handle is @{handle} and their work e-mail domain is "
                f"{_pick(rng, ('example.com', 'example.org', 'corp.example'))}.", "user")


def _variant(rng: random.Random, text: str) -> str:
    """A duplicate of ``text``: the same words, or one word more (a prefix)."""
    k = rng.randrange(3)
    if k == 0:
        return text  # exact copy under another id
    if k == 1:  # case and punctuation only: the same normalised text
        return text[0].lower() + text[1:-1] + ("!" if text.endswith(".") else text[-1])
    return f"{_pick(rng, REWORD_PREFIXES)} {text}"


def _scope_facts(rng: random.Random, n: int, make: Callable[[], Fact],
                 dup_share: float, sup_share: float) -> list[Fact]:
    """``n`` facts of one scope: fresh ones, duplicates of earlier ones, and newer facts
    superseding earlier ones, in creation order."""
    facts: list[Fact] = []
    seen: set[tuple[str, str]] = set()
    supersedable: list[int] = []
    originals: list[int] = []
    while len(facts) < n:
        roll = rng.random()
        if roll < dup_share and originals:
            i = originals[rng.randrange(len(originals))]
            facts.append(Fact(_variant(rng, facts[i].content), facts[i].type, "dup", i))
            continue
        if roll < dup_share + sup_share and supersedable:
            i = supersedable.pop(rng.randrange(len(supersedable)))
            type_, text = facts[i].successor  # type: ignore[misc]
            if (type_, text) not in seen:
                seen.add((type_, text))
                facts.append(Fact(text, type_, "sup", i))
                continue
        for _ in range(200):
            f = make()
            if (f.type, f.content) not in seen:
                break
        else:  # the template space is used up: make the text unique
            f.content = f"{f.content[:-1]} (fact {len(facts)})."
        seen.add((f.type, f.content))
        facts.append(f)
        originals.append(len(facts) - 1)
        if f.successor is not None:
            supersedable.append(len(facts) - 1)
    return facts


@dataclass
class Seeded:
    memories: list[Memory]
    truth: Truth
    scope_sizes: dict[str | None, int]  # project key (None = user) -> memories
    roots: dict[str | None, str | None]
    dups: int
    sups: int


def build_memories(n: int, *, seed: int, projects: int, dup_share: float,
                   sup_share: float) -> Seeded:
    """The deterministic seeded store of ``n`` memories (see the module docstring)."""
    rng = random.Random(seed * 1_000_003 + n)
    names = PROJECTS[:projects]
    weights = [1 / (i + 1) ** 0.8 for i in range(len(names))]
    n_user = round(n * USER_SHARE)
    n_proj = n - n_user
    sizes = [int(n_proj * w / sum(weights)) for w in weights]
    sizes[0] += n_proj - sum(sizes)
    plan: list[tuple[str | None, int]] = [(None, n_user), *zip(names, sizes, strict=False)]

    memories: list[Memory] = []
    truth = Truth()
    scope_sizes: dict[str | None, int] = {}
    roots: dict[str | None, str | None] = {}
    dups = sups = 0
    for key, size in plan:
        if key is None:
            facts = _scope_facts(rng, size, lambda: _user_fact(rng), dup_share, sup_share)
            root = None
        else:
            profile = {"pm": _pick(rng, PACKAGE_MANAGERS),
                       "org": key.split("-")[0] + str(rng.randrange(10, 99))}
            facts = _scope_facts(rng, size, lambda p=profile: _project_fact(rng, p),
                                 dup_share, sup_share)
            root = f"/tmp/projects/{key}"
        scope = "user" if key is None else "project"
        scope_sizes[key], roots[key] = len(facts), root
        step = SPAN / max(len(facts), 1)
        ids: list[str] = []
        for i, f in enumerate(facts):
            created = T0 + step * i + timedelta(seconds=rng.randrange(0, 60))
            pid = point_id(scope, key, f.type, f.content)  # type: ignore[arg-type]
            if f.kind == "dup":
                pid = str(uuid.uuid5(NAMESPACE, f"{key}|{i}|{f.content}"))
                truth.dup_of[pid] = ids[f.ref]  # type: ignore[index]
                dups += 1
            elif f.kind == "sup":
                truth.supersedes[pid] = ids[f.ref]  # type: ignore[index]
                sups += 1
            ids.append(pid)
            truth.content[pid] = f.content
            session = f"ses_{(key or 'user')[:6]}_{i // 7:05d}"
            memories.append(Memory(
                id=pid, content=f.content, type=f.type, scope=scope,  # type: ignore[arg-type]
                project_id=key, project_root=root, session_id=session,
                message_ids=[f"msg_{(key or 'user')[:6]}_{i:06d}"],
                source="manual" if f.kind == "dup" and i % 2 else "llm",
                created_at=created, updated_at=created, session_ids=[session],
                content_hash=content_hash(f.content)))
    return Seeded(memories, truth, scope_sizes, roots, dups, sups)


# --------------------------------------------------------------------------- the fake model

_LINE = re.compile(r"^\[([0-9a-f-]{36})\] ", re.MULTILINE)


def planner(truth: Truth) -> Callable[[dict[str, Any]], Any]:
    """The fake model's answer to a dream prompt: supersede known replaced facts, merge
    known duplicates into the original's text, keep the rest."""

    def root(i: str) -> str:
        while i in truth.dup_of:
            i = truth.dup_of[i]
        return i

    def answer(body: dict[str, Any]) -> Any:
        ids = list(dict.fromkeys(_LINE.findall(body["messages"][1]["content"])))
        in_group = set(ids)
        used: set[str] = set()
        ops: list[dict[str, Any]] = []
        for i in ids:
            old = truth.supersedes.get(i)
            if old in in_group and old not in used and i not in used:
                used.update((i, old))  # type: ignore[arg-type]
                ops.append({"op": "supersede", "memory_ids": [i, old], "new_content": None,
                            "superseded_ids": [old], "reason": "replaced by a newer fact"})
        clusters: dict[str, list[str]] = {}
        for i in ids:
            if i not in used:
                clusters.setdefault(root(i), []).append(i)
        for r, members in clusters.items():
            if len(members) < 2:
                continue
            used.update(members)
            ops.append({"op": "merge", "memory_ids": members,
                        "new_content": truth.content[r], "superseded_ids": [],
                        "reason": "the same fact"})
        rest = [i for i in ids if i not in used]
        if rest:
            ops.append({"op": "keep", "memory_ids": rest, "new_content": None,
                        "superseded_ids": [], "reason": "distinct facts"})
        return {"operations": ops}

    return answer


# --------------------------------------------------------------------------- runs


@dataclass
class Row:
    size: int
    mode: str
    target: str
    seconds: float
    group_seconds: float
    write_seconds: float
    writes: int
    before: int
    after: int
    merged: int
    superseded: int
    wrong: int
    groups: int
    deferred: int
    rejected: int
    calls: int
    tokens_in: int
    tokens_out: int
    scopes: int
    statuses: dict[str, int]


class _Timer:
    """Seconds and calls spent in one wrapped method (installed once for the bench)."""

    def __init__(self, owner: type, name: str) -> None:
        self.seconds = 0.0
        self.calls = 0
        inner = getattr(owner, name)

        def timed(obj: Any, *a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(obj, *a, **kw)
            finally:
                self.seconds += time.perf_counter() - t
                self.calls += 1

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.seconds = 0.0
        self.calls = 0


#: Set by :func:`main`: ``Dreamer.groups`` and ``EdgeStore.upsert``.
TIMERS: dict[str, _Timer] = {}


def wrong_retirements(entries: list[dict[str, Any]], truth: Truth) -> int:
    """Memories a dream retired that the seed did not make redundant: merged into a
    memory that is not a copy of the same original, or superseded by a memory that is
    not their seeded replacement."""

    def root(i: str) -> str:
        while i in truth.dup_of:
            i = truth.dup_of[i]
        return i

    wrong = 0
    for e in entries:
        for op in e.get("operations") or []:
            new = op.get("new_id")
            if op.get("op") == "merge":
                retired = [i for i in op["memory_ids"] if i != new]
                wrong += sum(1 for i in retired if root(i) != root(str(new)))
            elif op.get("op") == "supersede":
                wrong += sum(1 for i in op["superseded_ids"]
                             if root(i) != truth.supersedes.get(str(new)))
    return wrong


def run_dreams(work: Path, seed_store: Path, seeded: Seeded, *, size: int, mode: str,
               target: str, fake: FakeOpenAI | None, env: dict[str, str],
               repeat: int = 0) -> list[Row]:
    """Copy the seeded store, then dream the biggest project or every scope through the
    App (build_dreamer, dream_scopes, run_dream). With ``repeat``, the biggest project is
    dreamed that many more times on the same store (as later scheduled dreams would).

    Returns:
        One row for the dream (or the dreams of every scope), then one per repeat.
    """
    run = work / f"{size}-{mode}-{target}"
    shutil.copytree(seed_store, run / "store")
    doc: dict[str, Any] = {
        "extraction": {"mode": mode},
        "qdrant": {"path": str(run / "store")},
        "state": {"dir": str(run / "state")},
    }
    if fake is not None:
        doc["llm"] = {"base_url": fake.base_url, "model": "bench-planner", "max_retries": 0}
    app = App(config=parse_config(doc), env=env)
    journal = DreamJournal(app.journal_path)
    rows: list[Row] = []
    with open_local(app) as service:
        dreamer, store = service.dreamer, service.store
        assert dreamer.mode == mode, (dreamer.mode, mode)
        if target == "biggest":
            key = max((k for k in seeded.scope_sizes if k is not None),
                      key=lambda k: seeded.scope_sizes[k])
            rounds = 1 + repeat
        else:
            rounds = 1
        for n in range(rounds):
            for t in TIMERS.values():
                t.reset()
            calls_before = len(fake.chat_requests) if fake is not None else 0
            entries: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            if target == "biggest":
                scopes: dict[str | None, str | None] = {key: seeded.roots[key]}
            else:
                scopes = dream_scopes(store)
            for k, root in scopes.items():
                entries.append(run_dream(dreamer, journal, k, root, trigger="forced"))
            seconds = time.perf_counter() - t0
            rows.append(_row(entries, seeded.truth, size=size, mode=mode,
                             target=target if n == 0 else f"{target}#{n + 1}",
                             seconds=seconds,
                             calls=(len(fake.chat_requests) - calls_before) if fake else 0))
        if fake is not None and getattr(dreamer.planner, "close", None):
            dreamer.planner.close()
    return rows


def _row(entries: list[dict[str, Any]], truth: Truth, *, size: int, mode: str, target: str,
         seconds: float, calls: int) -> Row:
    def total(name: str) -> int:
        return sum(int((e.get("counts") or {}).get(name, 0)) for e in entries)

    statuses: dict[str, int] = {}
    for e in entries:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    return Row(
        size=size, mode=mode, target=target, seconds=seconds,
        group_seconds=TIMERS["groups"].seconds, write_seconds=TIMERS["upsert"].seconds,
        writes=TIMERS["upsert"].calls,
        before=total("before"), after=total("after"), merged=total("merged"),
        superseded=total("superseded"), wrong=wrong_retirements(entries, truth),
        groups=total("groups"), deferred=total("groups_deferred"),
        rejected=sum(len(e.get("rejected") or []) for e in entries), calls=calls,
        tokens_in=sum(int(e.get("tokens_in") or 0) for e in entries),
        tokens_out=sum(int(e.get("tokens_out") or 0) for e in entries),
        scopes=len(entries), statuses=statuses,
    )


def seed_store(path: Path, memories: list[Memory], batch: int = 500) -> float:
    t = time.perf_counter()
    store = EdgeStore(path)
    try:
        for i in range(0, len(memories), batch):
            store.upsert(memories[i:i + batch])
    finally:
        store.close()
    return time.perf_counter() - t


def sandbox_env(root: Path) -> dict[str, str]:
    """HOME and the XDG folders inside ``root``; also applied to this process, so nothing
    (the openai SDK included) can read or write the real home directory."""
    env = home_dirs(root)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENCODE_DB", "OPENCODE_MEMORYD_CONFIG",
                 "OPENCODE_MEMORYD_FAULT", "XDG_RUNTIME_DIR"):
        os.environ.pop(name, None)
    os.environ.update(env)
    return env


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# --------------------------------------------------------------------------- output

HEADER = (f"{'size':>6} {'mode':5} {'scope':10} {'seconds':>7} {'group s':>7} "
          f"{'write s':>7} {'before':>6} {'after':>6} {'merged':>6} {'supers':>6} "
          f"{'wrong':>5} {'groups':>6} {'defer':>5} {'rej':>4} {'calls':>5} {'tok in':>7} "
          f"{'tok out':>7} {'in/mem':>6}")


def fmt(r: Row) -> str:
    scope = f"all ({r.scopes})" if r.target == "all" else r.target
    per_mem = f"{r.tokens_in / max(r.before, 1):.1f}" if r.mode == "llm" else "-"
    return (f"{r.size:>6} {r.mode:5} {scope:10} {r.seconds:>7.2f} {r.group_seconds:>7.2f} "
            f"{r.write_seconds:>7.2f} {r.before:>6} {r.after:>6} {r.merged:>6} "
            f"{r.superseded:>6} {r.wrong:>5} {r.groups:>6} {r.deferred:>5} {r.rejected:>4} "
            f"{r.calls:>5} {r.tokens_in:>7} {r.tokens_out:>7} {per_mem:>6}")


NOTES = """\
seconds: wall time of the dream(s) through App.run_dream (store copy excluded); group s:
  of which in Dreamer.groups (candidate pairs, text similarity, union-find); write s: of
  which in store.upsert (the dream applies one memory per upsert, each flushed to disk).
before/after: active memories of the scope(s); merged, supers(eded): memories retired;
  wrong: retired memories the seed did not make redundant (merged into a memory that is
  not a copy of the same original, or superseded by something else than their seeded
  replacement): facts that left the active store.
groups: groups planned (at most max_groups = 50 per dream); defer: groups found beyond that,
  left for later dreams; rej: groups whose plan failed a check or hit the retire cap.
biggest#k: the k-th dream in a row of the biggest project on the same store.
llm rows: the fake model answers at once, so the seconds exclude model latency; calls =
  groups sent to the model; tokens = the fake's usage (request bytes / 4 in, answer bytes
  / 4 out); in/mem = tokens in per memory of the scope(s)."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000",
                   help="comma-separated store sizes (default 1000,10000)")
    p.add_argument("--seed", type=int, default=7, help="seed of the generated texts")
    p.add_argument("--projects", type=int, default=10, help=f"projects (at most {len(PROJECTS)})")
    p.add_argument("--dup-share", type=float, default=0.10,
                   help="share of duplicates of an earlier memory (default 0.10)")
    p.add_argument("--supersede-share", type=float, default=0.05,
                   help="share of newer facts superseding an earlier one (default 0.05)")
    p.add_argument("--modes", default="rules,llm", help="rules, llm or both (default)")
    p.add_argument("--repeat", type=int, default=2,
                   help="further dreams of the biggest project on the same store (default 2)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not 1 <= args.projects <= len(PROJECTS) or not sizes or any(n < 20 for n in sizes):
        p.error(f"need 1..{len(PROJECTS)} projects and sizes of at least 20")
    if not modes or set(modes) - {"rules", "llm"}:
        p.error("--modes takes rules and/or llm")
    if args.repeat < 0:
        p.error("--repeat must not be negative")

    work = Path(tempfile.mkdtemp(prefix="ocm-dream-scale-"))
    env = sandbox_env(work / "sandbox")
    logs.configure(log_dir=None, console_level="warning")
    TIMERS["groups"] = _Timer(Dreamer, "groups")
    TIMERS["upsert"] = _Timer(EdgeStore, "upsert")
    rows: list[Row] = []
    truth = Truth()
    print("dream scale: fake model on 127.0.0.1, answers at once (times exclude model "
          f"latency); {os.cpu_count()} CPUs; work dir {work}", flush=True)
    try:
        with FakeOpenAI(responder=lambda body: planner(truth)(body)) as fake:
            for n in sizes:
                t = time.perf_counter()
                seeded = build_memories(n, seed=args.seed, projects=args.projects,
                                        dup_share=args.dup_share,
                                        sup_share=args.supersede_share)
                gen_s = time.perf_counter() - t
                truth.dup_of, truth.supersedes, truth.content = (
                    seeded.truth.dup_of, seeded.truth.supersedes, seeded.truth.content)
                store_path = work / f"seed-{n}"
                seed_s = seed_store(store_path, seeded.memories)
                big = max((k for k in seeded.scope_sizes if k is not None),
                          key=lambda k: seeded.scope_sizes[k])
                types: dict[str, int] = {}
                for m in seeded.memories:
                    if m.project_id == big:
                        types[m.type] = types.get(m.type, 0) + 1
                big_dups = sum(1 for m in seeded.memories
                               if m.project_id == big and m.id in seeded.truth.dup_of)
                big_sups = sum(1 for m in seeded.memories
                               if m.project_id == big and m.id in seeded.truth.supersedes)
                print(f"# size {n}: {len(seeded.scope_sizes) - 1} projects + user scope "
                      f"({seeded.scope_sizes[None]} memories), {seeded.dups} duplicates and "
                      f"{seeded.sups} superseding facts seeded; biggest project {big!r}: "
                      f"{seeded.scope_sizes[big]} memories "
                      f"({', '.join(f'{k} {v}' for k, v in sorted(types.items()))}; "
                      f"{big_dups} duplicates, {big_sups} superseding); generated in "
                      f"{gen_s:.2f} s, upserted in {seed_s:.2f} s", flush=True)
                for mode in modes:
                    for target in ("biggest", "all"):
                        got = run_dreams(work, store_path, seeded, size=n, mode=mode,
                                         target=target, fake=fake if mode == "llm" else None,
                                         env=env, repeat=args.repeat)
                        rows.extend(got)
                        for row in got:
                            bad = {k: v for k, v in row.statuses.items() if k != "ok"}
                            note = f", statuses {bad}" if bad else ""
                            print(f"  {mode:5} {row.target:10} {row.seconds:7.2f} s "
                                  f"({row.writes} upserts; peak RSS so far "
                                  f"{peak_rss_mb():.0f} MB{note})", flush=True)
    finally:
        if args.keep:
            print(f"# kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(HEADER)
    for r in rows:
        print(fmt(r))
    print(NOTES)
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        print()
        print(f"ratio {hi}/{lo} (store x{hi / lo:g}):")
        for mode in modes:
            for target in ("biggest", "all"):
                a = next(r for r in rows if (r.size, r.mode, r.target) == (lo, mode, target))
                b = next(r for r in rows if (r.size, r.mode, r.target) == (hi, mode, target))
                ratio = b.seconds / max(a.seconds, 1e-9)
                line = (f"  {mode:5} {target:8} memories x{b.before / max(a.before, 1):.1f}: "
                        f"time x{ratio:.1f} (goal <= 12x, grouping included: "
                        f"{'met' if ratio <= 12 else 'NOT met'}) (grouping "
                        f"x{b.group_seconds / max(a.group_seconds, 1e-9):.1f}, writing "
                        f"x{b.write_seconds / max(a.write_seconds, 1e-9):.1f})")
                if mode == "llm":
                    line += (f", calls x{b.calls / max(a.calls, 1):.1f}, tokens in "
                             f"x{b.tokens_in / max(a.tokens_in, 1):.1f}, tokens out "
                             f"x{b.tokens_out / max(a.tokens_out, 1):.1f}")
                print(line)
    print(f"peak RSS of the process: {peak_rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
