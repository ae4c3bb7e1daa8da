"""Where OpenCode's databases are, and the identity that keys their high-water marks.

OpenCode keeps ``opencode.db`` in its data dir (``$XDG_DATA_HOME/opencode``) for the release
channels, ``opencode-<channel>.db`` next to it for other channels, and honours
``$OPENCODE_DB`` (an absolute path, a name relative to the data dir, or ``:memory:``).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

#: A folder listing is reused only when it was made at least this long (s) after the
#: folder's last change (see :class:`DatabaseFinder`).
RACY_SECONDS = 1.0


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


class DatabaseFinder:
    """:func:`discover_databases` that lists the data dir again only when it changed.

    Creating, deleting or renaming a file in a folder moves the folder's mtime; while it is
    the mtime of the last listing, the last answer stands (one ``stat`` instead of a
    listing: the daemon looks for databases at every check). A file system stamps times
    in ticks of a few milliseconds, so a change in the same tick as the one before leaves
    the mtime where it was: a listing is therefore reused only when it was made at least
    :data:`RACY_SECONDS` after the mtime it saw (later changes then fall in later ticks).

    Args:
        clock: wall-clock seconds (the clock file times are stamped with); injectable.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        # (data dir, $OPENCODE_DB, its mtime in ns, when it was listed, the answer)
        self._last: tuple[Path, str, int, float, tuple[Path, ...]] | None = None

    def __call__(self, data_dir: Path, env: Mapping[str, str] | None = None) -> list[Path]:
        """As :func:`discover_databases`."""
        override = (os.environ if env is None else env).get("OPENCODE_DB", "")
        try:
            st = os.stat(data_dir)
            mtime = st.st_mtime_ns if stat.S_ISDIR(st.st_mode) else None
        except OSError:
            mtime = None
        last = self._last
        if (last is not None and mtime is not None and last[:3] == (data_dir, override, mtime)
                and last[3] - mtime / 1e9 >= RACY_SECONDS):
            return list(last[4])
        listed_at = self.clock()  # before the listing: it sees every change made before
        found = discover_databases(data_dir, env)
        self._last = ((data_dir, override, mtime, listed_at, tuple(found))
                      if mtime is not None else None)
        return found


def source_identity(path: Path) -> str:
    """The identity of a source database, used to key high-water marks.

    The canonical absolute path (symlinks resolved). OpenCode session ids are random, so a
    mark is keyed by (identity, session id); a copy of a database at another path is another
    source.
    """
    return str(Path(os.path.realpath(path)))
