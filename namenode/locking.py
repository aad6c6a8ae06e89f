"""The namesystem's two ways to run a method: under the writers' lock, answering once durable
(``_locked``; a retried call's first answer is kept and returned: retry_cache.py), or off it on a
snapshot of what is committed (``_snapshot``). Both need the
instance's ``_lock``, ``_local`` and ``db``."""

from __future__ import annotations

import functools

from hedgefs.namenode import retry_cache
from hedgefs.namenode.db import Stale


def _locked(method):
    """Under the lock; the answer (or the refusal) waits until every change it could have seen,
    its own included, is durable (group commit: ``Database.wait_durable``)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if getattr(self._local, "locked", False):   # called from a locked method: its caller waits
            with self._lock:
                return method(self, *args, **kwargs)
        self._local.locked = True
        ids = retry_cache.take()   # a retried call's ids (the RPC's, handed over by the servicer)
        try:
            with self._lock:
                try:
                    result = retry_cache.lookup(self.db, ids, self.wall_ms()) if ids else retry_cache.MISS
                    if result is retry_cache.MISS:
                        result = method(self, *args, **kwargs)
                        if ids:
                            retry_cache.remember(self.db, ids, result, self.wall_ms())
                finally:
                    seen = self.db.applied
        finally:
            self._local.locked = False
        self.db.wait_durable(seen)
        return result
    return wrapper


def _snapshot(method):
    """Off the lock: a read of what is committed (``Database.reading``), which is durable, the row
    cache's entries used where they agree with it (rowcache.py); else (``Stale``: rare, a commit
    between the first entry used and the snapshot's start) once more without them."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.db.in_reading():   # inside another read: its snapshot, its rerun
            return method(self, *args, **kwargs)
        try:
            with self.db.reading(cached=True):
                return method(self, *args, **kwargs)
        except Stale:
            with self.db.reading():
                return method(self, *args, **kwargs)
    return wrapper
