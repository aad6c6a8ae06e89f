"""Repair scheduling: which missing unit is rebuilt on which DataNode, and what is in flight.

Pure bookkeeping, in memory. Each pass (``plan``) takes the groups that lack live units, most
endangered first (fewest live units), and for every missing unit index picks a live DataNode that
holds no unit of that group, is not deleting one of its units, and has fewer than
``max_per_datanode`` repairs in flight. A repair is *in flight* from the moment it is planned:
its command goes out with the target's next heartbeat (``take``), and ends with UnitStored
(``drop``) or after ``timeout_s`` (a lost command or a dead target), when it is planned again.
Groups whose live units cannot decode them (fewer than k for RS; for LRC, ``Policy.decodable``)
cannot be rebuilt and are left to fsck to report.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Hashable

from hedgefs.namenode.blocks import placement


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


@dataclass
class InFlight:
    group_id: int
    index: int
    target: str
    issued_at: float
    delivered: bool = False


class RepairScheduler:
    def __init__(self, timeout_s: float = 60.0, max_per_datanode: int = 2,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None):
        self.timeout_s = timeout_s
        self.max_per_datanode = max_per_datanode
        self.clock = clock
        self.rng = rng or random.Random()
        self.in_flight: dict[tuple[int, int], InFlight] = {}
        self.done = 0

    def count_for(self, datanode_id: str) -> int:
        return sum(1 for r in self.in_flight.values() if r.target == datanode_id)

    def expire(self, is_live: Callable[[str], bool]) -> list[InFlight]:
        """Forget repairs that timed out or whose target died; they are planned again."""
        now = self.clock()
        gone = [key for key, r in self.in_flight.items()
                if now - r.issued_at > self.timeout_s or not is_live(r.target)]
        return [self.in_flight.pop(key) for key in gone]

    def forget_target(self, datanode_id: str) -> None:
        """The DataNode restarted (re-registered): whatever it was told is lost."""
        for key in [k for k, r in self.in_flight.items() if r.target == datanode_id]:
            del self.in_flight[key]

    def plan(self, needs: list[GroupNeed], live: list[str], load: Callable[[str], Hashable],
             deleting: dict[int, set[str]]) -> list[InFlight]:
        """Plan repairs for ``needs``; returns the repairs newly put in flight."""
        planned = []
        now = self.clock()
        # (one look at the repairs in flight, not one per DataNode and unit: a pass after a lost
        # rack plans thousands)
        counts = Counter(r.target for r in self.in_flight.values())
        busy = {d: counts.get(d, 0) for d in live}
        free = sum(1 for d in live if busy[d] < self.max_per_datanode)
        targets: dict[int, set[str]] = {}   # group id -> DataNodes its repairs in flight go to
        for r in self.in_flight.values():
            targets.setdefault(r.group_id, set()).add(r.target)
        for need in sorted(needs, key=lambda n: (len(n.live), n.group_id)):
            if not free:   # every DataNode has its fill of repairs: the next pass plans the rest
                break
            if not (need.decodable if need.decodable is not None else len(need.live) >= need.k):
                continue
            for index in need.missing:
                if (need.group_id, index) in self.in_flight:
                    continue
                taken = targets.get(need.group_id, ())
                candidates = [d for d in live
                              if d not in need.holders and d not in taken
                              and d not in deleting.get(need.group_id, ())
                              and busy[d] < self.max_per_datanode]
                chosen = placement.choose(candidates, 1, load, self.rng)
                if not chosen:
                    continue
                repair = InFlight(need.group_id, index, chosen[0], now)
                self.in_flight[(need.group_id, index)] = repair
                targets.setdefault(need.group_id, set()).add(chosen[0])
                busy[chosen[0]] += 1
                free -= busy[chosen[0]] == self.max_per_datanode
                planned.append(repair)
        return planned

    def take(self, datanode_id: str) -> list[InFlight]:
        """Repairs planned for this DataNode and not yet sent; marks them sent."""
        out = [r for r in self.in_flight.values() if r.target == datanode_id and not r.delivered]
        for r in out:
            r.delivered = True
        return out

    def drop(self, group_id: int, index: int) -> None:
        self.in_flight.pop((group_id, index), None)
