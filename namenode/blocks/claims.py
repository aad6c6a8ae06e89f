"""What DataNodes say, judged against the block map (HDFS's BlockManager.processReport,
addStoredBlock, markBlockAsCorrupt): receipts (UnitStored), full block reports, the balancer's
moves, reports of corrupt copies, and which pending deletes may go. blockmap.py holds the map;
this module holds the rules that decide what a DataNode's word changes in it.

Receipts, not claims: a unit counts only once its DataNode has said it stored it (UnitStored, or a
block report): AddBlockGroup maps the writer's targets as unreported, their receipts mark them
reported, Complete keeps only the reported ones (``BlockMap.commit``).

No premature deletes: a copy of a unit of a live group (a surplus copy, or a corrupt one that a
repaired copy replaced) is deleted only once every unit of its group is good elsewhere
(``deletes_due``), so no delete ever takes a group below full redundancy, let alone below k.

No copy on its way out is a replica: a copy whose delete is pending or sent is not mapped again
on a report's word (``claim``: DELETING), nor on a receipt delivered after its delete was confirmed
(receipts and heartbeats travel apart: ``PendingDeletes.deleted_lately``), nor a copy left out of
its group (an open tail's replica that lacks its bytes: ``BlockMap.left_out``); a report a DataNode
makes after (re)registering drops what it lacks however lately it was mapped (``BlockMap.forget_recent``).

Every method runs under the namesystem's lock, but ``missing_candidates`` (a read-only scan).
"""

from __future__ import annotations

from collections import Counter
from typing import Container, Iterable, Iterator

from hedgefs.namenode.blocks.blockmap import (
    BadMark,
    BlockMap,
    Claim,
    Group,
    IsLive,
    locs_codec,
    plain_k,
    units_of,
)
from hedgefs.namenode.blocks.deletes import Kind, Unit
from hedgefs.namenode.namespace.inodes import load_policy


class Claims:
    def __init__(self, blocks: BlockMap):
        self.blocks = blocks

    def claim(self, datanode_id: str, group_id: int, index: int, generation: int, holds: IsLive,
              sent: Container[tuple[str, int, int]] = (), receipt: bool = True) -> Claim:
        """A DataNode says it holds a unit (block report or UnitStored). A standby keeps a unit of
        a group it has not tailed yet (``ahead``). ``holds(d)``: does a copy
        on DataNode d count as good (live, registered, not leaving)? A surplus or corrupt copy's
        pending delete is cancelled, and the copy adopted or moved here (still corrupt, if it
        was), when no good copy is mapped elsewhere any more, unless the delete was already sent
        (``sent``: (DataNode id, group id, index)): the DataNode may be carrying it out, so it is
        final and the copy elsewhere stays mapped. ``receipt``: a UnitStored's (False: a block
        report's, which says what is there now); a receipt of a copy its DataNode confirmed
        deleted less than ``deletes.GONE_S`` ago is an old one, sent before the delete (receipts and
        heartbeats travel apart), unless a repair was sent there since (``PendingDeletes.renewed``)."""
        if not self.blocks.ours(generation):
            if self.blocks.hold_ahead(datanode_id, group_id, index, generation):
                return Claim.AHEAD
            return Claim.FOREIGN
        group = self.blocks.groups.get(group_id)
        if group is None or self.blocks.generation(group_id) != generation:
            self.blocks.queue_delete(datanode_id, group_id, index, generation)
            return Claim.UNKNOWN
        current = self.blocks.holder(group, index)
        if group.file.writer is not None:
            if current == datanode_id and index in self.blocks.unreported.get(group_id, ()):
                self.blocks.mark(self.blocks.unreported, group_id, index, False)
                return Claim.RECEIVED
            return Claim.WRITING
        if current == datanode_id:
            return Claim.MAPPED
        if (index, datanode_id) in self.blocks.left_out.get(group_id, ()):   # left out of the group: it lacks bytes
            self.blocks.queue_delete(datanode_id, group_id, index, generation)
            return Claim.DELETING
        if receipt and self.blocks.deletes.deleted_lately(datanode_id, group_id, index):
            return Claim.DELETING   # an old receipt (sent before the delete, delivered after): the copy is gone
        was_corrupt = index in self.blocks.corrupt.get(group_id, ())
        current_good = current is not None and not was_corrupt and holds(current)
        pending = self.blocks.deletes.kind(datanode_id, group_id, index)
        if pending is not None and (pending == Kind.PLAIN or current_good or (datanode_id, group_id, index) in sent):
            return Claim.DELETING
        if index >= load_policy(self.blocks.policy_of(group)).units:
            self.blocks.queue_delete(datanode_id, group_id, index, generation)
            return Claim.UNKNOWN
        if current_good:
            self.blocks.queue_delete(datanode_id, group_id, index, generation, Kind.SURPLUS)
            return Claim.STALE
        number = self.blocks.numbers.get(datanode_id)
        if number and group.locs and number in locs_codec(len(group.locs) // 2).unpack(group.locs):
            return Claim.EXTRA
        if pending is not None:   # surplus or corrupt, but the best copy now: keep it
            self.blocks.deletes.cancel(datanode_id, group_id, index)
        self.blocks.place(group, index, datanode_id, corrupt=pending == Kind.CORRUPT, recent=receipt)
        if current is None:
            return Claim.ADOPTED
        self.blocks.queue_delete(current, group_id, index, generation, Kind.CORRUPT if was_corrupt else Kind.SURPLUS)
        return Claim.MOVED

    def move(self, datanode_id: str, group_id: int, index: int, generation: int, source: str,
             sent: Container[tuple[str, int, int]] = ()) -> Claim | None:
        """A move's copy (the balancer's) is stored on ``datanode_id``: it takes the place of the
        copy on ``source``, which is then owed a delete once its group is whole (``deletes_due``):
        at no moment does the group have fewer good units than before. None if the move no longer
        applies (the group changed, the copy on ``source`` is no longer the mapped one, a delete
        of this copy was already sent, or a copy of that unit was left out there: ``left_out``): the
        caller claims the unit as any other."""
        group = self.blocks.groups.get(group_id)
        if group is None or self.blocks.generation(group_id) != generation or self.blocks.being_written(group) \
                or self.blocks.holder(group, index) != source or index in self.blocks.corrupt.get(group_id, ()):
            return None
        number = self.blocks.numbers.get(datanode_id)
        if number and number in self.blocks.unit_numbers(group):
            return None
        if datanode_id in self.blocks.left_out_on(group_id, (index,)):   # the balancer never aims there
            return None
        if self.blocks.deletes.kind(datanode_id, group_id, index) is not None:
            if (datanode_id, group_id, index) in sent:
                return None
            self.blocks.deletes.cancel(datanode_id, group_id, index)
        self.blocks.place(group, index, datanode_id)
        self.blocks.queue_delete(source, group_id, index, generation, Kind.SURPLUS)
        return Claim.MOVED

    def reconcile(self, datanode_id: str, reported: set[Unit], holds: IsLive,
                  sent: Container[tuple[str, int, int]] = ()) -> Counter:
        """Apply a DataNode's full block report at once (``reconcile_part`` of all of it, then the
        missing units dropped); returns counts by outcome (``Claim`` values but "mapped", and
        "missing", "deleted").

        A unit the map puts on this DataNode but the report lacks is *missing*: dropped from the
        map (repair follows), unless it was mapped less than REPORT_GRACE_S ago (the report may
        predate it) or belongs to a file being written. Pending deletes the report no longer
        shows are confirmed and forgotten."""
        before = self.blocks.mapped.get(datanode_id, 0)
        counts, matched = self.reconcile_part(datanode_id, reported, holds, sent)
        if matched < before:
            missing = self.drop_missing(datanode_id, reported, self.missing_candidates(datanode_id, reported))
            if missing:
                counts["missing"] = missing
        deleted = self.blocks.deletes.confirm_absent(datanode_id, reported)
        if deleted:
            counts["deleted"] = deleted
        return counts

    def reconcile_part(self, datanode_id: str, units: Iterable[Unit], holds: IsLive,
                       sent: Container[tuple[str, int, int]] = ()) -> tuple[Counter, int]:
        """Claim each unit of (a part of) a full report: (counts by outcome, how many were mapped
        here already). A report whose parts matched fewer units than the map put here before its
        first part lacks some: ``missing_candidates`` then ``drop_missing`` find and drop them."""
        counts: Counter = Counter()
        matched = adopted = 0
        number = self.blocks.numbers.number(datanode_id)
        # The common cases inline (a unit mapped here already; one of a complete group with no
        # copy known, nothing pending or marked about it: adopted), the rest through ``claim``:
        # a million units' report is a million of these.
        slots = self.blocks.groups.reserve(0)
        size = len(slots)
        base = self.blocks.generation_base
        odd, left_out = self.blocks.odd_generations, self.blocks.left_out
        pending = self.blocks.deletes.pending_on(datanode_id)
        unreported, corrupt, mapped = self.blocks.unreported, self.blocks.corrupt, self.blocks.mapped
        dirty = self.blocks.dirty
        for unit in units:
            gid, index, generation = unit
            group = slots[gid] if 0 <= gid < size else None
            if group is not None and not odd and generation == base + gid and group.file.writer is None \
                    and gid not in unreported and gid not in corrupt and gid not in left_out \
                    and (not pending or (gid << 8) | index not in pending):
                locs = group.locs
                policy = self.blocks.policy_of(group)
                width, k = units_of(policy), plain_k(policy)
                if k and index < width and (not locs or len(locs) == 2 * width):
                    if locs:
                        values = list(locs_codec(width).unpack(locs))
                        n = values[index]
                        if n == number:
                            matched += 1
                            continue
                    else:
                        values, n = [0] * width, 0
                    if n == 0 and number not in values:   # adopted: no copy known, none here of another unit
                        had = width - values.count(0)
                        zeros = self.blocks.zeros(group)
                        if zeros:   # a small file's group: its zero units count as there
                            had = len({i for i, v in enumerate(values) if v} | zeros)
                        now = had + (index not in zeros)
                        values[index] = number
                        group.locs = locs_codec(width).pack(*values)
                        self.blocks.readable += (now >= k) - (had >= k)
                        if dirty is not None:
                            dirty.add(gid)
                        adopted += 1
                        continue
            outcome = self.claim(datanode_id, *unit, holds, sent, receipt=False)
            if outcome != Claim.MAPPED:
                counts[outcome.value] += 1
            if outcome in (Claim.MAPPED, Claim.RECEIVED) or (
                    outcome == Claim.WRITING and self.blocks.holder(self.blocks.groups[unit[0]], unit[1]) == datanode_id):
                matched += 1
        if adopted:
            counts[Claim.ADOPTED.value] += adopted
            mapped[datanode_id] += adopted
        return counts, matched

    def missing_candidates(self, datanode_id: str, reported: set[Unit]) -> list[tuple[Group, int]]:
        """(group, index) of units mapped to ``datanode_id`` that ``reported`` lacks: a scan of
        every group, which reads only (group.locs is replaced whole, never changed in place), so
        it runs off the writers' lock; ``drop_missing`` checks each again under it."""
        number = self.blocks.numbers.get(datanode_id)
        if not number:
            return []
        out = []
        for group in self.blocks.groups.values():
            locs = group.locs
            if not locs or number not in (values := locs_codec(len(locs) // 2).unpack(locs)):
                continue
            generation = self.blocks.generation(group.id)
            for index, n in enumerate(values):
                if n == number and (group.id, index, generation) not in reported:
                    out.append((group, index))
        return out

    def drop_missing(self, datanode_id: str, reported: set[Unit], candidates: list[tuple[Group, int]]) -> int:
        """Drop the units of ``candidates`` (``missing_candidates``) still mapped to
        ``datanode_id``, still not reported, of complete files and not mapped lately."""
        dropped = 0
        for group, index in candidates:
            if self.blocks.groups.get(group.id) is not group or group.file.writer is not None \
                    or self.blocks.holder(group, index) != datanode_id \
                    or (group.id, index, self.blocks.generation(group.id)) in reported \
                    or self.blocks.mapped_lately((datanode_id, group.id, index)):
                continue
            self.blocks.place(group, index, None)
            dropped += 1
        return dropped

    def gone(self, datanode_id: str, group_id: int, index: int, generation: int, passive: bool = False) -> bool:
        """The DataNode says its copy is deleted, at whichever NameNode's command (with HA every
        NameNode hears of every delete: a standby's map may hold the copy, from a receipt it heard
        while the active ordered the delete): a location the map still puts there goes (True),
        and a standby's copy heard ahead of its group is forgotten. Its last word on the copy: a
        DataNode tells a delete only after the receipts of it it sent before, and a copy stored
        again is not told deleted (datanode/reports.py). A group being written is left to its
        writer's commit at the active (``passive`` False: it orders no delete of a target; a
        heartbeat's late "deleted" may trail the unit's re-store, review-lead L1). At a standby
        (``passive``) a writer's target told deleted stays the target, marked unreported (not
        read, dropped by the commit unless a receipt marks it back), so the standby that tails
        the commit later does not map it (review-halink F1); an open tail's copy goes."""
        self.blocks.forget_ahead(datanode_id, group_id, index)
        group = self.blocks.groups.get(group_id)
        if group is None or self.blocks.generation(group_id) != generation \
                or self.blocks.holder(group, index) != datanode_id:
            return False
        if self.blocks.being_written(group):
            if not passive:
                return False
            if group.file.writer is not None:   # the writer's target stays; its copy is not there (a commit drops it)
                self.blocks.mark(self.blocks.unreported, group_id, index, True)
                return False
        self.blocks.place(group, index, None)
        return True

    def mark_bad(self, datanode_id: str, group_id: int, index: int, generation: int) -> BadMark:
        """A copy on ``datanode_id`` is corrupt (a checksum failed somewhere in it)."""
        if not self.blocks.ours(generation):
            return BadMark.FOREIGN
        group = self.blocks.groups.get(group_id)
        if group is None or self.blocks.generation(group_id) != generation:
            self.blocks.queue_delete(datanode_id, group_id, index, generation)
            return BadMark.DELETED
        if group.file.writer is not None:
            return BadMark.WRITING
        if self.blocks.holder(group, index) == datanode_id:
            if index in self.blocks.corrupt.get(group_id, ()):
                return BadMark.KNOWN
            was = self.blocks.is_readable(group)
            self.blocks.mark(self.blocks.corrupt, group_id, index, True)
            self.blocks.recount(group, was)
            return BadMark.MARKED
        self.blocks.queue_delete(datanode_id, group_id, index, generation, Kind.CORRUPT)
        return BadMark.DELETED

    def deletes_due(self, datanode_id: str, is_live: IsLive) -> Iterator[Unit]:
        """The pending deletes that may be sent now, oldest first. A plain delete always goes. A
        surplus or corrupt copy goes only once its group is whole: every unit index mapped to a
        good copy, and not to this one. Until then it may be the copy that saves the group: if the
        mapped copy is lost, the next report of this one is adopted (``claim``)."""
        whole: dict[int, bool] = {}
        for unit, kind in self.blocks.deletes.scan(datanode_id):
            if kind != Kind.PLAIN:
                group = self.blocks.groups.get(unit[0])
                if group is None:
                    continue
                if unit[0] not in whole:
                    whole[unit[0]] = self.blocks.is_whole(group, is_live)
                if not whole[unit[0]] or self.blocks.holder(group, unit[1]) == datanode_id:
                    continue
            yield unit
