"""Positive redaction corpus: format-valid FAKE secrets of many kinds, in realistic text.

Every secret is generated at import time from a kind template and a seeded RNG, so this
file holds nothing a secret scanner would flag (prefixes are split) and the corpus is the
same on every run. :data:`CASES` places each secret in user, assistant and tool text; a
:class:`Case` lists the substrings that must be gone from ``redact(case.text).text``.

Used by ``tests/test_redaction_corpus.py`` and ``bench/redaction_corpus.py``; the negative
corpus is ``tests/redaction_negatives.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from redaction_gen import Gen
from redaction_kinds import CONTEXT_KINDS, TOKEN_KINDS, Template
from redaction_kinds_recent import ANY_VALUE_KINDS, BARE_RECENT, RECENT_KINDS
from redaction_prose import PROSE_KINDS

SEED = 20250101
#: Every kind of the corpus and its templates.
KINDS: dict[str, list[Template]] = {**TOKEN_KINDS, **CONTEXT_KINDS, **RECENT_KINDS,
                                    **BARE_RECENT, **ANY_VALUE_KINDS, **PROSE_KINDS}


@dataclass(frozen=True)
class Case:
    """One planted secret: ``text`` (in ``role`` text) and the ``secrets`` that must vanish."""

    kind: str
    role: str
    text: str
    secrets: tuple[str, ...]


# Realistic surroundings per role; "{s}" is the snippet. Tool lines look like transcript
# tool lines (tool, key input, "->", output).
ROLE_CONTEXTS: dict[str, list[str]] = {
    "user": [
        "{s}",
        "can you check why this fails?\n{s}\nit worked yesterday",
        "here's what I have in my config: {s} -- please wire it into the deploy script",
        "Remember this for later:\n{s}",
    ],
    "assistant": [
        "I've updated the configuration:\n\n```\n{s}\n```\n\nRestart the service to apply it.",
        "Done. {s}\nLet me know if you want me to rotate it.",
        "The failing call used the following setting: {s}. I replaced it in `app/settings.py`.",
    ],
    "tool": [
        "bash cat .env -> {s}",
        "read /srv/app/config/production.yml -> {s}",
        "bash kubectl logs deploy/api | tail -n 5 (exit 1) -> error: {s} rejected",
        "grep -rn SECRET . -> ./deploy/run.sh:12: {s}",
    ],
}


def build_cases(per_template: int = 1, seed: int = SEED) -> list[Case]:
    """Every template of every kind in every role context (``per_template`` secrets each).

    Each case gets a fresh secret; contexts are picked round-robin so every context is
    used. Deterministic for a given ``seed``.
    """
    g = Gen(seed)
    cases: list[Case] = []
    turn = 0
    for kind, templates in KINDS.items():
        for template in templates:
            for role, contexts in ROLE_CONTEXTS.items():
                for _ in range(per_template):
                    snippet, secrets = template(g)
                    ctx = contexts[turn % len(contexts)]
                    turn += 1
                    cases.append(Case(kind, role, ctx.replace("{s}", snippet), secrets))
    return cases


CASES: list[Case] = build_cases()


def iter_secrets(cases: Iterable[Case] = CASES) -> Iterator[tuple[str, str, str]]:
    """``(kind, secret, text)`` for every secret of every case (a PEM block's lines are
    several secrets of one text): the shape other corpora build their variants from."""
    for case in cases:
        for secret in case.secrets:
            yield case.kind, secret, case.text
