"""The served commands' quick parser (``cli/quickparse.py``) against the real one: for
every command line it answers, it gives the namespace ``argparse`` gives; the plain lines
it must answer (else the served path is slow), the rest it leaves to ``argparse``."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from opencode_memoryd.cli.main import _parser
from opencode_memoryd.cli.quickparse import QuickParser, Unsure
from opencode_memoryd.cli.thin import THIN_COMMANDS, _OneCommand

#: Lines the quick parser answers.
PLAIN = [
    ["search", "pnpm"], ["search", "pnpm", "--json"], ["search", "--limit", "3", "pnpm"],
    ["search", "pnpm", "--limit=7", "--dir", "/work/p", "--all"], ["search", "-"],
    ["search", "pnpm", "--dir="], ["search", "two words", "--db", "/x.db"],
    ["search", "pnpm", "--limit", "3", "--limit", "4"],
    ["list"], ["list", "--json"], ["list", "--dir", "/work/p", "--all"], ["list", "--user"],
    ["list", "--db", "/x.db", "--dir=/work/p"],
    ["status"], ["status", "--json"],
    ["context", "--dir", "/work/p"], ["context", "--project", "abc", "--json"],
    ["context", "--dir", "/w", "--session", "ses_1", "--query", "fix the build"],
]
#: Lines left to argparse (each an error there, or a case it reads in its own way).
TRICKY = [
    ["search"], ["search", "a", "b"], ["search", "pnpm", "--limit", "x"],
    ["search", "pnpm", "--limit"], ["search", "pnpm", "--lim", "3"], ["search", "--", "-x"],
    ["search", "-1"], ["search", "pnpm", "--json=yes"], ["search", "pnpm", "--dir", "-x"],
    ["list", "--dir", "/p", "--user"], ["list", "--bogus"], ["list", "extra"],
    ["status", "-j"], ["context"], ["context", "--dir", "/a", "--project", "b"],
    ["context", "--dir", "--json"],
]


def quick(argv: list[str]) -> QuickParser:
    one = _OneCommand(argv[0])
    module = __import__(f"opencode_memoryd.cli.{THIN_COMMANDS[argv[0]]}",
                        fromlist=["register"])
    module.register(one)
    assert one.parser is not None
    return one.parser


def full(argv: list[str]) -> dict[str, Any] | None:
    """``argparse``'s namespace for ``argv`` without the global options (the thin path
    reads those itself); ``None``: it refuses the line."""
    try:
        got = vars(_parser().parse_args(argv))
    except SystemExit:
        return None
    del got["config"], got["verbose"]
    return got


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_plain_lines_parse_as_argparse_parses_them(argv: list[str]) -> None:
    got = vars(quick(argv).parse_args(argv[1:]))
    got["command"] = argv[0]
    assert got == full(argv)


@pytest.mark.parametrize("argv", TRICKY, ids=" ".join)
def test_other_lines_are_left_to_argparse(argv: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Unsure):
        quick(argv).parse_args(argv[1:])
    full(argv)  # it answers or reports them itself
    capsys.readouterr()


def test_unknown_argument_features_are_left_to_argparse() -> None:
    p = QuickParser(prog="x")
    with pytest.raises(Unsure):
        p.add_argument("--n", nargs=2)
    with pytest.raises(Unsure):
        p.add_argument("--v", action="count")
    p.add_argument("--mode", choices=["a", "b"], default="a")
    assert p.parse_args([]).mode == "a"
    assert p.parse_args(["--mode", "b"]).mode == "b"
    with pytest.raises(Unsure):
        p.parse_args(["--mode", "c"])
    ref = argparse.ArgumentParser()
    ref.add_argument("--mode", choices=["a", "b"], default="a")
    assert vars(ref.parse_args(["--mode", "b"])) == vars(p.parse_args(["--mode", "b"]))
