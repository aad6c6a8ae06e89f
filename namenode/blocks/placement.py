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
        ranked = sorted(candidates, key=lambda c: (c.load, self.rng.random()))   # once: every pass's order
        indexes = list(indexes)
        order = list(indexes)
        if shuffle:
            self.rng.shuffle(order)
        # an LRC's local groups first (each member where its group has fewest), the global parities after
        order.sort(key=lambda i: i >= len(shape.local) or shape.local[i] < 0)
        if bounds is None:
            bounds = Bounds.of(shape, [c.location for c in ranked] + list(placed.values()))
        strict = (1, shape.cap)
        loose = (max(1, bounds.per_host), max(shape.cap, bounds.per_rack))
        passes = [strict, loose] if loose != strict else [strict]
        if loose != strict and len(order) + len(placed) == shape.units:
            passes = [loose]   # the whole group cannot keep the rule here: the best spread at once
            self._warn(shape, bounds)
        if spill:
            passes.append((shape.units, shape.units))   # any DataNode at all rather than no unit
        chosen: dict[int, str] = {}
        state = _Fill(shape, placed)
        for n, (per_host, per_rack) in enumerate(passes):
            rest = [i for i in order if i not in chosen]
            if not rest:
                break
            if n == 1 and passes[0] == strict and (per_host, per_rack) == loose:
                self._warn(shape, bounds)
            chosen.update(state.fill(rest, ranked, per_host, per_rack))
        return {i: chosen[i] for i in indexes if i in chosen}

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


class _Fill:
    """The units placed so far (per host, per rack, per rack and local group) and the DataNodes
    taken; ``fill`` places more within a pass's bounds."""

    def __init__(self, shape: Shape, placed: Mapping[int, Location]):
        self.shape = shape
        self.hosts = Counter(loc.host for loc in placed.values())
        self.racks = Counter(loc.rack for loc in placed.values())
        self.local = Counter((loc.rack, shape.local[i]) for i, loc in placed.items()
                             if i < len(shape.local) and shape.local[i] >= 0)
        self.used: set[str] = set()

    def fill(self, order: list[int], ranked: list[Candidate], per_host: int, per_rack: int) -> dict[int, str]:
        """For each index, the least loaded candidate on the host with fewest of the group, then
        the rack with fewest of its local group, then the rack with fewest of the group; a
        candidate that is as good as any can be ends the search (a long list is not read to its end)."""
        hosts, racks, local, used = self.hosts, self.racks, self.local, self.used
        chosen: dict[int, str] = {}
        all_racks = {c.location.rack for c in ranked}
        all_hosts = {c.location.host for c in ranked}
        covered = sum(1 for h in all_hosts if hosts.get(h, 0))   # hosts of the candidates holding a unit
        for index in order:
            group = self.shape.local[index] if index < len(self.shape.local) else -1
            counts = [racks.get(r, 0) for r in all_racks]
            open_counts = [n for n in counts if n < per_rack]
            if not open_counts:
                break
            # the best key any candidate could have: a host without a unit of the group, if one is left
            fewest = 0 if covered < len(all_hosts) else min(hosts.get(h, 0) for h in all_hosts)
            floor = (fewest, 0, min(open_counts))
            best, best_key = None, None
            for c in ranked:
                if c.id in used:
                    continue
                loc = c.location
                on_host = hosts.get(loc.host, 0)
                in_rack = racks.get(loc.rack, 0)
                if on_host >= per_host or in_rack >= per_rack:
                    continue
                key = (on_host, local.get((loc.rack, group), 0) if group >= 0 else 0, in_rack)
                if best_key is None or key < best_key:
                    best, best_key = c, key
                    if key <= floor:
                        break
            if best is None:
                continue
            loc = best.location
            chosen[index] = best.id
            used.add(best.id)
            if not hosts.get(loc.host, 0):
                covered += 1
            hosts[loc.host] = hosts.get(loc.host, 0) + 1
            racks[loc.rack] = racks.get(loc.rack, 0) + 1
            if group >= 0:
                local[(loc.rack, group)] = local.get((loc.rack, group), 0) + 1
        return chosen
