"""Which units to read: the cheapest source set for the units a reader (or a repair) wants, given
the units it may read. Pure: unit indices in, unit indices out; no bytes, no I/O.

One question for every policy, answered by the code's structure:

* RS-k-m: a wanted unit that is not available is rebuilt from any k units; the ones already being
  read come first (free), then data units (no decode needed for them), then parity.
* REPLICATE-n: any one replica holds everything (the same rule with k = 1).
* LRC-k-l-g: a lost unit of a local group is rebuilt from the k / l other members of its group
  when they are all available (3 reads for LRC-6-2-2, not 6); otherwise globally, from about k
  units, local parities of the groups concerned before global parities. ``ec/lrc.py`` says which
  sets determine which units; the plan is checked against it, never assumed.

*Cost* is the number of units to read that are not in ``reading`` (units already read or in
flight cost nothing). Every wanted unit that is available is read as it is, so ``plan`` never
trades a wanted unit for a rebuild: a caller that wants to avoid a slow unit leaves it out of
``available``. ``extra`` of a plan is how many units it reads beyond the wanted ones: 0 means a
parity unit replaced the missing one at no extra read (a whole-stripe read whose slow data unit's
group peers are being read anyway), which ``replacement`` names.

``plan`` is cached per (policy, wants, available, reading, order): a reader asks again and again
about the same few patterns.

**A read's code** (``code_for(policy)``: ``MdsCode`` for RS, ``LrcCode``, ``Copies``): the questions a
range fetch (client/range_fetch.py) asks of the code's shape, so that the fetch itself never
branches on it. A fetch wants some units over one block range (a replicated block: unit 0, which
every replica holds) and keeps a set of units it *counts on* (read, or being read):

    unit_ranges(group_length, offset, length)
                                   the wanted units of a group data range, and what each gives
                                   (RS, LRC: ec/layout.py's cells; copies: unit 0's one range)
    named(wanted)                  the units a read asks by name, each routed on its own (RS, LRC:
                                   the wanted units; copies: none, the ranking picks a replica)
    covered(wanted, units)         the wanted units those units give as they are (``missing``: the rest)
    holding(wanted)                the units that hold a wanted unit as it is (RS, LRC: the wanted
                                   units; copies: every replica)
    to_read(missing, counting, ranked, spare, avoid)
                                   the units to read more so that the missing wanted units can be
                                   rebuilt: RS any k, in the caller's order; LRC the cheapest plan,
                                   its local group first; copies any one
    enough(wanted, done)           can the done units give every wanted unit?
    holders(wanted, done)          the done unit that holds each wanted unit's bytes as they are
    spare_room(wanted, available)  units late binding could add (whole stripes only; copies: the
                                   other replicas)
    tier(unit)                     0 for a unit whose bytes are data (no decode), 1 for parity
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Collection, Iterable, Sequence

from hedgefs.ec import layout, lrc
from hedgefs.ec.gf256 import Basis
from hedgefs.ec.policy import Policy


class Undecodable(ValueError):
    """The available units cannot rebuild the wanted ones (too many lost, or the wrong ones)."""


@dataclass(frozen=True)
class SourcePlan:
    """What to read for ``wants``.

    ``read``: every unit to read, ascending: the wanted units that are available, and the sources
    of the others. ``rebuild``: the wanted units decoded from ``read`` (not read themselves).
    ``cost``: units of ``read`` not already being read. ``extra``: units read beyond the wanted
    ones (0 when nothing is rebuilt, or when a parity unit replaced a missing one).
    ``local``: every rebuilt unit comes from its own LRC local group.
    """

    read: tuple[int, ...]
    rebuild: tuple[int, ...]
    cost: int
    extra: int
    local: bool = False


def plan(policy: Policy, wants: Iterable[int], available: Iterable[int], reading: Iterable[int] = (),
         order: Sequence[int] = ()) -> SourcePlan:
    """The cheapest units to read to get ``wants``, reading only ``available`` units.

    ``reading``: units already read or in flight (free). ``order``: the caller's preference among
    units of equal cost, best first (fastest DataNodes, say); units not in it come after, by index.
    Raises Undecodable when the available units cannot give every wanted unit, and ValueError for
    an index out of range.
    """
    wants_t = tuple(sorted(set(wants)))
    avail = frozenset(available)
    free = frozenset(reading) & avail
    for u in (*wants_t, *avail, *free):
        if not 0 <= u < policy.units:
            raise ValueError(f"unit index {u} out of range for {policy.name}")
    return _plan(policy, wants_t, avail, free, tuple(order))


@lru_cache(maxsize=8192)
def _plan(policy: Policy, wants: tuple[int, ...], avail: frozenset[int], free: frozenset[int],
          order: tuple[int, ...]) -> SourcePlan:
    base = frozenset(w for w in wants if w in avail)
    missing = tuple(w for w in wants if w not in avail)
    if not missing:
        return _made(wants, base, missing, free)
    position = {u: i for i, u in enumerate(order)}

    def preference(u: int, tier: int = 0):
        return (u not in free, tier, position.get(u, len(position)), u)

    if policy.local_groups:
        return _plan_lrc(policy, wants, base, missing, avail, free, preference)
    # MDS (RS, and REPLICATE with k = 1): any k units give every unit.
    others = sorted(avail - base, key=lambda u: preference(u, int(u >= policy.k)))
    read = set(base) | set(others[:max(0, policy.k - len(base))])
    if len(read) < policy.k:
        raise Undecodable(_refusal(policy, missing, avail, f"any {policy.k} are needed"))
    return _made(wants, read, missing, free)


def _plan_lrc(policy: Policy, wants, base, missing, avail, free, preference) -> SourcePlan:
    k, l, g = policy.k, policy.local_groups, policy.global_parities
    local = _local_sources(k, l, missing, avail)
    candidates = []
    if local is not None:
        candidates.append(_made(wants, base | local, missing, free, local=True))
    touched = {lrc.group_of(k, l, u) for u in missing} - {None}

    def tier(u: int) -> int:
        group = lrc.group_of(k, l, u)
        if u < k:
            return 0 if group in touched else 2
        if group is not None:
            return 1 if group in touched else 4
        return 3

    chosen = _span_greedy(k, l, g, base, missing, sorted(avail - base, key=lambda u: preference(u, tier(u))))
    if chosen is not None:
        candidates.append(_made(wants, chosen, missing, free))
    if not candidates:
        raise Undecodable(_refusal(policy, missing, avail, "not enough independent units"))
    return min(candidates, key=lambda p: (p.cost, len(p.read), not p.local))


def _local_sources(k: int, l: int, missing, avail) -> frozenset[int] | None:
    """Every missing unit from its own local group, or None if one cannot be."""
    sources: set[int] = set()
    groups = [lrc.group_of(k, l, u) for u in missing]
    for u, group in zip(missing, groups):
        if group is None or groups.count(group) > 1:
            return None
        peers = [m for m in lrc.group_members(k, l, group) if m != u]
        if any(m not in avail for m in peers):
            return None
        sources.update(peers)
    return frozenset(sources)


def _span_greedy(k: int, l: int, g: int, base, missing, ordered) -> frozenset[int] | None:
    """Add units in ``ordered`` that raise the rank until the missing units are covered, then
    drop, most expensive first, every added unit they are still covered without."""
    rows = lrc.encoding_matrix(k, l, g)
    chosen = list(base)
    basis = Basis()
    for u in sorted(base):
        basis.add(rows[u])
    for u in ordered:
        if all(basis.spans(rows[w]) for w in missing):
            break
        if basis.add(rows[u]):
            chosen.append(u)
    if not lrc.covers(k, l, g, chosen, missing):
        return None
    for u in reversed(chosen[len(base):]):
        trial = [v for v in chosen if v != u]
        if lrc.covers(k, l, g, trial, missing):
            chosen = trial
    return frozenset(chosen)


def _made(wants, read, missing, free, local: bool = False) -> SourcePlan:
    read_t = tuple(sorted(read))
    return SourcePlan(read_t, tuple(missing), sum(1 for u in read_t if u not in free),
                      max(0, len(read_t) - len(wants)), local and bool(missing))


def _refusal(policy: Policy, missing, avail, why: str) -> str:
    shape = policy.name.rsplit("-", 1)[0] if policy.kind != "REPLICATE" else policy.name   # not the cell size
    return (f"{shape}: cannot rebuild units {list(missing)} from units {sorted(avail)} "
            f"({len(avail)} of {policy.units}; {why})")


def replacement(policy: Policy, wants: Iterable[int], slow: int, available: Iterable[int]) -> int | None:
    """The parity unit that stands in for the slow (or lost) unit ``slow`` of a read of ``wants``
    at no extra read, or None when going around it costs more units than it saves."""
    wants = set(wants)
    if slow not in wants:
        return None
    try:
        p = plan(policy, wants, set(available) - {slow})
    except Undecodable:
        return None
    if p.extra != 0:
        return None
    spare = [u for u in p.read if u not in wants]
    return spare[0] if len(spare) == 1 else None


def repair_traffic(policy: Policy, group_length: int, index: int) -> int:
    """Bytes a repair of unit ``index`` reads when every other unit is there: per stripe, from each
    source of the plan, as much of its cell as the wanted cell is long (columns decode on their
    own, so a repair worker reads no more)."""
    read = plan(policy, [index], set(range(policy.units)) - {index}).read
    return sum(min(s.cell_lengths[index], s.cell_lengths[u]) for s in layout.iter_stripes(policy, group_length)
               for u in read)


# ---------------------------------------------------------------------------- a read's code


class MdsCode:
    """RS-k-m, or any code where any k units give every unit (an MDS code)."""

    # A hedge of a read that needs k sources reads one more: one more straggler is then free.
    hedge_spare = 1
    # What replaces a unit whose read failed: "rebuild" (decoded from others) or "replica".
    substitute = "rebuild"

    def __init__(self, policy: Policy):
        self.policy = policy
        self.k = policy.k
        self.units = policy.units

    def unit_ranges(self, group_length: int, offset: int, length: int) -> list[layout.UnitRange]:
        return layout.group_range_to_units(self.policy, group_length, offset, length)

    def named(self, wanted: Sequence[int]) -> Sequence[int]:
        return wanted

    def covered(self, wanted: Sequence[int], units: Collection[int]) -> set[int]:
        return {w for w in wanted if w in units}

    def missing(self, wanted: Sequence[int], units: Collection[int]) -> list[int]:
        return [w for w in wanted if w not in units]

    def holding(self, wanted: Sequence[int]) -> Iterable[int]:
        return wanted

    def to_read(self, missing: Sequence[int], counting: set[int], ranked: Sequence[int], spare: int,
                avoid: Callable[[int], bool]) -> list[int]:
        """Units of ``ranked`` (best first, none of them counted on) to read so that ``counting``
        and they rebuild ``missing``, plus ``spare`` more; [] when nothing left decodes."""
        return list(ranked[:max(0, self.k + spare - len(counting))])

    def enough(self, wanted: Sequence[int], done: Collection[int]) -> bool:
        if len(done) >= self.k:
            return True
        for w in wanted:
            if w not in done:
                return False
        return True

    def holders(self, wanted: Sequence[int], done: Collection[int]) -> dict[int, int]:
        return {w: w for w in wanted if w in done}

    def spare_room(self, wanted: Sequence[int], available: int) -> int:
        """Late binding reads whole stripes only: a smaller read would need k - wanted + N more
        reads than it wants."""
        return self.policy.m if len(wanted) == self.k and available > self.k else 0

    def tier(self, unit: int) -> int:
        return 0 if unit < self.k else 1

    def shortfall(self, group_id: int, start: int, done: int, units: int, errors: str) -> str:
        return (f"cannot read group {group_id} at block offset {start}: only {done} "
                f"of the {self.k} units needed could be read")


class LrcCode(MdsCode):
    """LRC-k-l-g: a lost unit from its local group when that is whole, else globally (``plan``)."""

    def to_read(self, missing, counting, ranked, spare, avoid) -> list[int]:
        usable = (set(ranked) | counting) - set(missing)
        avoided = {u for u in usable - counting if avoid(u)}
        for available in (usable - avoided, usable):
            try:
                chosen = plan(self.policy, missing, available, reading=counting, order=ranked)
            except Undecodable:
                continue
            send = [u for u in chosen.read if u not in counting]
            if chosen.local:
                return send   # a spare outside the group could not stand in for a late peer
            return send + [u for u in ranked if u not in send][:spare]
        return []   # nothing decodes with what is left: wait for the reads that run

    def enough(self, wanted, done) -> bool:
        missing = [w for w in wanted if w not in done]
        if not missing:
            return True
        try:
            plan(self.policy, missing, done)
        except Undecodable:
            return False
        return True


class Copies(MdsCode):
    """REPLICATE-n, the MDS code with k = 1: unit 0 is wanted, and every unit holds it as it is,
    so any one replica will do."""

    hedge_spare = 0   # another replica is the whole rescue
    substitute = "replica"

    def unit_ranges(self, group_length, offset, length) -> list[layout.UnitRange]:
        """A block's bytes are unit 0's as they are: one range, one piece (no cells to cut it into)."""
        if offset < 0 or length < 0 or offset + length > group_length:
            raise ValueError(f"range [{offset}, {offset + length}) is not inside the block's {group_length} bytes")
        if not length:
            return []
        return [layout.UnitRange(0, offset, length, (layout.CellRange(0, 0, offset, length, offset, offset),))]

    def named(self, wanted):
        return ()

    def covered(self, wanted, units) -> set[int]:
        return set(wanted) if units else set()

    def missing(self, wanted, units) -> list[int]:
        return [] if units else list(wanted)

    def holding(self, wanted) -> Iterable[int]:
        return range(self.units) if wanted else ()

    def enough(self, wanted, done) -> bool:
        return bool(done)

    def holders(self, wanted, done) -> dict[int, int]:
        first = next(iter(done), None)
        return {} if first is None else {w: first for w in wanted}

    def spare_room(self, wanted, available: int) -> int:
        return max(0, available - 1)

    def tier(self, unit: int) -> int:
        return 0

    def shortfall(self, group_id, start, done, units, errors) -> str:
        if not units:
            return f"block {group_id} has no live replica"
        return f"block {group_id}: none of its {units} live replicas could be read ({errors})"


@lru_cache(maxsize=64)
def code_for(policy: Policy) -> MdsCode:
    """The read strategy of a file's own policy."""
    if policy.replicated:
        return Copies(policy)
    if policy.local_groups:
        return LrcCode(policy)
    return MdsCode(policy)
