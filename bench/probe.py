"""What the client decided during a bench run, time-stamped: hedges and refusals as the breaker
makes them (``CircuitBreaker.observe``), and every bucket a sample of its unit reads, the reads'
needs, the breaker's state and the DataNodes the latency model calls slow.
"""

from __future__ import annotations

import collections
import threading
import time

from hedgefs.bench.timeseries import BUCKET_S
from hedgefs.client.breaker import ALLOWED, REFUSED_BREAKER


class ClientProbe:
    """Time-stamps what the client's breaker decides (as its observer, on one instance) and
    samples, every bucket, its unit reads, the reads' needs, the breaker and the model."""

    def __init__(self, fs, t0: float, bucket_s: float = BUCKET_S):
        self._fs = fs
        self._breaker = breaker = fs.breaker
        self._t0 = t0
        self.bucket_s = bucket_s
        self._lock = threading.Lock()
        self.first_slow: dict[str, float] = {}  # DataNode -> first time it was impaired (slow)
        self.slow_spans: dict[str, list[list[float]]] = {}  # DataNode -> [start, end] while the model called it slow
        self.trips: list[dict] = []  # {"t", "impaired": [...]}
        self._per_bucket: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0, 0])  # hedges, refused breaker, refused rate
        self._window: collections.deque[float] = collections.deque()
        self.max_hedges_in_1s = 0
        self.open_samples: list[tuple[float, bool]] = []
        self.samples: list[tuple[float, int, int]] = []  # (t, unit reads so far, unit reads needed so far)
        self._slow_now: set[str] = set()
        breaker.observe(self._on_breaker)

    def _on_breaker(self, event: str, *details) -> None:
        """What the breaker decided, as it decided it (``CircuitBreaker.observe``)."""
        now = time.monotonic() - self._t0
        with self._lock:
            if event == "slow":            # fixed threshold: impaired = crossed it
                self.first_slow.setdefault(details[0], now)
            elif event == "trip":
                impaired, after = details
                self.trips.append({"t": round(now, 4), "after_slow_on": after, "impaired": impaired})
            elif event == "hedge":
                verdict = details[0]
                slot = self._per_bucket[int(now / self.bucket_s)]
                if verdict == ALLOWED:
                    slot[0] += 1
                    self._window.append(now)
                    while self._window and now - self._window[0] >= 1.0:
                        self._window.popleft()
                    self.max_hedges_in_1s = max(self.max_hedges_in_1s, len(self._window))
                elif verdict == REFUSED_BREAKER:
                    slot[1] += 1
                else:
                    slot[2] += 1

    def sample(self) -> None:
        now = round(time.monotonic() - self._t0, 3)
        self.open_samples.append((now, bool(self._breaker.is_open)))
        slow = set(self._fs.model.slow_datanodes())
        with self._lock:
            # The client's own count of what its reads needed: both counted as unit reads start.
            self.samples.append((now, self._fs.metrics.counter("unit_reads"), self._fs.metrics.counter("unit_reads_needed")))
            for dn in slow - self._slow_now:
                self.first_slow.setdefault(dn, now)
                self.slow_spans.setdefault(dn, []).append([now, now])
            for dn in slow:
                self.slow_spans[dn][-1][1] = now
            self._slow_now = slow

    def max_extra_pct_1s(self) -> float | None:
        """The largest share of extra unit reads (over the reads' needs) in any 1 s window
        (between samples at least 1 s apart, as close to 1 s as the samples allow)."""
        samples = self.samples
        worst, j = None, 0
        for i in range(len(samples)):
            while j + 1 < i and samples[i][0] - samples[j + 1][0] >= 1.0:
                j += 1
            if samples[i][0] - samples[j][0] < 1.0:
                continue
            needed = samples[i][2] - samples[j][2]
            if needed > 0:
                pct = 100.0 * ((samples[i][1] - samples[j][1]) - needed) / needed
                worst = pct if worst is None else max(worst, pct)
        return None if worst is None else round(worst, 2)

    def to_dict(self) -> dict:
        with self._lock:
            buckets = sorted(self._per_bucket.items())
        return {
            "first_slow_s": {dn: round(t, 4) for dn, t in sorted(self.first_slow.items(), key=lambda kv: kv[1])},
            "slow_spans": self.slow_spans,
            "trips": self.trips,
            "max_hedges_in_any_1s": self.max_hedges_in_1s,
            "max_extra_pct_1s": self.max_extra_pct_1s(),
            "hedge_series": [{"t": round(i * self.bucket_s, 3), "hedges": h, "refused_breaker": rb, "refused_rate": rr}
                             for i, (h, rb, rr) in buckets],
            # Breaker state sampled every bucket: only the changes are kept.
            "breaker_open": _changes(self.open_samples),
            "unit_reads": [{"t": t, "sent": sent, "needed": needed} for t, sent, needed in self.samples],
        }


def _changes(samples: list[tuple[float, bool]]) -> list[dict]:
    out, last = [], None
    for t, is_open in samples:
        if is_open != last:
            out.append({"t": t, "open": is_open})
            last = is_open
    return out
