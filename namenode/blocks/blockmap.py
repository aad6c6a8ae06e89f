"""The block map (HDFS's BlocksMap): block groups by id, where each of their units lives, deletes
owed to DataNodes. In memory only: unit locations come from receipts and block reports, and come
back from them after a restart or a failover (DESIGN.md, "Metadata engines"). What the journal
knows of a group is its id, its file and, while the file is written, its writer's targets.

A ``Group`` is (id, file, locs): ``locs`` holds one 16-bit DataNode number per unit index
(0: no copy known), ``DataNodeNumbers`` turning ids into numbers. A unit is *unreported* while
its writer's target has not said it stored it (only files being written have those), *corrupt*
when reported bad (kept, and read if nothing better is left, until a repaired copy replaces it).
A unit is *good* when reported, not corrupt and on a live DataNode (the caller says which are).

What DataNodes say (receipts, block reports, moves, corrupt copies) and which pending deletes may
go are judged in claims.py, which changes the map through ``place``, ``mark`` and ``recount``.

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
from typing import Callable, Iterable, Iterator

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
def units_of(policy: str) -> int:
    return load_policy(policy).units


@lru_cache(maxsize=256)
def plain_k(policy: str) -> int:
    """k of a policy any k units of which decode a group (RS, copies); 0 for LRC."""
    p = load_policy(policy)
    return 0 if p.local_groups else p.k
_NONE: frozenset[int] = frozenset()


def locs_codec(units: int) -> struct.Struct:
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
        # group id -> its own code, where not its file's: an EC file's open tail (REPLICATE-(m+1))
        self.codes: dict[int, str] = {}
        # ... of those, the open tails a live write still appends to that are already its base
        # file's last group (a complete file's group, but being written: never repaired or moved)
        self.open_tails: set[int] = set()
        # group id -> (index, DataNode) of copies left out of it: a tail's replicas that lack its
        # bytes (a SyncLength went on without them: ``leave_out``). Journaled (and in the image),
        # so that no restart or standby maps them on their DataNode's report; kept while the group is.
        self.left_out: dict[int, frozenset[tuple[int, str]]] = {}
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

    def code_of(self, group_id: int) -> str:
        """The group's own code (``codes``: an open tail's, kept while the group is its file's
        last, after close kept it or a recovery ended the write); "" if it is stored in its file's."""
        return self.codes.get(group_id, "")

    def policy_of(self, group: Group) -> str:
        """The code ``group`` is stored in: its own, else its file's."""
        return self.code_of(group.id) or group.file.attrs.policy

    def being_written(self, group: Group) -> bool:
        """Is a writer still writing ``group``: a file being written's, or a live write's open tail?"""
        return group.file.writer is not None or group.id in self.open_tails

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
        return {i: ids[n] for i, n in enumerate(locs_codec(len(locs) // 2).unpack(locs)) if n}

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
            return {i: ids[n] for i, n in enumerate(locs_codec(len(locs) // 2).unpack(locs))
                    if n and i not in skip and is_live(ids[n])}
        return {i: ids[n] for i, n in enumerate(locs_codec(len(locs) // 2).unpack(locs)) if n and is_live(ids[n])}

    def readable_units(self, group: Group, is_live: IsLive) -> dict[int, str]:
        """Good units and live corrupt ones."""
        skip = self.unreported.get(group.id, _NONE)
        return {i: d for i, d in self.units(group).items() if i not in skip and is_live(d)}

    def reported_units(self, group: Group) -> dict[int, str]:
        skip = self.unreported.get(group.id, frozenset())
        return {i: d for i, d in self.units(group).items() if i not in skip}

    def get(self, group_id: int) -> Group | None:
        return self.groups.get(group_id)

    def zeros(self, group: Group) -> frozenset[int]:
        """The group's zero units (module docstring): only a complete file's last group has any
        (none if it is replicated: an open tail)."""
        file = group.file
        if file.writer is not None:
            return _NONE
        groups = file.groups
        if not groups or groups[-1] is not group:   # (a group a truncate is dropping: none)
            return _NONE
        if self.code_of(group.id):
            return _NONE
        length = file.length
        if len(groups) > 1:
            length -= (len(groups) - 1) * group_data_size(load_policy(file.attrs.policy), file.attrs.block_size)
        return zero_units(load_policy(file.attrs.policy), length) if length > 0 else _NONE

    def lacking(self, group: Group, good: Iterable[int]) -> list[int]:
        """The unit indexes of ``group`` that are neither in ``good`` nor zero units: what a
        repair rebuilds."""
        skip = set(good) | self.zeros(group)
        return [i for i in range(units_of(self.policy_of(group))) if i not in skip]

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
            for i, n in enumerate(locs_codec(len(locs) // 2).unpack(locs)):
                if n == number:
                    out.append((gid, i, group))
                    if len(out) >= limit:
                        return out
        return out

    @staticmethod
    def unit_numbers(group: Group) -> tuple[int, ...]:
        """The DataNode number of each unit of ``group`` (0: none)."""
        locs = group.locs
        return locs_codec(len(locs) // 2).unpack(locs) if locs else ()

    def groups_on(self, datanode_id: str) -> Iterator[Group]:
        """Every group with a unit mapped to ``datanode_id`` (a scan of the map)."""
        number = self.numbers.get(datanode_id)
        if not number or not self.mapped.get(datanode_id):
            return
        for group in self.groups.values():
            locs = group.locs
            if locs and number in locs_codec(len(locs) // 2).unpack(locs):
                yield group

    # ------------------------------------------------------------------ changes of one group

    def is_readable(self, group: Group) -> bool:
        file = group.file
        locs = group.locs
        if file.writer is not None or not locs:
            return False
        bad = self.corrupt.get(group.id)
        values = locs_codec(len(locs) // 2).unpack(locs)
        policy = self.policy_of(group)
        k = plain_k(policy)
        zeros = self.zeros(group)
        if k and bad is None and not zeros:   # RS or copies: any k units
            return len(values) - values.count(0) >= k
        return load_policy(policy).decodable(
            {i for i, n in enumerate(values) if n and (bad is None or i not in bad)} | zeros)

    def place(self, group: Group, index: int, datanode_id: str | None, corrupt: bool = False,
             recent: bool = True) -> None:
        """Map ``group``'s unit ``index`` to ``datanode_id`` (None: nowhere), reported; the counts
        follow. ``recent``: note it as mapped just now (a receipt, a commit: a full report that
        may predate it must not drop it; a report's own adoption needs no such note)."""
        was = self.is_readable(group)
        gid = group.id
        units = len(group.locs) // 2 or load_policy(self.policy_of(group)).units
        codec = locs_codec(units)
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
            self.mark(self.unreported, gid, index, False)
        if gid in self.corrupt or corrupt:
            self.mark(self.corrupt, gid, index, corrupt and datanode_id is not None)
        self.recount(group, was)

    def recount(self, group: Group, was: bool) -> None:
        now = self.is_readable(group)
        self.readable += now - was
        if group.file.writer is None and self.dirty is not None:
            self.dirty.add(group.id)

    @staticmethod
    def mark(marks: dict[int, frozenset[int]], group_id: int, index: int, on: bool) -> None:
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

    def mapped_lately(self, key: tuple[str, int, int]) -> bool:
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

    def add_group(self, file: File, group_id: int, targets: Iterable[str], policy: str = "") -> Group:
        """A new group of a file being written; unit j goes to targets[j] ("": nowhere), unreported.
        ``policy``: its own code, if not the file's (an open tail)."""
        targets = list(targets)
        numbers = [self.numbers.number(d) if d else 0 for d in targets]
        group = Group(group_id, file, locs_codec(len(numbers)).pack(*numbers) if any(numbers) else b"")
        self.groups[group_id] = group
        if policy:
            self.codes[group_id] = policy
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
                    self.mark(self.unreported, group_id, i, False)
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

    def hold_ahead(self, datanode_id: str, group_id: int, index: int, generation: int) -> bool:
        """A standby keeps a DataNode's unit of a group it has not tailed yet (up to AHEAD_LIMIT)."""
        if self.ahead is None or group_id < self.next_group_id or generation != self.generation_base + group_id \
                or self._ahead_count >= AHEAD_LIMIT:
            return False
        self.ahead.setdefault(group_id, []).append((datanode_id, index))
        self._ahead_count += 1
        return True

    def forget_ahead(self, datanode_id: str, group_id: int, index: int) -> None:
        """A copy held ahead is gone from its DataNode (it told a delete)."""
        held = self.ahead.get(group_id) if self.ahead else None
        if held and (datanode_id, index) in held:
            kept = [h for h in held if h != (datanode_id, index)]
            self._ahead_count -= len(held) - len(kept)
            if kept:
                self.ahead[group_id] = kept
            else:
                del self.ahead[group_id]

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
            values = list(locs_codec(len(group.locs) // 2).unpack(group.locs))
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
            group.locs = locs_codec(len(values)).pack(*values) if any(values) else b""
        self.complete_groups += 1
        self.recount(group, False)
        for datanode_id, index in self._drop_ahead(group.id):   # a standby's: copies heard before the group
            number = self.numbers.get(datanode_id)
            units = len(group.locs) // 2 or load_policy(self.policy_of(group)).units
            if index < units and self.holder(group, index) is None and \
                    not (number and number in self.unit_numbers(group)) and \
                    self.deletes.kind(datanode_id, group.id, index) is None and \
                    datanode_id not in self.left_out_on(group.id, (index,)):
                self.place(group, index, datanode_id, recent=False)

    def leave_out(self, group: Group, index: int, datanode_id: str) -> None:
        """The copy of unit ``index`` on ``datanode_id`` is no longer the group's (it lacks bytes
        the group has: a tail's replica a SyncLength went on without): unmapped if mapped, owed a
        delete, and never mapped again there while the group lives (``left_out``: claims.py refuses
        it, repair planning and the balancer never choose it as a target). The mark goes only
        with the group (``forget``): a function of the journal alone, so the active, a standby
        and a replay agree on it."""
        if self.holder(group, index) == datanode_id:   # (a replay's tail maps no replica yet)
            self.place(group, index, None)
        self.left_out[group.id] = self.left_out.get(group.id, frozenset()) | {(index, datanode_id)}
        self.queue_delete(datanode_id, group.id, index, self.generation(group.id))

    def left_out_on(self, group_id: int, indexes: Iterable[int]) -> set[str]:
        """The DataNodes a copy of one of ``indexes`` was left out on (``left_out``): no target for them."""
        return {d for i, d in self.left_out.get(group_id, ()) if i in indexes}

    def forget(self, group: Group) -> None:
        """The group goes (its file was deleted, replaced, abandoned, or its writer dropped it):
        every copy of it is owed a delete, extra copies included."""
        was = self.is_readable(group)
        generation = self.generation(group.id)
        for index, holder in self.units(group).items():
            self.mapped[holder] -= 1
            self.queue_delete(holder, group.id, index, generation)
        self.deletes.make_plain(group.id)
        self.groups.pop(group.id, None)
        self.unreported.pop(group.id, None)
        self.corrupt.pop(group.id, None)
        self.odd_generations.pop(group.id, None)
        self.codes.pop(group.id, None)
        self.open_tails.discard(group.id)
        self.left_out.pop(group.id, None)
        self._drop_ahead(group.id)
        self.readable -= was
        if group.file.writer is None:
            self.complete_groups -= 1
            if self.dirty is not None:
                self.dirty.add(group.id)

    # ------------------------------------------------------------------ what DataNodes say

    def drop_unit(self, group: Group, index: int) -> None:
        self.place(group, index, None)

    def is_whole(self, group: Group, is_live: IsLive) -> bool:
        """Every unit but the zero units good."""
        zeros = self.zeros(group)
        good = self.good(group, is_live)
        return len(good.keys() | zeros if zeros else good) == units_of(self.policy_of(group))

    def datanodes_deleting(self, group_ids: Iterable[int]) -> dict[int, dict[str, set[int]]]:
        out = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            units = load_policy(self.policy_of(group)).units if group is not None else 16
            found = self.deletes.datanodes_deleting(gid, units)
            for index, datanode_id in self.left_out.get(gid, ()):   # a copy never mapped there: no repair to it
                found.setdefault(datanode_id, set()).add(index)
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
