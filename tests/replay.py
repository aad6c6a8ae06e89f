"""The replay tier's harness: recorded DataNode service times, replayed through the real reader.

A trace (tests/replay/traces/, recorded by ``python -m hedgefs.bench.traces``) holds what real
DataNodes did for a client with hedging off: the file's placement, the reads the client made
(seconds into the trace, group, unit) and every unit read's service time by DataNode. A replay
issues the same reads at the same times through the real ``ReadPolicy``, ``RangeFetcher``,
``LatencyModel`` and breaker (read_sim's ``Client``) on the virtual clock, over a real encoding
(read_sim's ``Stripe``; a read is one whole 4 KiB cell: the size class of the recorded 64 KiB reads),
and answers a unit read of DataNode d sent at t with the service time of d's recorded read sent
nearest to t: the DataNodes behave as they did, whatever the policy now asks of them.

A replay starts with ``warm_s`` of the healthy trace of the same policy (a running client: its
connections open, its model learned), then the trace itself; what a replay reports is about the
trace's part only. Connections are modelled as a pool per DataNode: a read finding none idle
opens one (``connecting``: the latency model judges it as a new connection).

Deterministic: the same trace, the same policy, the same outcome, on every run.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import functools
import gzip
import json
import pathlib
import re

from read_sim import Client, ScriptedDataNodes, Stripe, run

from hedgefs.client import latency, overtaking
from hedgefs.client.locations import GroupLocation, UnitLocation
from hedgefs.ec.policy import parse_policy

TRACES = pathlib.Path(__file__).resolve().parent / "replay" / "traces"
WARM_S = 1.0
# The replayed cells: 4 KiB, the latency model's smallest size class as the recorded 64 KiB reads
# (it judges reads by size class), at a sixteenth of the bytes to copy and check.
CELL_KIB = 4
QUIET = "rs-6-3-1024k-healthy"   # the quietest recorded host: ``quieted``'s DataNodes
FAULT_S = 0.4                    # ... but the faulty one's reads this slow, which are its fault's


@dataclasses.dataclass(frozen=True)
class Trace:
    name: str
    policy: str
    scenario: str
    victim: str | None
    seconds: float
    groups: tuple[dict, ...]             # per group: unit index -> DataNode
    reads: tuple[tuple[float, int, int], ...]   # (seconds in, group, unit)
    service: dict                        # DataNode -> (sent times, service seconds), sorted by time

    def latency(self, datanode: str, t: float) -> float:
        rows = self.service.get(datanode)
        if not rows:   # never read in the trace: as the median DataNode then
            rows = self._pooled
        times, took = rows
        i = bisect.bisect_left(times, t)
        if i == len(times) or (i > 0 and t - times[i - 1] <= times[i] - t):
            i -= 1
        return took[i]

    @functools.cached_property
    def _pooled(self):
        rows = sorted(r for times, took in self.service.values() for r in zip(times, took))
        return [r[0] for r in rows], [r[1] for r in rows]

    def percentile(self, q: float) -> float:
        """The q-th percentile of every recorded unit read's service time."""
        took = sorted(self._pooled[1])
        return took[min(len(took) - 1, int(len(took) * q / 100))]

    def share(self, datanode: str) -> float:
        """The share of the trace's reads whose cell is on ``datanode``."""
        on = sum(1 for _, g, u in self.reads if self.groups[g].get(u) == datanode)
        return on / len(self.reads) if self.reads else 0.0


@functools.lru_cache(maxsize=None)
def load(name: str) -> Trace:
    """A recorded trace; or ``<policy>-stall<N>ms``: the healthy one with every DataNode stopped
    for N ms at 1 s and at 3 s (``stretched``); or ``<policy>-quiet-<scenario>``: the trace on a
    quieter host (``quieted``)."""
    if (m := re.fullmatch(r"(.+)-stall(\d+)ms", name)) is not None:
        return stretched(load(f"{m[1]}-healthy"), int(m[2]) / 1000.0, name)
    if (m := re.fullmatch(r"(.+)-quiet-(.+)", name)) is not None:
        return quieted(load(f"{m[1]}-{m[2]}"), load(QUIET), name)
    with gzip.open(TRACES / f"{name}.json.gz", "rt") as f:
        doc = json.load(f)
    service = {dn: ([r[0] for r in rows], [r[1] for r in rows]) for dn, rows in doc["service"].items()}
    return Trace(name, doc["policy"], doc["scenario"], doc["victim"], doc["seconds"],
                 tuple({int(i): dn for i, dn in g.items()} for g in doc["groups"]),
                 tuple(tuple(r) for r in doc["reads"]), service)


def stretched(healthy: Trace, seconds: float, name: str, at: tuple[float, ...] = (1.0, 3.0)) -> Trace:
    """A host-wide stall longer than the recorded one (150 ms): every read sent while every
    DataNode is stopped waits for the stall's end, then takes what it took."""
    def stall(t: float, took: float) -> float:
        return took + sum(a + seconds - t for a in at if a <= t < a + seconds)
    service = {dn: (times, [stall(t, s) for t, s in zip(times, took)]) for dn, (times, took) in healthy.service.items()}
    return dataclasses.replace(healthy, name=name, scenario=name.rsplit("-", 1)[1], service=service)


def quieted(trace: Trace, quiet: Trace, name: str) -> Trace:
    """``trace`` on a quieter host: its reads and placement as recorded, every DataNode answering
    as the same-named one of ``quiet`` (QUIET: unit reads' p99 10 ms, against the LRC traces'
    74 ms, whose host stalls set their p99 for every arm alike; the quiet host of bench tail's
    full run, H0 p99 4.4-4.9 ms, is closer to this one), but the faulty DataNode's faulty reads
    (those it took FAULT_S or more for: +500 ms, frozen, the 2 s stragglers), as recorded.
    (A DataNode the quiet trace never read answers as its median DataNode did: ``Trace.latency``.)"""
    def victim(times: list, took: list) -> tuple:
        return times, [t if t >= FAULT_S else quiet.latency(trace.victim, at) for at, t in zip(times, took)]

    def as_quiet(dn: str, times: list) -> tuple:
        return quiet.service[dn] if dn in quiet.service else (times, [quiet.latency(dn, at) for at in times])
    service = {dn: victim(*rows) if dn == trace.victim else as_quiet(dn, rows[0]) for dn, rows in trace.service.items()}
    return dataclasses.replace(trace, name=name, scenario=name.split("-quiet-", 1)[1], service=service)


class TracedDataNodes(ScriptedDataNodes):
    """DataNodes answering as the trace's did: the warm-up trace first, then the trace."""

    def __init__(self, stripe: Stripe, trace: Trace, warm: Trace | None, warm_s: float, idle_s: float = 0.0):
        # Unpoisoned: buffers given back are not refilled (256 KiB each, twice a read); the sim tier
        # (tests/sim) checks the buffers' lifetimes, the replay the policy; every byte is checked.
        super().__init__(stripe, poison=False)
        self.trace, self.warm, self.warm_s, self.idle_s = trace, warm, warm_s, idle_s
        self.t0 = 0.0
        self.pool: dict[str, int] = {}
        self.busy: dict[str, int] = {}
        self.cold_reads = 0

    def service(self, datanode: str, now: float) -> float:
        t = now - self.t0
        if self.warm is not None and t < self.warm_s:
            return self.warm.latency(datanode, t)
        return self.trace.latency(datanode, max(0.0, t - self.warm_s - self.idle_s))

    async def read(self, address, group_id, index, offset, length, *, generation, token=b"", peer="", phases=None):
        loop = asyncio.get_running_loop()
        self.asked.append(index)
        took = self.service(peer, loop.time())
        busy = self.busy.get(peer, 0)
        if busy >= self.pool.get(peer, 0):   # no idle connection: a new one
            self.pool[peer] = busy + 1
            self.cold_reads += 1
            if phases is not None and phases.on_connect is not None:
                phases.on_connect()
        self.busy[peer] = busy + 1
        try:
            await asyncio.sleep(took)
        except asyncio.CancelledError:
            self.cancelled.append(index)
            self.pool[peer] -= 1   # a cancelled read closes its connection
            raise
        finally:
            self.busy[peer] -= 1
        buf = self.buffers.take(length)
        view = memoryview(buf)[:length]
        view[:] = self.stripe.blocks[index][offset:offset + length]
        return view


@dataclasses.dataclass
class Outcome:
    trace: Trace
    latencies: list[float]          # of the trace's reads, from their scheduled start
    victim_latencies: list[float]   # ... of those whose cell is on the faulty DataNode
    wrong: int                      # reads whose bytes were not the stored ones
    errors: int
    counters: dict                  # the client's counters over the trace's part
    slow_marks: list                # (seconds into the trace, DataNode, "slow" | "recovered")
    trips: int
    cold_reads: int

    @property
    def extra_pct(self) -> float:
        needed = self.counters["unit_reads_needed"]
        return 100.0 * (self.counters["unit_reads"] - needed) / needed if needed else 0.0

    def pct(self, q: float, victim: bool = False) -> float:
        values = sorted(self.victim_latencies if victim else self.latencies)
        return values[min(len(values) - 1, int(len(values) * q / 100))] if values else 0.0

    @property
    def max_s(self) -> float:
        return max(self.latencies, default=0.0)

    def marked(self, state: str = "slow") -> set[str]:
        return {dn for _, dn, s in self.slow_marks if s == state}


def replicated(groups: tuple[dict, ...], copies: int = 3) -> list[dict]:
    """The trace's placement as REPLICATE-``copies`` blocks: per recorded (group, data unit), a
    block whose first replica is that unit's DataNode (so each DataNode is first for the share of
    reads it served: the faulty one too) and whose others are the DataNodes of the group's next
    units (distinct: a group's units are on distinct DataNodes). Block ``g * units + u`` serves
    the recorded read (g, u)."""
    out = []
    for units in groups:
        ring = [units[i] for i in sorted(units)]
        for u in range(len(ring)):
            out.append({c: ring[(u + c) % len(ring)] for c in range(copies)})
    return out


def replay(name: str, warm: str | None = "healthy", warm_s: float = WARM_S, oracle: bool = False,
           copies: int | None = None, idle_s: float = 0.0, **hedge) -> Outcome:
    """Replay trace ``name`` (``<policy>-<scenario>``) after ``warm_s`` of ``<policy>-<warm>``;
    ``oracle``: the bench's arm O, the faulty DataNode left out of every read of the trace's part
    from its first try (its units rebuilt the cheapest way). ``copies``: the same DataNodes'
    service times under REPLICATE-``copies`` (``replicated``: a read asks one replica, another
    replica is its hedge). ``idle_s``: the client reads nothing for that long between the warm-up
    and the trace (bench tail's hedging client between its arms: its model and budget as it left
    them, its connections idle)."""
    trace = load(name)
    prefix = name[:len(name) - len(trace.scenario) - 1]
    warm_trace = load(f"{prefix}-{warm}") if warm else None
    if copies:
        stripe = Stripe(f"REPLICATE-{copies}", length=CELL_KIB * 1024)
        cell = stripe.length
        layout = replicated(trace.groups, copies)
        k_rec = len(layout) // len(trace.groups)
    else:
        p = parse_policy(trace.policy)
        stripe = Stripe(p.name.rsplit("-", 1)[0] + f"-{CELL_KIB}k")
        cell = stripe.policy.cell_size
        layout, k_rec = list(trace.groups), 0
    dns = TracedDataNodes(stripe, trace, warm_trace, warm_s if warm_trace else 0.0, idle_s)
    marks: list = []
    client = Client(dns, on_change=lambda dn, state: marks.append((asyncio.get_running_loop().time(), dn, state)),
                    **hedge)
    groups = [GroupLocation(g + 1, stripe.length, {i: UnitLocation(i, dn, f"ctl-{dn}", f"data-{dn}")
                                                   for i, dn in units.items()}, 1)
              for g, units in enumerate(layout)]
    if copies:
        # a recorded read (g, u) reads block g * k + u whole (its one cell)
        def place(g: int, u: int) -> tuple[int, int]:
            return (g % len(trace.groups)) * k_rec + u % k_rec, 0
        expected = {0: stripe.data}
    else:
        def place(g: int, u: int) -> tuple[int, int]:
            return g % len(groups), u
        expected = {u: stripe.data[u * cell:(u + 1) * cell] for u in range(stripe.policy.k)}
    lat, victim_lat, wrong, errors, at_start, began = [], [], [0], [0], {}, [0.0]
    offset = (warm_s if warm_trace else 0.0) + idle_s
    avoid = frozenset({trace.victim}) if oracle and trace.victim else frozenset()

    async def one(t0: float, t: float, g: int, u: int, measured: bool):
        victim_cell = bool(trace.victim) and trace.groups[g % len(trace.groups)].get(u) == trace.victim
        g, u = place(g, u)
        try:
            got = await client.pread(u * cell, cell, group=groups[g], exclude=avoid if measured else frozenset())
        except Exception:   # noqa: BLE001 - counted: a read that fails is an outcome
            errors[0] += measured
            return
        if measured:
            took = asyncio.get_running_loop().time() - (t0 + t)
            lat.append(took)
            if victim_cell:
                victim_lat.append(took)
            wrong[0] += got != expected[u]

    async def go():
        loop = asyncio.get_running_loop()
        t0 = dns.t0 = loop.time()
        schedule = []
        if warm_trace:
            schedule += [(t, g, u, False) for t, g, u in warm_trace.reads if t < warm_s]
        schedule += [(offset + t, g, u, True) for t, g, u in trace.reads]

        def boundary():
            at_start.update(client.metrics.snapshot().counters)
        began[0] = t0 + offset
        loop.call_at(t0 + offset, boundary)
        tasks = []
        for t, g, u, measured in sorted(schedule):
            delay = t0 + t - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(t0, t, g, u, measured)))
        await asyncio.gather(*tasks)
        return loop.time() - t0

    run(go)
    end = client.metrics.snapshot().counters
    counters = {k: end[k] - at_start.get(k, 0) for k in end}
    slow_marks = [(round(t - began[0], 4), dn, state) for t, dn, state in marks if t >= began[0]]
    return Outcome(trace, lat, victim_lat, wrong[0], errors[0], counters, slow_marks, client.breaker.trips,
                   dns.cold_reads)


# ---------------------------------------------------------------------------- the model's rules, one by one

def _never(*args, **kwargs):
    return False


RULES = {
    # a DataNode whose reads are mostly twice their threshold, and 4 x its peers', is read around
    "slow": [(latency.LatencyModel, "_judge", lambda self, node, name, now: None)],
    # a new connection's read is judged by the plain threshold once its DataNode answers nothing (suspect)
    "suspect": [(latency.LatencyModel, "_cold",
                 staticmethod(lambda entry, node, now, threshold, nbytes:
                              latency.cold_threshold(threshold, nbytes) if entry is not None and entry.cold else None))],
    # a read under its threshold that later reads overtook is hedged now
    "overtaken": [(latency.LatencyModel, "overtaken", _never)],
    # a read past its threshold whose peers are late too (a host stall) waits
    "stalled": [(overtaking.ReadLog, "stalled", _never)],
    # a DataNode with reads in flight that answers nothing is never waited on, breaker or not
    "silent": [(latency.LatencyModel, "is_silent", _never)],
    # a slow read whose peers were as late is no evidence against its DataNode
    "excused": [(overtaking.ReadLog, "excused", _never)],
}


@contextlib.contextmanager
def without(rule: str):
    """The latency model with ``rule`` never applying (for the tier's test that every rule
    earns its place)."""
    saved = []
    try:
        for owner, attribute, value in RULES[rule]:
            saved.append((owner, attribute, owner.__dict__[attribute]))
            setattr(owner, attribute, value)
        yield
    finally:
        for owner, attribute, value in saved:
            setattr(owner, attribute, value)
