"""Which tokens count as identifiers (dedup of near-duplicate memories keeps a memory whose
identifiers differ): ASCII tokens take a regex per test, others the character tests; both
give the same answers."""

from __future__ import annotations

import random
import string

from opencode_memoryd.extract import facts
from opencode_memoryd.extract.facts import identifiers


def test_every_token_gets_the_answer_of_the_character_tests() -> None:
    rng = random.Random(3)
    rich = string.printable + "éÉ²İßΩ٣"
    plain = string.ascii_letters + string.digits + "./-_:@#+~\\\n"
    tokens = ["", "npm", "e.g", "..", "-x", "Ab", "aB", "x.y", "x.", ".x", "a\nB", "²", "a²"]
    tokens += [a + b for a in string.printable for b in string.printable]
    tokens += ["".join(rng.choice(rich if rng.random() < 0.2 else plain)
                       for _ in range(rng.randrange(1, 8))) for _ in range(50_000)]
    differ = [t for t in tokens if facts._is_identifier(t) != facts._is_identifier_by_characters(t)]
    assert differ == []
    assert sum(map(facts._is_identifier, tokens)) > len(tokens) // 3  # both answers occur


def test_identifiers_of_a_memory() -> None:
    assert identifiers("Use `pnpm test` 9.1 for /api/v2.") == {"pnpm test", "9.1", "/api/v2"}
    assert identifiers("The cobalt mailer job number 12 runs at 02:16 on host build-1931, "
                       "see README.md and fooBar, via ssh") == {
        "12", "02:16", "build-1931", "readme.md", "foobar", "ssh"}
