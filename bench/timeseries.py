"""The bench's time series: per 100 ms of run time (by a read's scheduled start), a count and a
small latency histogram, so memory stays fixed however long a run is.
"""

from __future__ import annotations

import threading

from hedgefs.client.metrics import LatencyHistogram

BUCKET_S = 0.1


class _Bucket:
    __slots__ = ("count", "hist")

    def __init__(self) -> None:
        self.count = 0
        self.hist = LatencyHistogram()


class TimeSeries:
    """Per-bucket (default 100 ms) latency summaries, keyed by the read's (scheduled) start time."""

    def __init__(self, bucket_s: float = BUCKET_S):
        self.bucket_s = bucket_s
        self._buckets: dict[int, _Bucket] = {}
        self._lock = threading.Lock()

    def record(self, t_s: float, seconds: float) -> None:
        index = int(t_s / self.bucket_s)
        with self._lock:
            bucket = self._buckets.get(index)
            if bucket is None:
                bucket = self._buckets[index] = _Bucket()
            bucket.count += 1
        bucket.hist.record(seconds)

    def window(self, start_s: float, end_s: float, skip: set[int] = frozenset()) -> LatencyHistogram:
        """The reads scheduled in [start_s, end_s), merged (buckets in ``skip`` left out)."""
        out = LatencyHistogram()
        first, last = int(round(start_s / self.bucket_s, 6)), int(round(end_s / self.bucket_s, 6))
        with self._lock:
            items = [(i, b) for i, b in self._buckets.items() if first <= i < last and i not in skip]
        for _, b in items:
            out.merge(b.hist)
        return out

    def rows(self) -> list[dict]:
        with self._lock:
            items = sorted(self._buckets.items())
        return [{"t": round(i * self.bucket_s, 3), "n": b.count,
                 "p50_ms": ms(b.hist.percentile(50)), "p99_ms": ms(b.hist.percentile(99)),
                 "max_ms": ms(b.hist.max_s)} for i, b in items]


def ms(seconds: float) -> float:
    """Seconds as milliseconds, to 0.01 ms."""
    return round(seconds * 1000.0, 2)
