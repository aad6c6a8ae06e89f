"""The block map: block groups, where each unit lives, and deletes owed to DataNodes.

One location per unit (group id, unit index), and the units of a group on distinct DataNodes.
A unit is *live* when its DataNode is live; the caller passes ``is_live`` because liveness lives
in memory (``liveness.py``), not in SQLite.

Reconciliation rules (block reports, UnitStored) are in ``claim`` and ``reconcile``; units of
files still being written are left alone: their map rows are the writer's targets until Complete.
All methods run inside the caller's transaction.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hedgefs.ec import layout
from hedgefs.ec.policy import Policy
from hedgefs.namenode.db import Database
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.namespace import load_policy

IsLive = Callable[[str], bool]


@dataclass
class GroupRow:
    id: int
    file_id: int
    seq: int
    length: int
    units: dict[int, str] = field(default_factory=dict)  # unit index -> DataNode id


@dataclass(frozen=True)
class GroupCommit:
    group_id: int
    length: int
    stored_units: tuple[int, ...]


class BlockMap:
    def __init__(self, db: Database, wall_ms: Callable[[], int]):
        self.db = db
        self.wall_ms = wall_ms

    # ------------------------------------------------------------------ DataNodes

    def datanodes(self) -> dict[str, str]:
        return {r["id"]: r["address"] for r in self.db.query("SELECT id, address FROM datanodes")}

    def save_datanode(self, datanode_id: str, address: str) -> None:
        self.db.conn.execute(
            "INSERT INTO datanodes(id, address) VALUES (?, ?) "
            "ON CONFLICT(id) DO UPDATE SET address = excluded.address", (datanode_id, address))

    # ------------------------------------------------------------------ groups

    def _load_units(self, groups: dict[int, GroupRow]) -> None:
        ids = list(groups)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = self.db.query(
                f"SELECT group_id, idx, datanode_id FROM units WHERE group_id IN ({','.join('?' * len(chunk))})",
                chunk)
            for r in rows:
                groups[r[0]].units[r[1]] = r[2]

    def groups_of_files(self, file_ids: Iterable[int]) -> dict[int, list[GroupRow]]:
        """file id -> its groups in file order, with units."""
        ids = list(file_ids)
        out: dict[int, list[GroupRow]] = {i: [] for i in ids}
        by_id: dict[int, GroupRow] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = self.db.query(
                f"SELECT id, file_id, seq, length FROM groups WHERE file_id IN ({','.join('?' * len(chunk))}) "
                "ORDER BY file_id, seq", chunk)
            for r in rows:
                g = GroupRow(r[0], r[1], r[2], r[3])
                out[g.file_id].append(g)
                by_id[g.id] = g
        self._load_units(by_id)
        return out

    def groups(self, file_id: int) -> list[GroupRow]:
        return self.groups_of_files([file_id])[file_id]

    def group(self, group_id: int) -> tuple[GroupRow, str, str] | None:
        """(group, its file's state, its file's policy name), or None if no such group."""
        row = self.db.one(
            "SELECT g.id, g.file_id, g.seq, g.length, f.state, f.policy FROM groups g "
            "JOIN inodes f ON f.id = g.file_id WHERE g.id = ?", (group_id,))
        if row is None:
            return None
        g = GroupRow(row[0], row[1], row[2], row[3])
        self._load_units({g.id: g})
        return g, row[4], row[5]

    def max_group_id(self) -> int:
        """The highest group id ever allocated (AUTOINCREMENT keeps it across deletes)."""
        row = self.db.one("SELECT seq FROM sqlite_sequence WHERE name = 'groups'")
        return row[0] if row else 0

    def complete_groups(self) -> list[tuple[GroupRow, str]]:
        """Every group of every complete file, with its file's policy name."""
        rows = self.db.query(
            "SELECT g.id, g.file_id, g.seq, g.length, f.policy FROM groups g "
            "JOIN inodes f ON f.id = g.file_id WHERE f.state = 'complete' ORDER BY g.id")
        groups = {r[0]: (GroupRow(r[0], r[1], r[2], r[3]), r[4]) for r in rows}
        for r in self.db.query(
                "SELECT u.group_id, u.idx, u.datanode_id FROM units u JOIN groups g ON g.id = u.group_id "
                "JOIN inodes f ON f.id = g.file_id WHERE f.state = 'complete'"):
            groups[r[0]][0].units[r[1]] = r[2]
        return list(groups.values())

    def units_on(self, datanode_id: str, limit: int) -> list[tuple[int, int, int]]:
        """(group id, unit index, file id) of up to ``limit`` units mapped to a DataNode."""
        rows = self.db.query("SELECT u.group_id, u.idx, g.file_id FROM units u JOIN groups g ON g.id = u.group_id "
                             "WHERE u.datanode_id = ? ORDER BY u.group_id, u.idx LIMIT ?", (datanode_id, limit))
        return [(r[0], r[1], r[2]) for r in rows]

    def add_group(self, file_id: int, datanode_ids: list[str]) -> GroupRow:
        """A new group at the end of a file being written; unit j goes to datanode_ids[j]."""
        seq = self.db.one("SELECT COALESCE(MAX(seq) + 1, 0) FROM groups WHERE file_id = ?", (file_id,))[0]
        cur = self.db.conn.execute("INSERT INTO groups(file_id, seq, length) VALUES (?, ?, 0)", (file_id, seq))
        now = self.wall_ms()
        self.db.conn.executemany(
            "INSERT INTO units(group_id, idx, datanode_id, added_ms) VALUES (?, ?, ?, ?)",
            [(cur.lastrowid, j, dn, now) for j, dn in enumerate(datanode_ids)])
        return GroupRow(cur.lastrowid, file_id, seq, 0, dict(enumerate(datanode_ids)))

    def commit(self, file_id: int, length: int, commits: list[GroupCommit], policy: Policy,
               block_size: int) -> None:
        """Record what a writer stored: group lengths and order; units not stored leave the map.

        Groups of the file not listed are dropped (a writer may give up on a group). Every group
        but the last must be full (k * block_size), as the striping math assumes.
        """
        own = {g.id: g for g in self.groups(file_id)}
        full, seen, total = layout.group_data_size(policy, block_size), set(), 0
        for pos, c in enumerate(commits):
            if c.group_id not in own:
                raise InvalidArgument(f"group {c.group_id} does not belong to file {file_id}")
            if c.group_id in seen:
                raise InvalidArgument(f"group {c.group_id} is listed twice")
            seen.add(c.group_id)
            last = pos == len(commits) - 1
            if c.length > full or (not last and c.length != full):
                raise InvalidArgument(
                    f"group {c.group_id} has {c.length} bytes; every group but the last holds exactly "
                    f"k * block_size = {full} bytes, the last at most that")
            stored = set(c.stored_units)
            if any(i >= policy.units for i in stored):
                raise InvalidArgument(f"group {c.group_id}: unit index out of range for {policy.name}")
            if len(stored) < policy.k:
                raise FailedPrecondition(
                    f"group {c.group_id} has only {len(stored)} stored units, "
                    f"policy {policy.name} needs at least {policy.k}")
            total += c.length
        if total != length:
            raise InvalidArgument(f"file length {length} is not the sum of its group lengths ({total})")
        now = self.wall_ms()
        for pos, c in enumerate(commits):
            self.db.conn.execute("UPDATE groups SET seq = ?, length = ? WHERE id = ?", (pos, c.length, c.group_id))
            for idx, dn in own[c.group_id].units.items():
                if idx in c.stored_units:
                    # A fresh timestamp: a block report computed before this commit must not drop it.
                    self.db.conn.execute("UPDATE units SET added_ms = ? WHERE group_id = ? AND idx = ?",
                                         (now, c.group_id, idx))
                else:
                    self._drop(c.group_id, idx)
                    self.queue_delete(dn, c.group_id, idx)
        self._forget_groups([g for gid, g in own.items() if gid not in seen])

    def forget_files(self, file_ids: list[int]) -> None:
        """Drop the files' groups; every unit becomes a pending delete on its DataNode."""
        groups = [g for gs in self.groups_of_files(file_ids).values() for g in gs]
        self._forget_groups(groups)

    def _forget_groups(self, groups: list[GroupRow]) -> None:
        for g in groups:
            for idx, dn in g.units.items():
                self.queue_delete(dn, g.id, idx)
            # Extra copies elsewhere go too, whoever holds the unit.
            self.db.conn.execute("UPDATE pending_deletes SET stale = 0 WHERE group_id = ?", (g.id,))
            self.db.conn.execute("DELETE FROM units WHERE group_id = ?", (g.id,))
            self.db.conn.execute("DELETE FROM groups WHERE id = ?", (g.id,))

    # ------------------------------------------------------------------ unit locations

    def _drop(self, group_id: int, idx: int) -> None:
        self.db.conn.execute("DELETE FROM units WHERE group_id = ? AND idx = ?", (group_id, idx))

    def claim(self, datanode_id: str, group_id: int, idx: int, is_live: IsLive) -> str:
        """A DataNode says it holds a unit (block report or UnitStored). Returns what we made of it:

        mapped    the map already says so
        adopted   the unit had no location: now it is here
        moved     the map said a dead DataNode: now it is here, the dead copy is deleted later
        stale     a live DataNode already holds it: this copy is an extra, delete it (while that
                  DataNode stays live: see ``deletes_due``)
        extra     no live copy elsewhere, but the map puts another unit of this group on this
                  DataNode: left alone (neither mapped nor deleted), as a group's units stay on
                  distinct DataNodes; repair rebuilds the unit elsewhere, then this copy is stale
        unknown   no such group (deleted, abandoned) or no such unit index: delete it
        foreign   a group id this NameNode never allocated (a DataNode of another namespace, or
                  of a NameNode whose database was wiped): left alone, never deleted
        writing   a unit of a file being written: not ours to judge yet
        deleting  a delete of this copy is pending: it is on its way out. A stale delete whose
                  unit has no live copy elsewhere any more is cancelled instead, and the copy
                  adopted or moved here.
        """
        found = self.group(group_id)
        if found is None:
            if group_id > self.max_group_id():
                return "foreign"
            self.queue_delete(datanode_id, group_id, idx)
            return "unknown"
        group, state, policy_name = found
        if state == "writing":
            return "writing"
        current = group.units.get(idx)
        if current == datanode_id:
            return "mapped"
        current_live = current is not None and is_live(current)
        pending = self._pending_delete(datanode_id, group_id, idx)  # None, or whether it is stale
        if pending is not None and (not pending or current_live):
            return "deleting"
        if idx >= load_policy(policy_name).units:
            self.queue_delete(datanode_id, group_id, idx)
            return "unknown"
        if current_live:
            self.queue_delete(datanode_id, group_id, idx, stale=True)
            return "stale"
        if datanode_id in group.units.values():
            return "extra"
        if pending is not None:  # a stale delete, but this is the only live copy now: keep it
            self.db.conn.execute("DELETE FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND idx = ?",
                                 (datanode_id, group_id, idx))
        now = self.wall_ms()
        if current is None:
            self.db.conn.execute("INSERT INTO units(group_id, idx, datanode_id, added_ms) VALUES (?, ?, ?, ?)",
                                 (group_id, idx, datanode_id, now))
            return "adopted"
        self.db.conn.execute("UPDATE units SET datanode_id = ?, added_ms = ? WHERE group_id = ? AND idx = ?",
                             (datanode_id, now, group_id, idx))
        self.queue_delete(current, group_id, idx, stale=True)
        return "moved"

    def reconcile(self, datanode_id: str, reported: set[tuple[int, int]], is_live: IsLive,
                  grace_ms: int) -> dict[str, int]:
        """Apply a DataNode's full block report; returns counts by outcome (see ``claim``).

        A unit the map puts on this DataNode but the report lacks is *missing*: dropped from the
        map (repair follows), unless it was placed less than ``grace_ms`` ago (the report may
        predate it) or belongs to a file being written. Pending deletes the report no longer
        shows are confirmed and forgotten.
        """
        counts: dict[str, int] = defaultdict(int)
        mapped = self.db.query(
            "SELECT u.group_id, u.idx, u.added_ms, f.state FROM units u JOIN groups g ON g.id = u.group_id "
            "JOIN inodes f ON f.id = g.file_id WHERE u.datanode_id = ?", (datanode_id,))
        recent = self.wall_ms() - grace_ms
        for group_id, idx, added_ms, state in mapped:
            if (group_id, idx) in reported or state == "writing" or added_ms > recent:
                continue
            self._drop(group_id, idx)
            counts["missing"] += 1
        mapped_keys = {(r[0], r[1]) for r in mapped}
        for group_id, idx in sorted(reported - mapped_keys):
            counts[self.claim(datanode_id, group_id, idx, is_live)] += 1
        for group_id, idx in self.pending_deletes(datanode_id):
            if (group_id, idx) not in reported:
                self.db.conn.execute(
                    "DELETE FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND idx = ?",
                    (datanode_id, group_id, idx))
                counts["deleted"] += 1
        return dict(counts)

    def drop_bad(self, datanode_id: str, group_id: int, idx: int, is_live: IsLive) -> str:
        """A copy on ``datanode_id`` is corrupt (a checksum failed somewhere in it). Returns:

        dropped   it was the mapped copy: unmapped (repair follows) and deleted there
        kept      it is the mapped copy, but without it fewer than k units of the group would be
                  live: it stays mapped and is not deleted (its other chunks are still needed)
        deleted   not the mapped copy (an extra, or a wrong report): deleted there, map unchanged
        writing   a unit of a file being written: left alone
        """
        found = self.group(group_id)
        if found is not None and found[1] == "writing":
            return "writing"
        if found is not None and found[0].units.get(idx) == datanode_id:
            group, _, policy_name = found
            others = sum(1 for i, d in group.units.items() if i != idx and is_live(d))
            if others < load_policy(policy_name).k:
                return "kept"
            self._drop(group_id, idx)
            self.queue_delete(datanode_id, group_id, idx)
            return "dropped"
        self.queue_delete(datanode_id, group_id, idx)
        return "deleted"

    # ------------------------------------------------------------------ pending deletes

    def queue_delete(self, datanode_id: str, group_id: int, idx: int, stale: bool = False) -> None:
        """Owe ``datanode_id`` a delete. ``stale``: an extra copy of a unit mapped elsewhere (see
        ``deletes_due``); a plain delete of the same copy overrides it."""
        self.db.conn.execute(
            "INSERT INTO pending_deletes(datanode_id, group_id, idx, queued_ms, stale) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(datanode_id, group_id, idx) DO UPDATE SET stale = MIN(stale, excluded.stale)",
            (datanode_id, group_id, idx, self.wall_ms(), int(stale)))

    def _pending_delete(self, datanode_id: str, group_id: int, idx: int) -> bool | None:
        """None if no delete of this copy is pending, else whether it is a stale one."""
        row = self.db.one("SELECT stale FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND idx = ?",
                          (datanode_id, group_id, idx))
        return None if row is None else bool(row[0])

    def pending_deletes(self, datanode_id: str) -> list[tuple[int, int]]:
        rows = self.db.query("SELECT group_id, idx FROM pending_deletes WHERE datanode_id = ? "
                             "ORDER BY queued_ms, group_id, idx", (datanode_id,))
        return [(r[0], r[1]) for r in rows]

    def deletes_due(self, datanode_id: str, is_live: IsLive) -> list[tuple[int, int]]:
        """The pending deletes that may be sent now, oldest first.

        A stale copy is deleted only while the map puts its unit on another, live DataNode: if
        that one dies (or loses the unit), this copy is the one left, and the next report of it
        is adopted (``claim``). Other deletes (deleted groups, bad or unstored copies) always go.
        """
        rows = self.db.query(
            "SELECT p.group_id, p.idx, p.stale, u.datanode_id FROM pending_deletes p "
            "LEFT JOIN units u ON u.group_id = p.group_id AND u.idx = p.idx WHERE p.datanode_id = ? "
            "ORDER BY p.queued_ms, p.group_id, p.idx", (datanode_id,))
        return [(g, i) for g, i, stale, holder in rows
                if not stale or (holder is not None and holder != datanode_id and is_live(holder))]

    def pending_delete_counts(self) -> dict[str, int]:
        rows = self.db.query("SELECT datanode_id, COUNT(*) FROM pending_deletes GROUP BY datanode_id")
        return {r[0]: r[1] for r in rows}

    def datanodes_deleting(self) -> dict[int, set[str]]:
        """group id -> DataNodes with a pending delete for one of its units (no repair goes there)."""
        out: dict[int, set[str]] = defaultdict(set)
        for r in self.db.query("SELECT DISTINCT group_id, datanode_id FROM pending_deletes"):
            out[r[0]].add(r[1])
        return out

    def expire_deletes(self, before_ms: int) -> int:
        """Give up on deletes queued before ``before_ms`` (a later block report re-queues leftovers)."""
        return self.db.conn.execute("DELETE FROM pending_deletes WHERE queued_ms < ?", (before_ms,)).rowcount
