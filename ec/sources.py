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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

from hedgefs.ec import lrc
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
    from hedgefs.ec.layout import iter_stripes

    read = plan(policy, [index], set(range(policy.units)) - {index}).read
    return sum(min(s.cell_lengths[index], s.cell_lengths[u]) for s in iter_stripes(policy, group_length)
               for u in read)
