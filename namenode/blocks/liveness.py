"""DataNode liveness, in memory: who heartbeated when, and what they last said about themselves.

A DataNode silent for more than ``dead_interval_s`` is dead; it is live again with its next
heartbeat. A NameNode knows only the DataNodes that spoke to it since it started (register,
heartbeat, report: DataNodes report to every NameNode of an HA pair). The clock is injectable
(tests drive it by hand; no sleeps).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from hedgefs.namenode.model import DataNodeStats
from hedgefs.topology import Location

HEAT_MINUTES = 60   # how much read-latency history the NameNode keeps per DataNode
# A DataNode with less free space than this share of its capacity is "low" in report, page and metrics.
LOW_SPACE_PCT = 10.0


@dataclass
class DataNodeState:
    id: str
    address: str      # gRPC (control)
    last_seen: float
    data_address: str = ""   # data transfer (unit reads and writes)
    used_bytes: int = 0
    units: int = 0
    active_repairs: int = 0
    # Units placed on it since its last heartbeat, as bytes: spreads placements between heartbeats.
    allocated_bytes: int = 0
    was_live: bool = True
    foreign_units: int = 0   # of generations this namespace never issued, as its last block report said
    storage_id: str = ""     # its data dir's identity, as it registered ("" = not said)
    place: Location | None = None   # its host and rack, as it registered (None: not yet: its address's host)
    stats: DataNodeStats = DataNodeStats()
    # unix minute -> the DataNode's read p99 (ms) in that minute, the last HEAT_MINUTES of them
    p99_by_minute: dict[int, float] = field(default_factory=dict)


class Liveness:
    def __init__(self, dead_interval_s: float, clock: Callable[[], float] = time.monotonic):
        self.dead_interval_s = dead_interval_s
        self.clock = clock
        self._nodes: dict[str, DataNodeState] = {}
        # The readers' view (``live``): (valid until, {id: (address, data address)} of the live
        # DataNodes, generation it was built at); ``_generation`` moves when it must be rebuilt.
        self._view: tuple[float, dict[str, tuple[str, str]]] = (float("-inf"), {})
        self._generation = 0
        self._view_lock = threading.Lock()

    def adopt(self, node: DataNodeState) -> None:
        """A DataNode as another Liveness of this process knew it (its last sign of life kept)."""
        self._nodes[node.id] = node
        self._stale()

    def _stale(self) -> None:
        with self._view_lock:
            self._generation += 1
            self._view = (float("-inf"), {})

    def live(self) -> dict[str, tuple[str, str]]:
        """{id: (address, data address)} of the live DataNodes, for the lock-free readers (a
        stat's locations): one dict lookup a unit, not a clock and a state a unit. Rebuilt when a
        DataNode comes alive or moves, and when the first of those in it could have died (the
        view never holds a dead one; a heartbeat's renewal only makes it rebuilt sooner)."""
        until, view = self._view
        now = self.clock()
        if now < until:
            return view
        generation = self._generation
        view, until = {}, float("inf")
        for node in list(self._nodes.values()):
            expires = node.last_seen + self.dead_interval_s
            if now <= expires:
                view[node.id] = (node.address, node.data_address)
                until = min(until, expires)
        with self._view_lock:
            if generation == self._generation:   # no DataNode came alive or moved meanwhile
                self._view = (until, view)
        return view

    def knows(self, datanode_id: str) -> bool:
        return datanode_id in self._nodes

    def seen(self, datanode_id: str, address: str | None = None, data_address: str | None = None) -> DataNodeState:
        """Record a sign of life (register, heartbeat, report); creates the entry if new."""
        node = self._nodes.get(datanode_id)
        if node is None:
            node = self._nodes[datanode_id] = DataNodeState(datanode_id, address or "", self.clock())
        if (node.address, node.data_address) != self._view[1].get(datanode_id) \
                or (address and address != node.address) or (data_address and data_address != node.data_address):
            changed = True   # not in the readers' view (new, or back from the dead), or moved
        else:
            changed = False
        node.last_seen = self.clock()
        if address:
            node.address = address
        if data_address:
            node.data_address = data_address
        if changed:
            self._stale()
        return node

    def heartbeat(self, datanode_id: str, address: str, used_bytes: int, units: int, active_repairs: int,
                  stats: DataNodeStats | None = None, data_address: str = "") -> None:
        node = self.seen(datanode_id, address, data_address)
        node.used_bytes, node.units, node.active_repairs = used_bytes, units, active_repairs
        node.allocated_bytes = 0
        if stats is not None:
            node.stats = stats
            for m in stats.read_minutes:   # a minute is sent again until it is over: keep the last word
                node.p99_by_minute[m.minute] = m.p99_ms
            if len(node.p99_by_minute) > HEAT_MINUTES:
                newest = max(node.p99_by_minute)
                node.p99_by_minute = {m: v for m, v in node.p99_by_minute.items() if m > newest - HEAT_MINUTES}

    def is_live(self, datanode_id: str) -> bool:
        node = self._nodes.get(datanode_id)
        return node is not None and self.clock() - node.last_seen <= self.dead_interval_s

    def live_ids(self) -> list[str]:
        return sorted(d for d in self._nodes if self.is_live(d))

    def get(self, datanode_id: str) -> DataNodeState | None:
        return self._nodes.get(datanode_id)

    def address(self, datanode_id: str) -> str:
        node = self._nodes.get(datanode_id)
        return node.address if node else ""

    def addresses(self, datanode_id: str) -> tuple[str, str]:
        """(gRPC address, data address) of a DataNode (("", "") if unknown)."""
        node = self._nodes.get(datanode_id)
        return (node.address, node.data_address) if node else ("", "")

    def location(self, datanode_id: str) -> Location:
        """Its host and rack as it registered (before that: its address's host, the default rack)."""
        node = self._nodes.get(datanode_id)
        if node is None:
            return Location(datanode_id)
        return node.place or Location.of("", "", node.address)

    def data_address(self, datanode_id: str) -> str:
        node = self._nodes.get(datanode_id)
        return node.data_address if node else ""

    def all(self) -> list[DataNodeState]:
        return [self._nodes[d] for d in sorted(self._nodes)]

    def age_s(self, datanode_id: str) -> float:
        return self.clock() - self._nodes[datanode_id].last_seen

    # ---------------------------------------------------------------- space

    @staticmethod
    def filesystem_key(node: DataNodeState) -> tuple[str, str] | None:
        """(host, file system) of its data dir, or None if it did not say."""
        if not node.stats.filesystem:
            return None
        return node.address.rsplit(":", 1)[0], node.stats.filesystem

    def sharing(self, datanode_id: str) -> list[str]:
        """The other DataNodes (any state) on the same host and file system."""
        key = self.filesystem_key(self._nodes[datanode_id])
        if key is None:
            return []
        return sorted(n.id for n in self._nodes.values() if n.id != datanode_id and self.filesystem_key(n) == key)

    def room(self, datanode_id: str) -> int | None:
        """Free bytes on its file system less what was placed there since (by any DataNode sharing
        it); None if it never said (an older DataNode, a test): assumed to have room."""
        node = self._nodes[datanode_id]
        if not node.stats.capacity_bytes:
            return None
        key = self.filesystem_key(node)
        placed = node.allocated_bytes if key is None else \
            sum(n.allocated_bytes for n in self._nodes.values() if self.filesystem_key(n) == key)
        return node.stats.remaining_bytes - placed

    def has_room(self, datanode_id: str, nbytes: int) -> bool:
        room = self.room(datanode_id)
        return room is None or room >= nbytes

    def low_space(self, datanode_id: str) -> bool:
        stats = self._nodes[datanode_id].stats
        return bool(stats.capacity_bytes) and stats.remaining_bytes * 100 < stats.capacity_bytes * LOW_SPACE_PCT

    def load_key(self, datanode_id: str) -> tuple[int, int, int]:
        """Placement order: emptiest file system first (in steps of 5 % of its capacity, so that
        DataNodes sharing one, reporting at different moments, still tie), then fewest used bytes
        (reported + placed since), then fewest units."""
        node = self._nodes[datanode_id]
        room, capacity = self.room(datanode_id), node.stats.capacity_bytes
        full_step = 0 if room is None else int(20 * (1 - max(room, 0) / capacity))
        return full_step, node.used_bytes + node.allocated_bytes, node.units

    def note_allocated(self, datanode_id: str, nbytes: int) -> None:
        self._nodes[datanode_id].allocated_bytes += nbytes

    def release(self, datanode_id: str, nbytes: int) -> None:
        """What was placed there is written (its bytes come with the next heartbeat) or never will
        be: ``nbytes`` of it no longer held back (never below 0: a heartbeat since started anew)."""
        node = self._nodes.get(datanode_id)
        if node is not None:
            node.allocated_bytes = max(0, node.allocated_bytes - nbytes)

    def transitions(self) -> list[tuple[str, bool]]:
        """(id, now live?) for every DataNode whose state changed since the last call."""
        changed = []
        for node in self._nodes.values():
            live = self.is_live(node.id)
            if live != node.was_live:
                node.was_live = live
                changed.append((node.id, live))
        return changed
