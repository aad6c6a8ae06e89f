"""What a read may do: the questions the range fetcher asks, and nothing else.

The fetcher (range_fetch.py) knows how to read k units of a block range; this module decides
when a read is late, which units to ask, and whether an extra read may be spent. Three policies,
one set of questions (the fetcher never branches on which policy it has):

    ReadPolicy       hedging off: a late read is waited for, a failed one rebuilt (a rebuild's
                     late source may still bring in the next, if the breaker allows).
    FixedPolicy      HubSpot's rule: a fixed threshold; a read past it is hedged if the breaker
                     allows (any DataNode with a read past it counts as impaired); nothing is
                     read around, nothing probed, no budget.
    AdaptivePolicy   the latency model's threshold per read size; DataNodes the model calls slow
                     or silent are read around (a probe now and then sees their recovery); a read
                     overtaken by later reads is hedged under its threshold; every extra unit read
                     spends the breaker's budget; a retired loser runs on until it has told the
                     model whether its DataNode is slow.

Which one a client gets, and with which threshold, is the composition's (reader.py
``make_policy``), from its ``HedgeConfig``.
"""

from __future__ import annotations

import enum
import math
from typing import TYPE_CHECKING, Callable, Iterable

from hedgefs.client.breaker import ALLOWED, BudgetBreaker, CircuitBreaker, FixedBreaker, Verdict
from hedgefs.client.latency import OVERTAKEN_MIN_S, LatencyModel, ProbeTicket

if TYPE_CHECKING:
    from hedgefs.client.unit_reads import UnitRead


class Route(enum.Enum):
    """How a wanted unit is read."""
    ASK = "ask"                     # ask its DataNode
    AROUND_SLOW = "slow"            # rebuild it from other units: its DataNode is slow
    AROUND_SILENT = "silent"        # ... its DataNode has reads in flight and answers nothing
    NO_COPY = "no live copy"        # no DataNode holds it: rebuild it
    EXCLUDED = "excluded"           # the caller asked to leave its DataNode out (distcp's second copy)

    @property
    def around(self) -> bool:
        return self in (Route.AROUND_SLOW, Route.AROUND_SILENT)


class ReadPolicy:
    """Hedging off: the base every policy refines. Subclasses change the answers, never the questions."""

    rescue_poll_s: float | None = None   # how often a late read we wait for is looked at again (None: never)

    def __init__(self, breaker: CircuitBreaker, model: LatencyModel, threshold: Callable[[int], float],
                 read_extra: int = 0):
        self.breaker = breaker
        self.model = model
        self._threshold = threshold
        self.read_extra = read_extra

    # ---------------------------------------------------------------- timing

    def threshold(self, nbytes: int) -> float:
        """Seconds after which a unit read of ``nbytes`` still running is overdue."""
        return self._threshold(nbytes)

    def overtaken(self, read: "UnitRead", mates: tuple = ()) -> bool:
        """Is this read, still under its threshold, overtaken (later reads of its size to other
        DataNodes answered while it has not, or ``mates``, the log entries of the reads sent with
        it, all did): hedge it now? (Only the adaptive policy knows more than the threshold.)"""
        return False

    def overtaken_look_at(self, read: "UnitRead", mates: tuple = ()) -> float | None:
        """When to ask ``overtaken`` about this read again (None: never)."""
        return None

    def note_overtaken(self, read: "UnitRead") -> None:
        """The fetcher acts on ``overtaken``: its DataNode's other reads in flight are overtaken too."""

    def hedge_later(self, read: "UnitRead") -> float:
        """A read has crossed its threshold: seconds to wait more before it is overdue (0: now)."""
        return 0.0

    def note_overdue(self, datanode: str) -> None:
        """A read of this DataNode crossed the threshold."""

    def gone_in(self, datanode: str | None) -> float | None:
        """Seconds until a range that only this DataNode's reads in flight could still finish
        gives up on it (0: now; None: it has none in flight). Every policy: hedging or not, a
        frozen DataNode is not waited for to the transport's deadline when nothing else is left."""
        return None if datanode is None else self.model.gone_in(datanode)

    def retire_after(self, read: "UnitRead") -> float:
        """A loser: cancel it after this many seconds (0: at once)."""
        return 0.0

    # ---------------------------------------------------------------- routes, ranks, probes

    def route(self, datanode: str) -> Route:
        return Route.ASK

    def rescue(self, datanode: str) -> Route | None:
        """A late read we chose to wait for: go around its DataNode now? (None: keep waiting.)"""
        return None

    def troubled(self, datanode: str | None) -> bool:
        return False

    def late(self, datanode: str, threshold: float) -> bool:
        """A unit to ask last: troubled, or silent past the threshold with reads out now."""
        return False

    def rank(self, candidates: Iterable[tuple[int, str | None, bool]], nbytes: int, exclude: frozenset[str],
             tier: Callable[[int], int]) -> list[int]:
        """Units to read, best first. ``candidates``: (index, DataNode or None, free), free meaning
        the range is past the unit's end (zeros, no read); ``tier``: the code's word for a unit (0:
        its bytes are data, no decode needed; 1: parity). Free first; then away from excluded and
        late DataNodes; data before parity; DataNodes without a recent failure; the model's score
        in factor-2 bands (units about as fast share the load); then index (placement is random
        per group: that spreads it too)."""
        model = self.model
        threshold = self.threshold(nbytes)

        def key(c):
            index, dn, free = c
            if free:
                return (0, False, False, 0, False, 0, index)
            return (1, dn in exclude, self.late(dn, threshold), tier(index), model.failed_recently(dn),
                    speed_band(model.score(dn)), index)

        return [c[0] for c in sorted(candidates, key=key)]

    def probe(self, datanode: str) -> ProbeTicket | None:
        """A read passes this DataNode over: a ticket to ask it anyway, to learn whether it
        recovered (None: not now). The read holds the ticket and hands it back when it ends."""
        return None

    # ---------------------------------------------------------------- extra reads

    def earn(self, unit_reads: int) -> None:
        self.breaker.earn(unit_reads)

    def may_hedge(self, cost: int) -> Verdict:
        """A read is overdue: may ``cost`` extra unit reads race it? (OFF: hedging is off.)"""
        return Verdict.OFF

    def may_add_source(self, late_datanode: str) -> bool:
        """A source we wait for is overdue: may one more source be read?"""
        return self.breaker.try_extra(1) == ALLOWED

    def late_binding(self, room: Callable[[], int]) -> int:
        """Extra units to read at once (late binding: the first to answer are used), at most
        ``room()`` (the code's: whole stripes only, or the other replicas; asked only if needed)."""
        return 0


class FixedPolicy(ReadPolicy):
    """HubSpot's rule: a read past the fixed threshold is hedged, within the breaker's limits."""

    def __init__(self, breaker: FixedBreaker, model: LatencyModel, threshold: Callable[[int], float],
                 read_extra: int = 0):
        super().__init__(breaker, model, threshold, read_extra)
        self.breaker: FixedBreaker = breaker

    def note_overdue(self, datanode: str) -> None:
        self.breaker.record_slow(datanode)   # HubSpot: it counts as impaired

    def may_hedge(self, cost: int) -> Verdict:
        return self.breaker.try_hedge(cost)

    def late_binding(self, room: Callable[[], int]) -> int:
        """Not while the breaker holds extra reads back."""
        extra = min(self.read_extra, room()) if self.read_extra else 0
        return extra if extra and self.breaker.allows_read_around() else 0


class AdaptivePolicy(FixedPolicy):
    """The latency model decides; the breaker's budget pays for every extra read."""

    rescue_poll_s = 0.05

    def __init__(self, breaker: BudgetBreaker, model: LatencyModel, read_extra: int = 0, overtaken: bool = True):
        ReadPolicy.__init__(self, breaker, model, model.threshold, read_extra)
        self.breaker: BudgetBreaker = breaker
        self._overtakes = overtaken

    def note_overdue(self, datanode: str) -> None:
        pass   # impaired DataNodes come from the model's own verdicts, not single late reads

    def overtaken(self, read: "UnitRead", mates: tuple = ()) -> bool:
        return self._overtakes and read.token is not None and self.model.overtaken(read.token, mates)

    def overtaken_look_at(self, read: "UnitRead", mates: tuple = ()) -> float | None:
        if not self._overtakes:
            return None
        if read.token is None:   # its task has not run yet: it could be overtaken OVERTAKEN_MIN_S after it was sent
            return read.sent_at + OVERTAKEN_MIN_S
        return self.model.overtaken_look_at(read.token, mates)

    def note_overtaken(self, read: "UnitRead") -> None:
        if read.token is not None:
            self.model.stuck(read.token)

    def hedge_later(self, read: "UnitRead") -> float:
        return self.model.hedge_later(read.token, read.held) if read.token is not None else 0.0

    def retire_after(self, read: "UnitRead") -> float:
        """Run on until the read is evidence either way: cancelled at once, a read beaten by a
        rebuild would only ever tell the model "at least this long", never that it is slow."""
        return self.model.evidence_in(read.token, read.held) if read.token else 0.0

    def troubled(self, datanode: str | None) -> bool:
        return datanode is not None and (self.model.is_slow(datanode) or self.model.is_silent(datanode))

    def late(self, datanode: str, threshold: float) -> bool:
        return self.troubled(datanode) or self.model.silent_for(datanode) >= threshold

    def route(self, datanode: str) -> Route:
        model = self.model
        if model.is_silent(datanode):
            return Route.AROUND_SILENT   # never waited on, breaker or not
        if model.is_slow(datanode) and self.breaker.allows_read_around():
            return Route.AROUND_SLOW
        return Route.ASK

    def rescue(self, datanode: str) -> Route | None:
        route = self.route(datanode)
        return None if route is Route.ASK else route

    def probe(self, datanode: str) -> ProbeTicket | None:
        """Slow, or far slower than the threshold lately (a unit ranked below others by its score
        would otherwise never be read, and never be seen to recover); one due; and the budget
        pays for it. Not a silent one: its own reads in flight are its probes."""
        model = self.model
        if not (model.is_slow(datanode) or speed_band(model.score(datanode)) >= 2):
            return None
        ticket = model.book_probe(datanode)
        if ticket is not None and self.breaker.try_extra(1) != ALLOWED:
            ticket.done()
            return None
        return ticket

    def may_add_source(self, late_datanode: str) -> bool:
        # Instead of silent it is not an extra read: it replaces a failure.
        return self.model.is_silent(late_datanode) or self.breaker.try_extra(1) == ALLOWED


def speed_band(score: float) -> int:
    """A DataNode's score (its median recent read as a multiple of the threshold; 0 unknown) in
    factor-2 bands: 0 under the threshold (or unknown: asking it teaches us), 1 up to twice it..."""
    return 0 if score < 1.0 else 1 + int(math.log2(score))
