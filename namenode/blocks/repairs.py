"""Repair scheduling: which missing unit is rebuilt on which DataNode, and what is in flight.

Pure bookkeeping, in memory. Each pass (``plan``) takes the groups that lack live units, most
endangered first (fewest live units), and for its missing unit indexes picks live DataNodes that
hold no unit of that group, do not owe a delete of the unit, and have fewer than
``max_per_datanode`` repairs in flight, by the placement rule (placement.py: the units that stay
and the repairs in flight are where they are; the new ones go to other hosts, within each
rack's share). A repair is *in flight* from the moment it is planned:
its command goes out with the target's next heartbeat (``take``), and ends with UnitStored
(``drop``) or after ``timeout_s`` (a lost command or a dead target), when it is planned again.
Groups whose live units cannot decode them (fewer than k for RS; for LRC, ``Policy.decodable``)
cannot be rebuilt and are left to fsck to report. A *move* (the balancer's: ``source`` set) is
in flight the same way: a copy of a good unit made on its target, which then takes its place.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hedgefs.namenode.blocks.placement import Bounds, Candidate, Placement, Shape
from hedgefs.topology import Location


@dataclass(frozen=True)
class GroupNeed:
    """A group of a complete file that lacks live units."""

    group_id: int
    k: int
    live: dict[int, str]        # unit index -> live DataNode it can be read from (a repair source)
    missing: list[int]          # unit indexes without a live copy
    holders: frozenset[str]     # every DataNode the map puts a unit of this group on (dead ones too)
    replicated: bool = False    # a REPLICATE-n block: its units are replicas (re-replication)
    decodable: bool | None = None   # the live units decode the group; None: judge by k (RS, REPLICATE)
    shape: Shape | None = None  # the policy's, for placement (None: any DataNode, as a test's)
    staying: dict[int, str] = field(default_factory=dict)   # units that stay where they are (placement's constraint)


@dataclass
class InFlight:
    group_id: int
    index: int
    target: str
    issued_at: float
    delivered: bool = False
    source: str = ""            # a move (the balancer's): the DataNode whose good copy it replaces
    nbytes: int = 0             # a move's unit size


class RepairScheduler:
    def __init__(self, timeout_s: float = 60.0, max_per_datanode: int = 2,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None):
        self.timeout_s = timeout_s
        self.max_per_datanode = max_per_datanode
        self.clock = clock
        self.rng = rng or random.Random()
        self.placement = Placement(self.rng)
        self.in_flight: dict[tuple[int, int], InFlight] = {}
        self.done = 0
        self.moves_done = 0        # the balancer's moves that took their place, and their bytes
        self.bytes_moved = 0
        self.moves_failed = 0      # ... that timed out, or whose target died
        self.last_move_at = float("-inf")
        self.moved_from: set[tuple[str, int, int]] = set()   # (DataNode, group, index): old copies not yet deleted

    def count_for(self, datanode_id: str) -> int:
        return sum(1 for r in self.in_flight.values() if r.target == datanode_id)

    def expire(self, is_live: Callable[[str], bool]) -> list[InFlight]:
        """Forget repairs that timed out or whose target died; they are planned again."""
        now = self.clock()
        gone = [self.in_flight.pop(key) for key, r in list(self.in_flight.items())
                if now - r.issued_at > self.timeout_s or not is_live(r.target)]
        self.moves_failed += sum(1 for r in gone if r.source)
        return gone

    def forget_target(self, datanode_id: str) -> None:
        """The DataNode restarted (re-registered): whatever it was told is lost."""
        for key in [k for k, r in self.in_flight.items() if r.target == datanode_id]:
            del self.in_flight[key]

    def plan(self, needs: list[GroupNeed], live: list[Candidate], deleting: dict[int, dict[str, set[int]]],
             bounds: Callable[[Shape], Bounds] | None = None,
             location: Callable[[str], Location] | None = None) -> list[InFlight]:
        """Plan repairs for ``needs`` onto the ``live`` candidates, by the placement rule with the
        group's staying units (and its repairs in flight) as constraints; ``bounds(shape)``: the
        best spread the cluster allows; ``location(d)``: where any DataNode is (a holder or a
        target need not be a candidate). Returns the repairs newly put in flight."""
        planned = []
        now = self.clock()
        # (one look at the repairs in flight, not one per DataNode and unit: a pass after a lost
        # rack plans thousands)
        counts = Counter(r.target for r in self.in_flight.values())
        busy = {c.id: counts.get(c.id, 0) for c in live}
        known = {c.id: c.location for c in live}

        def where(d: str) -> Location:
            return known.get(d) or (location(d) if location is not None else Location(d))
        free = sum(1 for c in live if busy[c.id] < self.max_per_datanode)
        targets: dict[int, dict[int, str]] = {}   # group id -> {index: DataNode} of its repairs in flight
        for r in self.in_flight.values():
            targets.setdefault(r.group_id, {})[r.index] = r.target
        for need in sorted(needs, key=lambda n: (len(n.live), n.group_id)):
            if not free:   # every DataNode has its fill of repairs: the next pass plans the rest
                break
            if not (need.decodable if need.decodable is not None else len(need.live) >= need.k):
                continue
            todo = [i for i in need.missing if (need.group_id, i) not in self.in_flight]
            if not todo:
                continue
            taken = targets.get(need.group_id, {})
            # A DataNode owing a delete of one of these units would delete the repaired copy: not
            # there. One owing a delete of another unit of the group may take them: a surplus or
            # corrupt copy's delete waits for the group to be whole, so excluding it would wait for
            # a repair that waits for it (chaos 4242022 --secure: the group's three non-holders each
            # owed one, and the group stayed degraded for good).
            owed = deleting.get(need.group_id, {})
            candidates = [c for c in live
                          if c.id not in need.holders and c.id not in taken.values()
                          and not owed.get(c.id, set()).intersection(todo)
                          and busy[c.id] < self.max_per_datanode]
            shape = need.shape or Shape(max(need.missing) + 1, max(need.missing) + 1,
                                        (-1,) * (max(need.missing) + 1))
            placed = {i: where(d) for i, d in need.staying.items()}
            placed.update({i: where(d) for i, d in taken.items()})
            # beyond the best spread only for a group that cannot lose another unit: the others
            # wait a pass for the DataNodes the rule wants (busy with repairs now)
            last = len(need.live) <= need.k
            chosen = self.placement.choose(shape, todo, candidates, placed,
                                           bounds(shape) if bounds is not None else None, spill=last)
            for index, target in chosen.items():
                repair = InFlight(need.group_id, index, target, now)
                self.in_flight[(need.group_id, index)] = repair
                targets.setdefault(need.group_id, {})[index] = target
                busy[target] += 1
                free -= busy[target] == self.max_per_datanode
                planned.append(repair)
        return planned

    def moved(self, move: InFlight) -> None:
        self.moves_done += 1
        self.bytes_moved += move.nbytes
        self.last_move_at = self.clock()
        self.moved_from.add((move.source, move.group_id, move.index))

    def start_moves(self, moves: Iterable[InFlight]) -> None:
        """Moves the balancer planned (``InFlight.source`` set): in flight as repairs are."""
        for move in moves:
            self.in_flight[(move.group_id, move.index)] = move

    def take(self, datanode_id: str) -> list[InFlight]:
        """Repairs planned for this DataNode and not yet sent; marks them sent."""
        out = [r for r in self.in_flight.values() if r.target == datanode_id and not r.delivered]
        for r in out:
            r.delivered = True
        return out

    def drop(self, group_id: int, index: int) -> None:
        self.in_flight.pop((group_id, index), None)
