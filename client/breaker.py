"""The hedging circuit breaker: stop hedging when too many DataNodes look slow at once.

A DataNode is *impaired* when one of its reads crosses the hedge threshold. When the
(max_impaired_nodes + 1)-th distinct DataNode turns impaired inside impaired_window_ms, the
breaker opens: no hedges for cooldown_ms, and reads simply wait for slow DataNodes. Independently,
at most max_per_second hedges start in any one-second window. One breaker per client process.
"""

import collections
import logging
import threading
import time
from typing import Callable

from hedgefs.client.config import HedgeConfig

log = logging.getLogger("hedgefs.client.breaker")

ALLOWED = "allowed"
REFUSED_BREAKER = "breaker"
REFUSED_RATE = "rate"


class CircuitBreaker:
    def __init__(self, config: HedgeConfig, clock: Callable[[], float] = time.monotonic,
                 on_trip: Callable[[], None] = lambda: None):
        self._config = config
        self._on_trip = on_trip
        self._clock = clock
        self._lock = threading.Lock()
        self._impaired: dict[str, float] = {}  # DataNode -> last time it crossed the threshold
        self._open_until: float | None = None
        self._tripped_by: list[str] = []
        self._recent_hedges: collections.deque[float] = collections.deque()
        self.trips = 0

    def record_slow(self, datanode: str) -> None:
        """A read on this DataNode crossed the threshold; may open the breaker."""
        with self._lock:
            now = self._clock()
            self._close_if_cooled(now)
            if self._open_until is not None:
                return
            window = self._config.impaired_window_ms / 1000.0
            self._impaired = {dn: t for dn, t in self._impaired.items() if now - t < window}
            self._impaired[datanode] = now
            if len(self._impaired) > self._config.max_impaired_nodes:
                self._trip(now)

    def try_hedge(self) -> str:
        """ALLOWED (and counted against the rate cap), or why the hedge is refused."""
        with self._lock:
            now = self._clock()
            self._close_if_cooled(now)
            if self._open_until is not None:
                return REFUSED_BREAKER
            while self._recent_hedges and now - self._recent_hedges[0] >= 1.0:
                self._recent_hedges.popleft()
            if len(self._recent_hedges) >= self._config.max_per_second:
                return REFUSED_RATE
            self._recent_hedges.append(now)
            return ALLOWED

    @property
    def is_open(self) -> bool:
        with self._lock:
            self._close_if_cooled(self._clock())
            return self._open_until is not None

    def _trip(self, now: float) -> None:
        self.trips += 1
        self._on_trip()
        self._tripped_by = sorted(self._impaired)
        self._open_until = now + self._config.cooldown_ms / 1000.0
        # Start the next window afresh: the nodes that tripped us must prove slow again.
        self._impaired.clear()
        log.warning(
            "hedging OFF: %d DataNodes impaired within %.0f ms (%s); cooldown %.0f ms",
            len(self._tripped_by), self._config.impaired_window_ms,
            ", ".join(self._tripped_by), self._config.cooldown_ms,
        )

    def _close_if_cooled(self, now: float) -> None:
        if self._open_until is not None and now >= self._open_until:
            self._open_until = None
            log.warning("hedging ON again after cooldown (tripped by %s)", ", ".join(self._tripped_by))
