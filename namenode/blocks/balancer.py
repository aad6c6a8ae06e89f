"""The balancer's planning (HDFS's Balancer, in the NameNode): which units move where, so that
every group keeps the placement rule and the DataNodes' disk use evens out.

``hedgefs admin balance`` calls ``step`` again and again (the Balance RPC), each time with the
bytes it may start moving (its bandwidth's share); a step plans moves and returns where things
stand. A move is a copy of a good unit made on its target by the repair machinery (the target
reads the one unit and writes it: no decode), then, at the target's receipt, the map's switch to
the new copy, then the delete of the old one once its group is whole: at no moment does a group
have fewer good units than before, so a kill of the balancer, of a DataNode or of the NameNode at
any point loses nothing (a copy made and never switched to is a surplus copy, deleted as any).

1. **The rule first.** A step judges the groups from where the last one stopped (``SCAN`` groups at
   most: one bounded hold of the writers' lock; a round of 10 M groups is 500 steps), and for each misplaced group (placement.py's
   judge: every unit live, but two on a host or more than the tolerance in a rack where the
   DataNodes in service allow better) plans the fewest moves that mend it: the units on the most
   crowded host and rack leave first, and go where placement puts them.
2. **Then disk use**, once a whole round of the map found nothing to mend: DataNodes whose use is
   more than ``threshold`` above the cluster's average give units to those more than ``threshold``
   below it, each move keeping its group within the rule. Use is a share of capacity (HDFS's)
   where every DataNode has a file system of its own, else (DataNodes sharing one disk: a local
   cluster) a DataNode's bytes against the average of theirs.

A step plans nothing in safe mode or on a standby. Moves in flight are counted against each
target's share of the repair slots (``RepairScheduler.max_per_datanode``), so a balance never
crowds out repairs.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from dataclasses import dataclass

from hedgefs.ec import layout
from hedgefs.namenode.blocks.placement import Bounds, misplaced, shape_of
from hedgefs.namenode.blocks.repairs import InFlight
from hedgefs.namenode.namespace.inodes import load_policy

log = logging.getLogger("hedgefs.namenode")

SCAN = 20_000            # groups a step judges at most (one hold of the writers' lock: ~0.1 s, as health's)
UNITS_LOOKED_AT = 2_000  # units of an overfull DataNode a step looks at for an evening move
BUSY = object()          # _mend_group's "the DataNodes it needs are busy now"
WAITING = object()       # _mend_group's "a unit of it is being repaired or moved now: judged when that ends"


@dataclass(frozen=True)
class BalanceState:
    """Where a balance stands after a step."""
    planned_moves: int          # this step's
    planned_bytes: int
    moves_in_flight: int
    bytes_in_flight: int
    moves_done: int             # since the NameNode started (the caller counts its own by difference)
    bytes_moved: int
    moves_failed: int
    round_done: bool            # the map was judged whole since the balance began
    misplaced: int              # misplaced groups the last whole round found (or this round so far)
    unmendable: int             # ... of them, groups no move can mend with the DataNodes in service
    over: int                   # DataNodes above the average use by more than the threshold
    under: int                  # ... below it
    spread_pct: float           # the highest use less the lowest (points of capacity, or % of the average)
    relative: bool              # use is bytes against the average (DataNodes sharing a disk), not of capacity
    quiet: bool                 # a whole round planned nothing, nothing is in flight or owed a delete: done


class Balancer:
    def __init__(self, manager):
        self.m = manager
        self.cursor = 0
        self.round_done = False
        self.round = Counter()       # this round's: misplaced, unmendable, planned
        self.last = Counter()        # the last whole round's
        self.looked: dict[str, int] = {}   # DataNode -> the group id its next evening look starts at
        self.stopped = False         # this step's mending stopped short of a group it would move (budget, busy)

    def restart(self) -> None:
        """A new balance: judge the whole map again from its start."""
        self.cursor, self.round_done, self.round, self.last = 0, False, Counter(), Counter()
        self.looked = {}

    # ------------------------------------------------------------------ a step

    def step(self, max_bytes: int, threshold_pct: float) -> BalanceState:
        m = self.m
        budget = max(0, max_bytes)
        planned: list[InFlight] = []
        can_plan = not (m.safe_mode.on or m.passive)
        self.stopped = False
        in_flight = [r for r in m.repairs.in_flight.values() if r.source]
        busy = Counter(r.target for r in m.repairs.in_flight.values())
        use = self._use(in_flight)
        if can_plan:
            budget = self._mend(budget, planned, busy, use)
        settled = self._settled()
        evening = self.round_done and self.last["misplaced"] == self.last["unmendable"] and settled
        if can_plan and evening:
            self._even(budget, threshold_pct, planned, busy, use)
        m.repairs.start_moves(planned)
        for move in planned:
            m.liveness.note_allocated(move.target, move.nbytes)
            log.info("balance: unit %d/%d to move from %s to %s (%d bytes)", move.group_id, move.index,
                     move.source, move.target, move.nbytes)
        moving = [r for r in m.repairs.in_flight.values() if r.source]
        over, under, spread, relative = self._judge(use, threshold_pct)
        shown = self.last if self.round_done else self.round
        # Done: a whole round that planned nothing and passed no group waiting on a repair or move
        # (its outcome unknown when the round passed it), and this step stopped short of nothing.
        quiet = self.round_done and not self.last["planned"] and not self.last["waiting"] and not self.stopped \
            and not planned and not moving and settled
        return BalanceState(len(planned), sum(r.nbytes for r in planned), len(moving), sum(r.nbytes for r in moving),
                            m.repairs.moves_done, m.repairs.bytes_moved, m.repairs.moves_failed, self.round_done,
                            shown["misplaced"], shown["unmendable"], len(over), len(under), spread, relative, quiet)

    # ------------------------------------------------------------------ 1. the rule

    def _mend(self, budget: int, planned: list, busy: Counter, use: dict) -> int:
        m = self.m
        blocks = m.blocks
        slots = blocks.groups.reserve(0)
        bounds: dict[str, Bounds] = {}
        policies: dict = {}
        end = min(len(slots), self.cursor + SCAN)
        gid = self.cursor
        while gid < end:
            group = slots[gid]
            if group is not None and group.locs and not blocks.being_written(group):
                name = blocks.policy_of(group)
                policy = policies.get(name) or policies.setdefault(name, load_policy(name))
                if name not in bounds:
                    bounds[name] = m.bounds(shape_of(policy.name))
                moves = self._mend_group(group, policy, bounds[name], busy)
                if moves is WAITING:
                    self.round["waiting"] += 1
                    gid += 1
                    continue
                if moves is BUSY:
                    self.stopped = True
                    break       # the targets it needs are busy: the next step goes on from this group
                if moves is not None:
                    cost = sum(r.nbytes for r in moves)
                    if moves and cost > budget and (planned or budget <= 0 or self._moving()):
                        self.stopped = True
                        break   # the next step goes on from this group (one over the budget if none is moving)
                    self.round["misplaced"] += 1
                    self.round["unmendable"] += not moves
                    self.round["planned"] += len(moves)
                    for r in moves:
                        planned.append(r)
                        busy[r.target] += 1
                        use[r.target] = use.get(r.target, 0) + r.nbytes
                        use[r.source] = use.get(r.source, 0) - r.nbytes
                    budget -= cost
            gid += 1
        self.cursor = gid
        if self.cursor >= len(slots):
            self.cursor, self.round_done = 0, True
            self.last, self.round = self.round, Counter()
        return budget

    def _settled(self) -> bool:
        """No move in flight, the old copy of every move done deleted, and each DataNode in
        service heartbeated since the last move took its place: the used bytes they report are as
        the moves left them. (Other deletes, a busy cluster's, do not hold the balance up.)"""
        m = self.m
        if self._moving():
            return False
        owed = {key for key in m.repairs.moved_from
                if m.blocks.deletes.kind(*key) is not None and m.liveness.is_live(key[0])}
        m.repairs.moved_from = owed
        return not owed and all(m.liveness.get(d).last_seen >= m.repairs.last_move_at for d in m.placeable_ids())

    def _units_on(self, datanode_id: str):
        """(group id, index, group) of up to UNITS_LOOKED_AT units on ``datanode_id`` in at most
        SCAN groups, from where its last look stopped (wrapping round): a DataNode whose first
        units cannot move offers others at the next step."""
        blocks = self.m.blocks
        number = blocks.numbers.get(datanode_id)
        if not number:
            return
        slots = blocks.groups.reserve(0)
        start = self.looked.get(datanode_id, 0) % max(1, len(slots))
        found = 0
        for seen, gid in enumerate(itertools.chain(range(start, len(slots)), range(0, start))):
            if seen >= SCAN:   # one look is a bounded stretch of the map, as a mending step's
                return
            self.looked[datanode_id] = gid + 1
            group = slots[gid]
            if group is None or not group.locs:
                continue
            for index, n in enumerate(blocks.unit_numbers(group)):
                if n == number:
                    yield gid, index, group
                    found += 1
            if found >= UNITS_LOOKED_AT:
                return

    def _moving(self) -> bool:
        return any(r.source for r in self.m.repairs.in_flight.values())

    def _mend_group(self, group, policy, bounds: Bounds, busy: Counter) -> "list[InFlight] | object | None":
        """None if the group keeps the rule (or is not whole: a repair's, not a move's); WAITING if a
        unit of it is being repaired or moved; else the moves that mend it ([] if none can; BUSY if
        the DataNodes it needs have their fill of repairs and moves now)."""
        m = self.m
        units = m.blocks.units(group)
        if not m.blocks.is_whole(group, m.stays):
            return None
        if any((group.id, i) in m.repairs.in_flight for i in units):
            return WAITING
        shape = shape_of(policy.name)
        where = m.liveness.location
        placed = {i: where(d) for i, d in units.items()}
        if not misplaced(shape, placed, bounds):
            return None
        movers: list[int] = []
        while misplaced(shape, placed, bounds):
            hosts = Counter(loc.host for loc in placed.values())
            racks = Counter(loc.rack for loc in placed.values())

            def excess(i: int) -> tuple:
                loc = placed[i]
                return ((hosts[loc.host] > bounds.per_host) + (racks[loc.rack] > bounds.per_rack),
                        hosts[loc.host], racks[loc.rack], i)
            worst = max(placed, key=excess)
            movers.append(worst)
            del placed[worst]
        nbytes = {i: self._unit_bytes(group, policy, i) for i in movers}
        left_out = m.blocks.left_out_on(group.id, movers)   # (a tail's short copy: never a target)
        roomy = [d for d in m.placeable_ids() if d not in units.values() and d not in left_out
                 and m.liveness.has_room(d, max(nbytes.values()))]
        free = [d for d in roomy if busy[d] < m.repairs.max_per_datanode]
        chosen = self._mends(shape, movers, free, placed, bounds)
        if chosen is None:
            # with every DataNode free it could: they are busy (repairs, moves), not unable
            return BUSY if len(free) < len(roomy) and self._mends(shape, movers, roomy, placed, bounds) else []
        now = m.clock()
        return [InFlight(group.id, i, chosen[i], now, source=units[i], nbytes=nbytes[i]) for i in movers]

    def _mends(self, shape, movers: list[int], ids: list[str], placed: dict, bounds: Bounds) -> dict[int, str] | None:
        """Targets for ``movers`` among ``ids`` that leave the group within the rule, or None."""
        m = self.m
        chosen = m.placement.choose(shape, movers, m.candidates(ids), placed, bounds)
        final = dict(placed)
        final.update({i: m.liveness.location(d) for i, d in chosen.items()})
        return chosen if len(chosen) == len(movers) and not misplaced(shape, final, bounds) else None

    @staticmethod
    def _unit_bytes(group, policy, index: int) -> int:
        file = group.file
        length = file.group_lengths()[file.groups.index(group)] if group in file.groups else 0
        return layout.unit_length(policy, length, index)

    # ------------------------------------------------------------------ 2. disk use

    def _use(self, in_flight: list[InFlight]) -> dict[str, int]:
        """Bytes on each DataNode in service, as the moves in flight will leave them."""
        m = self.m
        use = {d: m.liveness.get(d).used_bytes for d in m.placeable_ids()}
        for r in in_flight:
            if r.target in use:
                use[r.target] += r.nbytes
            if r.source in use:
                use[r.source] -= r.nbytes
        return use

    def _shares(self, use: dict[str, int]) -> tuple[dict[str, float], float, bool]:
        """(each DataNode's use in %, the average, relative?)."""
        m = self.m
        capacity = {d: m.liveness.get(d).stats.capacity_bytes for d in use}
        own_disks = all(capacity.values()) and not any(m.liveness.sharing(d) for d in use)
        if own_disks:
            share = {d: 100.0 * use[d] / capacity[d] for d in use}
            return share, 100.0 * sum(use.values()) / max(1, sum(capacity.values())), False
        mean = sum(use.values()) / max(1, len(use))
        return {d: (100.0 * use[d] / mean if mean else 100.0) for d in use}, 100.0, True

    def _judge(self, use: dict[str, int], threshold_pct: float) -> tuple[list, list, float, bool]:
        share, average, relative = self._shares(use)
        over = [d for d in share if share[d] > average + threshold_pct]
        under = [d for d in share if share[d] < average - threshold_pct]
        spread = (max(share.values()) - min(share.values())) if share else 0.0
        return over, under, round(spread, 1), relative

    def _even(self, budget: int, threshold_pct: float, planned: list, busy: Counter, use: dict) -> None:
        """Moves from DataNodes above the average use to those below it (HDFS's: the over-used,
        more than the threshold above, give down to the average plus the threshold, the others
        down to the average; the under-used take up to the average less the threshold)."""
        m = self.m
        blocks = m.blocks
        share, average, relative = self._shares(use)
        if not any(abs(v - average) > threshold_pct for v in share.values()):
            return
        give = {d: average + threshold_pct if v > average + threshold_pct else average
                for d, v in share.items() if v > average}
        take = {d: average - threshold_pct if v < average - threshold_pct else average
                for d, v in share.items() if v < average}
        if not (any(share[d] > average + threshold_pct for d in give)
                or any(share[d] < average - threshold_pct for d in take)):
            return
        mean = sum(use.values()) / max(1, len(use))
        scale = {d: (100.0 / mean if mean else 0.0) if relative else 100.0 / m.liveness.get(d).stats.capacity_bytes
                 for d in use}
        touched = {r.group_id for r in planned}
        bounds_of: dict[str, Bounds] = {}
        where = m.liveness.location
        for source in sorted(give, key=lambda d: -share[d]):
            for gid, index, group in self._units_on(source):
                takers = [d for d, level in take.items() if share[d] < level]
                if share[source] <= give[source] or not takers or (budget <= 0 and (planned or self._moving())):
                    break
                if gid in touched or blocks.being_written(group):
                    continue
                policy = load_policy(blocks.policy_of(group))
                units = blocks.units(group)
                if not blocks.is_whole(group, m.stays) or any((gid, i) in m.repairs.in_flight for i in units):
                    continue
                nbytes = self._unit_bytes(group, policy, index)
                shape = shape_of(policy.name)
                if policy.name not in bounds_of:
                    bounds_of[policy.name] = m.bounds(shape)
                bounds = bounds_of[policy.name]
                placed = {i: where(d) for i, d in units.items() if i != index}
                left_out = blocks.left_out_on(gid, (index,))
                candidates = m.candidates(d for d in takers if d not in units.values() and d not in left_out
                                          and busy[d] < m.repairs.max_per_datanode and m.liveness.has_room(d, nbytes))
                chosen = m.placement.choose(shape, [index], candidates, placed, bounds)
                if index not in chosen:
                    continue
                target = chosen[index]
                placed[index] = where(target)
                if misplaced(shape, placed, bounds):   # evening never breaks the rule
                    continue
                planned.append(InFlight(gid, index, target, m.clock(), source=source, nbytes=nbytes))
                touched.add(gid)
                busy[target] += 1
                budget -= nbytes
                self.round["planned"] += 1
                for d, sign in ((source, -1), (target, 1)):
                    use[d] += sign * nbytes
                    share[d] += sign * nbytes * scale[d]
