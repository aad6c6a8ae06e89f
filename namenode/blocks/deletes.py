"""Deletes owed to DataNodes (HDFS's InvalidateBlocks), in memory: queued when a unit leaves the
map, sent in heartbeats when due, confirmed by the DataNode (the next heartbeat's ``deleted``, or a
full block report that no longer lists the copy), or given up after a while (a later report
queues what is still there again). Lost at a restart, and nothing is lost with them: a unit the
namespace no longer has is deleted again when its DataNode reports it.

One dict per DataNode, in the order deletes were queued (oldest first), keyed by the unit packed
into one int (group id * 256 + index): about 110 bytes a pending delete.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from typing import Callable, Iterator

Unit = tuple[int, int, int]   # (group id, unit index, generation): a unit as a DataNode names it
GONE_S = 60.0                 # a surplus or corrupt copy's confirmed delete is remembered this long:
                              # a receipt delivered later may predate it


class Kind(enum.IntEnum):
    """What a pending delete removes."""
    PLAIN = 0     # a unit of a deleted or abandoned group, or one its writer never got a receipt for: goes at once
    SURPLUS = 1   # an extra copy of a unit the map puts elsewhere: goes once its group is whole
    CORRUPT = 2   # a corrupt copy a repaired one replaced: goes once its group is whole


def pack(group_id: int, index: int) -> int:
    return (group_id << 8) | index


class PendingDeletes:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._gone: dict[tuple[str, int], float] = {}      # (DataNode, packed unit) -> when its delete was confirmed
        self._gone_order: deque[tuple[float, tuple[str, int]]] = deque()
        self._by_dn: dict[str, dict[int, int]] = {}        # DataNode -> {packed unit: queued (ms)}
        self._kinds: dict[tuple[str, int], Kind] = {}     # (DataNode, packed unit) -> kind, unless PLAIN
        self._generations: dict[tuple[str, int], int] = {}   # (DataNode, packed unit) -> generation
        self._held: dict[int, set[str]] = {}              # group id -> DataNodes holding a held-back delete

    def queue(self, datanode_id: str, group_id: int, index: int, generation: int, now_ms: int,
              kind: Kind = Kind.PLAIN) -> None:
        """Owe ``datanode_id`` a delete of one copy. A plain delete of the same copy overrides the
        others; corrupt overrides surplus."""
        key = pack(group_id, index)
        queue = self._by_dn.setdefault(datanode_id, {})
        dk = (datanode_id, key)
        if key in queue:
            old = self._kinds.get(dk, Kind.PLAIN)
            kind = Kind.PLAIN if Kind.PLAIN in (old, kind) else max(old, kind)
        else:
            queue[key] = now_ms
        self._generations[dk] = generation
        self._set_kind(dk, kind)

    def _set_kind(self, dk: tuple[str, int], kind: Kind) -> None:
        group_id = dk[1] >> 8
        if kind == Kind.PLAIN:
            if self._kinds.pop(dk, None) is not None:
                held = self._held[group_id]
                held.discard(dk)
                if not held:
                    del self._held[group_id]
        else:
            self._kinds[dk] = kind
            self._held.setdefault(group_id, set()).add(dk)

    def pending_on(self, datanode_id: str) -> dict[int, int]:
        """A DataNode's pending deletes, by packed unit (read only: a report's fast path)."""
        return self._by_dn.get(datanode_id, {})

    def kind(self, datanode_id: str, group_id: int, index: int) -> Kind | None:
        """None if no delete of this copy is pending, else its kind."""
        key = pack(group_id, index)
        if key not in self._by_dn.get(datanode_id, ()):
            return None
        return self._kinds.get((datanode_id, key), Kind.PLAIN)

    def cancel(self, datanode_id: str, group_id: int, index: int) -> None:
        self._drop(datanode_id, pack(group_id, index))

    def _drop(self, datanode_id: str, key: int) -> bool:
        queue = self._by_dn.get(datanode_id)
        if queue is None or queue.pop(key, None) is None:
            return False
        dk = (datanode_id, key)
        self._generations.pop(dk, None)
        self._set_kind(dk, Kind.PLAIN)
        if not queue:
            del self._by_dn[datanode_id]
        return True

    def make_plain(self, group_id: int) -> None:
        """The group is going: the deletes it held back (surplus, corrupt copies) go at once."""
        for dk in self._held.pop(group_id, ()):
            self._kinds.pop(dk, None)

    def held_back(self, group_id: int) -> bool:
        return group_id in self._held

    def units(self, datanode_id: str) -> list[Unit]:
        """Every pending delete of a DataNode, oldest first."""
        gens = self._generations
        return [(key >> 8, key & 0xFF, gens[(datanode_id, key)]) for key in self._by_dn.get(datanode_id, ())]

    def scan(self, datanode_id: str) -> Iterator[tuple[Unit, Kind]]:
        """(unit, kind) of a DataNode's pending deletes, oldest first (over a copy of its queue)."""
        gens, kinds = self._generations, self._kinds
        for key in list(self._by_dn.get(datanode_id, ())):
            dk = (datanode_id, key)
            if dk in gens:
                yield (key >> 8, key & 0xFF, gens[dk]), kinds.get(dk, Kind.PLAIN)

    def confirm(self, datanode_id: str, unit: Unit) -> bool:
        """The DataNode says this copy (of that generation) is gone: its delete is done."""
        key = pack(unit[0], unit[1])
        if self._generations.get((datanode_id, key)) != unit[2]:
            return False
        held = self._kinds.get((datanode_id, key), Kind.PLAIN) != Kind.PLAIN
        if not self._drop(datanode_id, key):
            return False
        if not held:   # a unit of no group (or another generation): a late receipt maps nothing anyway
            return True
        now = self.clock()
        self._gone[(datanode_id, key)] = now
        self._gone_order.append((now, (datanode_id, key)))
        while self._gone_order and now - self._gone_order[0][0] > GONE_S:
            when, old = self._gone_order.popleft()
            if self._gone.get(old) == when:
                del self._gone[old]
        return True

    def deleted_lately(self, datanode_id: str, group_id: int, index: int) -> bool:
        """Was this (surplus or corrupt) copy's delete confirmed less than GONE_S ago?"""
        when = self._gone.get((datanode_id, pack(group_id, index)))
        return when is not None and self.clock() - when <= GONE_S

    def renewed(self, datanode_id: str, group_id: int, index: int) -> None:
        """A repair (or a move) of this unit was sent to the DataNode: the copy it stores is a new
        one, and its receipt counts."""
        self._gone.pop((datanode_id, pack(group_id, index)), None)

    def confirm_absent(self, datanode_id: str, present: set[Unit]) -> int:
        """After a full block report: every pending delete it no longer lists is done."""
        gone = [u for u in self.units(datanode_id) if u not in present]
        for unit in gone:
            self.confirm(datanode_id, unit)
        return len(gone)

    def expire(self, before_ms: int, limit: int) -> list[tuple[str, int, int]]:
        """Give up on up to ``limit`` deletes queued before ``before_ms`` (a later block report
        re-queues leftovers); returns the (DataNode, group id, index) given up."""
        out = []
        for datanode_id in list(self._by_dn):
            queue = self._by_dn.get(datanode_id, {})
            old = []
            for key, queued in queue.items():   # insertion order: the oldest first
                if queued >= before_ms or len(out) + len(old) >= limit:
                    break
                old.append(key)
            for key in old:
                self._drop(datanode_id, key)
                out.append((datanode_id, key >> 8, key & 0xFF))
            if len(out) >= limit:
                break
        return out

    def counts(self) -> dict[str, int]:
        return {d: len(q) for d, q in self._by_dn.items()}

    def count(self, datanode_id: str) -> int:
        return len(self._by_dn.get(datanode_id, ()))

    def datanodes_deleting(self, group_id: int, units: int) -> dict[str, set[int]]:
        """DataNodes with a pending delete of a unit of this group, and the unit indexes (no
        repair of those indexes goes there)."""
        keys = {pack(group_id, i): i for i in range(units)}
        out: dict[str, set[int]] = {}
        for d, q in self._by_dn.items():
            found = {i for k, i in keys.items() if k in q}
            if found:
                out[d] = found
        return out
