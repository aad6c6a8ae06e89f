"""A histogram of latencies where old samples fade: the latency model's memory (latency.py)."""

from __future__ import annotations

import array
import math


class DecayedHistogram:
    """Counts in log-spaced buckets where a sample's weight halves every ``half_life_s``.

    Forward decay: a sample recorded at t weighs 2^((t - landmark) / half_life); the landmark
    moves (and every count is rescaled) when weights grow large, so recording is O(1) and a
    quantile O(buckets). Decay scales every count alike, so quantiles change only when samples
    arrive. Not locked: its owner locks."""

    __slots__ = ("_lo", "_log_growth", "_counts", "_half_life", "_landmark")

    def __init__(self, lo: float, hi: float, growth: float, half_life_s: float, now: float):
        self._lo = lo
        self._log_growth = math.log(growth)
        self._counts = array.array("d", bytes(8 * (int(math.log(hi / lo) / self._log_growth) + 2)))
        self._half_life = half_life_s
        self._landmark = now

    def record(self, value: float, now: float) -> None:
        age = (now - self._landmark) / self._half_life
        if age > 40:   # 2^40: rescale before the floats lose precision
            factor = 2.0 ** -age
            for i, c in enumerate(self._counts):
                self._counts[i] = c * factor
            self._landmark, age = now, 0.0
        if value <= self._lo:
            index = 0
        else:
            index = min(len(self._counts) - 1, 1 + int(math.log(value / self._lo) / self._log_growth))
        self._counts[index] += 2.0 ** age

    def weight(self, now: float) -> float:
        """The decayed number of samples: what is remembered now."""
        return sum(self._counts) * 2.0 ** (-(now - self._landmark) / self._half_life)

    def quantile(self, q: float) -> float:
        """Upper bound of the bucket holding quantile q (0..1); 0 when empty."""
        total = sum(self._counts)
        if total <= 0:
            return 0.0
        rank, seen = total * q, 0.0
        for i, c in enumerate(self._counts):
            seen += c
            if seen >= rank:
                return self._lo * math.exp(self._log_growth * i)
        return self._lo * math.exp(self._log_growth * (len(self._counts) - 1))
