"""The namesystem's two ways to run a method: under the writers' lock, answering once durable
(``_locked``), or off it on a snapshot of what is committed (``_snapshot``). Both need the
instance's ``_lock``, ``_local`` and ``db``."""

from __future__ import annotations

import functools


def _locked(method):
    """Under the lock; the answer (or the refusal) waits until every change it could have seen,
    its own included, is durable (group commit: ``Database.wait_durable``)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if getattr(self._local, "locked", False):   # called from a locked method: its caller waits
            with self._lock:
                return method(self, *args, **kwargs)
        self._local.locked = True
        try:
            with self._lock:
                try:
                    result = method(self, *args, **kwargs)
                finally:
                    seen = self.db.applied
        finally:
            self._local.locked = False
        self.db.wait_durable(seen)
        return result
    return wrapper


def _snapshot(method):
    """Off the lock: a read of what is committed (``Database.reading``), which is durable."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.db.reading():
            return method(self, *args, **kwargs)
    return wrapper
