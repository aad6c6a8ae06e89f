"""What a read may do: the questions the range fetcher asks, and nothing else.

The fetcher (range_fetch.py) knows how to read k units of a block range; this module decides
when a read is late, which units to ask, and whether an extra read may be spent. Two policies:

    FixedPolicy      HubSpot's rule: a fixed threshold; a read past it is hedged if the breaker
                     allows (any DataNode with a read past it counts as impaired); nothing is
                     read around, nothing probed, no budget. Also the policy of a client with
                     hedging off (``enabled``: False), which only ever waits or rebuilds a
                     failed read.
    AdaptivePolicy   the latency model's threshold per read size; DataNodes the model calls slow
                     or silent are read around (a probe now and then sees their recovery); every
                     extra unit read spends the breaker's budget; a retired loser runs on until
                     it has told the model whether its DataNode is slow.

The fetcher never branches on which policy it has.
"""

from __future__ import annotations

import enum
import math
from typing import TYPE_CHECKING, Iterable, Sequence

from hedgefs.client.breaker import ALLOWED, CircuitBreaker, Verdict
from hedgefs.client.config import HedgeConfig
from hedgefs.client.latency import OVERTAKEN_MIN_S, LatencyModel

if TYPE_CHECKING:
    from hedgefs.client.unit_reads import UnitRead


class Route(enum.Enum):
    """How a wanted unit is read."""
    ASK = "ask"                     # ask its DataNode
    AROUND_SLOW = "slow"            # rebuild it from other units: its DataNode is slow
    AROUND_SILENT = "silent"        # ... its DataNode has reads in flight and answers nothing
    PROBE = "probe"                 # rebuild it, and ask its (slow) DataNode too, to see it recover
    NO_COPY = "no live copy"        # no DataNode holds it: rebuild it
    EXCLUDED = "excluded"           # the caller asked to leave its DataNode out (distcp's second copy)

    @property
    def around(self) -> bool:
        return self in (Route.AROUND_SLOW, Route.AROUND_SILENT, Route.PROBE)


# A hedge of a read that needs k sources (k > 1) reads one spare: one more straggler is free.
HEDGE_SPARE = 1


class ReadPolicy:
    """The base: HubSpot's fixed rule. Subclasses change the answers, never the questions."""

    rescue_poll_s: float | None = None   # how often a late read we wait for is looked at again
    overtaken_poll_s: float | None = None   # how often (at least) a read under its threshold is asked
                                            # whether it is overtaken (None: never)

    def __init__(self, config: HedgeConfig, breaker: CircuitBreaker, model: LatencyModel):
        self.config = config
        self.breaker = breaker
        self.model = model
        self.hedging = config.enabled

    # ---------------------------------------------------------------- timing

    def threshold(self, nbytes: int) -> float:
        """Seconds after which a unit read of ``nbytes`` still running is overdue."""
        if self.config.adaptive:
            return self.model.threshold(nbytes)
        return self.config.threshold_ms / 1000.0

    def overtaken(self, read: "UnitRead", mates: tuple = ()) -> bool:
        """Is this read, still under its threshold, overtaken (later reads of its size to other
        DataNodes answered while it has not, or ``mates``, the log entries of the reads sent with
        it, all did): hedge it now? HubSpot's rule knows only the threshold."""
        return False

    def hedge_later(self, read: "UnitRead") -> float:
        """A read has crossed its threshold: seconds to wait more before it is overdue (0: now)."""
        return 0.0

    def note_overdue(self, datanode: str) -> None:
        """A read of this DataNode crossed the threshold (HubSpot: it counts as impaired)."""
        if self.hedging:
            self.breaker.record_slow(datanode)

    def retire_after(self, read: "UnitRead") -> float:
        """A loser: cancel it after this many seconds (0: at once)."""
        return 0.0

    # ---------------------------------------------------------------- routes and ranks

    def route(self, datanode: str) -> Route:
        return Route.ASK

    def rescue(self, datanode: str) -> Route | None:
        """A late read we chose to wait for: go around its DataNode now? (None: keep waiting.)"""
        return None

    def troubled(self, datanode: str) -> bool:
        return False

    def late(self, datanode: str, threshold: float) -> bool:
        """A replica to ask last: troubled, or silent past the threshold with reads out now."""
        return False

    def rank_sources(self, candidates: Iterable[tuple[int, str | None, bool]], k: int, exclude: frozenset[str]) -> list[int]:
        """Units to decode from, best first. ``candidates``: (index, DataNode or None, free),
        free meaning the range is past the unit's end (zeros, no read). Free first; then away
        from excluded and troubled DataNodes; data before parity (no decode needed for data);
        DataNodes without a recent failure; the fastest by the model; then index."""
        model = self.model

        def rank(c):
            index, dn, free = c
            if free:
                return (0, False, False, False, False, 0.0, index)
            return (1, dn in exclude, self.troubled(dn), index >= k, model.failed_recently(dn), model.score(dn), index)

        return [c[0] for c in sorted(candidates, key=rank)]

    def rank_replicas(self, replicas: Sequence[tuple[int, str]], nbytes: int, exclude: frozenset[str]) -> list[int]:
        """Replicas best first: not excluded; (adaptive) not troubled nor silent past the
        threshold; no recent failure; the model's score in factor-2 bands (replicas about as
        fast share the load); then index (placement is random per block: that spreads it too)."""
        model = self.model
        threshold = self.threshold(nbytes)

        def rank(r):
            index, dn = r
            return (dn in exclude, self.late(dn, threshold), model.failed_recently(dn), speed_band(model.score(dn)), index)

        return [r[0] for r in sorted(replicas, key=rank)]

    def replica_probe(self, ranked: Sequence[tuple[int, str]]) -> int | None:
        """A replica to ask besides the best one, to learn whether its DataNode recovered."""
        return None

    # ---------------------------------------------------------------- extra reads

    def earn(self, unit_reads: int) -> None:
        self.breaker.earn(unit_reads)

    def may_hedge(self, cost: int) -> Verdict:
        """A read is overdue: may ``cost`` extra unit reads race it?"""
        if not self.hedging:
            return Verdict.REFUSED_BREAKER
        return self.breaker.try_hedge(cost)

    def may_add_source(self, late_datanode: str) -> bool:
        """A source we wait for is overdue: may one more source be read?"""
        return self.breaker.try_extra(1) == ALLOWED

    def late_binding_spare(self, k: int, m: int, wanted: int, available: int) -> int:
        """Extra units to read at once for a read wanting ``wanted`` data units (late binding:
        the first k to answer are used). Only for whole stripes: a smaller read would need
        k - wanted + N more reads than it wants. Not while the breaker holds extra reads back."""
        extra = min(self.config.read_extra, m)
        if not extra or not self.hedging or wanted != k or available < k + 1:
            return 0
        return extra if self.breaker.allows_read_around() else 0

    def extra_replicas(self, n: int) -> int:
        """Replicas to ask at once besides the best (late binding for k = 1)."""
        return 0


class AdaptivePolicy(ReadPolicy):
    """The latency model decides; the breaker's budget pays for every extra read."""

    rescue_poll_s = 0.05

    def __init__(self, config: HedgeConfig, breaker: CircuitBreaker, model: LatencyModel):
        super().__init__(config, breaker, model)
        self.overtaken_poll_s = OVERTAKEN_MIN_S if config.overtaken else None

    def note_overdue(self, datanode: str) -> None:
        pass   # impaired DataNodes come from the model's own verdicts, not single late reads

    def overtaken(self, read: "UnitRead", mates: tuple = ()) -> bool:
        return read.token is not None and self.model.overtaken(read.token, mates)

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
            route = Route.AROUND_SILENT   # never waited on, breaker or not
        elif model.is_slow(datanode) and self.breaker.allows_read_around():
            route = Route.AROUND_SLOW
        else:
            return Route.ASK
        if model.probe_due(datanode):
            if self.breaker.try_extra(1) == ALLOWED:
                return Route.PROBE
            model.probe_done(datanode)
        return route

    def rescue(self, datanode: str) -> Route | None:
        if self.model.is_silent(datanode):
            return Route.AROUND_SILENT
        if self.model.is_slow(datanode) and self.breaker.allows_read_around():
            return Route.AROUND_SLOW
        return None

    def replica_probe(self, ranked: Sequence[tuple[int, str]]) -> int | None:
        model = self.model
        for index, dn in ranked[1:]:
            if (model.is_slow(dn) or speed_band(model.score(dn)) >= 2) and model.probe_due(dn):
                if self.breaker.try_extra(1) != ALLOWED:
                    model.probe_done(dn)
                    return None
                return index
        return None

    def may_add_source(self, late_datanode: str) -> bool:
        # Instead of silent it is not an extra read: it replaces a failure.
        return self.model.is_silent(late_datanode) or self.breaker.try_extra(1) == ALLOWED

    def extra_replicas(self, n: int) -> int:
        extra = min(self.config.read_extra, n)
        if extra and self.breaker.allows_read_around() and self.breaker.try_extra(extra) == ALLOWED:
            return extra
        return 0


def make_policy(config: HedgeConfig, breaker: CircuitBreaker, model: LatencyModel) -> ReadPolicy:
    if config.enabled and config.adaptive:
        return AdaptivePolicy(config, breaker, model)
    return ReadPolicy(config, breaker, model)


def speed_band(score: float) -> int:
    """A DataNode's score (its median recent read as a multiple of the threshold; 0 unknown) in
    factor-2 bands: 0 under the threshold (or unknown: asking it teaches us), 1 up to twice it..."""
    return 0 if score < 1.0 else 1 + int(math.log2(score))
