"""Where OpenCode's databases are, and the identity that keys their high-water marks.

OpenCode keeps ``opencode.db`` in its data dir (``$XDG_DATA_HOME/opencode``) for the release
channels, ``opencode-<channel>.db`` next to it for other channels, and honours
``$OPENCODE_DB`` (an absolute path, a name relative to the data dir, or ``:memory:``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def discover_databases(data_dir: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """List the OpenCode databases to read, the way OpenCode names them.

    Every ``opencode*.db`` in ``data_dir`` (``opencode.db`` and the per-channel
    ``opencode-<channel>.db``), plus ``$OPENCODE_DB`` when set: an absolute path or a name
    relative to the data dir (``:memory:`` is ignored). Paths are returned absolute,
    de-duplicated, in sorted order; a missing data dir gives an empty list.

    Args:
        data_dir: OpenCode's data dir.
        env: the environment to read ``OPENCODE_DB`` from (``os.environ`` when ``None``).
    """
    env = os.environ if env is None else env
    found: dict[str, Path] = {}
    if data_dir.is_dir():
        for p in sorted(data_dir.glob("opencode*.db")):
            if p.is_file():
                found[os.path.abspath(p)] = p
    override = env.get("OPENCODE_DB", "").strip()
    if override and override != ":memory:":
        p = Path(override).expanduser()
        if not p.is_absolute():
            p = data_dir / p
        found.setdefault(os.path.abspath(p), p)
    return [Path(k) for k in sorted(found)]


def source_identity(path: Path) -> str:
    """The identity of a source database, used to key high-water marks.

    The canonical absolute path (symlinks resolved). OpenCode session ids are random, so a
    mark is keyed by (identity, session id); a copy of a database at another path is another
    source.
    """
    return str(Path(os.path.realpath(path)))
