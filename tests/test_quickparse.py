"""The served commands' quick parser (``cli/quickparse.py``) against the real one: for
every command line it answers, it gives the namespace ``argparse`` gives; the plain lines
it must answer (else the served path is slow), the rest it leaves to ``argparse``."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from opencode_memoryd.cli.commands import SERVED, declare
from opencode_memoryd.cli.main import _parser
from opencode_memoryd.cli.quickparse import QuickParser, Unsure

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
    parser: QuickParser = declare(QuickParser(), argv[0])
    return parser


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
    served = SERVED[argv[0]]
    got["handler"] = getattr(__import__(f"opencode_memoryd.cli.{served.module}",
                                        fromlist=[served.handler]), served.handler)
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


def _value(arg: Any) -> str:
    """A value ``arg`` accepts: a relative folder for a ``--dir`` (both parsers resolve it
    in this process's working directory), a number for an ``int``."""
    kind = arg.options.get("type")
    return "3" if kind is int else "rel/project" if kind is not None else "two words"


def _given(arg: Any, inline: bool = False) -> list[str]:
    """``arg`` on a command line: a flag alone, an option with a value, a positional's
    value."""
    name = arg.names[0]
    if not name.startswith("-"):
        return [_value(arg)]
    if arg.options.get("action") == "store_true":
        return [name]
    return [f"{name}={_value(arg)}"] if inline else [name, _value(arg)]


def _table_lines(command: str) -> tuple[list[list[str]], list[list[str]]]:
    """Lines made from ``command``'s row of the table: ``(plain, refused)``. Plain: each
    argument given once (both ``--opt V`` and ``--opt=V``) beside the required ones;
    refused: an option without its value, two options of one exclusive group, a required
    group left out."""
    from opencode_memoryd.cli.commands import Arg, Exclusive

    items = SERVED[command].arguments
    required = [a for a in items if isinstance(a, Arg) and not a.names[0].startswith("-")]
    groups = [g for g in items if isinstance(g, Exclusive)]
    bases = [[command, *(v for a in required for v in _given(a))]]
    refused: list[list[str]] = []
    for group in (g for g in groups if g.required):
        refused.append(list(bases[0]))
        bases = [[*b, *_given(a)] for b in bases for a in group.arguments]
    base = bases[0]
    plain = list(bases)
    for item in items:
        if isinstance(item, Exclusive) and item.required:
            continue
        for arg in item.arguments if isinstance(item, Exclusive) else (item,):
            if not arg.names[0].startswith("-"):
                continue
            plain += [[*base, *_given(arg)], [*base, *_given(arg, inline=True)]]
            if arg.options.get("action") != "store_true":
                refused.append([*base, arg.names[0]])
    for group in groups:
        if len(group.arguments) > 1:
            refused.append([*base, *_given(group.arguments[0]), *_given(group.arguments[1])])
    return plain, refused


@pytest.mark.parametrize("command", sorted(SERVED))
def test_every_served_argument_parses_as_argparse_parses_it(command: str) -> None:
    plain, refused = _table_lines(command)
    assert len(plain) > 1 or command == "status"
    for argv in plain:
        test_plain_lines_parse_as_argparse_parses_them(argv)
    for argv in refused:
        assert full(argv) is None, argv
        with pytest.raises(Unsure):
            quick(argv).parse_args(argv[1:])


def _shape(parser: argparse.ArgumentParser) -> list[tuple[Any, ...]]:
    groups = [sorted(a.dest for a in g._group_actions)
              for g in parser._mutually_exclusive_groups]
    return [*((tuple(a.option_strings), a.dest, a.default, a.type, a.help, a.metavar,
               a.required, a.nargs) for a in parser._actions if a.dest != "help"), *groups]


@pytest.mark.parametrize("command", sorted(SERVED))
def test_the_full_parser_takes_a_served_commands_arguments_from_the_table(
        command: str) -> None:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    full_parser = sub.choices[command]
    assert _shape(full_parser) == _shape(declare(argparse.ArgumentParser(), command))
    assert full_parser.description == SERVED[command].description
