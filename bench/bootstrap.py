"""The tail suite's statistics, pure: pooled percentiles of rounds, their ratios with a 95 %
round-level block-bootstrap interval, and a verdict against a target (bench/tail.py).

A run has R rounds; in each, every arm ran for a while on the same host, so a slow spell of the
host touches all arms of a round alike. A ratio of two arms (S over O, say) is the ratio of their
percentiles over all rounds pooled; its interval resamples whole rounds with replacement (the
same rounds for both arms: they are paired by round), 2,000 times, and takes the 2.5th and 97.5th
percentiles of the resampled ratios (Kunsch's block bootstrap with the round as the block:
requests within a round are not independent, rounds nearly are).

A verdict: *met* when the interval's upper bound is within the target (and the point within its
point target, if any); *missed* when the interval lies wholly above the target, or above the point
target; *unresolved* otherwise (the run cannot tell).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

ITERATIONS = 2000
CONFIDENCE = 0.95


def pooled(rounds: Sequence[np.ndarray], q: float) -> float | None:
    """The q-th percentile (0-100) of the samples of all ``rounds`` together (None: no sample)."""
    arrays = [r for r in rounds if len(r)]
    if not arrays:
        return None
    return float(np.percentile(np.concatenate(arrays), q, method="higher"))


@dataclasses.dataclass(frozen=True)
class Interval:
    point: float | None
    low: float | None
    high: float | None

    def fmt(self, digits: int = 2) -> str:
        if self.point is None:
            return "-"
        return f"{self.point:.{digits}f} ({self.low:.{digits}f}-{self.high:.{digits}f})"


def _bounds(values: np.ndarray) -> tuple[float, float]:
    alpha = (1.0 - CONFIDENCE) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1.0 - alpha))


def ratio_of_percentiles(a: Sequence[np.ndarray], b: Sequence[np.ndarray], q: float,
                         iterations: int | None = None, seed: int = 0) -> Interval:
    """p_q(a) / p_q(b) over the pooled rounds, with its block-bootstrap interval. ``a[i]`` and
    ``b[i]`` are round i's samples of the two arms."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} rounds of one arm against {len(b)} of the other")
    keep = [i for i in range(len(a)) if len(a[i]) and len(b[i])]
    if not keep:
        return Interval(None, None, None)
    a = [np.sort(a[i]) for i in keep]
    b = [np.sort(b[i]) for i in keep]
    point = pooled(a, q) / pooled(b, q)
    rng = np.random.default_rng(seed)
    n = len(keep)
    iterations = iterations or ITERATIONS
    ratios = np.empty(iterations)
    for j in range(iterations):
        pick = rng.integers(0, n, n)
        ratios[j] = pooled([a[i] for i in pick], q) / pooled([b[i] for i in pick], q)
    low, high = _bounds(ratios)
    return Interval(point, low, high)


def ratio_of_sums(num: Sequence[float], den: Sequence[float], scale: float = 1.0, iterations: int | None = None,
                  seed: int = 0) -> Interval:
    """(sum num / sum den) x scale over the rounds, with its block-bootstrap interval (extra unit
    reads over the reads needed, say, round by round)."""
    num_a, den_a = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if not len(num_a) or den_a.sum() <= 0:
        return Interval(None, None, None)
    point = scale * num_a.sum() / den_a.sum()
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(num_a), (iterations or ITERATIONS, len(num_a)))
    dens = den_a[picks].sum(axis=1)
    values = scale * num_a[picks].sum(axis=1) / np.where(dens > 0, dens, np.nan)
    low, high = _bounds(values[~np.isnan(values)])
    return Interval(point, low, high)


def scaled(interval: Interval, factor: float) -> Interval:
    """The interval divided by ``factor`` (extra reads over their floor)."""
    if interval.point is None or not factor:
        return Interval(None, None, None)
    return Interval(interval.point / factor, interval.low / factor, interval.high / factor)


def verdict(interval: Interval, bound: float, point_bound: float | None = None) -> str:
    """met / missed / unresolved (the module's docstring)."""
    if interval.point is None:
        return "unresolved"
    if interval.low > bound or (point_bound is not None and interval.low > point_bound):
        return "missed"
    if interval.high <= bound and (point_bound is None or interval.point <= point_bound):
        return "met"
    return "unresolved"
