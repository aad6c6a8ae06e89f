"""Who waits for which change to be durable (a mixin of db.Database), and the WAL's sync.

A writer answers, and a reader whose snapshot holds a batch not yet durable answers, only after
``wait_durable`` of its change's number. Each waiter waits on a gate of its own, opened when its
change is durable (``_durable``) or when the store failed (``_fail``): a durable batch wakes
only its own waiters, and a waiter's arrival only the committer (``_state``, with ``_wanted``).
"""

from __future__ import annotations

import heapq
import os
import threading


class StoreFailed(RuntimeError):
    """The database could not commit: the changes of the batch are lost, none was acknowledged."""


class Durability:
    """Needs the Database's ``_state``, ``_waiting``, ``_gates``, ``_wanted``, ``durable``,
    ``stamp``, ``commits``, ``failed``, ``cache``, ``path`` and ``_dir_synced``."""

    def _durable(self, upto: int) -> None:
        with self._state:
            self.durable = upto
            self.stamp += 1
            self.commits += 1
            self._open_gates(upto)
        if self.cache is not None:
            self.cache.prune(upto)

    def wait_durable(self, seq: int) -> None:
        """Return once change ``seq`` (and every one before it) is committed; StoreFailed if it
        never will be."""
        if seq <= self.durable:
            return
        with self._state:
            if seq > self._wanted:
                self._wanted = seq
                self._state.notify()   # the committer
            if self.durable >= seq:
                return
            if self.failed:
                raise StoreFailed(self.failed)
            gate = threading.Lock()
            gate.acquire()
            heapq.heappush(self._waiting, (seq, next(self._gates), gate))
        gate.acquire()   # opened by _durable, or by _fail
        if self.durable < seq:
            raise StoreFailed(self.failed)

    def _open_gates(self, upto: int | None) -> None:
        """Let the waiters for changes up to ``upto`` (None: all, the store failed) go on; the
        caller holds ``_state``."""
        waiting = self._waiting
        while waiting and (upto is None or waiting[0][0] <= upto):
            heapq.heappop(waiting)[2].release()

    def _sync_wal(self) -> None:
        """Sync the WAL, which holds every COMMIT made so far: SQLite's own sync at a COMMIT with
        synchronous=FULL is this one (fdatasync on Linux); and once its directory (the WAL file is
        made at the first commit)."""
        fd = os.open(self.path + "-wal", os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        if not self._dir_synced:
            fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._dir_synced = True
