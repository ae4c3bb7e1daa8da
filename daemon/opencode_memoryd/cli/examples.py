"""``python -m opencode_memoryd.cli.examples``: write or check the generated files of the
repository, ``config.example.toml`` (from the config schema) and the service-file examples in
``systemd/``.

Usage::

    python -m opencode_memoryd.cli.examples config [--check] [PATH]   # no PATH: print it
    python -m opencode_memoryd.cli.examples systemd [--check] DIR

Exit codes: 0 done (or up to date), 1 ``--check`` found a file out of date, 2 usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from opencode_memoryd.config.example import render_example
from opencode_memoryd.install.examples import render_examples

_COMMAND = "python -m opencode_memoryd.cli.examples"


def _outdated(target: Path, text: str) -> bool:
    try:
        return target.read_text(encoding="utf-8") != text
    except OSError:
        return True


def _write_or_check(files: Mapping[Path, str], *, check: bool, regenerate: str) -> int:
    stale = [p for p, text in files.items() if _outdated(p, text)] if check else []
    if not check:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{path} is out of date; regenerate it with {regenerate}", file=sys.stderr)
    return 1 if stale else 0


def config_main(args: list[str]) -> int:
    """``config [--check] [PATH]``: print, write or check the example config."""
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest) or (check and not rest):
        print(f"usage: {_COMMAND} config [--check] [PATH]", file=sys.stderr)
        return 2
    if not rest:
        sys.stdout.write(render_example())
        return 0
    target = Path(rest[0])
    return _write_or_check({target: render_example()}, check=check,
                           regenerate=f"{_COMMAND} config {target}")


def systemd_main(args: list[str]) -> int:
    """``systemd [--check] DIR``: write or check the service-file examples in DIR."""
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    if len(rest) != 1 or rest[0].startswith("-"):
        print(f"usage: {_COMMAND} systemd [--check] DIR", file=sys.stderr)
        return 2
    folder = Path(rest[0])
    files = {folder / name: text for name, text in render_examples().items()}
    return _write_or_check(files, check=check, regenerate=f"{_COMMAND} systemd {folder}")


_COMMANDS: dict[str, Callable[[list[str]], int]] = {"config": config_main,
                                                    "systemd": systemd_main}


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``config`` or ``systemd``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in _COMMANDS:
        print(f"usage: {_COMMAND} config|systemd ...", file=sys.stderr)
        return 2
    return _COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
