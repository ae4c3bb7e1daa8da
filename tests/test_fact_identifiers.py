"""Which tokens count as identifiers (dedup of near-duplicate memories keeps a memory whose
identifiers differ): ASCII tokens take a regex per test, others the character tests; both
give the same answers."""

from __future__ import annotations

import random
import string

from opencode_memoryd.extract import facts
from opencode_memoryd.extract.facts import identifiers


def _by_characters(token: str) -> bool:
    """The definition, one character at a time."""
    if not token or token in facts._NOT_IDENT or not any(c.isalnum() for c in token):
        return False
    if any(c.isdigit() for c in token):
        return True
    if token[0] in "-/~." or any(c in token for c in "/\\_@#+:"):
        return True
    if "." in token.strip("."):
        return True
    if any(c.isupper() for c in token[1:]):
        return True
    low = token.lower()
    return len(low) >= 2 and low.isalpha() and not (set(low) & facts._VOWELS)


def test_every_token_gets_the_answer_of_the_character_tests() -> None:
    rng = random.Random(3)
    rich = string.printable + "éÉ²İßΩ٣"
    plain = string.ascii_letters + string.digits + "./-_:@#+~\\\n"
    tokens = ["", "npm", "e.g", "..", "-x", "Ab", "aB", "x.y", "x.", ".x", "a\nB", "²", "a²"]
    tokens += [a + b for a in string.printable for b in string.printable]
    tokens += ["".join(rng.choice(rich if rng.random() < 0.2 else plain)
                       for _ in range(rng.randrange(1, 8))) for _ in range(50_000)]
    differ = [t for t in tokens if facts._is_identifier(t) != _by_characters(t)]
    assert differ == []
    assert sum(map(facts._is_identifier, tokens)) > len(tokens) // 3  # both answers occur


def test_identifiers_of_a_memory() -> None:
    assert identifiers("Use `pnpm test` 9.1 for /api/v2.") == {"pnpm test", "9.1", "/api/v2"}
    assert identifiers("The cobalt mailer job number 12 runs at 02:16 on host build-1931, "
                       "see README.md and fooBar, via ssh") == {
        "12", "02:16", "build-1931", "readme.md", "foobar", "ssh"}
