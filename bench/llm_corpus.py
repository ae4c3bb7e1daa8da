"""The LLM extractor on the labelled corpus, through the real capture pipeline.

Builds a real OpenCode database: a copy of ``tests/fixtures/opencode-sample.db`` plus one
session per case of ``tests/rules_corpus/`` in the project ``/srv/dev/src/acme-web``, each
a user message (the case), an assistant step with a ``bash`` tool call whose output holds a
planted sentence, and a final assistant reply holding another (``tests/corpus_db.py``).
Then runs ``maintain --dir /srv/dev/src/acme-web`` in ``extraction.mode = "llm"`` against
the OpenAI-compatible endpoint given by ``--base-url`` (summaries and briefs off; HOME and
the XDG dirs in a temp folder, so the store and state are fresh), reads the stored memories
back with ``list --json`` and prints, per category and overall: cases (sessions), memories
expected and stored, precision, recall, user-scope accuracy, junk, over-capture per session
(stored memories matching no labelled fact), wrong attributions (memories holding a planted
assistant or tool sentence) and the memories the rules floor added (``source`` ``rules``:
explicit directives the model missed). ``--misses`` lists each miss and extra.

Run: ``.venv/bin/python bench/llm_corpus.py --base-url http://127.0.0.1:8080/v1
--model qwen2.5-7b-instruct [--api-key-env OPENAI_API_KEY] [--limit 5] [--json]``;
``--fake perfect``, ``--fake silent`` or ``--fake gullible`` runs it against a scripted model
on 127.0.0.1 instead (the corpus labels; no memory at all; the assistant's and tools'
sentences passed off as the user's). Exit code 0 when the run completed and
the table was printed, 1 when ``maintain`` failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "daemon"))

from corpus_db import build  # noqa: E402
from llm_corpus_scoring import score, table  # noqa: E402
from opencode_memoryd.cli.main import main as cli_main  # noqa: E402
from rules_scoring import CORPUS, PROJECT_ROOT, Case, load  # noqa: E402

FIXTURES = (ROOT / "tests" / "fixtures" / "opencode-sample.db",
            Path("/work/shared/fixtures/opencode-sample.db"))


def pick(cases: Sequence[Case], limit: int | None) -> list[Case]:
    """The first ``limit`` cases of each category (all when ``limit`` is ``None``)."""
    if limit is None:
        return list(cases)
    seen: dict[str, int] = {}
    out = []
    for c in cases:
        if seen.get(c.category, 0) < limit:
            seen[c.category] = seen.get(c.category, 0) + 1
            out.append(c)
    return out


def config_text(base_url: str, model: str, api_key_env: str | None, timeout: float) -> str:
    """The config file of a run: LLM extraction at ``base_url``, no settle delay, no
    summaries or briefs (only facts are scored)."""
    key = f'api_key_env = "{api_key_env}"\n' if api_key_env else ""
    return ("[opencode]\nsettle_seconds = 0\n"
            "[summaries]\nsession_summaries = false\nproject_brief = false\n"
            "[extraction]\nmode = \"llm\"\n"
            f"[llm]\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\n{key}"
            f"timeout_seconds = {timeout:g}\nmax_retries = 2\n")


def _cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(args, env=env)
    return code, out.getvalue()


def run(cases: Sequence[Case], *, base_url: str, model: str, api_key_env: str | None,
        workdir: Path, fixture: Path, timeout: float = 120.0) -> dict[str, Any]:
    """Build the database under ``workdir``, run ``maintain`` and score what it stored.

    Returns ``{"tallies": {category: LlmTally}, "report": maintain's JSON report,
    "exit_code": int, "seconds": float, "memories": [payload]}``.
    """
    db = workdir / "opencode" / "opencode.db"
    sessions = build(fixture, db, cases)
    home = workdir / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_STATE_HOME": str(home / ".local/state"), "PATH": os.environ.get("PATH", "")}
    if api_key_env and api_key_env in os.environ:
        env[api_key_env] = os.environ[api_key_env]
    cfg = workdir / "config.toml"
    cfg.write_text(config_text(base_url, model, api_key_env, timeout))
    began = time.perf_counter()
    code, out = _cli(["--config", str(cfg), "maintain", "--dir", PROJECT_ROOT, "--db",
                      str(db), "--json"], env)
    seconds = time.perf_counter() - began
    try:
        report = json.loads(out)
    except ValueError:
        report = {"output": out}
    listed, memories_out = _cli(["--config", str(cfg), "list", "--json"], env)
    memories = json.loads(memories_out) if listed == 0 else []
    return {"tallies": score(sessions, memories), "report": report, "exit_code": code,
            "seconds": seconds, "memories": memories}


@contextlib.contextmanager
def _fake(kind: str, cases: Sequence[Case]) -> Iterator[str]:
    from fake_openai import FakeOpenAI
    from llm_corpus_models import gullible_responder, perfect_responder, silent_responder

    responder = {"perfect": perfect_responder(cases), "silent": silent_responder,
                 "gullible": gullible_responder}[kind]
    with FakeOpenAI(responder=responder) as fake:
        yield fake.base_url


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. "
                       "http://127.0.0.1:8080/v1")
    where.add_argument("--fake", choices=("perfect", "silent", "gullible"),
                       help="a scripted model on 127.0.0.1 instead of an endpoint")
    ap.add_argument("--model", default="default", help="model name sent to the endpoint")
    ap.add_argument("--api-key-env", help="environment variable holding the API key")
    ap.add_argument("--limit", type=int, help="at most this many cases per category")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="folder of *.txt cases")
    ap.add_argument("--fixture", type=Path, help="OpenCode database to copy (default: the "
                    "sample fixture)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per LLM call")
    ap.add_argument("--keep", type=Path, help="build the database and store here and keep them")
    ap.add_argument("--misses", action="store_true", help="list every miss and extra")
    ap.add_argument("--json", action="store_true", help="print the tallies as JSON")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error("--limit must be at least 1")
    fixture = args.fixture or next((p for p in FIXTURES if p.exists()), FIXTURES[0])
    cases = pick(load(args.corpus), args.limit)
    with contextlib.ExitStack() as stack:
        base_url = args.base_url or stack.enter_context(_fake(args.fake, cases))
        workdir = args.keep or Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="llm-corpus-")))
        workdir.mkdir(parents=True, exist_ok=True)
        result = run(cases, base_url=base_url, model=args.model, api_key_env=args.api_key_env,
                     workdir=workdir, fixture=fixture, timeout=args.timeout)
    tallies = result["tallies"]
    totals = result["report"].get("totals", {}) if isinstance(result["report"], dict) else {}
    if args.json:
        print(json.dumps({"categories": {k: t.as_dict() for k, t in tallies.items()},
                          "exit_code": result["exit_code"], "seconds": result["seconds"],
                          "llm_calls": totals.get("llm_calls"),
                          "refused": totals.get("rejected"),
                          "misses": tallies["all"].misses}, indent=2))
    else:
        print(table(tallies))
        print(f"\n{len(cases)} sessions, {totals.get('llm_calls', '?')} LLM calls, "
              f"{totals.get('rejected', '?')} proposals refused by the quality gate, "
              f"maintain exit {result['exit_code']}, {result['seconds']:.1f} s")
        if args.misses:
            misses = tallies["all"].misses
            print("\n".join(["", *misses]) if misses else "\nno misses")
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
