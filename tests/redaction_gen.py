"""Fake-secret generators for the redaction corpus: format-valid shapes, seeded.

:class:`Gen` draws random token bodies (every character class present); the helpers build
provider shapes (GitHub tokens with their CRC32 checksum, JWTs, PEM blocks, Discord bot
tokens) and turn a shape into a corpus template (:func:`one`, :func:`pem`, :func:`split`,
:func:`cli`). Prefixes are assembled from pieces so that no literal here looks like a
secret to a scanner. Used by ``tests/redaction_kinds.py``.
"""

from __future__ import annotations

import base64
import json
import random
import string
import zlib
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
SK = "s" + "k"


class Gen:
    """Random strings that look like real token bodies (every character class present)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        classes = [set(alphabet) & set(c) for c in
                   (string.digits, string.ascii_lowercase, string.ascii_uppercase)]
        while True:
            out = "".join(self.rng.choice(alphabet) for _ in range(n))
            if n < 8 or all(not c or set(out) & c for c in classes):
                return out

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + "".join(self.rng.choice(string.digits)
                                                     for _ in range(n - 1))

    def pick(self, items: list[str]) -> str:
        return self.rng.choice(items)

    def password(self) -> str:
        """A human-chosen-looking password with symbols such as ``&%#!$@``."""
        words = ["Tr0ub4dor", "Summer", "Blue", "Monkey", "Dragon", "Falcon", "Winter", "Kiwi"]
        sym = self.pick(["&", "%", "#", "!", "$", "@", "&3", "!!", "#1", "@%"])
        return (self.pick(words) + self.digits(2) + sym + self.s(4, string.ascii_lowercase)
                + self.pick(["", "!", "&9", "$x", "%2F"]))


def b62(n: int, width: int) -> str:
    chars = string.digits + string.ascii_letters
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = chars[r] + out
    return out.rjust(width, "0")


def github(g: Gen, prefix: str) -> str:
    body = g.s(30)
    return prefix + body + b62(zlib.crc32(body.encode()), 6)  # GitHub's CRC32 checksum


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jwt(g: Gen) -> str:
    payload = {"sub": g.digits(8), "name": "dev", "iat": 1_700_000_000 + g.rng.randint(0, 9999)}
    return (b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url(payload) + "."
            + g.s(43, URLSAFE))


def pem_block(g: Gen, label: str, lines: int = 6) -> tuple[str, tuple[str, ...]]:
    body = [g.s(64, B64) for _ in range(lines)] + [g.s(24, B64) + "=="]
    begin, end = "-----" + "BEGIN " + label + "-----", "-----" + "END " + label + "-----"
    return "\n".join([begin, *body, end]), tuple(body)


def discord(g: Gen) -> str:
    uid = base64.b64encode(g.digits(18).encode()).decode().rstrip("=")
    return uid + "." + g.s(6, URLSAFE) + "." + g.s(38, URLSAFE)


# A template yields (snippet, secrets): the snippet is the secret in a natural setting
# (an assignment, a header, a command), the secrets are what must vanish.
Template = Callable[[Gen], tuple[str, tuple[str, ...]]]


def one(fmt: str, make: Callable[[Gen], str]) -> Template:
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        v = make(g)
        return fmt.format(v), (v,)
    return t


def pem(label: str, fmt: str = "{}") -> Template:
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        block, body = pem_block(g, label)
        return fmt.format(block), body
    return t


def split(fmt: str, make: Callable[[Gen], str]) -> Template:
    """A key whose value continues on the next line (cut somewhere in its middle)."""
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        v = make(g)
        cut = g.rng.randint(len(v) // 3, 2 * len(v) // 3)
        return fmt.format(v[:cut] + "\n" + v[cut:]), (v[:cut], v[cut:])
    return t


def cli(fmt: str) -> Template:
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        v = g.password()
        return fmt.format(v), (v,)
    return t
