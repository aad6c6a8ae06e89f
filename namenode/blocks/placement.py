"""Where units go: the rule of a block group's spread, and the choice of DataNodes that keeps it.

The rule (HDFS's BlockPlacementPolicyRackFaultTolerant, Ceph's failure domains): a group's units
on distinct hosts, and at most ``cap`` of them in one rack, ``cap`` being the losses the group
survives whichever they are (m for RS and REPLICATE, g + 1 for LRC). An LRC group's local groups
are spread over racks too, where the racks allow: a rack lost then costs each local group as few
units as can be, and their repairs stay local. Within the rule, units go to the racks holding
fewest of the group (an even spread), then to the least loaded DataNodes, ties at random.

A cluster that cannot keep the rule (fewer hosts than units, or racks too few to hold the group
``cap`` a rack) still takes every write: the best spread it allows (``Bounds``: as few units a
host, then a rack, as the live hosts and racks permit), with a warning logged once per cause. A
one-host cluster stays usable. Writes, repairs, decommission and the balancer all choose here,
and fsck judges by the same rule (``misplaced``). Pure: no I/O, no clock; the caller supplies
the candidates, their places and their loads.
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Mapping, NamedTuple

from hedgefs.ec.policy import Policy
from hedgefs.namenode.namespace.inodes import load_policy
from hedgefs.topology import Location

log = logging.getLogger("hedgefs.namenode")


class Candidate(NamedTuple):
    """A DataNode that may take a unit: its id, its place and its load (lower: preferred)."""
    id: str
    location: Location
    load: Hashable = 0


@dataclass(frozen=True)
class Shape:
    """What placement needs of a policy: its units, the units a rack may hold, and each unit's
    local group (LRC; -1: none)."""
    units: int
    cap: int
    local: tuple[int, ...]
    name: str = ""

    @classmethod
    def of(cls, policy: Policy) -> "Shape":
        local = [-1] * policy.units
        if policy.local_groups:
            size = policy.k // policy.local_groups
            for i in range(policy.k):
                local[i] = i // size
            for j in range(policy.local_groups):   # the local parities follow the data units
                local[policy.k + j] = j
        return cls(policy.units, max(1, policy.tolerance), tuple(local), policy.name)


@lru_cache(maxsize=256)
def shape_of(policy_name: str) -> Shape:
    return Shape.of(load_policy(policy_name))


@dataclass(frozen=True)
class Bounds:
    """The best spread the live cluster allows a group of ``units``: at most ``per_host`` units a
    host and ``per_rack`` a rack (1 and the shape's cap where it has the hosts and racks)."""
    per_host: int
    per_rack: int
    hosts: int
    racks: int

    @classmethod
    def of(cls, shape: Shape, locations: Iterable[Location]) -> "Bounds":
        racks: dict[str, set[str]] = {}
        for loc in locations:
            racks.setdefault(loc.rack, set()).add(loc.host)
        hosts = len(set().union(*racks.values())) if racks else 0
        if not hosts:
            return cls(shape.units, shape.units, 0, 0)
        per_host = math.ceil(shape.units / hosts) if hosts < shape.units else 1
        per_rack = shape.cap
        # the fewest units a rack must take when each holds at most per_host a host (water filling)
        while per_rack < shape.units and sum(min(per_rack, len(h) * per_host) for h in racks.values()) < shape.units:
            per_rack += 1
        return cls(per_host, per_rack, hosts, len(racks))


def misplaced(shape: Shape, placed: Mapping[int, Location], bounds: Bounds) -> str:
    """Why a group whose units are at ``placed`` breaks the rule as far as the cluster allows
    (``bounds``), or "" if it keeps it: fsck's and the balancer's judge."""
    hosts = Counter(loc.host for loc in placed.values())
    racks = Counter(loc.rack for loc in placed.values())
    why = []
    host, n = hosts.most_common(1)[0] if hosts else ("", 0)
    if n > bounds.per_host:
        why.append(f"{n} units on host {host}")
    rack, n = racks.most_common(1)[0] if racks else ("", 0)
    if n > bounds.per_rack:
        why.append(f"{n} units in rack {rack} (at most {bounds.per_rack})")
    return "; ".join(why)


class Placement:
    """Chooses DataNodes for units; remembers which shortfalls it warned of (once per cause)."""

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random()
        self.warned: set[tuple] = set()

    def choose(self, shape: Shape, indexes: Iterable[int], candidates: Iterable[Candidate],
               placed: Mapping[int, Location] = {}, bounds: Bounds | None = None,
               shuffle: bool = False, spill: bool = True) -> dict[int, str]:
        """A DataNode for each of ``indexes`` (fewer if the candidates run out), ``placed`` being
        the group's units that stay where they are (a repair's survivors, a move's others).
        Candidates are distinct DataNodes holding no unit of the group. The rule first; where the
        cluster cannot keep it, the best spread of ``bounds`` (of every live place when not
        given) and a warning. ``shuffle``: the indexes take their DataNodes in a random order (a
        new group's: no unit index always gets the least loaded), else in the order given.
        ``spill``: when the candidates (fewer than the live DataNodes: some full, busy or
        excluded) cannot give even that spread, any of them rather than no unit (a write must go
        on); else those units are left unplaced (a repair waits a pass for a busy DataNode)."""
        pool = {c.id: c for c in candidates}
        indexes = list(indexes)
        order = list(indexes)
        if shuffle:
            self.rng.shuffle(order)
        # an LRC's local groups first (each member where its group has fewest), the global parities after
        order.sort(key=lambda i: i >= len(shape.local) or shape.local[i] < 0)
        if bounds is None:
            bounds = Bounds.of(shape, [c.location for c in pool.values()] + list(placed.values()))
        strict = (1, shape.cap)
        loose = (max(1, bounds.per_host), max(shape.cap, bounds.per_rack))
        chosen = self._fill(shape, order, pool, dict(placed), *strict)
        if len(chosen) < len(order) and loose != strict:
            rest = [i for i in order if i not in chosen]
            taken = {c for c in chosen.values()}
            now = dict(placed)
            now.update({i: pool[d].location for i, d in chosen.items()})
            chosen.update(self._fill(shape, rest, {d: c for d, c in pool.items() if d not in taken}, now, *loose))
            self._warn(shape, bounds)
        if len(chosen) < len(order) and spill:   # any DataNode at all rather than no unit
            taken = set(chosen.values())
            now = dict(placed)
            now.update({i: pool[d].location for i, d in chosen.items()})
            rest = [i for i in order if i not in chosen]
            chosen.update(self._fill(shape, rest, {d: c for d, c in pool.items() if d not in taken}, now,
                                     shape.units, shape.units))
        return {i: chosen[i] for i in indexes if i in chosen}

    def _fill(self, shape: Shape, order: list[int], pool: dict[str, Candidate], placed: dict[int, Location],
              per_host: int, per_rack: int) -> dict[int, str]:
        hosts = Counter(loc.host for loc in placed.values())
        racks = Counter(loc.rack for loc in placed.values())
        local = Counter((loc.rack, shape.local[i]) for i, loc in placed.items() if shape.local[i] >= 0)
        ranked = sorted(pool.values(), key=lambda c: (c.load, self.rng.random()))
        chosen: dict[int, str] = {}
        used: set[str] = set()
        for index in order:
            group = shape.local[index] if index < len(shape.local) else -1
            best, best_key = None, None
            seen: set[tuple[str, int]] = set()
            for c in ranked:   # of each rack, the least loaded fit on a host this busy: the first seen
                loc = c.location
                on_host = hosts[loc.host]
                if c.id in used or on_host >= per_host or racks[loc.rack] >= per_rack or (loc.rack, on_host) in seen:
                    continue
                seen.add((loc.rack, on_host))
                key = (on_host, local[(loc.rack, group)] if group >= 0 else 0, racks[loc.rack])
                if best_key is None or key < best_key:
                    best, best_key = c, key
            if best is None:
                continue
            chosen[index] = best.id
            used.add(best.id)
            hosts[best.location.host] += 1
            racks[best.location.rack] += 1
            if group >= 0:
                local[(best.location.rack, group)] += 1
        return chosen

    def _warn(self, shape: Shape, bounds: Bounds) -> None:
        causes = []
        if bounds.per_host > 1:
            causes.append((("hosts", shape.name, bounds.hosts),
                           f"{shape.name or 'a group'} puts its {shape.units} units on distinct hosts, and only "
                           f"{bounds.hosts} are live: up to {bounds.per_host} units share a host (losing one "
                           f"costs more than one unit of a group)"))
        if bounds.per_rack > shape.cap:
            causes.append((("racks", shape.name, bounds.racks, bounds.hosts),
                           f"{shape.name or 'a group'} puts at most {shape.cap} of its {shape.units} units in a "
                           f"rack, and the live racks ({bounds.racks}) cannot hold them so: up to "
                           f"{bounds.per_rack} share a rack (losing it may lose data)"))
        for key, text in causes:
            if key not in self.warned:
                self.warned.add(key)
                log.warning("placement: %s", text)
