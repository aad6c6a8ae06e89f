"""Durable namespace rows kept in memory: inodes by id, visible children by (parent, name), and a
file's block groups, so that a lookup need not be SQL (HDFS keeps its whole namespace in memory).

What an entry holds is the row as the *durable* state has it, and while an entry is present the
row has no change applied since (so it is also what a writer under the lock sees):

* Every change to a cached table's rows, on the writers' connection, reaches ``_mark`` through
  TEMP triggers (this connection only): the keys it touches are popped and marked with the
  number of the change (``Database.applied`` + 1). A marked key is *dirty* until that change is
  durable (``prune``, called by db.py as ``durable`` rises): no entry for it may be made meanwhile.
  A change rolled back stays marked until its number is durable: merely a miss.
* An entry is made (``put_*``) from a row read at ``floor`` (``Database.floor``: the durable mark
  the reading connection's rows are at least as new as) only if the key is not dirty beyond it and
  ``durable`` is still ``floor`` (so no mark above it was pruned meanwhile). Marks and fills take
  one small lock, so a row read before a change cannot be put after the change's mark.
* A reader off the lock (``Database.reading(cached=True)``) may combine entries with rows of its
  SQLite snapshot only if nothing became visible or durable in between (``Database.stamp``); the
  database checks that (``may_hit``) and raises ``Stale`` when the snapshot it begins is newer than
  entries already used, and the namesystem reruns the read without entries (locking.py).

A standby's view changes through the follower's own connection, which has no such triggers:
there is no cache there (``Namesystem``: ``read_only``), and a promoted active starts a new one.
Each map is cleared when it outgrows ``MAX_ENTRIES`` (a cache, not a copy of the namespace).
Callers must not change what they get: entries are shared.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque

MAX_ENTRIES = 100_000

_TRIGGERS = """
CREATE TEMP TRIGGER IF NOT EXISTS cache_inode_in AFTER INSERT ON main.inodes BEGIN
  SELECT _cache_inode(NEW.id, NEW.parent, NEW.name, NULL, NULL);
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_inode_out AFTER DELETE ON main.inodes BEGIN
  SELECT _cache_inode(OLD.id, OLD.parent, OLD.name, NULL, NULL);
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_inode_change AFTER UPDATE ON main.inodes BEGIN
  SELECT _cache_inode(OLD.id, OLD.parent, OLD.name, NEW.parent, NEW.name)
  WHERE OLD.parent IS NOT NEW.parent OR OLD.name IS NOT NEW.name OR OLD.state IS NOT NEW.state;
  SELECT _cache_inode(OLD.id, NULL, NULL, NULL, NULL)
  WHERE OLD.parent IS NEW.parent AND OLD.name IS NEW.name AND OLD.state IS NEW.state;
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_group_in AFTER INSERT ON main.groups BEGIN
  SELECT _cache_file(NEW.file_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_group_out AFTER DELETE ON main.groups BEGIN
  SELECT _cache_file(OLD.file_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_group_change AFTER UPDATE ON main.groups BEGIN
  SELECT _cache_file(OLD.file_id);
  SELECT _cache_file(NEW.file_id) WHERE NEW.file_id IS NOT OLD.file_id;
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_unit_in AFTER INSERT ON main.units BEGIN
  SELECT _cache_file((SELECT file_id FROM main.groups WHERE id = NEW.group_id));
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_unit_out AFTER DELETE ON main.units BEGIN
  SELECT _cache_file((SELECT file_id FROM main.groups WHERE id = OLD.group_id));
END;
CREATE TEMP TRIGGER IF NOT EXISTS cache_unit_change AFTER UPDATE ON main.units
WHEN OLD.group_id IS NOT NEW.group_id OR OLD.idx IS NOT NEW.idx OR OLD.datanode_id IS NOT NEW.datanode_id
  OR OLD.reported IS NOT NEW.reported OR OLD.corrupt IS NOT NEW.corrupt BEGIN
  SELECT _cache_file((SELECT file_id FROM main.groups WHERE id = OLD.group_id));
  SELECT _cache_file((SELECT file_id FROM main.groups WHERE id = NEW.group_id)) WHERE NEW.group_id IS NOT OLD.group_id;
END;
"""


class RowCache:
    def __init__(self, db, conn: sqlite3.Connection):
        self.db = db
        self.inodes: dict = {}      # inode id -> Inode
        self.children: dict = {}    # (parent id, name) -> id of its visible (complete) child
        self.files: dict = {}       # file id -> its groups (tuple of GroupRow, with units)
        self._maps = (self.inodes, self.children, self.files)
        self._dirty: tuple[dict, dict, dict] = ({}, {}, {})   # the same keys -> number of the last change
        self._marks: deque = deque()   # (change number, map index, key), in number order
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        conn.create_function("_cache_inode", 5, self._on_inode)
        conn.create_function("_cache_file", 1, self._on_file)
        conn.executescript(_TRIGGERS)

    # ------------------------------------------------------------------ changes (triggers)

    def _mark(self, which: int, key) -> None:
        seq = self.db.applied + 1
        self._dirty[which][key] = seq
        self._marks.append((seq, which, key))
        self._maps[which].pop(key, None)

    def _on_inode(self, inode_id, parent, name, new_parent, new_name) -> None:
        with self._lock:
            self._mark(0, inode_id)
            if name is not None:
                self._mark(1, (parent, name))
            if new_name is not None:
                self._mark(1, (new_parent, new_name))

    def _on_file(self, file_id) -> None:
        if file_id is not None:
            with self._lock:
                self._mark(2, file_id)

    def prune(self, durable: int) -> None:
        """Changes up to ``durable`` are durable: their keys are clean again (db.py calls this)."""
        with self._lock:
            marks, dirty = self._marks, self._dirty
            while marks and marks[0][0] <= durable:
                seq, which, key = marks.popleft()
                if dirty[which].get(key) == seq:
                    del dirty[which][key]

    # ------------------------------------------------------------------ lookups and fills

    def _get(self, which: dict, key):
        value = which.get(key)
        if value is not None and self.db.may_hit():
            self.hits += 1
            return value
        self.misses += 1
        return None

    def inode(self, inode_id: int):
        return self._get(self.inodes, inode_id)

    def child(self, parent_id: int, name: str):
        """The visible child's inode, or None: not cached (a miss, never "no such child")."""
        child_id = self._get(self.children, (parent_id, name))
        return None if child_id is None else self.inode(child_id)

    def groups(self, file_id: int):
        return self._get(self.files, file_id)

    def _put(self, which: int, key, value, floor: int) -> None:
        with self._lock:
            if self.db.durable != floor or self._dirty[which].get(key, 0) > floor:
                return
            target = self._maps[which]
            if len(target) >= MAX_ENTRIES:
                target.clear()
            target[key] = value

    def put_inode(self, node, floor: int, visible: bool = False) -> None:
        """``node`` as read at ``floor``; ``visible``: it is its parent's visible child too."""
        self._put(0, node.id, node, floor)
        if visible:
            self._put(1, (node.parent, node.name), node.id, floor)

    def put_groups(self, file_id: int, groups: tuple, floor: int) -> None:
        self._put(2, file_id, groups, floor)
