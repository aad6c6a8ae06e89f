"""The block map: block groups, where each unit lives, and deletes owed to DataNodes.

One location per unit (group id, unit index), and the units of a group on distinct DataNodes.
A unit is *live* when its DataNode is live; the caller passes ``is_live`` because liveness lives
in memory (``liveness.py``), not in SQLite. A unit is *good* when it is live and not reported
corrupt.

Receipts, not claims: a unit counts only once its DataNode has said it stored it (UnitStored, or a
block report). AddBlockGroup maps the writer's targets as *unreported*; their receipts mark them
reported; Complete keeps only the reported ones (``commit``).

No premature deletes: a copy of a unit of a live group (a surplus copy, or a corrupt one that a
repaired copy replaced) is deleted only once every unit of its group is good elsewhere
(``deletes_due``), so no delete ever takes a group below full redundancy, let alone below k.

Generations: a group's units carry the generation issued with it, and a unit is this group's
only with that generation. A unit of a generation this namespace never issued is *foreign* (a
DataNode that also served another namespace, or a wiped NameNode's predecessor): it is never
mapped, served or deleted from here. (Group ids alone cannot tell: a new namespace's ids start at
1 again.)

Reconciliation rules (block reports, UnitStored) are in ``claim`` and ``reconcile``.
All methods run inside the caller's transaction.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Container, Iterable, Iterator

from hedgefs.ec import layout
from hedgefs.ec.policy import Policy
from hedgefs.namenode.db import Database
from hedgefs.namenode.reads import in_chunks
from hedgefs.namenode.deletes import CORRUPT, PLAIN, SURPLUS, IsLive, PendingDeletes, Unit  # noqa: F401 (re-exported)
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.namespace import load_policy

GROUPS_CHUNK = 10_000   # files whose groups (with units) a walk of many files holds at once


@dataclass
class GroupRow:
    id: int
    file_id: int
    seq: int
    length: int
    generation: int = 0
    units: dict[int, str] = field(default_factory=dict)  # unit index -> DataNode id
    corrupt: set[int] = field(default_factory=set)      # indexes whose mapped copy is reported corrupt
    unreported: set[int] = field(default_factory=set)   # writer's targets without a receipt yet

    def good(self, is_live: IsLive) -> dict[int, str]:
        """Units on live DataNodes, reported stored and not reported corrupt."""
        return {i: d for i, d in self.units.items()
                if i not in self.corrupt and i not in self.unreported and is_live(d)}


@dataclass(frozen=True)
class GroupCommit:
    group_id: int
    length: int
    stored_units: tuple[int, ...]


class BlockMap(PendingDeletes):
    def __init__(self, db: Database, wall_ms: Callable[[], int]):
        self.db = db
        self.wall_ms = wall_ms

    # ------------------------------------------------------------------ DataNodes

    def datanodes(self) -> dict[str, tuple[str, str]]:
        """id -> (gRPC address, data address)"""
        return {r["id"]: (r["address"], r["data_address"])
                for r in self.db.query("SELECT id, address, data_address FROM datanodes")}

    def save_datanode(self, datanode_id: str, address: str, data_address: str = "") -> None:
        self.db.conn.execute(
            "INSERT INTO datanodes(id, address, data_address) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET address = excluded.address, data_address = excluded.data_address",
            (datanode_id, address, data_address))

    # ------------------------------------------------------------------ groups

    def _load_units(self, groups: dict[int, GroupRow]) -> None:
        for chunk, marks in in_chunks(list(groups)):
            rows = self.db.query(
                f"SELECT group_id, idx, datanode_id, reported, corrupt FROM units WHERE group_id IN ({marks})", chunk)
            for r in rows:
                _add_unit(groups[r[0]], r)

    def groups_of_files(self, file_ids: Iterable[int]) -> dict[int, list[GroupRow]]:
        """file id -> its groups in file order, with units."""
        ids = list(file_ids)
        out: dict[int, list[GroupRow]] = {i: [] for i in ids}
        by_id: dict[int, GroupRow] = {}
        for chunk, marks in in_chunks(ids):
            rows = self.db.query(
                f"SELECT id, file_id, seq, length, generation FROM groups WHERE file_id IN ({marks}) "
                "ORDER BY file_id, seq", chunk)
            for r in rows:
                g = GroupRow(r[0], r[1], r[2], r[3], r[4])
                out[g.file_id].append(g)
                by_id[g.id] = g
        self._load_units(by_id)
        return out

    def groups_file_by_file(self, file_ids: list[int]) -> Iterator[list[GroupRow]]:
        """Each file's groups (``groups_of_files``), in the order of ``file_ids``, read GROUPS_CHUNK
        files at a time: fsck and a big delete walk millions of files, whose groups and units at
        once are gigabytes."""
        for start in range(0, len(file_ids), GROUPS_CHUNK):
            chunk = file_ids[start:start + GROUPS_CHUNK]
            groups = self.groups_of_files(chunk)
            for file_id in chunk:
                yield groups[file_id]

    def groups(self, file_id: int) -> list[GroupRow]:
        return self.groups_of_files([file_id])[file_id]

    def shared_groups(self, file_id: int) -> tuple[GroupRow, ...]:
        """``groups``, from the row cache if it holds them (rowcache.py): shared, not to be changed."""
        cache = self.db.cache
        found = cache.groups(file_id) if cache is not None else None
        if found is None:
            floor = self.db.floor()
            found = tuple(self.groups(file_id))
            if cache is not None:
                cache.put_groups(file_id, found, floor)
        return found

    def group(self, group_id: int) -> tuple[GroupRow, str, str] | None:
        """(group, its file's state, its file's policy name), or None if no such group."""
        row = self.db.one(
            "SELECT g.id, g.file_id, g.seq, g.length, f.state, f.policy, g.generation FROM groups g "
            "JOIN inodes f ON f.id = g.file_id WHERE g.id = ?", (group_id,))
        if row is None:
            return None
        g = GroupRow(row[0], row[1], row[2], row[3], row[6])
        self._load_units({g.id: g})
        return g, row[4], row[5]

    def ours(self, group_id: int, generation: int) -> bool:
        """Did this namespace issue the unit (group id, generation)? Every group has one from its
        own range; 0 (a unit named without one) is nobody's."""
        return int(self.db.meta("generation_first")) <= generation < int(self.db.meta("generation_next"))

    def _next_generation(self) -> int:
        generation = int(self.db.meta("generation_next"))
        self.db.conn.execute("UPDATE meta SET value = ? WHERE key = 'generation_next'", (str(generation + 1),))
        return generation

    def complete_groups(self, ids: Iterable[int] | None = None) -> list[tuple[GroupRow, str]]:
        """Every group of every complete file (or those of ``ids``), with its file's policy name."""
        if ids is not None:
            ids = sorted(ids)
            return [g for chunk, _ in in_chunks(ids) for g in self._complete_groups(chunk)]
        return self._complete_groups(None)

    def _complete_groups(self, ids: list[int] | None) -> list[tuple[GroupRow, str]]:
        where, params = ("", []) if ids is None else (f" AND g.id IN ({','.join('?' * len(ids))})", ids)
        rows = self.db.query(
            "SELECT g.id, g.file_id, g.seq, g.length, f.policy, g.generation FROM groups g "
            "JOIN inodes f ON f.id = g.file_id WHERE f.state = 'complete'" + where + " ORDER BY g.id", params)
        groups = {r[0]: (GroupRow(r[0], r[1], r[2], r[3], r[5]), r[4]) for r in rows}
        for r in self.db.query(
                "SELECT u.group_id, u.idx, u.datanode_id, u.reported, u.corrupt FROM units u "
                "JOIN groups g ON g.id = u.group_id JOIN inodes f ON f.id = g.file_id WHERE f.state = 'complete'"
                + where.replace("g.id", "u.group_id"), params):
            _add_unit(groups[r[0]][0], r)
        return list(groups.values())

    def units_on(self, datanode_id: str, limit: int) -> list[tuple[int, int, int]]:
        """(group id, unit index, file id) of up to ``limit`` units mapped to a DataNode."""
        rows = self.db.query("SELECT u.group_id, u.idx, g.file_id FROM units u JOIN groups g ON g.id = u.group_id "
                             "WHERE u.datanode_id = ? ORDER BY u.group_id, u.idx LIMIT ?", (datanode_id, limit))
        return [(r[0], r[1], r[2]) for r in rows]

    def corrupt_count(self) -> int:
        return self.db.one("SELECT COUNT(*) FROM units WHERE corrupt = 1")[0]

    def add_group(self, file_id: int, datanode_ids: list[str]) -> GroupRow:
        """A new group at the end of a file being written; unit j goes to datanode_ids[j], unreported."""
        seq = self.db.one("SELECT COALESCE(MAX(seq) + 1, 0) FROM groups WHERE file_id = ?", (file_id,))[0]
        generation = self._next_generation()
        cur = self.db.conn.execute("INSERT INTO groups(file_id, seq, length, generation) VALUES (?, ?, 0, ?)",
                                   (file_id, seq, generation))
        now = self.wall_ms()
        self.db.conn.executemany(
            "INSERT INTO units(group_id, idx, datanode_id, added_ms, reported) VALUES (?, ?, ?, ?, 0)",
            [(cur.lastrowid, j, dn, now) for j, dn in enumerate(datanode_ids)])
        return GroupRow(cur.lastrowid, file_id, seq, 0, generation, dict(enumerate(datanode_ids)),
                        unreported=set(range(len(datanode_ids))))

    def commit(self, file_id: int, length: int, commits: list[GroupCommit], policy: Policy,
               block_size: int, min_units: int, done: int = 0) -> None:
        """Record what a writer stored: group lengths and order. Units without a receipt leave the
        map (and are deleted, should they be stored after all); fewer than ``min_units`` in a group
        (k, or the minimum replicas) is a refusal.

        Groups of the file not listed are dropped (a writer may give up on a group). Every group
        but the last must be full (k * block_size), as the striping math assumes. The first
        ``done`` of ``commits`` were recorded already (``commit_groups``, on etcd, in changes of
        their own: a file of many groups would not fit one transaction).
        """
        own = self.check_commit(file_id, length, commits, policy, block_size, min_units)
        self.commit_groups(file_id, commits[done:], done, own)
        seen = {c.group_id for c in commits}
        self._forget_groups([g for gid, g in own.items() if gid not in seen])

    def check_commit(self, file_id: int, length: int, commits: list[GroupCommit], policy: Policy,
                     block_size: int, min_units: int) -> dict[int, GroupRow]:
        """Refuse a commit ``commit`` would refuse, changing nothing; the file's groups by id."""
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
            if any(i >= policy.units for i in c.stored_units):
                raise InvalidArgument(f"group {c.group_id}: unit index out of range for {policy.name}")
            group = own[c.group_id]
            received = [i for i in group.units if i not in group.unreported]
            if len(received) < min_units:
                raise FailedPrecondition(
                    f"group {c.group_id} has only {len(received)} stored units reported by their DataNodes "
                    f"(the writer claimed {len(set(c.stored_units))}), policy {policy.name} needs at least {min_units}")
            if not policy.decodable(received):   # an LRC group: not any k units decode it
                raise FailedPrecondition(
                    f"group {c.group_id}: its stored units {sorted(received)} cannot decode it ({policy.name})")
            total += c.length
        if total != length:
            raise InvalidArgument(f"file length {length} is not the sum of its group lengths ({total})")
        return own

    def commit_groups(self, file_id: int, commits: list[GroupCommit], first_seq: int,
                      own: dict[int, GroupRow] | None = None) -> None:
        """Record these groups' lengths and order (from ``first_seq``) and drop their units without
        a receipt; ``check_commit`` has accepted the whole list. Invisible while the file is being
        written, so it may run in several changes before the one that completes the file."""
        own = own if own is not None else {g.id: g for g in self.groups(file_id)}
        now = self.wall_ms()
        for pos, c in enumerate(commits, start=first_seq):
            self.db.conn.execute("UPDATE groups SET seq = ?, length = ? WHERE id = ?", (pos, c.length, c.group_id))
            for idx, dn in own[c.group_id].units.items():
                if idx not in own[c.group_id].unreported:
                    # A fresh timestamp: a block report computed before this commit must not drop it.
                    self.db.conn.execute("UPDATE units SET added_ms = ? WHERE group_id = ? AND idx = ?",
                                         (now, c.group_id, idx))
                else:
                    self._drop(c.group_id, idx)
                    self.queue_delete(dn, c.group_id, idx, own[c.group_id].generation)

    def append_groups(self, from_file_ids: list[int], to_file_id: int) -> None:
        """Move the groups of ``from_file_ids`` (in that order, each in its own order) to the end
        of ``to_file_id``: concat. Units stay where they are; only the owner and order change."""
        seq = self.db.one("SELECT COALESCE(MAX(seq) + 1, 0) FROM groups WHERE file_id = ?", (to_file_id,))[0]
        for file_id in from_file_ids:
            for group in self.groups(file_id):
                self.db.conn.execute("UPDATE groups SET file_id = ?, seq = ? WHERE id = ?", (to_file_id, seq, group.id))
                seq += 1

    def forget_files(self, file_ids: list[int]) -> None:
        """Drop the files' groups; every unit becomes a pending delete on its DataNode."""
        for groups in self.groups_file_by_file(file_ids):
            self._forget_groups(groups)

    def _forget_groups(self, groups: list[GroupRow]) -> None:
        for g in groups:
            for idx, dn in g.units.items():
                self.queue_delete(dn, g.id, idx, g.generation)
            self.make_plain(g.id)   # extra copies elsewhere go too, whoever holds the unit
            self.db.conn.execute("DELETE FROM units WHERE group_id = ?", (g.id,))
            self.db.conn.execute("DELETE FROM groups WHERE id = ?", (g.id,))

    # ------------------------------------------------------------------ unit locations

    def _drop(self, group_id: int, idx: int) -> None:
        self.db.conn.execute("DELETE FROM units WHERE group_id = ? AND idx = ?", (group_id, idx))

    def claim(self, datanode_id: str, group_id: int, idx: int, generation: int, is_live: IsLive,
              sent: Container[tuple[str, int, int]] = ()) -> str:
        """A DataNode says it holds a unit (block report or UnitStored). Returns what we made of it:

        received  a unit of a file being written, on the DataNode the writer was given: its receipt
        writing   any other unit of a file being written: not ours to judge yet
        mapped    the map already says so
        adopted   the unit had no location: now it is here
        moved     the map said a dead DataNode, or a corrupt copy: now it is here; the old copy is
                  deleted once the group is whole again
        stale     a good copy is mapped elsewhere: this one is surplus, deleted once the group is whole
        extra     no good copy elsewhere, but the map puts another unit of this group on this
                  DataNode: left alone (neither mapped nor deleted), as a group's units stay on
                  distinct DataNodes; repair rebuilds the unit elsewhere, then this copy is stale
        unknown   no such group (deleted, abandoned) or no such unit index: delete it
        foreign   a generation this namespace never issued (a DataNode of another namespace, or
                  of a NameNode whose database was wiped): left alone, never mapped or deleted
        deleting  a delete of this copy is pending: it is on its way out. A surplus or corrupt
                  copy's pending delete is cancelled instead when no good copy is mapped elsewhere
                  any more, and the copy adopted or moved here (still corrupt, if it was), unless
                  the delete was already sent (``sent``: (DataNode id, group id, index)): the
                  DataNode may be carrying it out, so it is final and the copy elsewhere stays mapped.
        """
        if not self.ours(group_id, generation):
            return "foreign"
        found = self.group(group_id)
        if found is None or found[0].generation != generation:
            self.queue_delete(datanode_id, group_id, idx, generation)
            return "unknown"
        group, state, policy_name = found
        current = group.units.get(idx)
        if state == "writing":
            if current == datanode_id and idx in group.unreported:
                self.db.conn.execute("UPDATE units SET reported = 1 WHERE group_id = ? AND idx = ?", (group_id, idx))
                return "received"
            return "writing"
        if current == datanode_id:
            return "mapped"
        current_good = current is not None and idx not in group.corrupt and is_live(current)
        pending = self._pending_delete(datanode_id, group_id, idx)  # None, or its kind
        if pending is not None and (pending == PLAIN or current_good or (datanode_id, group_id, idx) in sent):
            return "deleting"
        if idx >= load_policy(policy_name).units:
            self.queue_delete(datanode_id, group_id, idx, generation)
            return "unknown"
        if current_good:
            self.queue_delete(datanode_id, group_id, idx, generation, SURPLUS)
            return "stale"
        if datanode_id in group.units.values():
            return "extra"
        corrupt = pending == CORRUPT
        if pending is not None:  # surplus or corrupt, but the best copy now: keep it
            self.db.conn.execute("DELETE FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND idx = ?",
                                 (datanode_id, group_id, idx))
        now = self.wall_ms()
        if current is None:
            self.db.conn.execute("INSERT INTO units(group_id, idx, datanode_id, added_ms, corrupt) VALUES (?, ?, ?, ?, ?)",
                                 (group_id, idx, datanode_id, now, int(corrupt)))
            return "adopted"
        self.db.conn.execute("UPDATE units SET datanode_id = ?, added_ms = ?, reported = 1, corrupt = ? "
                             "WHERE group_id = ? AND idx = ?", (datanode_id, now, int(corrupt), group_id, idx))
        self.queue_delete(current, group_id, idx, generation, CORRUPT if idx in group.corrupt else SURPLUS)
        return "moved"

    def reconcile(self, datanode_id: str, reported: set[Unit], is_live: IsLive,
                  grace_ms: int, sent: Container[tuple[str, int, int]] = ()) -> dict[str, int]:
        """Apply a DataNode's full block report; returns counts by outcome (see ``claim``).

        A unit of a file being written that the report lists is *received* (its receipt). A unit
        the map puts on this DataNode but the report lacks is *missing*: dropped from the
        map (repair follows), unless it was placed less than ``grace_ms`` ago (the report may
        predate it) or belongs to a file being written. Pending deletes the report no longer
        shows are confirmed and forgotten. In changes of its own, as many as it needs (on etcd
        one change holds a few hundred rows): not inside one.
        """
        mapped = self.db.query(
            "SELECT u.group_id, u.idx, g.generation, u.added_ms, f.state, u.reported FROM units u "
            "JOIN groups g ON g.id = u.group_id JOIN inodes f ON f.id = g.file_id WHERE u.datanode_id = ?",
            (datanode_id,))
        recent = self.wall_ms() - grace_ms
        work: list[tuple[str, int, int, int]] = []   # (what, group id, index, generation), then done in parts
        for group_id, idx, generation, added_ms, state, was_reported in mapped:
            present = (group_id, idx, generation) in reported
            if present and not was_reported:   # a receipt that UnitStored did not bring
                work.append(("received", group_id, idx, generation))
            if not (present or state == "writing" or added_ms > recent):
                work.append(("missing", group_id, idx, generation))
        mapped_keys = {(r[0], r[1], r[2]) for r in mapped}
        work += [("claim", *unit) for unit in sorted(reported - mapped_keys)]

        def apply(item) -> str:
            what, group_id, idx, generation = item
            if what == "received":
                self.db.conn.execute("UPDATE units SET reported = 1 WHERE group_id = ? AND idx = ?", (group_id, idx))
            elif what == "missing":
                self._drop(group_id, idx)
            elif what == "deleted":
                self.db.conn.execute("DELETE FROM pending_deletes WHERE datanode_id = ? AND group_id = ? AND idx = ?",
                                     (datanode_id, group_id, idx))
            else:
                return self.claim(datanode_id, group_id, idx, generation, is_live, sent)
            return what

        counts: dict[str, int] = defaultdict(int)
        for outcome in self.db.each_in_changes(work, apply):
            counts[outcome] += 1
        gone = [("deleted", *unit) for unit in self.pending_deletes(datanode_id) if unit not in reported]
        for outcome in self.db.each_in_changes(gone, apply):
            counts[outcome] += 1
        return dict(counts)

    def mark_bad(self, datanode_id: str, group_id: int, idx: int, generation: int) -> str:
        """A copy on ``datanode_id`` is corrupt (a checksum failed somewhere in it). Returns:

        marked    it is the mapped copy: marked corrupt. It stays (its other chunks may still be
                  needed) until a repaired copy replaces it (``claim``: moved), and is deleted
                  once its group is whole again
        known     it was already marked
        deleted   not the mapped copy: a surplus one, or a report about a deleted group. Deleted
                  once its group is whole again (at once if there is no group)
        writing   a unit of a file being written: left alone
        foreign   not a unit of this namespace (see ``claim``): left alone
        """
        if not self.ours(group_id, generation):
            return "foreign"
        found = self.group(group_id)
        if found is None or found[0].generation != generation:
            self.queue_delete(datanode_id, group_id, idx, generation)
            return "deleted"
        group, state, _policy = found
        if state == "writing":
            return "writing"
        if group.units.get(idx) == datanode_id:
            if idx in group.corrupt:
                return "known"
            self.db.conn.execute("UPDATE units SET corrupt = 1 WHERE group_id = ? AND idx = ?", (group_id, idx))
            return "marked"
        self.queue_delete(datanode_id, group_id, idx, generation, CORRUPT)
        return "deleted"


def _add_unit(group: GroupRow, row) -> None:
    """One ``units`` row (group_id, idx, datanode_id, reported, corrupt) into its group."""
    group.units[row[1]] = row[2]
    if not row[3]:
        group.unreported.add(row[1])
    if row[4]:
        group.corrupt.add(row[1])
