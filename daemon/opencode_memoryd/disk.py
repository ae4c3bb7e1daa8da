"""The files we write: private modes, and enough free space before writing.

**Privacy.** Memories, marks, logs and the journal are readable by their owner only: the
CLI and the daemon run with the umask :data:`PRIVATE_UMASK` (new folders 0700, new files
0600), and :func:`make_private` repairs what an earlier version left readable (called by
the store and the state file on open, and for the log file).

**Free space.** Qdrant Edge maps its segment files into memory as sparse files and fills
them as points are written; on a full disk the kernel answers a write to such a page with
``SIGBUS``, which kills the process without a word. So opening the embedded store and
every write to it first check that :data:`STORE_MIN_FREE_BYTES` are free
(:func:`require_free`) and raise :class:`~opencode_memoryd.errors.DiskFullError`
otherwise. Measured with qdrant-edge-py 0.9 on tmpfs: creating a shard allocates 8.1 MiB
(its preallocated files are 166 MB sparse: two 32 MiB WAL files, a 32 MiB payload page,
a 32 MiB BM25 page and the payload indexes); opening it again the first time fills
another 20 MiB (28.2 MiB in all; it died with SIGBUS with 8 MiB free); one write of a
chunk's memories at most 96 KiB (7,200 memories of 2 KB: 21 MiB in all). SQLite reports a
full disk cleanly (``SQLITE_FULL``), so the state file needs only
:data:`STATE_MIN_FREE_BYTES` for its WAL and the log lines around a write.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable

from opencode_memoryd.errors import DiskFullError

# pathlib is imported where it is used: the CLI imports this module for its umask alone
TYPE_CHECKING = False  # not `typing`'s, for the same reason
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "PRIVATE_UMASK",
    "STATE_MIN_FREE_BYTES",
    "STORE_MIN_FREE_BYTES",
    "FreeBytes",
    "FreeSpaceCache",
    "access_problem",
    "foreign_or_locked",
    "free_bytes",
    "make_private",
    "require_free",
]

#: The process umask of the CLI and the daemon: nothing for group or others.
PRIVATE_UMASK = 0o077
#: Free space (bytes) the embedded store needs to open and before any write: three times
#: the most an open was measured to fill (20 MiB), far above one write (96 KiB).
STORE_MIN_FREE_BYTES = 64 * 1024 * 1024
#: Free space (bytes) the state dir needs before an extraction: the state file's WAL
#: pages and log lines.
STATE_MIN_FREE_BYTES = 4 * 1024 * 1024

#: Free bytes of the file system holding a path (injectable for tests).
FreeBytes = Callable[["Path"], int]

_DIR_MODE = 0o700
_FILE_MODE = 0o600


def free_bytes(path: Path) -> int:
    """Free bytes (for an unprivileged user) on the file system that holds ``path``; a
    path that does not exist yet is measured at its nearest existing ancestor."""
    import shutil
    from pathlib import Path

    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


#: A reading of :class:`FreeSpaceCache` is reused for this long (s) ...
FREE_CACHE_SECONDS = 1.0
#: ... when it found at least this many bytes free: 16 times :data:`STORE_MIN_FREE_BYTES`,
#: far more than the daemon writes in that time (a chunk's memories: 96 KiB at most).
FREE_CACHE_FLOOR_BYTES = 16 * STORE_MIN_FREE_BYTES


class FreeSpaceCache:
    """A :data:`FreeBytes` probe that measures a path at most once per ``seconds`` while it
    finds plenty of room: an extraction checks the space before each write (a few
    ``statvfs`` calls per session), and a disk with gigabytes free cannot run out in a
    second through those writes. A reading below ``floor`` is never reused, so near a
    full disk every check measures again.

    Args:
        measure: the probe whose readings are reused (default :func:`free_bytes`).
        seconds: how long a reading is reused.
        floor: the least free bytes a reading needs to be reused.
        clock: monotonic seconds (injectable for tests).

    One object may be shared by threads (a reading is one dict entry, replaced whole).
    """

    def __init__(self, measure: FreeBytes = free_bytes, *, seconds: float = FREE_CACHE_SECONDS,
                 floor: int = FREE_CACHE_FLOOR_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.measure = measure
        self.seconds = seconds
        self.floor = floor
        self.clock = clock
        self._readings: dict[str, tuple[float, int]] = {}

    def __call__(self, path: Path) -> int:
        """Free bytes where ``path`` lives (as :func:`free_bytes`)."""
        key = str(path)
        now = self.clock()
        got = self._readings.get(key)
        if got is not None and now - got[0] < self.seconds:
            return got[1]
        free = self.measure(path)
        if free >= self.floor:
            if len(self._readings) >= 64:  # a few folders in practice; bounded anyway
                self._readings.clear()
            self._readings[key] = (now, free)
        else:
            self._readings.pop(key, None)
        return free


def require_free(directory: Path, needed: int, *, free: FreeBytes = free_bytes) -> None:
    """Raise unless ``needed`` bytes are free where ``directory`` lives.

    Raises:
        DiskFullError: fewer bytes are free; the message names ``directory``, the space
            needed and the space free.
    """
    have = free(directory)
    if have < needed:
        raise DiskFullError(str(directory), needed, have)


def _chmod(path: Path, mode: int) -> bool:
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
            return False  # never follow a link, never touch another user's file
        if stat.S_IMODE(st.st_mode) == mode:
            return False
        path.chmod(mode)
    except OSError:
        return False
    return True


def make_private(directory: Path, patterns: Iterable[str] = ("*",)) -> int:
    """Make ``directory`` 0700 and what its ``patterns`` match private: folders 0700 (and
    everything below them), files 0600. Links and other users' files are left alone;
    errors are ignored (the folder may be read-only, the caller finds out when it writes).

    Args:
        directory: an existing folder of ours.
        patterns: glob patterns of the entries to fix, relative to ``directory``
            (``("*",)``: all of them).

    Returns:
        The number of modes changed.
    """
    from pathlib import Path

    directory = Path(directory)
    changed = int(_chmod(directory, _DIR_MODE))
    for pattern in patterns:
        for entry in directory.glob(pattern):
            if entry.is_symlink():
                continue
            if not entry.is_dir():
                changed += _chmod(entry, _FILE_MODE)
                continue
            changed += _chmod(entry, _DIR_MODE)
            for root, dirs, files in os.walk(entry):
                for d in dirs:
                    changed += _chmod(Path(root, d), _DIR_MODE)
                for f in files:
                    changed += _chmod(Path(root, f), _FILE_MODE)
    return changed


#: The ``errno`` values of an ``OSError`` that mean "this user may not use this file".
_ACCESS_ERRNOS = (13, 1, 30)  # EACCES, EPERM, EROFS


def _owner(uid: int) -> str:
    """The user name of ``uid``, else ``uid N``."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _fix(folder: str) -> str:
    """The command that gives ``folder`` (and what it holds) back to the current user."""
    import shlex

    try:
        import pwd

        me = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        me = str(os.geteuid())
    return f"sudo chown -R {me} {shlex.quote(folder)}"


def access_problem(exc: OSError) -> str | None:
    """What ``exc`` means to a person, when it is the current user being refused a file of
    ours (``EACCES``, ``EPERM``, ``EROFS``): the path, why (another user owns it, e.g. after
    one ``sudo`` run; a read-only file system; a mode without access) and the command that
    fixes it; ``None`` for any other error (or one that names no file).

    Example: ``cannot use /home/me/.local/state/opencode-memoryd/state.db: Permission
    denied; it belongs to root (uid 0), not to you (a command run with sudo?): fix: sudo
    chown -R me /home/me/.local/state/opencode-memoryd``.
    """
    if exc.errno not in _ACCESS_ERRNOS or not exc.filename:
        return None
    path = os.fsdecode(exc.filename)
    head = f"cannot use {path}: {exc.strerror}"
    if exc.errno == 30:
        return (f"{head}; the folder is on a read-only file system: fix: set `[state] dir` "
                "(the state) or `[qdrant] path` (the store) to a writable folder")
    probe = path
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    folder = probe if os.path.isdir(probe) else os.path.dirname(probe)
    try:
        uid = os.stat(probe).st_uid
    except OSError:
        return f"{head}; fix: {_fix(folder)}"
    if uid != os.geteuid():
        return (f"{head}; it belongs to {_owner(uid)}, not to you (a command run with "
                f"sudo?): fix: {_fix(folder)}")
    return f"{head}; its mode gives you no access: fix: chmod -R u+rwX {folder}"


def foreign_or_locked(paths: Iterable[Path]) -> list[str]:
    """Of ``paths`` and everything under those that are folders: each that exists and
    that the current user does not own or cannot read and write (a folder: also enter),
    or that lies on a read-only file system, as ``path (owner)``; the first 20."""
    out: list[str] = []
    for top in paths:
        todo = [os.fspath(top)]
        while todo and len(out) < 20:
            p = todo.pop()
            try:
                st = os.lstat(p)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            need = os.R_OK | os.W_OK | (os.X_OK if is_dir else 0)
            if st.st_uid != os.geteuid() or not os.access(p, need):
                out.append(f"{p} ({_owner(st.st_uid)}, {stat.S_IMODE(st.st_mode):04o})")
                continue
            if is_dir:
                try:
                    todo.extend(os.path.join(p, n) for n in os.listdir(p))
                except OSError:
                    out.append(f"{p} (unreadable)")
    return out
