"""Deferred flushes: a thread's store writes made durable once, at the end of a batch.

:class:`WriteBatching` is mixed into :class:`~opencode_memoryd.store.base.StoreBase`: an
adapter asks :meth:`WriteBatching._deferring` after a write and skips its own flush while the
calling thread is inside :meth:`WriteBatching.batch`; the outermost batch flushes once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["WriteBatching"]


class WriteBatching:
    """Per-thread write batches over a store's ``_flush`` (under its ``_lock``)."""

    _lock: threading.RLock
    _closed: bool

    def _flush(self) -> None:
        raise NotImplementedError

    @property
    def _batching(self) -> threading.local:
        local: threading.local | None = self.__dict__.get("_batching_local")
        if local is None:
            local = self.__dict__.setdefault("_batching_local", threading.local())
        return local

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the calling thread's writes: inside, :meth:`upsert`, :meth:`set_fields`
        and :meth:`delete` are not flushed one by one; the outermost ``batch`` flushes once
        on exit (also when the block raised), if anything was written. Other threads' writes
        are unaffected.

        Raises:
            StoreError: the final flush failed.
        """
        b = self._batching
        b.depth = getattr(b, "depth", 0) + 1
        try:
            yield
        finally:
            b.depth -= 1
            if b.depth == 0 and getattr(b, "wrote", False):
                b.wrote = False
                with self._lock:
                    if not self._closed:
                        self._flush()

    def pending_flush(self) -> bool:
        """Whether the calling thread's :meth:`batch` holds writes not yet flushed."""
        return bool(getattr(self._batching, "wrote", False))

    def _deferring(self) -> bool:
        """Whether the calling thread is inside :meth:`batch` (its writes are then not
        flushed one by one); notes that it wrote."""
        b = self._batching
        if getattr(b, "depth", 0) > 0:
            b.wrote = True
            return True
        return False

