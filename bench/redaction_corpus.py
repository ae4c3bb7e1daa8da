"""Recall per kind and false-positive rate of redaction on the test corpora, as a table.

Runs :func:`opencode_memoryd.redaction.engine.redact` over the positive corpus
(``tests/redaction_corpus.py``: 1,200+ format-valid fake secrets of 90+ kinds, passwords
in prose in 18 languages, each in user, assistant and tool text; a case counts as redacted
when none of its secrets is left) and the negative corpus
(``tests/redaction_negatives.py``: commit SHAs, UUIDs, hashes, integrity strings, base64
images, identifiers, publishable keys, account SIDs, paths, URLs, lockfile lines, prose
about passwords in many languages …; an item is a false positive when its text changes),
and prints the table ``tests/test_redaction_corpus.py`` asserts on, then the misses and
false positives (``--failures``).

Run: ``.venv/bin/python bench/redaction_corpus.py [--failures]``. Exit code 0 when the
goals (recall 100 % per kind, false positives at most 1 %) are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", action="store_true",
                        help="also list the missed cases and the false positives")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT / "daemon"), str(ROOT / "tests")]
    from redaction_measure import FP_GOAL, RECALL_GOAL, format_failures, format_table, measure

    start = time.perf_counter()
    m = measure()
    elapsed = time.perf_counter() - start
    print(format_table(m))
    print(f"measured in {elapsed:.2f} s")
    if args.failures:
        print(format_failures(m, limit=10_000) or "no misses, no false positives")
    ok = all(r.hits / r.total >= RECALL_GOAL for r in m.positives.values())
    return 0 if ok and m.fp_rate <= FP_GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
