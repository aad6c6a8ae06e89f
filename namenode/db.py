"""The NameNode's SQLite database: pragmas, and group commit of namespace changes.

WAL; a change is acknowledged only once the WAL holding it is fsynced, so a ``kill -9`` (or a
power cut) loses nothing acknowledged. Writers serialise on the NameNode's lock; ``tx()`` nests,
so a composite change (complete = namespace + block map) is one change. Before the committer
starts, and at close, each change is its own COMMIT (synchronous=FULL).

Group commit (HDFS's edit log sync, ``start_group_commit``): a change is applied under the lock
as a savepoint of one open transaction and numbered; one committer thread commits every change
applied so far in one go (one fsync for many), and a writer answers its caller only once
``wait_durable`` says its change is durable. Nothing is acknowledged before it is durable, so a
``kill -9`` mid-batch loses only changes no caller was told about. The committer pipelines (HDFS
syncs its edit log outside the namesystem lock too; research 5.4): under the lock it COMMITs the
batch without an fsync (``_seal``: synchronous=NORMAL, the WAL written, not synced), raising
``visible``; off the lock it makes the batch durable (``_push``: an fsync of the WAL, which holds
every COMMIT before it), then raises ``durable``. Writers apply the next batch meanwhile. Reads
that need not see the batch (stat, list) run on per-thread read connections (``reading``,
reads.py): WAL snapshots of what is committed, taken without the lock, answered only after
``wait_durable`` of the ``visible`` their snapshot began at, so nobody is shown a change before it
is durable; and the row cache of durable rows (rowcache.py, told here as changes become durable:
``_durable``). An fsync that fails fails the batch (``_fail``): changes are refused until a
restart, whose recovery keeps what the WAL holds.

On etcd (``--meta etcd://``, ha.py) this file is a view and ``backend`` holds the truth: the
capture triggers (etcd_view.py) record each change's rows; ``_seal`` collects the batch's rows
and COMMITs the view (no fsync: the view is rebuilt from etcd at every start), and ``_push``
sends them as one Txn guarded by the active's epoch (one Txn in flight, in order). A Txn whose
answer is lost is settled by the backend while its lease holds (etcd_commit.py: each batch lands
exactly once), everyone still waiting; a refused Txn, or one not settled in time, fails the batch
(``_fail``) and the backend's ``fatal`` makes the NameNode step down (its view, ahead of etcd, is
discarded). A batch is sealed before it outgrows one Txn, and one change too large for one is
refused (TooLarge). A standby opens the view ``read_only``.

The tables and what each holds: schema.py.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import secrets
import sqlite3
import threading
import uuid
from collections import deque
from contextlib import contextmanager
from typing import Iterator, Protocol

from hedgefs.namenode import etcd_view
from hedgefs.namenode.errors import FailedPrecondition
from hedgefs.namenode.etcd_meta import MetaError
from hedgefs.namenode.reads import Reads, Stale  # noqa: F401  (Stale: locking.py, tests)
from hedgefs.namenode.schema import SCHEMA as _SCHEMA, SCHEMA_VERSION  # noqa: F401  (ha.py, tests)
from hedgefs.namenode.waiting import Durability, StoreFailed  # noqa: F401  (StoreFailed: everywhere)
from hedgefs.security.identity import Refused

log = logging.getLogger("hedgefs.namenode")

ROOT_ID = 1
SUPERGROUP = "supergroup"        # HDFS's name for the superusers' group: the root's group
DIR_MODE, FILE_MODE = 0o755, 0o644

CLOSE_READS_S = 10.0      # close() waits this long at most for running read transactions
CHECKPOINT_EVERY = 50     # commits between two checkpoints (SQLite's own default: every ~1000 WAL pages)


class Backend(Protocol):
    """Where the truth is when it is not this file (``--meta etcd://``: ha.EtcdBackend)."""

    max_keys: int                                                              # keys one Txn may hold
    def commit(self, puts: dict[str, bytes], deletes: list[str]) -> int: ...   # one guarded Txn; its revision
    def fatal(self, why: str) -> None: ...                                     # a commit failed: stop being active


class TooLarge(FailedPrecondition):
    """One change too large for one etcd transaction (half of ``--etcd-max-txn-ops``)."""


class ReadOnlyView(FailedPrecondition):
    """A change asked of a standby's view."""


class NotFormatted(RuntimeError):
    """A standby's view of a namespace no active has formatted yet."""


class Database(Reads, Durability):
    """One SQLite connection with a re-entrant transaction helper. Not thread-safe by itself.

    ``cluster_id``: the cluster this namespace must belong to (a secure NameNode's credential
    says); a new namespace takes it, an existing one of another cluster is refused (Refused).
    """

    def __init__(self, path: str, cluster_id: str | None = None, superuser: str = "hedgefs",
                 backend: "Backend | None" = None, read_only: bool = False):
        self.path = path
        self.backend = backend
        self.read_only = read_only
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        # On etcd the file is a view, rebuilt from etcd at every start: no fsync of it.
        self.conn.execute(f"PRAGMA synchronous={'OFF' if backend or read_only else 'FULL'}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._depth = 0
        # Group commit (``start_group_commit``): changes are numbered as they apply; ``committed``
        # is the last one a COMMIT was issued for, ``durable`` the last one that COMMIT returned for
        # (on etcd: its Txn too). ``visible``: on etcd, the last one a reader may see in the view.
        self.applied = self.committed = self.durable = self.visible = self.commits = 0
        # Raised before a batch becomes visible to readers and after it is durable: a reader whose
        # ``stamp`` is unchanged saw one state throughout (the row cache's check, rowcache.py).
        self.stamp = 0
        self.cache = None   # a rowcache.RowCache (the namesystem's), told as changes become durable
        self._sealed: deque = deque()   # on etcd: (upto, rows) COMMITted to the view, not yet to etcd
        self._wanted = 0
        self.failed: str | None = None
        # The committer waits for work on ``_state``; writers and readers wait for durability each
        # on a gate of its own, opened when its change is durable (``_waiting``, a heap by change
        # number): a waiter's arrival wakes only the committer, a durable batch only its waiters.
        self._state = threading.Condition()
        self._waiting: list[tuple[int, int, threading.Lock]] = []
        self._gates = itertools.count()
        self._committer: threading.Thread | None = None
        self._writer_lock = None
        self._dir_synced = False   # the WAL's directory, once (``_sync_wal``)
        self._closing = False
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._reads_open, self._reads_closed = 0, False   # read transactions running; close() waits for them
        if read_only:   # a standby's view: etcd's rows, applied by its follower (follower.py)
            self.cluster_id = self._view_identity(cluster_id)
            return
        self.conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
        self._capture = etcd_view.Capture(self.conn) if backend is not None else None
        with self.tx() as c:
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                      (str(SCHEMA_VERSION),))
            c.execute("INSERT OR IGNORE INTO inodes(id, parent, name, is_dir, mtime_ms, owner, grp, mode) "
                      "VALUES (?, NULL, '', 1, 0, ?, ?, ?)", (ROOT_ID, superuser, SUPERGROUP, DIR_MODE))
        version = int(self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
        if version != SCHEMA_VERSION:   # no release ever shipped another: nothing to migrate from
            raise Refused(f"{path}: namespace schema version {version}, this NameNode reads only {SCHEMA_VERSION}")
        self._identity(cluster_id)

    def _identity(self, cluster_id: str | None) -> None:
        """The cluster id and the generation range, made once (a new namespace) and kept."""
        with self.tx() as c:
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('cluster_id', ?)",
                      (cluster_id or f"CID-{uuid.uuid4()}",))
            # Generations start at a random point of a 2^61-wide space: the ranges two namespaces
            # issue (a wiped NameNode's and its successor's) meet with odds of (n1 + n2) / 2^61.
            first = str(secrets.randbelow(1 << 61) + (1 << 40))
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('generation_first', ?)", (first,))
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('generation_next', ?)", (first,))
        self.cluster_id = self.meta("cluster_id")
        if cluster_id and cluster_id != self.cluster_id:
            raise Refused(f"the namespace in {os.path.dirname(self.path) or '.'} belongs to cluster "
                             f"{self.cluster_id}, not {cluster_id}")

    def _view_identity(self, cluster_id: str | None) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()
        if row is None:
            raise NotFormatted("the namespace on etcd is not formatted yet (no active NameNode has run)")
        if cluster_id and cluster_id != row[0]:
            raise Refused(f"the namespace on etcd belongs to cluster {row[0]}, not {cluster_id}")
        return row[0]

    def meta(self, key: str) -> str:
        return self._reader().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]

    # ------------------------------------------------------------------ group commit

    def guard(self, lock) -> None:
        """``lock`` is held by every user of ``conn`` (the namesystem's: its writers, and on a
        standby's view its locked reads, a Report): close() takes it before closing ``conn``."""
        self._writer_lock = lock

    def start_group_commit(self, lock) -> None:
        """From now on a ``tx()`` only applies its change: the committer thread commits every change
        applied since its last commit in one transaction (one fsync), taking ``lock`` (the one every
        writer holds) for it. A caller answers only after ``wait_durable(self.applied)``."""
        self.guard(lock)
        # Checkpoints (WAL -> database file, with its own fsync) move from inside a COMMIT, under
        # the lock, to the committer between commits on a connection of its own: PASSIVE, so
        # neither writers nor readers wait for them.
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        if self.backend is None:   # the fsync moves out of the COMMIT, off the lock (``_push``)
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self._committer = threading.Thread(target=self._commit_loop, name="namenode-commit", daemon=True)
        self._committer.start()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A change; nested calls join the outermost one. Each outermost change is a savepoint in
        the open batch: if it fails only its own rows roll back. Without the committer (before
        ``start_group_commit``) each change is committed as it ends, as before."""
        outermost = self._depth == 0
        before = 0
        if outermost:
            if self.failed:
                raise StoreFailed(self.failed)
            if self.backend is not None and self.conn.in_transaction:
                before = self._captured()
                if before > self.change_rows():   # the batch's Txn stays within etcd's limit
                    self._seal(self.applied) if self._committer is not None else self._commit(self.applied)
                    before = 0
                    if self.failed:
                        raise StoreFailed(self.failed)
            if not self.conn.in_transaction:
                self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("SAVEPOINT change")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self._depth -= 1
            if outermost:
                self._undo_change()
            raise
        self._depth -= 1
        if outermost:
            if self.read_only and self.conn.execute("SELECT 1 FROM _changes LIMIT 1").fetchone():
                self._undo_change()
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise ReadOnlyView("this NameNode is a standby: its view of the namespace is etcd's, changed "
                                   "only by the active")
            if self.backend is not None and self._captured() - before > self.change_rows():
                keys = self._captured() - before
                self._undo_change()
                if self._committer is None and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise TooLarge(f"this change touches {keys} rows, more than one etcd transaction may hold "
                               f"({self.change_rows()}): do it in parts (a smaller directory, fewer sources)")
            self.conn.execute("RELEASE change")
            self.applied += 1
            if self._committer is None:
                self._commit(self.applied)

    def _undo_change(self) -> None:
        batched = self.applied > self.committed   # other changes wait in this transaction
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK TO change")
                self.conn.execute("RELEASE change")
            elif batched:   # SQLite rolled the whole transaction back (disk full, I/O error)
                self._fail("a change failed and SQLite rolled back the batch it was in")
            if self._committer is None and self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        except sqlite3.Error as err:
            self._fail(f"cannot roll a failed change back: {err}")

    def _commit(self, upto: int) -> None:
        """COMMIT what is applied (the caller holds the writers' lock); ``upto`` is then durable."""
        self.committed = upto
        try:
            if self.conn.in_transaction:
                if self.backend is not None:
                    self._push_now()
                self.stamp += 1
                self.conn.execute("COMMIT")
        except MetaError as err:   # fail-stop: etcd refused the epoch, or its answer is unknown
            self._fail(f"etcd: {err}")
            self.backend.fatal(str(err))
            if self._committer is None:
                raise StoreFailed(self.failed) from None
            return
        except sqlite3.Error as err:
            if self._committer is None:   # one change, its writer is told: the next one may work
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            self._fail(f"commit failed: {err}")
            return
        self._durable(upto)

    def _seal(self, upto: int) -> None:
        """Pipelined (the caller holds the writers' lock): COMMIT the batch without its fsync (on
        etcd: collect its rows first); the committer makes it durable off the lock (``_push``).
        ``visible`` is raised before the COMMIT, so a reader whose snapshot holds the batch finds
        it raised."""
        if self.failed:
            return
        self.committed = upto
        rows, before = None, self.visible
        try:
            if self.conn.in_transaction:
                if self.backend is not None:
                    rows = self._capture.collect(self.conn)
                    etcd_view.set_applied(self.conn, self.backend.revision)   # the view holds at least that
                else:
                    rows = ({}, [])   # SQLite: the WAL holds the batch, to be synced
                self.visible = upto
                self.stamp += 1
                self.conn.execute("COMMIT")
        except sqlite3.Error as err:   # nothing of the batch is durable; its writers are told
            self.visible = before          # nor visible: readers need not wait for it
            self._fail(f"commit failed: {err}")
            if self.backend is not None:
                self.backend.fatal(str(err))
            return
        with self._state:
            self._sealed.append((upto, rows))
            self._state.notify_all()

    def _push(self, upto: int, rows: tuple[dict[str, bytes], list[str]] | None) -> None:
        """The committer, off the lock: a sealed batch's rows to etcd as one Txn guarded by the
        epoch (on SQLite: an fsync of the WAL); then ``upto`` is durable. Fail-stop on any error:
        what readers may already see in the file is not known to be durable."""
        if self.backend is None:
            if rows is not None:
                try:
                    self._sync_wal()
                except OSError as err:
                    self._fail(f"fsync failed: {err}", rollback=False)
                    return
        elif rows is not None and (rows[0] or rows[1]):
            try:
                self.backend.commit(*rows)
            except Exception as err:   # MetaError: refused, or its outcome unknown
                self._fail(f"etcd: {err}", rollback=False)   # the open batch belongs to the lock's holder
                self.backend.fatal(str(err))
                return
            self._capture.sent(rows[0])
        self._durable(upto)

    def each_in_changes(self, items, fn) -> list:
        """[fn(item) for item in items], a part (``part_rows``, halved if TooLarge) to a change: what
        grows with a DataNode's units, refused for ever on etcd as one change. ``fn`` changes only rows."""
        assert self._depth == 0, "each_in_changes inside a change would be one change"
        items, out = list(items), []
        size = self.part_rows() or len(items)
        while len(out) < len(items):
            part = items[len(out):len(out) + size]
            try:
                with self.tx():
                    results = [fn(item) for item in part]
            except TooLarge:
                if size == 1:
                    raise
                size //= 2
                continue
            out.extend(results)
        return out

    def part_rows(self) -> int | None:
        """Items a part (on etcd a quarter of a change's rows, room for triggers; None on SQLite)."""
        return None if self.backend is None else max(1, self.change_rows() // 4)

    def change_rows(self) -> int | None:
        """Captured rows (an update counts twice) a change may add, and a batch may hold before it is
        committed: two halves and the id marks fit one Txn of ``backend.max_keys``. None on SQLite."""
        return None if self.backend is None else (self.backend.max_keys - 8) // 2

    def _captured(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM _changes").fetchone()[0]

    def _push_now(self) -> None:
        """Without the committer (at open, at close): the batch's rows to etcd, as one Txn guarded
        by the epoch, before the local COMMIT."""
        puts, deletes = self._capture.collect(self.conn)
        if not puts and not deletes:
            return
        revision = self.backend.commit(puts, deletes)
        self._capture.sent(puts)
        etcd_view.set_applied(self.conn, revision)

    def _fail(self, why: str, rollback: bool = True) -> None:
        """The changes since the last commit are gone: refuse every change from now on (their
        writers are told), as HDFS's NameNode stops when it cannot write its edit log."""
        if rollback and self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        log.critical("metadata store %s failed (%s): refusing changes%s", self.path, why,
                     "" if self.backend is not None else " until the NameNode restarts")
        then = ("this NameNode steps down to standby" if self.backend is not None else
                "changes are refused until the NameNode restarts")
        with self._state:
            self.failed = f"the NameNode's metadata store failed ({why}); {then}"
            self._state.notify_all()
            self._open_gates(None)

    def _commit_loop(self) -> None:
        checkpointer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        checkpointed = 0
        try:
            while True:
                with self._state:
                    while (not self._sealed and self._wanted <= self.committed and not self._closing
                           and not self.failed):
                        self._state.wait()
                    if self.failed or (self._closing and not self._sealed and self._wanted <= self.committed):
                        return
                    sealed = self._sealed.popleft() if self._sealed else None
                if sealed is not None:   # sent before the lock is taken: a sealed batch never waits for it
                    self._push(*sealed)
                else:
                    with self._writer_lock:
                        self._seal(self.applied)
                    continue   # the next round pushes it
                if self.commits - checkpointed >= CHECKPOINT_EVERY:
                    checkpointed = self.commits
                    try:
                        checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    except sqlite3.Error as err:   # the next one catches up; commits go on
                        log.warning("checkpoint of %s failed: %s", self.path, err)
        finally:
            checkpointer.close()

    def close(self) -> None:
        """Commit what is applied, stop the committer, close every connection: the threads' read
        connections once no read transaction runs on one (an HA switch closes a namesystem
        whose reads go on off the lock; closing a connection under a running query crashes
        SQLite), a read that would begin after this one refused as on a closed database."""
        with self._state:
            self._reads_closed = True
            reads_done = self._state.wait_for(lambda: not self._reads_open, CLOSE_READS_S)
        if not reads_done:
            log.warning("closing the database while %d reads still run: their connections are left open",
                        self._reads_open)
        if self._committer is not None:
            with self._state:
                self._closing = True
                self._state.notify_all()
            self._committer.join()
        with self._writer_lock or contextlib.nullcontext():
            if self._committer is not None and not self.failed:
                if self.backend is None:   # as the committer would (synchronous=NORMAL: the fsync is ours)
                    self._seal(self.applied)
                    while self._sealed and not self.failed:
                        self._push(*self._sealed.popleft())
                else:
                    self._commit(self.applied)
            for conn in self._readers if reads_done else ():
                conn.close()
            self.conn.close()
