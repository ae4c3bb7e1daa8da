"""The rules extractor on the labelled corpus: precision, recall, scope accuracy and junk.

Runs ``extraction.mode = "rules"`` (``opencode_memoryd.extract.rules.directives``) on every
message of ``tests/rules_corpus/`` (``--corpus`` for another folder of the same format:
``tests/rules_corpus/README.md``) and prints the table the test suite prints: per category
and overall, the cases, the memories expected and stored, precision (matched stored over
all stored), recall (matched expected over all expected), user-scope accuracy (matched
memories in the expected scope) and junk memories (a trigger or filler alone). ``--misses``
adds one line per missed, wrongly scoped or extra memory, with its file and line.

Run: ``.venv/bin/python bench/rules_corpus.py [--misses] [--corpus DIR]``.
Exit code 0 when the goals are met (recall and scope accuracy at least 97 %, precision at
least 99 %, no junk), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "daemon"))

from rules_scoring import CORPUS, GOALS, load, score, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="folder of *.txt cases")
    ap.add_argument("--misses", action="store_true", help="list every miss and extra")
    args = ap.parse_args(argv)
    cases = load(args.corpus)
    began = time.perf_counter()
    tallies = score(cases)
    elapsed = time.perf_counter() - began
    print(table(tallies))
    total = tallies["all"]
    print(f"\n{len(cases)} messages in {elapsed * 1000:.0f} ms "
          f"({elapsed / max(len(cases), 1) * 1e6:.0f} µs each)")
    if args.misses:
        print("\n".join(["", *total.misses]) if total.misses else "\nno misses")
    ok = (total.recall >= GOALS["recall"] and total.precision >= GOALS["precision"]
          and total.scope >= GOALS["scope"] and total.junk == 0)
    print("goals met" if ok else "goals NOT met: recall >= 97 %, precision >= 99 %, "
          "scope >= 97 %, junk 0")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
