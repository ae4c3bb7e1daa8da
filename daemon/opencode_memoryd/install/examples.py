"""The rendered service-file examples in the repository's ``systemd/`` folder.

Regenerate them with ``python -m opencode_memoryd.install.examples systemd``; a test checks
that they are current (``--check``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from opencode_memoryd.config.paths import APP_NAME
from opencode_memoryd.install.service import PLIST_NAME, SYSTEMD_UNIT_NAME, fill_plist, fill_unit

#: The stand-in home of the launchd example (no real user's path in the repository).
_EXAMPLE_HOME = Path("/var/empty/example-home")


def render_examples() -> dict[str, str]:
    """The example files of the repository's ``systemd/`` folder: file name to text.

    The unit runs ``%h/.local/bin/opencode-memoryd`` (``%h`` is systemd's home specifier);
    the plist uses the stand-in home ``/var/empty/example-home``. No environment is pinned.
    """
    unit = fill_unit(f"%h/.local/bin/{APP_NAME} run", [])
    exe = str(_EXAMPLE_HOME / ".local" / "bin" / APP_NAME)
    plist = fill_plist([exe, "run"], home=_EXAMPLE_HOME, env=[])
    return {SYSTEMD_UNIT_NAME: unit, PLIST_NAME: plist}


def main(argv: list[str] | None = None) -> int:
    """``python -m opencode_memoryd.install.examples [--check] DIR``: write the examples to DIR.

    With ``--check``, write nothing and exit 1 if a file in DIR differs from
    :func:`render_examples`.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m opencode_memoryd.install.examples [--check] DIR", file=sys.stderr)
        return 2
    folder = Path(args[0])
    stale = []
    for file_name, text in render_examples().items():
        target = folder / file_name
        if check:
            try:
                current = target.read_text(encoding="utf-8")
            except OSError:
                current = None
            if current != text:
                stale.append(target)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    for target in stale:
        print(
            f"{target} is out of date; regenerate it with "
            f"python -m opencode_memoryd.install.examples {folder}",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
