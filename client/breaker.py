"""The hedging circuit breakers: every extra read asks one, and it says no when too much is slow.

Two breakers, one set of questions (``try_hedge``, ``try_extra``, ``allows_read_around``,
``earn``, ``is_open``):

    FixedBreaker    HubSpot's rule, with a fixed threshold: a DataNode is *impaired* when one of
                    its reads crossed the threshold (``record_slow``); no budget: extra reads that
                    are not hedges are always allowed.
    BudgetBreaker   with the adaptive threshold (the default): the impaired DataNodes are the ones
                    the latency model has judged slow compared with their peers for a second on
                    end (so a uniformly slow host impairs nobody, and neither does a moment's
                    stall); every extra unit read spends the budget; no reading around while more
                    than max_impaired_nodes DataNodes are slow at once (the first second of a
                    broad slowdown costs no more than its hedges).

Both trip alike: when the (max_impaired_nodes + 1)-th distinct DataNode turns impaired inside
impaired_window_ms, the breaker opens for cooldown_ms: no hedges, no reading around slow
DataNodes, no extra sources; reads wait for slow DataNodes (never for silent DataNodes: see the
reader). At most max_per_second hedges start in any one-second window (the absolute ceiling).

The extra-read budget (Marc Brooker's retry token bucket): every unit read a read needs earns
budget_pct % of a token, up to a small burst; every extra unit read (a hedge's sources, a
rebuild's next source, a probe) spends one, and is refused when none is left. So over any
stretch, extra reads stay within budget_pct % of the reads plus the burst. One breaker per
``FileSystem`` (each has its own latency model).

Observers (``observe``) hear what the breaker decides, as it decides it: ``("slow", datanode)``
(fixed: a read crossed the threshold), ``("hedge", verdict)`` and ``("trip", impaired, after)``;
the benchmark's probe listens instead of wrapping methods.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from hedgefs.client.config import HedgeConfig

if TYPE_CHECKING:
    from hedgefs.client.latency import LatencyModel

log = logging.getLogger("hedgefs.client.breaker")


class Verdict(str, enum.Enum):
    """The breaker's answer to an extra read."""
    ALLOWED = "allowed"
    REFUSED_BREAKER = "breaker"
    REFUSED_RATE = "rate"   # the budget or the per-second cap
    OFF = "off"             # hedging is off: nothing asked, nothing counted

    @property
    def counter(self) -> str | None:
        """The client counter a refusal adds to (None: none)."""
        return {Verdict.REFUSED_BREAKER: "hedges_refused_breaker", Verdict.REFUSED_RATE: "hedges_refused_rate"}.get(self)


ALLOWED, REFUSED_BREAKER, REFUSED_RATE = Verdict.ALLOWED, Verdict.REFUSED_BREAKER, Verdict.REFUSED_RATE

BURST = 64  # extra unit reads the budget can hold: a few hedges of one-cell reads at once
IMPAIRED_AFTER_S = 1.0  # adaptive: slow this long on end before a DataNode counts as impaired


class CircuitBreaker:
    """What both breakers share: the impaired window, the trip and its cooldown, the per-second
    cap on hedges, and the observers. A breaker says what holds extra reads back (``_held_back``)
    and what an extra read costs (``_spend``)."""

    def __init__(self, config: HedgeConfig, clock: Callable[[], float] = time.monotonic,
                 on_trip: Callable[[], None] = lambda: None):
        self._config = config
        self._on_trip = on_trip
        self._clock = clock
        self._lock = threading.Lock()
        self._impaired: dict[str, float] = {}  # DataNode -> last time it was seen impaired
        self._open_until: float | None = None
        self._tripped_by: list[str] = []
        self._recent_hedges: collections.deque[float] = collections.deque()
        self._observers: list[Callable[..., None]] = []
        self.trips = 0

    def observe(self, observer: Callable[..., None]) -> None:
        """Call ``observer(event, *details)`` on every decision (see the module's docstring)."""
        self._observers.append(observer)

    def _notify(self, *event) -> None:
        for observer in self._observers:
            observer(*event)

    # ---------------------------------------------------------------- the questions

    def earn(self, unit_reads: int) -> None:
        """A read needs this many unit reads (the budget grows by budget_pct % of them)."""

    def try_hedge(self, cost: int = 1) -> Verdict:
        """ALLOWED (counted against the cap, ``cost`` unit reads spent), or why the hedge is refused."""
        with self._lock:
            verdict = self._hedge(cost)
            self._notify("hedge", verdict)
            return verdict

    def _hedge(self, cost: int) -> Verdict:
        now = self._clock()
        if self._held_back(now):
            return REFUSED_BREAKER
        while self._recent_hedges and now - self._recent_hedges[0] >= 1.0:
            self._recent_hedges.popleft()
        if len(self._recent_hedges) >= self._config.max_per_second or not self._spend(cost):
            return REFUSED_RATE
        self._recent_hedges.append(now)
        return ALLOWED

    def try_extra(self, cost: int = 1) -> Verdict:
        """An extra unit read that is not a hedge (a rebuild's next source, a probe)."""
        with self._lock:
            if self._held_back(self._clock()):
                return REFUSED_BREAKER
            return ALLOWED if self._spend(cost) else REFUSED_RATE

    def allows_read_around(self) -> bool:
        """May reads skip slow DataNodes (read parity and decode instead)? Not while open."""
        return not self.is_open

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._refresh(self._clock())

    @property
    def impaired(self) -> list[str]:
        """The DataNodes counted impaired in the current window."""
        with self._lock:
            self._refresh(self._clock())
            return sorted(self._impaired)

    # ---------------------------------------------------------------- what each breaker says

    def _held_back(self, now: float) -> bool:
        """Is every extra read refused now (locked)?"""
        return self._refresh(now)

    def _spend(self, cost: int) -> bool:
        return True

    def _refresh(self, now: float) -> bool:
        """Close after the cooldown; True if open (locked)."""
        if self._open_until is not None and now >= self._open_until:
            self._open_until = None
            log.warning("hedging ON again after cooldown (tripped by %s)", ", ".join(self._tripped_by))
        return self._open_until is not None

    def _note_impaired(self, datanodes, now: float, after: str | None = None) -> None:
        window = self._config.impaired_window_ms / 1000.0
        self._impaired = {dn: t for dn, t in self._impaired.items() if now - t < window}
        for dn in datanodes:
            self._impaired[dn] = now
        if len(self._impaired) > self._config.max_impaired_nodes:
            self._trip(now, after)

    def _trip(self, now: float, after: str | None) -> None:
        self.trips += 1
        self._on_trip()
        self._tripped_by = sorted(self._impaired)
        self._notify("trip", list(self._tripped_by), after)
        self._open_until = now + self._config.cooldown_ms / 1000.0
        # Start the next window afresh: the nodes that tripped us must prove slow again.
        self._impaired.clear()
        log.warning(
            "hedging OFF: %d DataNodes impaired within %.0f ms (%s); cooldown %.0f ms",
            len(self._tripped_by), self._config.impaired_window_ms,
            ", ".join(self._tripped_by), self._config.cooldown_ms,
        )


class FixedBreaker(CircuitBreaker):
    """HubSpot's rule: impaired = a read crossed the fixed threshold; no budget (the per-second
    cap is its only limit on hedges), and extra reads that are not hedges are always allowed."""

    def record_slow(self, datanode: str) -> None:
        """A read on this DataNode crossed the threshold: it is impaired (may open the breaker)."""
        with self._lock:
            now = self._clock()
            self._notify("slow", datanode)
            if not self._refresh(now):
                self._note_impaired([datanode], now, after=datanode)

    def try_extra(self, cost: int = 1) -> Verdict:
        return ALLOWED


class BudgetBreaker(CircuitBreaker):
    """The adaptive rule: impaired = slow by the latency model for a second on end; every extra
    unit read spends the budget."""

    def __init__(self, config: HedgeConfig, model: "LatencyModel", clock: Callable[[], float] = time.monotonic,
                 on_trip: Callable[[], None] = lambda: None):
        super().__init__(config, clock, on_trip)
        self._model = model
        self._tokens = float(BURST)

    def earn(self, unit_reads: int) -> None:
        with self._lock:
            self._tokens = min(float(BURST), self._tokens + unit_reads * self._config.budget_pct / 100.0)

    def allows_read_around(self) -> bool:
        """Not while open, nor while more DataNodes are slow than may be impaired."""
        return not self.is_open and len(self._model.slow_datanodes()) <= self._config.max_impaired_nodes

    def _spend(self, cost: int) -> bool:
        if self._tokens < cost:
            return False
        self._tokens -= cost
        return True

    def _refresh(self, now: float) -> bool:
        """... and count what the model says is slow now."""
        if super()._refresh(now):
            return True
        slow = self._model.slow_datanodes(for_at_least=IMPAIRED_AFTER_S)
        if slow:
            self._note_impaired(slow, now)
        return self._open_until is not None
