"""Invisible Unicode never reaches the block: every Default_Ignorable_Code_Point is stripped.

Variation selectors, the soft hyphen, the combining grapheme joiner, the Hangul fillers and
the Mongolian vowel separator survived into the context block before; a memory added with
them comes back without them, and the visible characters around them stay.
"""

from __future__ import annotations

from pathlib import Path

from conftest import ACME, cli_json
from opencode_memoryd.redaction.engine import scrub
from opencode_memoryd.redaction.unicode import strip_invisible

# Unicode 15.1, DerivedCoreProperties.txt, Default_Ignorable_Code_Point.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
#: The characters the attack found in the block.
FOUND = "\ufe0f\U000e0101\u00ad\u034f\u115f\u3164\uffa0\u180e"


def every_ignorable() -> str:
    return "".join(chr(c) for lo, hi in DEFAULT_IGNORABLE for c in range(lo, hi + 1))


#: Visible text next to them: letters of many scripts, Hangul jamo beside the fillers, emoji.
VISIBLE = ("naïve café, 日本語, 한국어 가나다, ᠮᠣᠩᠭᠣᠯ, emoji 🎉, ❤, Ξ λ Ж ש ع ก, "
           "\u1161\u11a8 \u3131 \uffa1, line\nbreak\ttab")


def test_every_default_ignorable_code_point_is_stripped_and_visible_text_stays() -> None:
    ignorable = every_ignorable()
    assert len(ignorable) == 4174
    assert strip_invisible("a" + ignorable + "b") == "ab"
    assert strip_invisible(FOUND) == ""
    mixed = "".join(c + ignorable[i * 97 % len(ignorable)] for i, c in enumerate(VISIBLE))
    assert strip_invisible(mixed) == VISIBLE


def test_hidden_selectors_cannot_split_or_hide_a_secret() -> None:
    key = "gh" + "p_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    hidden = "\ufe0f".join(key[:12]) + "\u3164" + key[12:]
    result = scrub(f"push with {hidden}")
    assert result.text == "push with [REDACTED:github_token]"


def test_an_added_memory_reaches_the_block_without_invisible_characters(
        config_file: Path, sample_db: Path) -> None:
    text = "Deploys\u3164go\ufe0f through\u00ad the\u034f staging\u180e cluster\uffa0 first\u115f."
    cfg = ("--config", str(config_file))
    cli_json(*cfg, "add", text, "--dir", ACME, "--db", str(sample_db))
    block = str(cli_json(*cfg, "context", "--dir", ACME)["text"])
    assert "Deploysgo through the staging cluster first." in block
    assert not any(c in block for c in every_ignorable())
