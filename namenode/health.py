"""Counts for the status page and /metrics, kept up to date as things change: never a scan per look.

Two halves:

* **Tallies in SQLite.** TEMP triggers (this connection only; nothing is stored in the file) keep
  counts beside the tables they count: complete files by policy, directories, pending deletes by
  DataNode. They change in the same transaction as the rows, so a rolled-back change leaves them
  right, and no code path that edits those tables can forget them.
* **Group health in memory.** A group of a complete file is *healthy* (every unit good: on a live
  DataNode and not reported corrupt), *degraded* (its good or corrupt-but-readable units decode
  the data: any k for RS, any one replica, for LRC a set ``Policy.decodable`` accepts) or
  *missing* (unreadable). Its health depends on
  liveness, which is not in SQLite, so triggers only note which groups changed (units moved,
  file completed or deleted) in ``dirty_groups``; ``refresh`` re-judges those, and the groups of
  DataNodes whose liveness changed. Its cost is the size of the change, not of the namespace.

At startup every group is judged once (the NameNode is reading its database anyway).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

from hedgefs.namenode.db import Database
from hedgefs.namenode.reads import in_chunks
from hedgefs.namenode.namespace import load_policy

_TEMP_SCHEMA = """
CREATE TEMP TABLE IF NOT EXISTS tallies (kind TEXT, key TEXT, n INTEGER NOT NULL, PRIMARY KEY (kind, key));
CREATE TEMP TABLE IF NOT EXISTS dirty_groups (group_id INTEGER PRIMARY KEY);

CREATE TEMP TRIGGER IF NOT EXISTS tally_inode_in AFTER INSERT ON main.inodes BEGIN
  INSERT INTO tallies SELECT 'dirs', '', 1 WHERE NEW.is_dir ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT INTO tallies SELECT 'files', NEW.policy, 1 WHERE NOT NEW.is_dir AND NEW.state = 'complete'
    ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TEMP TRIGGER IF NOT EXISTS tally_inode_out AFTER DELETE ON main.inodes BEGIN
  UPDATE tallies SET n = n - 1 WHERE OLD.is_dir AND kind = 'dirs';
  UPDATE tallies SET n = n - 1 WHERE NOT OLD.is_dir AND OLD.state = 'complete' AND kind = 'files' AND key = OLD.policy;
END;
CREATE TEMP TRIGGER IF NOT EXISTS tally_inode_change AFTER UPDATE OF state, policy ON main.inodes
WHEN NOT NEW.is_dir BEGIN
  UPDATE tallies SET n = n - 1 WHERE OLD.state = 'complete' AND kind = 'files' AND key = OLD.policy;
  INSERT INTO tallies SELECT 'files', NEW.policy, 1 WHERE NEW.state = 'complete'
    ON CONFLICT DO UPDATE SET n = n + 1;
  INSERT OR IGNORE INTO dirty_groups SELECT id FROM main.groups WHERE file_id = NEW.id;
END;
CREATE TEMP TRIGGER IF NOT EXISTS dirty_group_out AFTER DELETE ON main.groups BEGIN
  INSERT OR IGNORE INTO dirty_groups VALUES (OLD.id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS dirty_unit_in AFTER INSERT ON main.units BEGIN
  INSERT OR IGNORE INTO dirty_groups VALUES (NEW.group_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS dirty_unit_out AFTER DELETE ON main.units BEGIN
  INSERT OR IGNORE INTO dirty_groups VALUES (OLD.group_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS dirty_unit_move AFTER UPDATE OF datanode_id, group_id, corrupt, reported ON main.units BEGIN
  INSERT OR IGNORE INTO dirty_groups VALUES (OLD.group_id);
  INSERT OR IGNORE INTO dirty_groups VALUES (NEW.group_id);
END;
CREATE TEMP TRIGGER IF NOT EXISTS tally_delete_in AFTER INSERT ON main.pending_deletes BEGIN
  INSERT INTO tallies VALUES ('deletes', NEW.datanode_id, 1) ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TEMP TRIGGER IF NOT EXISTS tally_delete_out AFTER DELETE ON main.pending_deletes BEGIN
  UPDATE tallies SET n = n - 1 WHERE kind = 'deletes' AND key = OLD.datanode_id;
END;
"""

_INITIAL_TALLIES = """
DELETE FROM tallies;
INSERT INTO tallies SELECT 'dirs', '', COUNT(*) FROM main.inodes WHERE is_dir;
INSERT INTO tallies SELECT 'files', policy, COUNT(*) FROM main.inodes WHERE NOT is_dir AND state = 'complete'
  GROUP BY policy;
INSERT INTO tallies SELECT 'deletes', datanode_id, COUNT(*) FROM main.pending_deletes GROUP BY datanode_id;
DELETE FROM dirty_groups;
"""

# Start-up: every group of a complete file with its good and readable units, in one pass (the
# DataNodes counted live are in live_now). Groups of files being written are not judged.
_JUDGE_ALL = """
SELECT g.id, f.policy,
       COALESCE(SUM(u.corrupt = 0 AND l.id IS NOT NULL), 0),
       COALESCE(SUM(l.id IS NOT NULL), 0)
FROM main.groups g JOIN main.inodes f ON f.id = g.file_id
LEFT JOIN main.units u ON u.group_id = g.id AND u.reported = 1
LEFT JOIN live_now l ON l.id = u.datanode_id
WHERE f.state = 'complete' GROUP BY g.id
"""

STATES = ("healthy", "degraded", "missing")


class Health:
    def __init__(self, db: Database):
        self.db = db
        db.conn.executescript(_TEMP_SCHEMA)
        with db.tx() as c:
            for statement in _INITIAL_TALLIES.split(";"):
                if statement.strip():
                    c.execute(statement)
        # group id -> (state, units without a live copy): only groups of complete files
        self._groups: dict[int, tuple[str, int]] = {}
        self.unhealthy: set[int] = set()   # degraded or missing: what repair planning looks at
        self.counts: Counter[str] = Counter(dict.fromkeys(STATES, 0))
        self.units_lacking = 0          # units without a live copy, in degraded groups (repairable)

    # ------------------------------------------------------------------ group health

    def judge_all(self, live: Iterable[str]) -> None:
        """At start-up (nothing judged yet), every group at once (``live``: the DataNodes counted live), in one SQL
        pass: a few microseconds a group, where ``refresh`` costs tens (it reads units per chunk)."""
        with self.db.tx() as c:
            c.execute("CREATE TEMP TABLE IF NOT EXISTS live_now (id TEXT PRIMARY KEY)")
            c.execute("DELETE FROM live_now")
            c.executemany("INSERT INTO live_now VALUES (?)", [(d,) for d in live])
        sizes: dict[str, tuple[int, int]] = {}
        groups, counts = self._groups, self.counts
        # Row by row off the cursor: a list of every group's row would be the start-up's peak memory.
        for group_id, policy, good, readable in self.db.conn.execute(_JUDGE_ALL):
            size = sizes.get(policy)
            if size is None:
                p = load_policy(policy)
                size = sizes[policy] = (p.units, p.k)
            if good >= size[0]:
                groups[group_id] = ("healthy", 0)
                counts["healthy"] += 1
            else:
                self._set(group_id, ("degraded" if readable >= size[1] else "missing", size[0] - good))

    def refresh(self, is_live: Callable[[str], bool], changed_datanodes: Iterable[str] = ()) -> int:
        """Judge again the groups that changed since the last call; returns how many were judged."""
        with self.db.tx() as c:
            for datanode_id in changed_datanodes:
                c.execute("INSERT OR IGNORE INTO dirty_groups SELECT group_id FROM main.units WHERE datanode_id = ?",
                          (datanode_id,))
            ids = [r[0] for r in c.execute("SELECT group_id FROM dirty_groups")]
            c.execute("DELETE FROM dirty_groups")
        for chunk, marks in in_chunks(ids):
            policies = {r[0]: r[1] for r in self.db.query(
                f"SELECT g.id, f.policy FROM main.groups g JOIN main.inodes f ON f.id = g.file_id "
                f"WHERE g.id IN ({marks}) AND f.state = 'complete'", chunk)}
            holders: dict[int, list[tuple[int, str, bool]]] = {g: [] for g in policies}
            for group_id, index, datanode_id, corrupt in self.db.query(
                    f"SELECT group_id, idx, datanode_id, corrupt FROM main.units WHERE group_id IN ({marks}) "
                    "AND reported = 1", chunk):
                if group_id in holders:
                    holders[group_id].append((index, datanode_id, bool(corrupt)))
            for group_id in chunk:
                policy = policies.get(group_id)
                if policy is None:
                    self._set(group_id, None)
                    continue
                p = load_policy(policy)
                good = sum(1 for _i, d, corrupt in holders[group_id] if not corrupt and is_live(d))
                readable = [i for i, d, _corrupt in holders[group_id] if is_live(d)]
                state = "healthy" if good >= p.units else "degraded" if p.decodable(readable) else "missing"
                self._set(group_id, (state, p.units - good))
        return len(ids)

    def _set(self, group_id: int, new: tuple[str, int] | None) -> None:
        old = self._groups.pop(group_id, None)
        self.unhealthy.discard(group_id)
        if old is not None:
            self.counts[old[0]] -= 1
            if old[0] == "degraded":
                self.units_lacking -= old[1]
        if new is not None:
            self._groups[group_id] = new
            self.counts[new[0]] += 1
            if new[0] != "healthy":
                self.unhealthy.add(group_id)
            if new[0] == "degraded":
                self.units_lacking += new[1]

    @property
    def waiting_repair(self) -> int:
        """Groups with units on no live DataNode (degraded or missing)."""
        return self.counts["degraded"] + self.counts["missing"]

    # ------------------------------------------------------------------ tallies

    def tallies(self) -> dict[str, dict[str, int]]:
        """{"files": {policy: n}, "dirs": {"": n}, "deletes": {datanode id: n}}: a few rows."""
        out: dict[str, dict[str, int]] = {"files": {}, "dirs": {}, "deletes": {}}
        for kind, key, n in self.db.query("SELECT kind, key, n FROM tallies WHERE n != 0"):
            out.setdefault(kind, {})[key] = n
        return out
