"""What a DataNode measures about itself: its /metrics, and the read latency its heartbeats carry.

``MeasuredStore`` wraps the store the data handlers read and write through (the fault knobs
included, so an injected delay is a slow read here too), with the store's own interface, like
``FaultyStore``: a handler neither times nor counts anything itself, whichever server it is in.
A read is timed from the request to its last byte handed to the transport, or to the moment it
failed or its client cancelled it (a hedge loser on a slow DataNode still counts, as slow).

``ReadWindows`` keeps those latencies in 10-second slots of wall-clock time: the last 60 s for
the NameNode's DataNode table, and whole minutes for its heat map. Percentiles come from
``hedgefs.histogram``, so memory stays fixed however busy the DataNode is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from hedgefs.datanode.faults import ReadCancelled, ReadPlan
from hedgefs.histogram import LatencyHistogram

SLOT_S = 10
_SLOTS_KEPT = 13          # two whole minutes and the slot being filled
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ReadWindows:
    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self._lock = threading.Lock()
        self._slots: dict[int, LatencyHistogram] = {}

    def record(self, seconds: float) -> None:
        slot = int(self.clock() // SLOT_S)
        with self._lock:
            hist = self._slots.get(slot)
            if hist is None:
                hist = self._slots[slot] = LatencyHistogram()
                for old in [s for s in self._slots if s <= slot - _SLOTS_KEPT]:
                    del self._slots[old]
        hist.record(seconds)

    def _merged(self, keep: Callable[[int], bool]) -> LatencyHistogram:
        out = LatencyHistogram()
        with self._lock:
            chosen = [h for s, h in self._slots.items() if keep(s)]
        for hist in chosen:
            out.merge(hist)
        return out

    def recent(self) -> tuple[int, float, float]:
        """(reads, p50 s, p99 s) of the reads that ended in the last 60 s (six slots)."""
        now = int(self.clock() // SLOT_S)
        hist = self._merged(lambda s: s > now - 60 // SLOT_S)
        return hist.count, hist.percentile(50), hist.percentile(99)

    def minutes(self) -> list[tuple[int, int, float, float]]:
        """(unix minute, reads, p50 s, p99 s) for the previous and the current minute, with reads."""
        minute = int(self.clock() // 60)
        out = []
        for m in (minute - 1, minute):
            hist = self._merged(lambda s, m=m: s * SLOT_S // 60 == m)
            if hist.count:
                out.append((m, hist.count, hist.percentile(50), hist.percentile(99)))
        return out


class DataNodeMetrics:
    """The DataNode's Prometheus registry. Every series carries ``datanode`` (the id, escaped
    by prometheus_client however odd it is), so one Grafana query covers every DataNode."""

    def __init__(self, datanode_id: str, clock: Callable[[], float] = time.time):
        self.datanode_id = datanode_id
        self.registry = CollectorRegistry()
        self.windows = ReadWindows(clock)
        labels = ["datanode"]
        r = self.registry
        self.read_seconds = Histogram("hedgefs_datanode_read_seconds", "Reads served, from request to last byte "
                                      "(or error, or cancellation).", labels, buckets=LATENCY_BUCKETS_S, registry=r)
        self.reads = Counter("hedgefs_datanode_reads", "Reads served, by how they ended.", [*labels, "outcome"],
                             registry=r)
        self.read_bytes = Counter("hedgefs_datanode_read_bytes", "Bytes sent by reads.", labels, registry=r)
        self.write_seconds = Histogram("hedgefs_datanode_write_seconds", "Unit writes, from open to commit or abort.",
                                       labels, buckets=LATENCY_BUCKETS_S, registry=r)
        self.writes = Counter("hedgefs_datanode_writes", "Unit writes, by how they ended.", [*labels, "outcome"],
                              registry=r)
        self.write_bytes = Counter("hedgefs_datanode_write_bytes", "Bytes received by unit writes.", labels,
                                   registry=r)
        self.streams = Gauge("hedgefs_datanode_active_streams", "Reads and writes in progress.", [*labels, "kind"],
                             registry=r)
        self.commands_refused = Counter(
            "hedgefs_datanode_commands_refused", "NameNode commands (delete, repair) refused: from a NameNode "
            "that is not the active (not_active), of a deposed active (stale_epoch), of a NameNode without HA "
            "once an HA epoch was seen (no_ha). See datanode/epochs.py.", [*labels, "reason"], registry=r)
        for reason in ("not_active", "stale_epoch", "no_ha"):
            self.commands_refused.labels(datanode_id, reason)
        for outcome in ("ok", "error", "cancelled"):
            self.reads.labels(datanode_id, outcome)
        for outcome in ("ok", "error", "aborted"):
            self.writes.labels(datanode_id, outcome)
        for kind in ("read", "write"):
            self.streams.labels(datanode_id, kind)

    def add_state(self, collect: Callable[[], dict[str, float | dict[str, float]]]) -> None:
        """Gauges read from the DataNode at scrape time: ``collect()`` returns name -> value, or
        name -> {label value: value} for the ones with a second label (``knob``)."""
        registry, datanode_id = self.registry, self.datanode_id

        class State:
            def collect(self):
                for name, value in collect().items():
                    help_text = STATE_HELP.get(name, name)
                    if isinstance(value, dict):
                        family = GaugeMetricFamily(f"hedgefs_datanode_{name}", help_text, labels=["datanode", "knob"])
                        for knob, v in sorted(value.items()):
                            family.add_metric([datanode_id, knob], v)
                    else:
                        kind = CounterMetricFamily if name in STATE_COUNTERS else GaugeMetricFamily
                        family = kind(f"hedgefs_datanode_{name}", help_text, labels=["datanode"])   # counters: _total
                        family.add_metric([datanode_id], value)
                    yield family

        registry.register(State())

    def commands_refused_by(self, reason: str, n: int) -> None:
        self.commands_refused.labels(self.datanode_id, reason).inc(n)

    def read_done(self, seconds: float, nbytes: int, outcome: str) -> None:
        self.read_seconds.labels(self.datanode_id).observe(seconds)
        self.reads.labels(self.datanode_id, outcome).inc()
        self.read_bytes.labels(self.datanode_id).inc(nbytes)
        self.windows.record(seconds)

    def write_done(self, seconds: float, nbytes: int, outcome: str) -> None:
        self.write_seconds.labels(self.datanode_id).observe(seconds)
        self.writes.labels(self.datanode_id, outcome).inc()
        self.write_bytes.labels(self.datanode_id).inc(nbytes)


# Of the state values, the ones that only grow (until a restart): Prometheus counters, so that
# rate() and increase() see a restart's reset for what it is.
STATE_COUNTERS = {"repairs_done", "repairs_failed", "scrub_passes", "scrub_bytes_verified", "scrub_bad_units"}

STATE_HELP = {
    "repairs_active": "Repairs queued or running here.",
    "repairs_done": "Units rebuilt here since start.",
    "repairs_failed": "Repairs that failed here since start.",
    "fault": "Fault knobs in effect (0 = off); see hedgefs fault.",
    "namenode_reachable": "1 if the last heartbeat reached the NameNode (one of them, in an HA cluster).",
    "namenode_epoch": "The highest epoch of an active NameNode seen (HA; 0 = none): older ones' commands are refused.",
    "scrub_enabled": "1 if the scrubber runs (--scrub-interval-s > 0).",
    "scrub_passes": "Scrub passes finished since start.",
    "scrub_pass_units": "Units in the current (or last) scrub pass.",
    "scrub_pass_units_done": "Units of the current (or last) scrub pass verified so far.",
    "scrub_bytes_verified": "Bytes the scrubber has read and verified since start.",
    "scrub_bad_units": "Units the scrubber found damaged (and reported) since start.",
    "scrub_last_pass_seconds": "How long the last finished scrub pass took.",
}


class MeasuredStore:
    """A store (usually a FaultyStore) whose reads and writes are timed and counted."""

    def __init__(self, store, metrics: DataNodeMetrics, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.faults = store.faults
        self.metrics = metrics
        self.clock = clock

    def open_read(self, group_id: int, index: int, offset: int, length: int, guard, *, generation: int) -> ReadPlan:
        """``FaultyStore.open_read``, timed from the request (stalls and delays included) to the
        plan's ``done(sent, outcome)``, which the data server calls when the last byte is sent,
        the read failed or its client went away."""
        start = self.clock()
        streams = self.metrics.streams.labels(self.metrics.datanode_id, "read")
        streams.inc()
        try:
            plan = self.store.open_read(group_id, index, offset, length, guard, generation=generation)
        except BaseException as err:
            streams.dec()
            self.metrics.read_done(self.clock() - start, 0, _outcome(err))
            raise

        def done(sent: int, outcome: str) -> None:
            streams.dec()
            self.metrics.read_done(self.clock() - start, sent, outcome)

        plan.done = done
        return plan

    def chunk_checksums(self, group_id: int, index: int, *, generation: int):
        return self.store.chunk_checksums(group_id, index, generation=generation)   # metadata: not a read

    def open_writer(self, group_id: int, index: int, expected_length: int | None, *, generation: int,
                    once: bool = False):
        return _MeasuredWriter(self.store.open_writer(group_id, index, expected_length, generation=generation,
                                                      once=once), self)

    def append(self, group_id: int, index: int, offset: int, data, *, generation: int) -> int:
        """``FaultyStore.append``, timed and counted as a write of its bytes."""
        start = self.clock()
        try:
            length = self.store.append(group_id, index, offset, data, generation=generation)
        except BaseException:
            self.metrics.write_done(self.clock() - start, 0, "error")
            raise
        self.metrics.write_done(self.clock() - start, len(data), "ok")
        return length


class _MeasuredWriter:
    def __init__(self, writer, owner: MeasuredStore):
        self._writer, self._owner = writer, owner
        self._start = owner.clock()
        self._bytes = 0
        self._done = False
        self._streams = owner.metrics.streams.labels(owner.metrics.datanode_id, "write")
        self._streams.inc()

    def write(self, data) -> None:
        try:
            self._writer.write(data)
        except BaseException:
            self._end("error")   # a full disk is an error, not a client's cancel
            raise
        self._bytes += len(data)

    def commit(self, expected_length: int | None = None) -> int:
        try:
            length = self._writer.commit(expected_length)
        except BaseException:
            self._end("error")
            raise
        self._end("ok")
        return length

    def abort(self) -> None:
        self._writer.abort()
        self._end("aborted")

    def _end(self, outcome: str) -> None:
        if not self._done:
            self._done = True
            self._streams.dec()
            self._owner.metrics.write_done(self._owner.clock() - self._start, self._bytes, outcome)


def _outcome(err: BaseException) -> str:
    return "cancelled" if isinstance(err, ReadCancelled) else "error"
