"""Client counters and per-DataNode latency histograms (``hedgefs.histogram``)."""

import dataclasses
import threading

from hedgefs.histogram import LatencyHistogram

COUNTER_NAMES = (
    "reads",  # pread calls
    "cell_reads",  # unit-range reads sent to DataNodes, hedges and rebuilds included
    "cell_read_errors",  # of those, the ones that failed (error status, dead DataNode, checksum)
    "hedges",  # hedges started (a slow cell rebuilt from other units, raced with the original)
    "hedge_wins",  # hedges whose rebuild finished before the original read
    "hedges_refused_breaker",
    "hedges_refused_rate",
    "decodes_on_failure",  # cells rebuilt because their read failed (error, checksum, dead node)
    "cancelled_reads",  # losing cell reads cancelled by the client
)


@dataclasses.dataclass
class ReadStats:
    counters: dict[str, int]
    breaker_trips: int
    per_datanode: dict[str, dict[str, float]]


class ClientMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters = dict.fromkeys(COUNTER_NAMES, 0)
        self._per_datanode: dict[str, LatencyHistogram] = {}
        self._overdue: dict[str, int] = {}

    def incr(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n

    def record_cell_read(self, datanode: str, seconds: float) -> None:
        with self._lock:
            hist = self._per_datanode.setdefault(datanode, LatencyHistogram())
        hist.record(seconds)

    def record_overdue(self, datanode: str) -> None:
        """A read on this DataNode crossed the hedge threshold (it may never complete)."""
        with self._lock:
            self._per_datanode.setdefault(datanode, LatencyHistogram())
            self._overdue[datanode] = self._overdue.get(datanode, 0) + 1

    def datanode_p50(self, datanode: str) -> float:
        hist = self._per_datanode.get(datanode)
        return hist.percentile(50) if hist else 0.0

    def snapshot(self, breaker_trips: int = 0) -> ReadStats:
        with self._lock:
            counters = dict(self._counters)
            hists = dict(self._per_datanode)
            overdue = dict(self._overdue)
        per_dn = {
            dn: {"p50_ms": h.percentile(50) * 1000, "p99_ms": h.percentile(99) * 1000, "cell_reads": h.count,
                 "overdue": overdue.get(dn, 0)}
            for dn, h in sorted(hists.items(), key=lambda kv: natural_key(kv[0]))
        }
        return ReadStats(counters=counters, breaker_trips=breaker_trips, per_datanode=per_dn)


def natural_key(name: str) -> tuple:
    """dn2 before dn10."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else 0, name)
