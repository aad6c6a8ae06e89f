"""The pure parts of a copy job: names, segments, and when to hedge. No I/O.

A job is named by its arguments (``job_id``), so running it again finds its own staging
directory. Each source file is cut into segments of whole destination block groups (Uber's
chunks of blocks), so the parts can be concatenated at the destination without a partial group
in the middle. A segment that runs longer than the hedge delay gets a second copy (DoltHub),
within a budget of a per cent of the segments.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import math


def job_id(sources: list[str], destination: str, mode: str = "") -> str:
    """The same arguments name the same job (and staging directory). Of the options only the mode
    counts (-update / -overwrite decide where a directory goes); workers, hedging etc. do not."""
    text = "\0".join([*sources, "->", destination, mode])
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def key(*parts: object) -> str:
    """A short, path-safe name for a target path or a source file's identity."""
    text = "\0".join(str(p) for p in parts)
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclasses.dataclass(frozen=True)
class Segment:
    seq: int
    offset: int
    length: int


def segments(length: int, segment_size: int) -> list[Segment]:
    """Cut ``length`` bytes into segments of ``segment_size`` (the last one shorter); a 0-byte file
    is one 0-byte segment, so it is copied (and committed) like any other."""
    if segment_size <= 0:
        raise ValueError(f"segment size must be > 0 (got {segment_size})")
    if length == 0:
        return [Segment(0, 0, 0)]
    return [Segment(i, off, min(segment_size, length - off)) for i, off in enumerate(range(0, length, segment_size))]


def hedge_budget(max_hedged_percent: float, segments_planned: int) -> int:
    """How many segments may be hedged: at most ``max_hedged_percent`` of those planned so far."""
    return math.floor(max_hedged_percent * segments_planned / 100.0 + 1e-9)


class HedgeDelay:
    """When to hedge a segment copy: a fixed delay, or ``auto``.

    ``auto`` is the ideal the DoltHub post names: a high quantile of the copy times seen so far in
    this job, ``FACTOR`` x their p95, once ``MIN_SAMPLES`` segments of comparable size (at least
    half this one's bytes) have finished; until then no hedge. Comparable sizes only, so a job of
    many small files does not make its few large segments look late.
    """

    QUANTILE = 0.95
    FACTOR = 1.5
    MIN_SAMPLES = 5

    def __init__(self, fixed_s: float | None):
        self.fixed_s = fixed_s
        self._samples: list[tuple[int, float]] = []   # (bytes, seconds), sorted by bytes

    def record(self, nbytes: int, seconds: float) -> None:
        bisect.insort(self._samples, (nbytes, seconds))

    def delay_s(self, nbytes: int) -> float | None:
        """Seconds after which a segment of ``nbytes`` is late; None = do not hedge it (yet)."""
        if self.fixed_s is not None:
            return self.fixed_s
        start = bisect.bisect_left(self._samples, (nbytes // 2, -1.0))
        times = sorted(t for _, t in self._samples[start:])
        if len(times) < self.MIN_SAMPLES:
            return None
        rank = min(len(times) - 1, math.ceil(self.QUANTILE * len(times)) - 1)
        return self.FACTOR * times[rank]
