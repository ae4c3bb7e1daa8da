"""The rendered service-file examples in the repository's ``systemd/`` folder.

Regenerate them with ``python -m opencode_memoryd.cli.examples systemd systemd``; a test
checks that they are current (``--check``).
"""

from __future__ import annotations

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
