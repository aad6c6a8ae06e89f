"""Deletes owed to DataNodes (the ``pending_deletes`` table): queued when a unit leaves the
map, sent in heartbeats when due, confirmed by the next heartbeat's ``deleted`` (or by a full
block report that no longer lists the copy). A mixin of ``BlockMap``
(blockmap.py), whose ``db``, ``wall_ms`` and ``group`` it uses; it runs inside the caller's
transaction."""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable, Iterator

from hedgefs.namenode.namespace import load_policy
from hedgefs.namenode.reads import in_chunks

IsLive = Callable[[str], bool]

Unit = tuple[int, int, int]   # (group id, unit index, generation): a unit as a DataNode names it

DUE_PAGE = 1000   # pending deletes read at a time by ``deletes_due``

# pending_deletes.stale: what kind of copy a pending delete removes
PLAIN = 0     # a unit of a deleted or abandoned group, or one its writer never got a receipt for: goes at once
SURPLUS = 1   # an extra copy of a unit the map puts elsewhere: goes once its group is whole
CORRUPT = 2   # a corrupt copy a repaired one replaced: goes once its group is whole


class PendingDeletes:
    def queue_delete(self, datanode_id: str, group_id: int, idx: int, generation: int, kind: int = PLAIN) -> None:
        """Owe ``datanode_id`` a delete of one copy (``kind``: PLAIN, SURPLUS or CORRUPT, see
        ``deletes_due``). A plain delete of the same copy overrides the others; corrupt overrides surplus."""
        self.db.conn.execute(
            "INSERT INTO pending_deletes(datanode_id, group_id, idx, queued_ms, stale, generation) "
            "VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(datanode_id, group_id, idx) DO UPDATE SET stale = CASE WHEN stale = 0 OR excluded.stale = 0 "
            "THEN 0 ELSE MAX(stale, excluded.stale) END",
            (datanode_id, group_id, idx, self.wall_ms(), kind, generation))

    def owed(self, group_ids: Iterable[int]) -> dict[int, int]:
        """The deletes of surplus or corrupt copies each group's wholeness holds back, by group."""
        return {g: n for ids, marks in in_chunks(list(group_ids)) for g, n in self.db.query(
            f"SELECT group_id, COUNT(*) FROM pending_deletes WHERE group_id IN ({marks}) AND stale != ? "
            "GROUP BY group_id", (*ids, PLAIN))}

    def make_plain(self, group_id: int, limit: int = -1) -> int:
        """Let go of up to ``limit`` (-1: all) of the deletes a group held back: it is going, and its
        copies with it. Returns how many."""
        if limit < 0:
            return self.db.conn.execute("UPDATE pending_deletes SET stale = ? WHERE group_id = ? AND stale != ?",
                                        (PLAIN, group_id, PLAIN)).rowcount
        return self.db.conn.execute(
            "UPDATE pending_deletes SET stale = ? WHERE (datanode_id, group_id, idx) IN (SELECT datanode_id, "
            "group_id, idx FROM pending_deletes WHERE group_id = ? AND stale != ? LIMIT ?)",
            (PLAIN, group_id, PLAIN, limit)).rowcount

    def _pending_delete(self, datanode_id: str, group_id: int, idx: int) -> int | None:
        """None if no delete of this copy is pending, else its kind."""
        row = self.db.one("SELECT stale FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND idx = ?",
                          (datanode_id, group_id, idx))
        return None if row is None else row[0]

    def pending_deletes(self, datanode_id: str) -> list[Unit]:
        rows = self.db.query("SELECT group_id, idx, generation FROM pending_deletes WHERE datanode_id = ? "
                             "ORDER BY queued_ms, group_id, idx", (datanode_id,))
        return [(r[0], r[1], r[2]) for r in rows]

    def deletes_due(self, datanode_id: str, is_live: IsLive) -> Iterator[Unit]:
        """The pending deletes that may be sent now, oldest first, read a page at a time: a
        heartbeat takes what it sends (1,000 at most), so a DataNode owed the millions of deletes
        of a big directory costs a page per heartbeat, not millions of rows.

        A plain delete always goes. A surplus or corrupt copy goes only once its group is whole:
        every unit index mapped to a good copy, and not to this one. Until then it may be the copy
        that saves the group: if the mapped copy is lost, the next report of this one is adopted
        (``claim``). So no delete ever takes a group below full redundancy.
        """
        whole: dict = {}   # group id -> the group (a GroupRow) if whole, else None
        after = (-1, -1, -1)   # (queued_ms, group id, index) of the last page's last row: before any
        while True:
            rows = self.db.query(
                "SELECT queued_ms, group_id, idx, stale, generation FROM pending_deletes WHERE datanode_id = ? "
                "AND (queued_ms, group_id, idx) > (?, ?, ?) ORDER BY queued_ms, group_id, idx LIMIT ?",
                (datanode_id, *after, DUE_PAGE))
            for _queued, group_id, idx, kind, generation in rows:
                if kind != PLAIN:
                    if group_id not in whole:
                        whole[group_id] = self._whole_group(group_id, is_live)
                    group = whole[group_id]
                    if group is None or group.units.get(idx) == datanode_id:
                        continue
                yield (group_id, idx, generation)
            if len(rows) < DUE_PAGE:
                return
            after = tuple(rows[-1][:3])

    def _whole_group(self, group_id: int, is_live: IsLive):
        """The group if every one of its units is good, else None."""
        found = self.group(group_id)
        if found is None:
            return None
        group, _state, policy_name = found
        return group if len(group.good(is_live)) == load_policy(policy_name).units else None

    def confirm_deletes(self, datanode_id: str, units: list[Unit]) -> list[tuple[int, int]]:
        """The DataNode says these copies are gone: their pending deletes (of that generation) are
        done, in changes of their own (not inside one). Returns the (group id, index) pairs confirmed."""
        def confirm(unit: Unit) -> bool:
            return self.db.conn.execute("DELETE FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND "
                                        "idx = ? AND generation = ?", (datanode_id, *unit)).rowcount > 0
        done = self.db.each_in_changes(units, confirm)
        return [(group_id, idx) for (group_id, idx, _gen), ok in zip(units, done) if ok]

    def pending_delete_counts(self) -> dict[str, int]:
        rows = self.db.query("SELECT datanode_id, COUNT(*) FROM pending_deletes GROUP BY datanode_id")
        return {r[0]: r[1] for r in rows}

    def datanodes_deleting(self, group_ids: Iterable[int]) -> dict[int, set[str]]:
        """group id -> DataNodes with a pending delete for one of its units (no repair goes there),
        of these groups only: while a big directory's deletes drain, every pass plans, and all the
        pending deletes each time would be millions of rows."""
        out: dict[int, set[str]] = defaultdict(set)
        for chunk, marks in in_chunks(list(group_ids)):
            for r in self.db.query(f"SELECT DISTINCT group_id, datanode_id FROM pending_deletes "
                                   f"WHERE group_id IN ({marks})", chunk):
                out[r[0]].add(r[1])
        return out

    def expire_deletes(self, before_ms: int, limit: int) -> list[tuple[str, int, int]]:
        """Give up on deletes queued before ``before_ms`` (a later block report re-queues leftovers),
        the oldest ``limit`` of them; returns the (DataNode, group id, index) given up."""
        return [(r[0], r[1], r[2]) for r in self.db.conn.execute(
            "DELETE FROM pending_deletes WHERE (datanode_id, group_id, idx) IN (SELECT datanode_id, group_id, idx "
            "FROM pending_deletes WHERE queued_ms < ? ORDER BY queued_ms LIMIT ?) RETURNING datanode_id, group_id, idx",
            (before_ms, limit))]
