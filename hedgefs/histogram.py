"""Latency histograms, HDR-style: counts in log-spaced buckets ~2% wide from 10 us to ~10 min.

Percentiles cost O(buckets) and memory stays fixed however many reads are recorded. Used by the
client (per-DataNode read latency) and by the DataNode (the latency of the reads it serves).
"""

from __future__ import annotations

import math
import threading

_MIN_S = 1e-5
_GROWTH = 1.02
_LOG_GROWTH = math.log(_GROWTH)
_BUCKETS = int(math.log(600.0 / _MIN_S) / _LOG_GROWTH) + 2


class LatencyHistogram:
    def __init__(self) -> None:
        self._counts = [0] * _BUCKETS
        self.count = 0
        self.max_s = 0.0
        self._lock = threading.Lock()

    def record(self, seconds: float) -> None:
        index = 0 if seconds <= _MIN_S else min(_BUCKETS - 1, 1 + int(math.log(seconds / _MIN_S) / _LOG_GROWTH))
        with self._lock:
            self._counts[index] += 1
            self.count += 1
            self.max_s = max(self.max_s, seconds)

    def merge(self, other: "LatencyHistogram") -> None:
        with self._lock:
            for i, c in enumerate(other._counts):
                self._counts[i] += c
            self.count += other.count
            self.max_s = max(self.max_s, other.max_s)

    def percentile(self, p: float) -> float:
        """Upper bound of the bucket holding the p-th percentile (seconds); 0 when empty."""
        with self._lock:
            if self.count == 0:
                return 0.0
            rank = max(1, math.ceil(self.count * p / 100.0))
            seen = 0
            for i, c in enumerate(self._counts):
                seen += c
                if seen >= rank:
                    return min(self.max_s, _MIN_S * _GROWTH ** i)
            return self.max_s
