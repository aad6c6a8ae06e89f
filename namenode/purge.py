"""Detach-and-purge: what a recursive delete of a large tree leaves behind, emptied in the background.

On etcd every change is one transaction, and a transaction holds at most ``--etcd-max-txn-ops``
keys, so a large tree cannot go in one change; on SQLite it can, but every writer waits for it (~0.1 ms
a file under the writers' lock: 12-14 s for 100,000 files). A recursive delete therefore *detaches*
the tree (namespace.py: its top directory loses its parent, in one change: the path is gone at once,
for every reader, on every NameNode) and the active's ``Purger`` empties it here, one bounded change
at a time (HDFS's delete does the same: the tree is unlinked under the lock, its blocks removed in
increments after). On etcd any directory with something below it is detached; on SQLite a tree of
more than ``TREE_INODES`` inodes, or a file of more than ``FILE_ROWS`` rows. A step looks only at
one top's children, by index (its cost does not grow with the tree): files' groups, a batch at a
time (their units become pending deletes on their DataNodes, as with any delete), then the files;
empty directories; a non-empty directory is cut loose as a detached tree of its own (one row),
emptied by later steps the same way; a top with no child left. A detached tree is in the store like
any other row, so a new active finds it at start and goes on where the old one stopped (a kill -9
mid-purge loses nothing and leaves nothing). A single file too large to remove in one change (a
delete, or a file an overwrite replaces: namespace.py, writes.py) is detached the same way, and
emptied of its groups a batch at a time.

Until purged, a detached tree's files and groups still count in the cluster's totals (status page, metrics);
fsck and every path-based call never see it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from hedgefs.namenode.blockmap import GroupRow
from hedgefs.namenode.db import ROOT_ID, StoreFailed
from hedgefs.namenode.writes import DETACHED

log = logging.getLogger("hedgefs.namenode")

TREE_INODES = 1000      # on SQLite, a recursive delete of a larger tree detaches it (inline it holds writers ~0.1 s)
FILE_ROWS = 30_000      # and a delete of a file of more rows (~1,000 RS-6-3 groups: as long a hold)
SQLITE_ROWS_PER_CHANGE = 1000   # rows a purge change touches on SQLite: ~35 one-group RS-6-3 files, ~12 ms
SQLITE_CHILDREN_PER_CHANGE = 200   # and children it looks at (an empty file or directory: 1 row, a few statements)
ROWS_PER_CHANGE = 24    # and on etcd at most (bench/results/2026-12-01-purge.md: 48 doubled a Mkdir's p99)
MAX_BACKOFF_S = 300.0   # a tree whose purge fails (a bug, not etcd) is tried again at most this far apart

# Fault injection for the failover tests: HEDGEFS_NAMENODE_CRASH=purge:N makes this process
# kill -9 itself once its N-th purge change is durable. Read at start; unset in production.
_CRASH = os.environ.get("HEDGEFS_NAMENODE_CRASH", "")
_CRASH_AFTER = int(_CRASH.split(":", 1)[1]) if _CRASH.startswith("purge:") else 0


def detached(db) -> list[int]:
    """The top inodes of the trees waiting to be purged."""
    return [r[0] for r in db.query("SELECT id FROM inodes WHERE parent IS NULL AND id != ?", (ROOT_ID,))]


def _next_top(db, skip: frozenset[int]) -> int:
    """The first detached tree not in ``skip`` (0: none); an index lookup, however many there are."""
    marks = ",".join("?" * len(skip))
    row = db.one("SELECT id FROM inodes WHERE parent IS NULL AND id != ?"
                 + (f" AND id NOT IN ({marks})" if skip else "") + " ORDER BY id LIMIT 1", (ROOT_ID, *skip))
    return row[0] if row else 0


class PurgeFailed(Exception):
    """A purge step of the tree ``top`` failed (not on the store: a bug); its cause is chained."""

    def __init__(self, top: int):
        super().__init__(f"purge of the detached tree (inode {top}) failed")
        self.top = top


def step(nn, skip: frozenset[int] = frozenset()) -> tuple[int, int]:
    """One change of the purge (the caller holds the writers' lock) on the first detached tree
    not in ``skip``: (its top, rows removed); (0, 0) when there is none. PurgeFailed when the
    change failed other than on the store (StoreFailed goes up as it is)."""
    top = _next_top(nn.db, skip)
    if not top:
        return 0, 0
    try:
        return top, _step(nn, top)
    except StoreFailed:
        raise
    except Exception as err:
        raise PurgeFailed(top) from err


def change_rows(db) -> int | None:
    """On etcd: the rows one change may touch (half of a transaction, as db.py allows a change,
    less a few for the inode and its parent): a delete of a tree, or of a file that needs more,
    detaches it, then purges it; a Complete of a file of many groups goes in parts
    (namesystem.py). None on SQLite (no transaction limit)."""
    return db.change_rows() - 8 if db.backend is not None else None


def file_rows(db) -> int | None:
    """A delete of a file whose removal would touch more rows detaches it: on etcd what one
    change holds, on SQLite FILE_ROWS."""
    return change_rows(db) if db.backend is not None else FILE_ROWS


def abandon_over(db) -> int:
    """An abandoned file (its writer gone, or giving up) of more rows than this is detached: on
    etcd every one (one row; removing it at once might not fit a change, its groups' pending
    deletes too, and the monitor's lease expiry would fail on it every pass), on SQLite FILE_ROWS."""
    return 0 if db.backend is not None else FILE_ROWS


def trees_over(db) -> int:
    """A recursive delete of a tree of more inodes than this detaches it: on etcd any directory
    with something below it, on SQLite a tree of more than TREE_INODES."""
    return 1 if db.backend is not None else TREE_INODES


def budget(db) -> int:
    """Rows one purge change may touch: half of what one change may hold (db.py), the other half
    spare, and at most ROWS_PER_CHANGE, so that a writer waiting for the lock waits for a small
    change; SQLITE_ROWS_PER_CHANGE on SQLite."""
    if db.backend is None:
        return SQLITE_ROWS_PER_CHANGE
    return min(ROWS_PER_CHANGE, max(1, db.change_rows() // 2))


def _step(nn, top: int) -> int:
    """Up to ``budget`` rows of the top's own children, by bounded index lookups (never a walk of
    the tree, whose cost would grow with it): a file's groups (and the file once they are all
    gone), an empty directory, or a non-empty one cut loose as a detached tree of its own (one
    row; later steps empty it the same way); the top itself once it has no child left."""
    db, blocks = nn.db, nn.blocks
    rows = budget(db)
    if db.one("SELECT is_dir FROM inodes WHERE id = ?", (top,))[0]:
        limit = rows if db.backend is not None else SQLITE_CHILDREN_PER_CHANGE
        children = db.query("SELECT id, is_dir FROM inodes WHERE parent = ? ORDER BY id LIMIT ?", (top, limit))
    else:   # a file detached by a delete or an overwrite: its own groups, then itself
        children = [(top, 0)]
    with db.tx():
        if not children:
            db.conn.execute("DELETE FROM inodes WHERE id = ?", (top,))
            if not _next_top(db, frozenset()):
                log.info("purged every tree detached by a recursive delete (the last: inode %d)", top)
            return 1
        cost = 0
        for inode, is_dir in children:
            if cost >= rows:
                break
            if is_dir:
                if db.one("SELECT 1 FROM inodes WHERE parent = ? LIMIT 1", (inode,)):
                    db.conn.execute("UPDATE inodes SET parent = NULL, name = ? WHERE id = ?", (f"{DETACHED}{inode}", inode))
                else:
                    db.conn.execute("DELETE FROM inodes WHERE id = ?", (inode,))
                cost += 1
                continue
            groups, more, owed = _groups(blocks, inode, rows - cost, at_least_one=cost == 0)
            if not groups and more:   # its next group does not fit what is left: the next change
                break
            limit, first = db.change_rows(), groups[0] if len(groups) == 1 else None
            if limit is not None and first is not None and owed.get(first.id) and _cost(first, owed) > limit:
                cost += blocks.make_plain(first.id, rows)   # with what it held back it fills a change: that first
                break
            cost += sum(_cost(g, owed) for g in groups)
            if groups:
                blocks._forget_groups(groups)
            if not more:
                db.conn.execute("DELETE FROM inodes WHERE id = ?", (inode,))
                cost += 1
        return max(1, cost)


def _cost(group: GroupRow, owed: dict[int, int]) -> int:
    """Rows forgetting a group touches: its row, its units' and their deletes, and the deletes it
    held back (made plain)."""
    return 2 + 3 * len(group.units) + owed.get(group.id, 0)


def _groups(blocks, file_id: int, budget: int, at_least_one: bool) -> tuple[list[GroupRow], bool, dict[int, int]]:
    """A file's first groups that fit ``budget`` rows (one at least if ``at_least_one``: a
    change holds twice the budget), whether more are left, and the deletes they held back."""
    rows = blocks.db.query("SELECT id, file_id, seq, length, generation FROM groups WHERE file_id = ? "
                           "ORDER BY seq LIMIT ?", (file_id, max(1, budget // 2) + 1))
    by_id = {r[0]: GroupRow(r[0], r[1], r[2], r[3], r[4]) for r in rows}
    blocks._load_units(by_id)
    owed = blocks.owed(by_id)
    out, cost = [], 0
    for r in rows:
        g = by_id[r[0]]
        cost += _cost(g, owed)
        if cost > budget and (out or not at_least_one):
            break
        out.append(g)
    return out, len(out) < len(rows), owed


class Purger:
    """The active's purge thread: ``nn.purge_step()`` until nothing is detached, then a look every
    ``interval_s`` (a delete's tree is picked up within it). A tree whose step fails (a bug) is
    logged once with its traceback and tried again with an exponential back-off (capped at
    ``max_backoff_s``); the other trees go on meanwhile."""

    def __init__(self, namenode, interval_s: float = 1.0, max_backoff_s: float = MAX_BACKOFF_S):
        self.namenode, self.interval_s, self.max_backoff_s = namenode, interval_s, max_backoff_s
        self.changes = 0
        self.failing: dict[int, tuple[float, float]] = {}   # top -> (next try, monotonic; back-off)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="namenode-purge", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            skip = frozenset(t for t, (at, _) in self.failing.items() if now < at)
            try:
                top, removed = self.namenode.purge_step(skip)
            except StoreFailed as err:   # on etcd: this NameNode steps down; the next active goes on
                log.debug("purge stopped: %s", err)
                return
            except PurgeFailed as err:   # one bad tree must neither end the purge nor block the others
                self._failed(err)
                continue
            except Exception:
                log.exception("purge step failed")
                top, removed = 0, 0
            if top in self.failing and removed:
                log.info("the purge of the detached tree (inode %d) goes on", top)
                del self.failing[top]
            if removed:
                self.changes += 1
                if _CRASH_AFTER and self.changes >= _CRASH_AFTER:
                    log.critical("HEDGEFS_NAMENODE_CRASH=%s: kill -9 of this NameNode", _CRASH)
                    os.kill(os.getpid(), signal.SIGKILL)
            elif self._stop.wait(self.interval_s):
                return

    def _failed(self, err: PurgeFailed) -> None:
        _, backoff = self.failing.get(err.top, (0.0, 0.0))
        if not backoff:   # the traceback once a tree; its next failures in a line at debug
            log.error("%s; tried again with a back-off up to %g s, the other trees go on", err,
                      self.max_backoff_s, exc_info=err.__cause__)
        else:
            log.debug("%s again: %s", err, err.__cause__)
        backoff = min(self.max_backoff_s, max(self.interval_s, 2 * backoff))
        self.failing[err.top] = (time.monotonic() + backoff, backoff)
