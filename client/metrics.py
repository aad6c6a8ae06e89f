"""Client counters and per-DataNode latency histograms (``hedgefs.histogram``).

Each FileSystem keeps its own (``--stats`` prints them); every one of them also adds to the
process-wide Prometheus families in ``REGISTRY`` (made on first use), which a long-running
command (``bench read``, ``chaos``) serves with ``--metrics-port``.
"""

import dataclasses
import threading
import weakref

from hedgefs.histogram import LatencyHistogram

COUNTER_NAMES = (
    "reads",  # pread calls
    "unit_reads",  # unit-range reads sent to DataNodes, hedges and rebuilds included
    "unit_reads_needed",  # unit-range reads the reads themselves needed (unit_reads beyond these are extra)
    "unit_read_errors",  # of those, the ones that failed (error status, dead DataNode, checksum)
    "hedges",  # hedges started: a slow unit read rebuilt from others, or the next replica asked (hedgedReadOps)
    "hedges_overtaken",  # of those, hedges started under the threshold: later reads to other DataNodes overtook the read
    "hedges_cold",  # of those, hedges of a read that opened a new connection (no pooled one was free)
    "hedge_wins",  # hedges that answered before the read they hedged (HDFS's hedgedReadOpsWin)
    "hedges_refused_breaker",
    "hedges_refused_rate",
    "rebuilt_on_failure",  # unit reads rebuilt from other units because their read failed (error, checksum, dead node)
    "replica_failovers",  # replicated blocks read from the next replica because a replica's read failed
    "cancelled_reads",  # losing cell reads cancelled by the client
    "checksum_failures",  # unit reads whose bytes did not match the DataNode's CRC32C (rebuilt, reported)
    "avoided",  # unit reads rebuilt from other units instead of waiting on a slow or silent DataNode
    "probes",  # reads sent to an avoided DataNode anyway, to notice its recovery
    "token_refreshes",  # block tokens of an open file renewed (a secure cluster; they expire)
)


@dataclasses.dataclass
class ReadStats:
    counters: dict[str, int]
    breaker_trips: int
    per_datanode: dict[str, dict[str, float]]


_HELP = {
    "reads": "pread calls.",
    "unit_reads": "Unit-range reads sent to DataNodes, hedges and rebuilds included.",
    "unit_reads_needed": "Unit-range reads the reads themselves needed; unit_reads beyond these are extra.",
    "unit_read_errors": "Unit-range reads that failed (error status, dead DataNode, checksum).",
    "hedges": "Hedges started: a slow unit read rebuilt from other units, or (replicated files) the next replica "
              "asked, raced with the original (HDFS: hedgedReadOps).",
    "hedges_overtaken": "Of the hedges, those started under the threshold because later reads of the same size to "
                        "other DataNodes answered first (the read was overtaken).",
    "hedges_cold": "Of the hedges, those of a read that opened a new connection (no pooled connection was free).",
    "hedge_wins": "Hedges that answered before the read they hedged (HDFS: hedgedReadOpsWin).",
    "hedges_refused_breaker": "Hedges not started because the circuit breaker was open.",
    "hedges_refused_rate": "Hedges not started because of the extra-read budget or the per-second cap.",
    "rebuilt_on_failure": "Unit reads rebuilt from other units because the unit's own read failed.",
    "replica_failovers": "Replicated reads that went on to the next replica because a replica's read failed.",
    "cancelled_reads": "Losing reads cancelled by the client.",
    "checksum_failures": "Unit reads whose bytes failed the DataNode's CRC32C (rebuilt; the DataNode checks its copy).",
    "avoided": "Unit reads rebuilt from other units instead of waiting on a slow or silent DataNode.",
    "probes": "Reads sent to an avoided DataNode anyway, to notice its recovery.",
    "token_refreshes": "Block tokens of an open file renewed from the NameNode before (or as) they expired.",
}
_BREAKERS: "weakref.WeakSet" = weakref.WeakSet()


class _Families:
    """The process-wide Prometheus families. Made (and prometheus_client imported, ~20-50 ms)
    only when something asks for ``REGISTRY``: a command that serves --metrics-port does so
    before it reads anything; a plain ``hedgefs cat`` never does."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry()
        self.counters = {name: Counter(f"hedgefs_client_{name}", _HELP.get(name, name), registry=r)
                         for name in COUNTER_NAMES}
        self.unit_read = Histogram("hedgefs_client_unit_read_seconds",
                                   "Unit-range reads by DataNode, as the client timed them.", ["datanode"], registry=r,
                                   buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
        self.overdue = Counter("hedgefs_client_overdue_reads", "Reads that crossed the hedge threshold, by DataNode.",
                               ["datanode"], registry=r)
        self.avoided = Counter("hedgefs_client_avoided_reads", "Unit reads that went around a slow or silent DataNode, "
                               "by DataNode.", ["datanode"], registry=r)
        self.trips = Counter("hedgefs_client_breaker_trips", "Times a circuit breaker turned hedging off.", registry=r)
        Gauge("hedgefs_client_breaker_open", "Circuit breakers of this process now open (hedging off).",
              registry=r).set_function(lambda: sum(b.is_open for b in list(_BREAKERS)))


_PROM: _Families | None = None
_PROM_LOCK = threading.Lock()


def __getattr__(name: str):
    if name == "REGISTRY":
        global _PROM
        with _PROM_LOCK:
            if _PROM is None:
                _PROM = _Families()
        return _PROM.registry
    raise AttributeError(name)


def watch_breaker(breaker) -> None:
    """Count this breaker in ``hedgefs_client_breaker_open`` while it exists."""
    _BREAKERS.add(breaker)


def breaker_tripped() -> None:
    if _PROM is not None:
        _PROM.trips.inc()


class ClientMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters = dict.fromkeys(COUNTER_NAMES, 0)
        self._per_datanode: dict[str, LatencyHistogram] = {}
        self._overdue: dict[str, int] = {}
        self._avoided: dict[str, int] = {}
        self._probes: dict[str, int] = {}

    def incr(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n
        if _PROM is not None:
            _PROM.counters[name].inc(n)

    def counter(self, name: str) -> int:
        with self._lock:
            return self._counters[name]

    def record_unit_read(self, datanode: str, seconds: float) -> None:
        with self._lock:
            hist = self._per_datanode.setdefault(datanode, LatencyHistogram())
        hist.record(seconds)
        if _PROM is not None:
            _PROM.unit_read.labels(datanode).observe(seconds)

    def record_overdue(self, datanode: str) -> None:
        """A read on this DataNode crossed the hedge threshold (it may never complete)."""
        with self._lock:
            self._per_datanode.setdefault(datanode, LatencyHistogram())
            self._overdue[datanode] = self._overdue.get(datanode, 0) + 1
        if _PROM is not None:
            _PROM.overdue.labels(datanode).inc()

    def record_avoided(self, datanode: str) -> None:
        """A unit read of this DataNode was rebuilt from others instead (it is slow or silent)."""
        with self._lock:
            self._per_datanode.setdefault(datanode, LatencyHistogram())
            self._avoided[datanode] = self._avoided.get(datanode, 0) + 1
            self._counters["avoided"] += 1
        if _PROM is not None:
            _PROM.counters["avoided"].inc()
            _PROM.avoided.labels(datanode).inc()

    def record_probe(self, datanode: str) -> None:
        with self._lock:
            self._probes[datanode] = self._probes.get(datanode, 0) + 1
            self._counters["probes"] += 1
        if _PROM is not None:
            _PROM.counters["probes"].inc()

    def overdue_counts(self) -> dict[str, int]:
        """Reads per DataNode that crossed the hedge threshold so far."""
        with self._lock:
            return dict(self._overdue)

    def snapshot(self, breaker_trips: int = 0) -> ReadStats:
        with self._lock:
            counters = dict(self._counters)
            hists = dict(self._per_datanode)
            overdue = dict(self._overdue)
            avoided, probes = dict(self._avoided), dict(self._probes)
        per_dn = {
            dn: {"p50_ms": h.percentile(50) * 1000, "p99_ms": h.percentile(99) * 1000, "unit_reads": h.count,
                 "overdue": overdue.get(dn, 0), "avoided": avoided.get(dn, 0), "probes": probes.get(dn, 0)}
            for dn, h in sorted(hists.items(), key=lambda kv: natural_key(kv[0]))
        }
        return ReadStats(counters=counters, breaker_trips=breaker_trips, per_datanode=per_dn)


def natural_key(name: str) -> tuple:
    """dn2 before dn10."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else 0, name)
