"""``file-modes`` and ``disk-space``: our state and the embedded store are the user's own
(owned, readable and writable), private to the user (folders 0700, files 0600), and their
disks have room.

Only the state dir, the state file (with its ``-wal``/``-shm``), the dream journal, the
store folder and its ``store.json`` are looked at: Qdrant Edge creates the files inside the
store folder itself, and the folder's 0700 is what keeps them private.
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

from opencode_memoryd.config.paths import store_dir
from opencode_memoryd.disk import foreign_or_locked
from opencode_memoryd.store.edge import EDGE_META_FILE
from opencode_memoryd.usecases.doctor.model import FAIL, OK, WARN, Check, Context

#: Below this many free bytes a disk gets a warning ...
WARN_FREE_BYTES = 500 * 1024 * 1024
#: ... and below this many a failure (SQLite and Qdrant Edge cannot write on a full disk).
FAIL_FREE_BYTES = 50 * 1024 * 1024


def _store_dir(ctx: Context) -> Path | None:
    cfg = ctx.app.config
    return None if cfg.qdrant.url else store_dir(cfg, ctx.app.env)


def _loose(path: Path) -> str | None:
    """``path (0644)`` when group or others have any access to it; else ``None``."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    return f"{path} ({mode:04o})" if mode & 0o077 else None


def _chown(folder: Path) -> str:
    import os
    import pwd

    return f"sudo chown -R {pwd.getpwuid(os.geteuid()).pw_name} {shlex.quote(str(folder))}"


def file_modes_check(ctx: Context) -> Check:
    """The ``file-modes`` check: ``fail`` when a file of the state dir or the store
    belongs to another user or cannot be read and written (one ``sudo`` run leaves them
    root's), ``warn`` when one is readable by other users."""
    state = ctx.app.state_path
    store = _store_dir(ctx)
    dirs = [ctx.app.state_dir] + ([store] if store else [])
    sidecars = [state.with_name(state.name + "-wal"), state.with_name(state.name + "-shm")]
    files = [state, *sidecars, ctx.app.journal_path] + ([store / EDGE_META_FILE] if store
                                                         else [])
    theirs = {p: found for p in dirs if (found := foreign_or_locked([p]))}
    if theirs:
        return Check("file-modes", FAIL,
                     "not yours to read and write (every command fails on them): "
                     + ", ".join(x for found in theirs.values() for x in found),
                     " && ".join(_chown(p) for p in theirs))
    loose_dirs = [p for p in dirs if _loose(p)]
    loose_files = [p for p in files if _loose(p)]
    if not loose_dirs and not loose_files:
        return Check("file-modes", OK, "state and store are private: "
                                       + ", ".join(str(p) for p in dirs))
    commands = []
    if loose_dirs:
        commands.append("chmod 700 " + " ".join(shlex.quote(str(p)) for p in loose_dirs))
    # SQLite gives a new -wal/-shm the state file's mode; they exist only while it is open,
    # so they are named only when the state file itself is already private
    to_fix = [p for p in loose_files if not (p in sidecars and state in loose_files)]
    if to_fix:
        commands.append("chmod 600 " + " ".join(shlex.quote(str(p)) for p in to_fix))
    return Check("file-modes", WARN,
                 "readable by other users: " + ", ".join(
                     str(_loose(p)) for p in loose_dirs + loose_files)
                 + " (opening them, as any command does, makes them private again)",
                 " && ".join(commands))


def _existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GB" if n >= 1024**3 else f"{n / 1024**2:.0f} MB"


def disk_space_check(ctx: Context) -> Check:
    """The ``disk-space`` check: free space under the state dir and the store."""
    places = {"state dir": ctx.app.state_dir}
    store = _store_dir(ctx)
    if store is not None:
        places["store"] = store
    free = {name: ctx.probes.disk_free(_existing(p)) for name, p in places.items()}
    detail = "; ".join(f"{name} {places[name]}: {_size(n)} free" for name, n in free.items())
    low = min(free.values())
    if low >= WARN_FREE_BYTES:
        return Check("disk-space", OK, detail)
    tight = [str(places[name]) for name, n in free.items() if n == low]
    status = FAIL if low < FAIL_FREE_BYTES else WARN
    return Check("disk-space", status, detail,
                 f"free space on the disk holding {tight[0]} (below "
                 f"{_size(FAIL_FREE_BYTES)} SQLite and Qdrant Edge cannot write)")
