"""The block map (HDFS's BlocksMap): block groups by id, where each of their units lives, deletes
owed to DataNodes. In memory only: unit locations come from receipts and block reports, and come
back from them after a restart or a failover (DESIGN.md, "Metadata engines"). What the journal
knows of a group is its id, its file and, while the file is written, its writer's targets.

A ``Group`` is (id, file, locs): ``locs`` holds one 16-bit DataNode number per unit index
(0: no copy known), ``DataNodeNumbers`` turning ids into numbers. A unit is *unreported* while
its writer's target has not said it stored it (only files being written have those), *corrupt*
when reported bad (kept, and read if nothing better is left, until a repaired copy replaces it).
A unit is *good* when reported, not corrupt and on a live DataNode (the caller says which are).

Receipts, not claims: a unit counts only once its DataNode has said it stored it (UnitStored, or a
block report): AddBlockGroup maps the writer's targets as unreported, their receipts mark them
reported, Complete keeps only the reported ones (``commit``).

No premature deletes: a copy of a unit of a live group (a surplus copy, or a corrupt one that a
repaired copy replaced) is deleted only once every unit of its group is good elsewhere
(``deletes_due``), so no delete ever takes a group below full redundancy, let alone below k.

No copy on its way out is a replica: a copy whose delete is pending or sent is not mapped again
on a report's word (``claim``: DELETING), nor on a receipt delivered after its delete was confirmed
(receipts and heartbeats travel apart: ``PendingDeletes.deleted_lately``); a report a DataNode
makes after (re)registering drops what it lacks however lately it was mapped (``forget_recent``).

Zero units: the last group of a small file (of at most k - 1 cells: ``ec/layout.py``'s
``zero_units``) has data units that hold nothing and, for LRC, local parities that are zeros; its
writer does not store them, so they are never expected: a group is *whole* when every other unit
is good, readable when its good units and the zero units decode it, and no repair, delete or move
is ever planned for a zero unit. A copy of one that a DataNode reports all the same (an older
writer stored it) is mapped as any unit, and counts for nothing more.

Generations: a group's units carry the generation issued with it (``generation_base`` + its id;
groups of a converted namespace whose generation differs keep theirs in ``odd_generations``), and
a unit is this group's only with that generation. A unit of a generation this namespace never
issued is *foreign* (a DataNode that also served another namespace, or a wiped NameNode's
predecessor): it is never mapped, served or deleted from here.

Counts kept as things change, so no question about them scans the map: units mapped to each
DataNode, groups of complete files, and of those the ones readable from what is mapped (safe
mode's progress). ``dirty`` collects the groups whose units changed, for health.py.

Every method runs under the namesystem's lock; readers of ``groups`` and ``locs`` take none (a
group's ``locs`` is replaced whole, never changed in place).
"""

from __future__ import annotations

import enum
import struct
import time
from functools import lru_cache
from collections import Counter, deque
from dataclasses import dataclass
from typing import Callable, Container, Iterable, Iterator

from hedgefs.ec.layout import group_data_size, zero_units
from hedgefs.ec.policy import Policy
from hedgefs.namenode.blocks.deletes import Kind, PendingDeletes, Unit
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.namespace.inodes import File, load_policy

IsLive = Callable[[str], bool]
REPORT_GRACE_S = 10.0        # a block report may predate a unit mapped this recently: keep it
AHEAD_LIMIT = 200_000        # units of groups a standby has not tailed yet it keeps (more: reports re-tell)


class Claim(enum.Enum):
    """What the block map made of a DataNode saying it holds a unit (``claim``)."""
    RECEIVED = "received"    # a unit of a file being written, on the DataNode the writer was given: its receipt
    WRITING = "writing"      # any other unit of a file being written: not ours to judge yet
    MAPPED = "mapped"        # the map already says so
    ADOPTED = "adopted"      # the unit had no location: now it is here
    MOVED = "moved"          # the map said a dead DataNode, or a corrupt copy: now it is here
    STALE = "stale"          # a good copy is mapped elsewhere: this one is surplus
    EXTRA = "extra"          # another unit of this group is on this DataNode: left alone
    UNKNOWN = "unknown"      # no such group or unit index: delete it
    FOREIGN = "foreign"      # a generation this namespace never issued: left alone
    AHEAD = "ahead"          # (a standby's) a group it has not tailed yet: kept until it has (``ahead``)
    DELETING = "deleting"    # a delete of this copy is pending: on its way out


class BadMark(enum.Enum):
    """What the block map made of a report of a corrupt copy (``mark_bad``)."""
    MARKED = "marked"        # the mapped copy: marked corrupt, kept until a repaired copy replaces it
    KNOWN = "known"          # it was already marked
    DELETED = "deleted"      # not the mapped copy (or no such group): deleted once its group is whole
    WRITING = "writing"      # a unit of a file being written: left alone
    FOREIGN = "foreign"      # not a unit of this namespace: left alone


@dataclass(frozen=True)
class GroupCommit:
    group_id: int
    length: int
    stored_units: tuple[int, ...]


class Group:
    __slots__ = ("id", "file", "locs")

    def __init__(self, group_id: int, file: File, locs: bytes):
        self.id, self.file, self.locs = group_id, file, locs


_STRUCTS: dict[int, struct.Struct] = {}


@lru_cache(maxsize=256)
def _units_of(policy: str) -> int:
    return load_policy(policy).units


@lru_cache(maxsize=256)
def _plain_k(policy: str) -> int:
    """k of a policy any k units of which decode a group (RS, copies); 0 for LRC."""
    p = load_policy(policy)
    return 0 if p.local_groups else p.k
_NONE: frozenset[int] = frozenset()


def _codec(units: int) -> struct.Struct:
    found = _STRUCTS.get(units)
    if found is None:
        found = _STRUCTS[units] = struct.Struct(f"<{units}H")
    return found


class GroupTable:
    """Groups by id: a list indexed by the id (ids are issued one after another, never reused),
    8 bytes a group where a dict takes ~45; the dict API the block map's users need."""

    __slots__ = ("_slots", "_count")

    def __init__(self):
        self._slots: list[Group | None] = []
        self._count = 0

    def get(self, group_id: int, default=None):
        slots = self._slots
        return slots[group_id] if 0 <= group_id < len(slots) and slots[group_id] is not None else default

    def __getitem__(self, group_id: int) -> Group:
        found = self.get(group_id)
        if found is None:
            raise KeyError(group_id)
        return found

    def __setitem__(self, group_id: int, group: Group) -> None:
        slots = self._slots
        if group_id >= len(slots):
            slots.extend([None] * (group_id + 1 - len(slots) + len(slots) // 8))
        if slots[group_id] is None:
            self._count += 1
        slots[group_id] = group

    def reserve(self, size: int) -> list:
        """The list itself, long enough for ids below ``size`` (an image's load fills it, then
        calls ``recount``)."""
        if len(self._slots) < size:
            self._slots.extend([None] * (size - len(self._slots)))
        return self._slots

    def recount(self) -> None:
        self._count = sum(1 for g in self._slots if g is not None)

    def pop(self, group_id: int, default=None):
        found = self.get(group_id)
        if found is not None:
            self._slots[group_id] = None
            self._count -= 1
        return found if found is not None else default

    def __contains__(self, group_id: int) -> bool:
        return self.get(group_id) is not None

    def __len__(self) -> int:
        return self._count

    def __iter__(self):
        """The ids, ascending (over a copy: the table may change meanwhile)."""
        return (g.id for g in list(self._slots) if g is not None)

    def values(self):
        return [g for g in list(self._slots) if g is not None]

    def keys(self):
        return list(iter(self))


class DataNodeNumbers:
    """DataNode id <-> a small number (from 1), for ``Group.locs``; for the process's life."""

    def __init__(self):
        self._numbers: dict[str, int] = {}
        self.ids: list[str | None] = [None]

    def number(self, datanode_id: str) -> int:
        n = self._numbers.get(datanode_id)
        if n is None:
            if len(self.ids) > 0xFFFF:
                raise FailedPrecondition("this NameNode knows 65,535 DataNodes already: no more")
            n = self._numbers[datanode_id] = len(self.ids)
            self.ids.append(datanode_id)
        return n

    def get(self, datanode_id: str) -> int:
        return self._numbers.get(datanode_id, 0)


class BlockMap:
    def __init__(self, wall_ms: Callable[[], int], clock: Callable[[], float] = time.monotonic):
        self.wall_ms = wall_ms
        self.clock = clock
        self.groups = GroupTable()
        self.next_group_id = 1
        self.generation_base = 0          # a group's generation: this + its id
        self.generation_first = 1         # the first generation this namespace issued
        self.odd_generations: dict[int, int] = {}   # group id -> its generation, where not base + id
        self.numbers = DataNodeNumbers()
        self.unreported: dict[int, frozenset[int]] = {}   # group id -> writer's targets without a receipt
        self.corrupt: dict[int, frozenset[int]] = {}      # group id -> indexes whose mapped copy is corrupt
        self.mapped: Counter[str] = Counter()             # DataNode id -> units mapped to it
        self.deletes = PendingDeletes(clock)
        # groups whose units changed since health last looked (None: health has not begun its
        # first full pass yet, and will judge every group then: nothing to note)
        self.dirty: set[int] | None = None
        self.complete_groups = 0           # groups of complete files
        self.readable = 0                  # ... readable from the units mapped (corrupt ones aside)
        self._recent: deque[tuple[float, tuple[str, int, int]]] = deque()   # (when, (DataNode, group, index))
        self._recent_keys: dict[tuple[str, int, int], float] = {}            # ... the last time each was mapped
        self._notes = 0                                                      # mappings noted so far
        self._note_of: dict[tuple[str, int, int], int] = {}                  # ... the count at each key's last
        self._fresh_from: dict[str, int] = {}   # DataNode -> the count at its last registration
        # A standby's (None at an active): units DataNodes said they hold of groups it has not
        # tailed yet (its journal behind the active's), by group id: [(DataNode, index)]. Applied
        # as the group comes (``add_group``: its writer's receipts; ``commit``: the rest), as
        # HDFS's standby queues the messages of blocks from its future.
        self.ahead: dict[int, list[tuple[str, int]]] | None = None
        self._ahead_count = 0

    # ------------------------------------------------------------------ ids and generations

    def generation(self, group_id: int) -> int:
        odd = self.odd_generations.get(group_id)
        return odd if odd is not None else self.generation_base + group_id

    def ours(self, generation: int) -> bool:
        """Did this namespace issue the generation? 0 (a unit named without one) is nobody's."""
        return self.generation_first <= generation < self.generation_base + self.next_group_id

    # ------------------------------------------------------------------ reading a group

    def units(self, group: Group) -> dict[int, str]:
        """unit index -> the DataNode its copy is mapped to (reported or not)."""
        locs = group.locs
        if not locs:
            return {}
        ids = self.numbers.ids
        return {i: ids[n] for i, n in enumerate(_codec(len(locs) // 2).unpack(locs)) if n}

    def holder(self, group: Group, index: int) -> str | None:
        locs = group.locs
        if 2 * index + 2 > len(locs):
            return None
        n = locs[2 * index] | (locs[2 * index + 1] << 8)
        return self.numbers.ids[n] if n else None

    def good(self, group: Group, is_live: IsLive) -> dict[int, str]:
        """Units on live DataNodes, reported stored and not reported corrupt."""
        locs = group.locs
        if not locs:
            return {}
        ids = self.numbers.ids
        gid = group.id
        if gid in self.unreported or gid in self.corrupt:
            skip = self.unreported.get(gid, _NONE) | self.corrupt.get(gid, _NONE)
            return {i: ids[n] for i, n in enumerate(_codec(len(locs) // 2).unpack(locs))
                    if n and i not in skip and is_live(ids[n])}
        return {i: ids[n] for i, n in enumerate(_codec(len(locs) // 2).unpack(locs)) if n and is_live(ids[n])}

    def readable_units(self, group: Group, is_live: IsLive) -> dict[int, str]:
        """Good units and live corrupt ones."""
        skip = self.unreported.get(group.id, _NONE)
        return {i: d for i, d in self.units(group).items() if i not in skip and is_live(d)}

    def reported_units(self, group: Group) -> dict[int, str]:
        skip = self.unreported.get(group.id, frozenset())
        return {i: d for i, d in self.units(group).items() if i not in skip}

    def get(self, group_id: int) -> Group | None:
        return self.groups.get(group_id)

    @staticmethod
    def zeros(group: Group) -> frozenset[int]:
        """The group's zero units (module docstring): only a complete file's last group has any."""
        file = group.file
        if file.writer is not None:
            return _NONE
        groups = file.groups
        if not groups or groups[-1] is not group:   # (a group a truncate is dropping: none)
            return _NONE
        length = file.length
        if len(groups) > 1:
            length -= (len(groups) - 1) * group_data_size(load_policy(file.attrs.policy), file.attrs.block_size)
        return zero_units(load_policy(file.attrs.policy), length) if length > 0 else _NONE

    def lacking(self, group: Group, good: Iterable[int]) -> list[int]:
        """The unit indexes of ``group`` that are neither in ``good`` nor zero units: what a
        repair rebuilds."""
        skip = set(good) | self.zeros(group)
        return [i for i in range(_units_of(group.file.attrs.policy)) if i not in skip]

    def corrupt_count(self) -> int:
        return sum(len(v) for v in self.corrupt.values())

    def units_on(self, datanode_id: str, limit: int) -> list[tuple[int, int, Group]]:
        """(group id, unit index, group) of up to ``limit`` units mapped to a DataNode (a scan)."""
        number = self.numbers.get(datanode_id)
        out = []
        if not number or not self.mapped.get(datanode_id):
            return out
        for group in self.groups.values():
            gid = group.id
            locs = group.locs
            if not locs:
                continue
            for i, n in enumerate(_codec(len(locs) // 2).unpack(locs)):
                if n == number:
                    out.append((gid, i, group))
                    if len(out) >= limit:
                        return out
        return out

    @staticmethod
    def unit_numbers(group: Group) -> tuple[int, ...]:
        """The DataNode number of each unit of ``group`` (0: none)."""
        locs = group.locs
        return _codec(len(locs) // 2).unpack(locs) if locs else ()

    def groups_on(self, datanode_id: str) -> Iterator[Group]:
        """Every group with a unit mapped to ``datanode_id`` (a scan of the map)."""
        number = self.numbers.get(datanode_id)
        if not number or not self.mapped.get(datanode_id):
            return
        for group in self.groups.values():
            locs = group.locs
            if locs and number in _codec(len(locs) // 2).unpack(locs):
                yield group

    # ------------------------------------------------------------------ changes of one group

    def _readable(self, group: Group) -> bool:
        file = group.file
        locs = group.locs
        if file.writer is not None or not locs:
            return False
        bad = self.corrupt.get(group.id)
        values = _codec(len(locs) // 2).unpack(locs)
        k = _plain_k(file.attrs.policy)
        zeros = self.zeros(group)
        if k and bad is None and not zeros:   # RS or copies: any k units
            return len(values) - values.count(0) >= k
        return load_policy(file.attrs.policy).decodable(
            {i for i, n in enumerate(values) if n and (bad is None or i not in bad)} | zeros)

    def _set(self, group: Group, index: int, datanode_id: str | None, corrupt: bool = False,
             recent: bool = True) -> None:
        """Map ``group``'s unit ``index`` to ``datanode_id`` (None: nowhere), reported; the counts
        follow. ``recent``: note it as mapped just now (a receipt, a commit: a full report that
        may predate it must not drop it; a report's own adoption needs no such note)."""
        was = self._readable(group)
        gid = group.id
        units = len(group.locs) // 2 or load_policy(group.file.attrs.policy).units
        codec = _codec(units)
        values = list(codec.unpack(group.locs)) if group.locs else [0] * units
        old = values[index]
        if old:
            self.mapped[self.numbers.ids[old]] -= 1
        values[index] = self.numbers.number(datanode_id) if datanode_id else 0
        if datanode_id:
            self.mapped[datanode_id] += 1
            if recent:
                self._note_recent(datanode_id, gid, index)
        group.locs = codec.pack(*values) if any(values) else b""
        if gid in self.unreported:
            self._mark(self.unreported, gid, index, False)
        if gid in self.corrupt or corrupt:
            self._mark(self.corrupt, gid, index, corrupt and datanode_id is not None)
        self._recount(group, was)

    def _recount(self, group: Group, was: bool) -> None:
        now = self._readable(group)
        self.readable += now - was
        if group.file.writer is None and self.dirty is not None:
            self.dirty.add(group.id)

    @staticmethod
    def _mark(marks: dict[int, frozenset[int]], group_id: int, index: int, on: bool) -> None:
        have = marks.get(group_id, frozenset())
        if on and index not in have:
            marks[group_id] = have | {index}
        elif not on and index in have:
            rest = have - {index}
            if rest:
                marks[group_id] = rest
            else:
                del marks[group_id]

    def _note_recent(self, datanode_id: str, group_id: int, index: int) -> None:
        now = self.clock()
        key = (datanode_id, group_id, index)
        self._recent.append((now, key))
        self._recent_keys[key] = now
        self._notes += 1
        self._note_of[key] = self._notes
        recent = self._recent
        while recent and now - recent[0][0] > REPORT_GRACE_S:
            when, old = recent.popleft()
            if self._recent_keys.get(old) == when:
                del self._recent_keys[old]
                del self._note_of[old]

    def forget_recent(self, datanode_id: str) -> None:
        """The DataNode (re)registered: any report it sends from now on was made after every unit
        mapped to it so far, so none of them is still "mapped lately" (a copy deleted meanwhile,
        at another NameNode's command, is dropped by that report: chaos seed 33 --ha)."""
        self._fresh_from[datanode_id] = self._notes

    def _mapped_lately(self, key: tuple[str, int, int]) -> bool:
        when = self._recent_keys.get(key)
        return when is not None and self.clock() - when <= REPORT_GRACE_S \
            and self._note_of[key] > self._fresh_from.get(key[0], 0)

    def queue_delete(self, datanode_id: str, group_id: int, index: int, generation: int,
                     kind: Kind = Kind.PLAIN) -> None:
        self.deletes.queue(datanode_id, group_id, index, generation, self.wall_ms(), kind)

    def pending_deletes(self, datanode_id: str) -> list[Unit]:
        return self.deletes.units(datanode_id)

    def pending_delete_counts(self) -> dict[str, int]:
        return self.deletes.counts()

    # ------------------------------------------------------------------ the journal's changes (apply.py)

    def add_group(self, file: File, group_id: int, targets: Iterable[str]) -> Group:
        """A new group of a file being written; unit j goes to targets[j] ("": nowhere), unreported."""
        targets = list(targets)
        numbers = [self.numbers.number(d) if d else 0 for d in targets]
        group = Group(group_id, file, _codec(len(numbers)).pack(*numbers) if any(numbers) else b"")
        self.groups[group_id] = group
        self.next_group_id = max(self.next_group_id, group_id + 1)
        if any(numbers):
            self.unreported[group_id] = frozenset(i for i, d in enumerate(targets) if d)
        for d in targets:
            if d:
                self.mapped[d] += 1
        if self.ahead:   # a standby's: its writer's receipts heard before the group
            held = self.ahead.get(group_id, ())
            rest = [(d, i) for d, i in held if not (i < len(targets) and targets[i] == d)]
            for d, i in held:
                if i < len(targets) and targets[i] == d:
                    self._mark(self.unreported, group_id, i, False)
            self._ahead_count -= len(held) - len(rest)
            if rest:
                self.ahead[group_id] = rest
            else:
                self.ahead.pop(group_id, None)
        return group

    def keep_ahead(self, on: bool) -> None:
        """A standby keeps units of groups it has not tailed yet; an active does not."""
        if on != (self.ahead is not None):
            self.ahead, self._ahead_count = ({} if on else None), 0

    def _drop_ahead(self, group_id: int) -> list[tuple[str, int]]:
        held = self.ahead.pop(group_id, []) if self.ahead else []
        self._ahead_count -= len(held)
        return held

    def commit(self, group: Group, delete_unreported: bool = True) -> None:
        """Its file is complete (the caller has cleared its writer): units without a receipt
        leave the map (and, at the active, are deleted, should they be stored after all; a replay
        or a standby knows no receipts: their DataNodes' reports will say); the kept ones count as
        mapped just now (a block report computed before this must not drop them)."""
        generation = self.generation(group.id)
        unreported = self.unreported.pop(group.id, ())
        zeros = self.zeros(group)   # never written: no delete to send
        if group.locs:
            values = list(_codec(len(group.locs) // 2).unpack(group.locs))
            ids = self.numbers.ids
            for index, n in enumerate(values):
                if not n:
                    continue
                if index in unreported:
                    self.mapped[ids[n]] -= 1
                    if delete_unreported and index not in zeros:
                        self.queue_delete(ids[n], group.id, index, generation)
                    values[index] = 0
                else:
                    self._note_recent(ids[n], group.id, index)
            group.locs = _codec(len(values)).pack(*values) if any(values) else b""
        self.complete_groups += 1
        self._recount(group, False)
        for datanode_id, index in self._drop_ahead(group.id):   # a standby's: copies heard before the group
            number = self.numbers.get(datanode_id)
            units = len(group.locs) // 2 or load_policy(group.file.attrs.policy).units
            if index < units and self.holder(group, index) is None and \
                    not (number and number in self.unit_numbers(group)) and \
                    self.deletes.kind(datanode_id, group.id, index) is None:
                self._set(group, index, datanode_id, recent=False)

    def forget(self, group: Group) -> None:
        """The group goes (its file was deleted, replaced, abandoned, or its writer dropped it):
        every copy of it is owed a delete, extra copies included."""
        was = self._readable(group)
        generation = self.generation(group.id)
        for index, holder in self.units(group).items():
            self.mapped[holder] -= 1
            self.queue_delete(holder, group.id, index, generation)
        self.deletes.make_plain(group.id)
        self.groups.pop(group.id, None)
        self.unreported.pop(group.id, None)
        self.corrupt.pop(group.id, None)
        self.odd_generations.pop(group.id, None)
        self._drop_ahead(group.id)
        self.readable -= was
        if group.file.writer is None:
            self.complete_groups -= 1
            if self.dirty is not None:
                self.dirty.add(group.id)

    # ------------------------------------------------------------------ what DataNodes say

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
        if not self.ours(generation):
            if self.ahead is not None and group_id >= self.next_group_id and \
                    generation == self.generation_base + group_id and self._ahead_count < AHEAD_LIMIT:
                self.ahead.setdefault(group_id, []).append((datanode_id, index))
                self._ahead_count += 1
                return Claim.AHEAD
            return Claim.FOREIGN
        group = self.groups.get(group_id)
        if group is None or self.generation(group_id) != generation:
            self.queue_delete(datanode_id, group_id, index, generation)
            return Claim.UNKNOWN
        current = self.holder(group, index)
        if group.file.writer is not None:
            if current == datanode_id and index in self.unreported.get(group_id, ()):
                self._mark(self.unreported, group_id, index, False)
                return Claim.RECEIVED
            return Claim.WRITING
        if current == datanode_id:
            return Claim.MAPPED
        if receipt and self.deletes.deleted_lately(datanode_id, group_id, index):
            return Claim.DELETING   # an old receipt (sent before the delete, delivered after): the copy is gone
        was_corrupt = index in self.corrupt.get(group_id, ())
        current_good = current is not None and not was_corrupt and holds(current)
        pending = self.deletes.kind(datanode_id, group_id, index)
        if pending is not None and (pending == Kind.PLAIN or current_good or (datanode_id, group_id, index) in sent):
            return Claim.DELETING
        if index >= load_policy(group.file.attrs.policy).units:
            self.queue_delete(datanode_id, group_id, index, generation)
            return Claim.UNKNOWN
        if current_good:
            self.queue_delete(datanode_id, group_id, index, generation, Kind.SURPLUS)
            return Claim.STALE
        number = self.numbers.get(datanode_id)
        if number and group.locs and number in _codec(len(group.locs) // 2).unpack(group.locs):
            return Claim.EXTRA
        if pending is not None:   # surplus or corrupt, but the best copy now: keep it
            self.deletes.cancel(datanode_id, group_id, index)
        self._set(group, index, datanode_id, corrupt=pending == Kind.CORRUPT, recent=receipt)
        if current is None:
            return Claim.ADOPTED
        self.queue_delete(current, group_id, index, generation, Kind.CORRUPT if was_corrupt else Kind.SURPLUS)
        return Claim.MOVED

    def move(self, datanode_id: str, group_id: int, index: int, generation: int, source: str,
             sent: Container[tuple[str, int, int]] = ()) -> Claim | None:
        """A move's copy (the balancer's) is stored on ``datanode_id``: it takes the place of the
        copy on ``source``, which is then owed a delete once its group is whole (``deletes_due``):
        at no moment does the group have fewer good units than before. None if the move no longer
        applies (the group changed, the copy on ``source`` is no longer the mapped one, or a
        delete of this copy was already sent): the caller claims the unit as any other."""
        group = self.groups.get(group_id)
        if group is None or self.generation(group_id) != generation or group.file.writer is not None \
                or self.holder(group, index) != source or index in self.corrupt.get(group_id, ()):
            return None
        number = self.numbers.get(datanode_id)
        if number and number in self.unit_numbers(group):
            return None
        if self.deletes.kind(datanode_id, group_id, index) is not None:
            if (datanode_id, group_id, index) in sent:
                return None
            self.deletes.cancel(datanode_id, group_id, index)
        self._set(group, index, datanode_id)
        self.queue_delete(source, group_id, index, generation, Kind.SURPLUS)
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
        before = self.mapped.get(datanode_id, 0)
        counts, matched = self.reconcile_part(datanode_id, reported, holds, sent)
        if matched < before:
            missing = self.drop_missing(datanode_id, reported, self.missing_candidates(datanode_id, reported))
            if missing:
                counts["missing"] = missing
        deleted = self.deletes.confirm_absent(datanode_id, reported)
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
        number = self.numbers.number(datanode_id)
        # The common cases inline (a unit mapped here already; one of a complete group with no
        # copy known, nothing pending or marked about it: adopted), the rest through ``claim``:
        # a million units' report is a million of these.
        slots = self.groups.reserve(0)
        size = len(slots)
        base = self.generation_base
        odd = self.odd_generations
        pending = self.deletes.pending_on(datanode_id)
        unreported, corrupt, mapped = self.unreported, self.corrupt, self.mapped
        dirty = self.dirty
        for unit in units:
            gid, index, generation = unit
            group = slots[gid] if 0 <= gid < size else None
            if group is not None and not odd and generation == base + gid and group.file.writer is None \
                    and gid not in unreported and gid not in corrupt \
                    and (not pending or (gid << 8) | index not in pending):
                locs = group.locs
                policy = group.file.attrs.policy
                width, k = _units_of(policy), _plain_k(policy)
                if k and index < width and (not locs or len(locs) == 2 * width):
                    if locs:
                        values = list(_codec(width).unpack(locs))
                        n = values[index]
                        if n == number:
                            matched += 1
                            continue
                    else:
                        values, n = [0] * width, 0
                    if n == 0 and number not in values:   # adopted: no copy known, none here of another unit
                        had = width - values.count(0)
                        zeros = self.zeros(group)
                        if zeros:   # a small file's group: its zero units count as there
                            had = len({i for i, v in enumerate(values) if v} | zeros)
                        now = had + (index not in zeros)
                        values[index] = number
                        group.locs = _codec(width).pack(*values)
                        self.readable += (now >= k) - (had >= k)
                        if dirty is not None:
                            dirty.add(gid)
                        adopted += 1
                        continue
            outcome = self.claim(datanode_id, *unit, holds, sent, receipt=False)
            if outcome != Claim.MAPPED:
                counts[outcome.value] += 1
            if outcome in (Claim.MAPPED, Claim.RECEIVED) or (
                    outcome == Claim.WRITING and self.holder(self.groups[unit[0]], unit[1]) == datanode_id):
                matched += 1
        if adopted:
            counts[Claim.ADOPTED.value] += adopted
            mapped[datanode_id] += adopted
        return counts, matched

    def missing_candidates(self, datanode_id: str, reported: set[Unit]) -> list[tuple[Group, int]]:
        """(group, index) of units mapped to ``datanode_id`` that ``reported`` lacks: a scan of
        every group, which reads only (group.locs is replaced whole, never changed in place), so
        it runs off the writers' lock; ``drop_missing`` checks each again under it."""
        number = self.numbers.get(datanode_id)
        if not number:
            return []
        out = []
        for group in self.groups.values():
            locs = group.locs
            if not locs or number not in (values := _codec(len(locs) // 2).unpack(locs)):
                continue
            generation = self.generation(group.id)
            for index, n in enumerate(values):
                if n == number and (group.id, index, generation) not in reported:
                    out.append((group, index))
        return out

    def drop_missing(self, datanode_id: str, reported: set[Unit], candidates: list[tuple[Group, int]]) -> int:
        """Drop the units of ``candidates`` (``missing_candidates``) still mapped to
        ``datanode_id``, still not reported, of complete files and not mapped lately."""
        dropped = 0
        for group, index in candidates:
            if self.groups.get(group.id) is not group or group.file.writer is not None \
                    or self.holder(group, index) != datanode_id \
                    or (group.id, index, self.generation(group.id)) in reported \
                    or self._mapped_lately((datanode_id, group.id, index)):
                continue
            self._set(group, index, None)
            dropped += 1
        return dropped

    def mark_bad(self, datanode_id: str, group_id: int, index: int, generation: int) -> BadMark:
        """A copy on ``datanode_id`` is corrupt (a checksum failed somewhere in it)."""
        if not self.ours(generation):
            return BadMark.FOREIGN
        group = self.groups.get(group_id)
        if group is None or self.generation(group_id) != generation:
            self.queue_delete(datanode_id, group_id, index, generation)
            return BadMark.DELETED
        if group.file.writer is not None:
            return BadMark.WRITING
        if self.holder(group, index) == datanode_id:
            if index in self.corrupt.get(group_id, ()):
                return BadMark.KNOWN
            was = self._readable(group)
            self._mark(self.corrupt, group_id, index, True)
            self._recount(group, was)
            return BadMark.MARKED
        self.queue_delete(datanode_id, group_id, index, generation, Kind.CORRUPT)
        return BadMark.DELETED

    def drop_unit(self, group: Group, index: int) -> None:
        self._set(group, index, None)

    def is_whole(self, group: Group, is_live: IsLive) -> bool:
        """Every unit but the zero units good."""
        zeros = self.zeros(group)
        good = self.good(group, is_live)
        return len(good.keys() | zeros if zeros else good) == _units_of(group.file.attrs.policy)

    def deletes_due(self, datanode_id: str, is_live: IsLive) -> Iterator[Unit]:
        """The pending deletes that may be sent now, oldest first. A plain delete always goes. A
        surplus or corrupt copy goes only once its group is whole: every unit index mapped to a
        good copy, and not to this one. Until then it may be the copy that saves the group: if the
        mapped copy is lost, the next report of this one is adopted (``claim``)."""
        whole: dict[int, bool] = {}
        for unit, kind in self.deletes.scan(datanode_id):
            if kind != Kind.PLAIN:
                group = self.groups.get(unit[0])
                if group is None:
                    continue
                if unit[0] not in whole:
                    whole[unit[0]] = self.is_whole(group, is_live)
                if not whole[unit[0]] or self.holder(group, unit[1]) == datanode_id:
                    continue
            yield unit

    def datanodes_deleting(self, group_ids: Iterable[int]) -> dict[int, dict[str, set[int]]]:
        out = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            units = load_policy(group.file.attrs.policy).units if group is not None else 16
            found = self.deletes.datanodes_deleting(gid, units)
            if found:
                out[gid] = found
        return out


def check_commit(file_id: int, length: int, commits: list[GroupCommit], policy: Policy, block_size: int,
                 min_units: int, own: dict[int, Group], reported: Callable[[Group], dict[int, str]]) -> None:
    """Refuse what a Complete must refuse: groups not the file's or listed twice, lengths that do
    not add up (every group but the last holds exactly k * block_size bytes), groups without
    ``min_units`` units reported stored (or whose units cannot decode them: LRC)."""
    full, seen, total = group_data_size(policy, block_size), set(), 0
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
        total += c.length
        if c.length == 0:
            continue   # an empty group goes at Complete: nothing in it to keep
        received = sorted(reported(own[c.group_id]))
        zeros = zero_units(policy, c.length)   # a short group's: stored by its length alone
        if len(set(received) | zeros) < min_units:
            raise FailedPrecondition(
                f"group {c.group_id} has only {len(received)} stored units reported by their DataNodes "
                f"(the writer claimed {len(set(c.stored_units))}), policy {policy.name} needs at least "
                f"{min_units - len(zeros)}" + (f" besides its {len(zeros)} zero units" if zeros else ""))
        if not policy.decodable(set(received) | zeros):   # an LRC group: not any k units decode it
            raise FailedPrecondition(
                f"group {c.group_id}: its stored units {received} cannot decode it ({policy.name})")
    if total != length:
        raise InvalidArgument(f"file length {length} is not the sum of its group lengths ({total})")
