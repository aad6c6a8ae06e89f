"""Reads off the writers' lock (a mixin of db.Database): each thread's own read connection, a
snapshot of what is committed, and the row cache's rules for the thread (rowcache.py).

A read sees only what is durable: a read whose snapshot holds a batch COMMITted but not yet durable
(its WAL not fsynced, or on etcd not in etcd yet) is answered only once it is
(``visible``/``durable``, db.py). The snapshot begins at the first query, so a read the row cache
answers whole opens none; entries and rows are combined only while they show one state
(``stamp``), else ``Stale`` and the read runs again without entries (locking.py).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator


IN_CHUNK = 500   # ids one ``IN (...)`` binds: a short statement each, far below SQLite's variable limit


def in_chunks(ids: list) -> Iterator[tuple[list, str]]:
    """``ids`` IN_CHUNK at a time, each chunk with its ``?,?,...`` for ``IN (...)``."""
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start:start + IN_CHUNK]
        yield chunk, ",".join("?" * len(chunk))


class Stale(Exception):
    """A cached read met a snapshot newer than the entries it used: run it again (locking.py)."""


class _Read:
    """A thread's read connection and the state of its ``reading`` block."""

    conn: sqlite3.Connection | None = None
    active = open = begun = hit = cached = False
    mark = stamp = durable = 0


class Reads:
    """Needs the Database's ``_local``, ``_state``, ``_readers``, ``path``, ``backend``, ``stamp``,
    ``durable``, ``visible``, ``cache``, ``conn``, ``wait_durable`` and ``_writer_lock``."""

    @contextmanager
    def reading(self, cached: bool = False) -> Iterator[None]:
        """Run ``query``/``one`` of this thread on its own read connection, in one read transaction:
        a snapshot of what is committed (the block ends only once every batch the snapshot holds
        is durable), never a change still waiting in the batch, and no wait for the writers' lock.
        The transaction begins at the first query (``_begin``): a read the row cache answers whole
        takes none. ``cached``: the cache's entries may be used (rowcache.py; the caller reruns
        the read on ``Stale``)."""
        r = getattr(self._local, "read", None)
        if r is None:
            r = self._local.read = _Read()
        if r.active:   # nested: the outer snapshot
            yield
            return
        r.active, r.begun, r.hit, r.mark = True, False, False, 0
        r.cached = cached and self.cache is not None
        r.stamp = self.stamp
        try:
            yield
        finally:
            r.active = False
            if r.open:
                try:
                    if r.begun:
                        r.conn.execute("COMMIT")
                finally:
                    r.open = False
                    with self._state:
                        self._reads_open -= 1
                        if self._reads_closed:
                            self._state.notify_all()   # close() waits for the last one
            if r.begun:
                # The answer (or the refusal: "not found" tells too) leaves once all it saw is durable;
                # not under the writers' lock, whose holder answers after wait_durable(applied) anyway.
                if r.mark > self.durable and not self._owns_lock():
                    self.wait_durable(r.mark)

    def _begin(self, r: "_Read") -> None:
        """The snapshot of a ``reading`` block, at its first query. Stale if cache entries already
        used may be of an older state than the snapshot; refused once the database closes."""
        with self._state:
            if self._reads_closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            if not r.open:   # (a second try of a block whose first failed is counted once)
                self._reads_open += 1
        r.open = True
        if r.conn is None:
            r.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            r.conn.row_factory = sqlite3.Row
            r.conn.execute("PRAGMA query_only=ON")
            with self._state:
                self._readers.append(r.conn)
        r.durable = self.durable
        stamp = self.stamp
        r.conn.execute("BEGIN")
        r.begun = True
        r.conn.execute("SELECT 1 FROM meta LIMIT 1")   # the snapshot begins here ...
        r.mark = self.visible   # ... so it holds no batch above this (sealed ones may not be durable yet)
        if r.hit and self.stamp != r.stamp:
            raise Stale()
        if not r.hit:
            r.stamp = stamp

    def in_reading(self) -> bool:
        r = getattr(self._local, "read", None)
        return r is not None and r.active

    def may_hit(self) -> bool:
        """May this thread use a row cache entry now? A writer (under the lock) may: an entry is
        what it would read. A ``reading(cached=True)`` block may while nothing became visible or
        durable since its start (or its snapshot's: ``stamp``), so entries and snapshot agree."""
        r = getattr(self._local, "read", None)
        if r is None or not r.active:
            return True
        if not r.cached or self.stamp != r.stamp:
            return False
        if not r.begun:
            r.hit = True
        return True

    def floor(self) -> int:
        """The durable mark rows this thread reads next are at least as new as (for cache fills):
        its snapshot's if one is open, else now (a writer reads the applied state)."""
        r = getattr(self._local, "read", None)
        if r is not None and r.active and r.begun:
            return r.durable
        return self.durable

    def _owns_lock(self) -> bool:
        owned = getattr(self._writer_lock, "_is_owned", None)
        return bool(owned and owned())

    def _reader(self) -> sqlite3.Connection:
        r = getattr(self._local, "read", None)
        if r is None or not r.active:
            return self.conn
        if not r.begun:
            self._begin(r)
        return r.conn

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        return self._reader().execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | list = ()) -> sqlite3.Row | None:
        return self._reader().execute(sql, params).fetchone()

