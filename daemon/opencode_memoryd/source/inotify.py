"""Linux inotify through the C library (``ctypes``): block until a file in a folder changes.

The watcher thread sleeps in ``poll(2)`` on the inotify descriptor and a stop pipe, so an
idle database costs no wake-ups (a polling loop would wake many times a second). Only
``inotify_init1`` and ``inotify_add_watch`` are called through ``ctypes``; events are read
with ``os.read`` and decoded with ``struct`` (``struct inotify_event``: ``int wd; uint32_t
mask, cookie, len; char name[len]``, see inotify(7)).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import sys
import threading
from collections.abc import Iterable

__all__ = ["Inotify", "available"]

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: What a write to a database, its WAL or its SHM, or a file replacing it, raises.
WATCH_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
              | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

_EVENT = struct.Struct("iIII")


def available() -> bool:
    """Whether inotify can be used here (Linux with a C library that has it)."""
    return sys.platform.startswith("linux") and _libc() is not None


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name or None, use_errno=True)
    except OSError:
        return None
    return lib if hasattr(lib, "inotify_init1") else None


class Inotify:
    """An inotify instance watching folders (not recursive).

    Args:
        folders: the folders to watch.

    Raises:
        OSError: inotify is unavailable, a limit is reached (``ENOSPC``: too many watches,
            ``EMFILE``: too many instances) or a folder cannot be watched.
    """

    def __init__(self, folders: Iterable[str]) -> None:
        lib = _libc()
        if lib is None or not sys.platform.startswith("linux"):
            raise OSError("inotify is not available on this system")
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int | None = fd
        self._guard = threading.Lock()  # stop() and close() may run on different threads
        self._stop_r: int | None
        self._stop_w: int | None
        self._stop_r, self._stop_w = os.pipe()
        self._watches: set[int] = set()
        try:
            for folder in folders:
                wd = lib.inotify_add_watch(fd, os.fsencode(folder), WATCH_MASK)
                if wd < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"inotify_add_watch {folder}: {os.strerror(err)}")
                self._watches.add(wd)
        except BaseException:
            self.close()
            raise

    def wait(self) -> list[str] | None:
        """Block until events arrive; return the names they concern (``""`` for the
        folder itself or a queue overflow), or ``None`` once :meth:`stop` was called.

        Raises:
            OSError: reading the events failed, or every watched folder is gone (deleted
                or moved: nothing more can be seen).
        """
        fd = self.fd
        if fd is None:
            return None
        stop_r = self._stop_r
        if stop_r is None:
            return None
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(stop_r, select.POLLIN)
        while True:
            ready = {f for f, _ in poller.poll()}
            if stop_r in ready:
                return None
            if fd in ready:
                break
        names: list[str] = []
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                if not self._watches:
                    raise OSError("every watched folder is gone") from None
                return names
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                raw = data[offset:offset + length].split(b"\0", 1)[0]
                offset += length
                if mask & IN_IGNORED:  # the watch was removed (its folder is gone)
                    self._watches.discard(wd)
                    names.append("")
                elif mask & IN_Q_OVERFLOW:
                    names.append("")
                else:
                    names.append(os.fsdecode(raw))

    def stop(self) -> None:
        """Make a blocked (or the next) :meth:`wait` return ``None``; a no-op once closed."""
        with self._guard:
            if self._stop_w is not None:
                os.write(self._stop_w, b"x")

    def close(self) -> None:
        """Release the descriptors; safe to call twice."""
        with self._guard:
            for fd in (self.fd, self._stop_r, self._stop_w):
                if fd is not None:
                    os.close(fd)
            self.fd = self._stop_r = self._stop_w = None
