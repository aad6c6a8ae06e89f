"""What the client knows about each DataNode's speed: the object the read path asks (STYLE habit 17).

    model = LatencyModel()
    token = model.started("dn3", nbytes)         # a unit read goes out
    model.connecting(token)                      # ... on a new connection (judged as a new client would)
    model.responding(token)                      # ... its DataNode's response header arrived (a sign of life)
    model.finished(token, nbytes)                # ... it answered with data (an error: failed)
    model.abandoned(token, nbytes)               # ... or we cancelled it (a hedge won)
    model.slow_evidence(token, nbytes)           # ... still running at twice its threshold
    model.overtaken(token, mates)                # ... later reads to other DataNodes answered first?
    model.stuck(token)                           # ... it was: so are its DataNode's other reads in flight
    model.overtaken_look_at(token, mates)        # ... when to ask again
    model.hedge_later(token, nbytes)             # ... past its threshold: a new connection's, or stalled: wait
    model.seed(views)                            # a new client: the DataNodes' own figures (cluster_view.py)
    ticket = model.book_probe("dn3")             # one read to a slow DataNode, to notice its recovery
    ticket.done()                                # ... it ended (None: no probe due)

    model.threshold(nbytes)   # seconds: hedge a read of this size still running after this
    model.is_slow("dn3")      # far slower than its peers lately: read around it
    model.is_silent("dn3")    # reads in flight, nothing answered for far longer than peers take
    model.is_gone("dn3")      # ... no reads begun (no response header) for seconds: a read only it could finish fails
    model.last_trouble        # the last time a DataNode turned slow or silent

The questions (``threshold``, ``is_slow``, ``is_silent``, ``overtaken``, ``score``, ...) change
nothing the model knows; only the recording calls above do.

Per DataNode and size class (up to 64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB, larger) a decayed
latency histogram (``decayed.py``, 5 s half-life). *Healthy* for a size is the median over
DataNodes of their p99: slow minorities cannot move it, a uniformly slow host moves it for all.
``threshold`` = 1.5 x that, within a 10 ms floor and a ceiling (250 ms, HubSpot's, plus the
transfer at 32 MiB/s); a new client (fewer than 3 DataNodes known for the size): the ceiling.
The why of each rule, with the runs that led to it, is in docs/design.md ("latency model").

- *slow*: most of its recent reads (0.25 s, or its last 6; at least 4) took twice their size's
  threshold, *and* its recent median is 4 x the median DataNode's: a host slow all over, or a
  client stall, marks nobody. A read on a new connection (``connecting``: the DataNode sets each
  up, 3-4 x a pooled read, tens of ms on a loaded host) is judged against ``cold_threshold``
  (4 x the threshold, >= 100 ms, <= the ceiling; not while its DataNode, reads in flight, has
  answered nothing for that long, or since a threshold before the read went out: *suspect*):
  late first reads are no evidence, a frozen one's are, at twice that. A read still running at
  twice its yardstick counts then (``slow_evidence``); a cancelled one only once that late; a
  slow read whose peers beside it were as late is ``excused`` (overtaking.py). It stays slow
  until its own fast reads (probes) say otherwise; slowness with no fresh evidence is forgotten
  after 10 s.
- *overtaken*: a read under its threshold that later reads of its size to other DataNodes
  answered past (3 at least), older than the healthy p99 (a host-wide stall overtakes nothing);
  then every other read of its DataNode in flight that it answered nothing since, too.
- *stalled*: a read past its threshold whose peers are mostly late too waits (to ``cold_threshold``).
- *silent*: reads in flight and no answer for max(1 s, 20 x the healthy p99 of the smallest
  reads): reads never wait on one, whatever the breaker says.
- *gone*: no answer for max(5 s, 5 x the healthy p99), and on none of its reads in flight (no response
  header: a paced or delayed DataNode sends its header as soon as it starts on a read, a frozen
  or stalled one sends nothing): a range that only its reads could still finish fails
  (range_fetch.py ``_stranded``) instead of waiting for the transport's 60 s deadline, round
  after round.

Each rule earns its place on the replay tier (tests/replay/: recorded DataNode service times
replayed through the real reader on a virtual clock): without it, some replay's outcome is
worse. One rule that did not (2026-12-06) is gone: *crowded* (no extra read while the median
DataNode's reads were overdue: its removal changed only the LRC +500 ms replays, and for the
better, p99.9 455 -> 320 ms for a new client; a replay of recorded service times cannot show the
overload it was for, and the real-cluster runs never did either).

Thread-safe (one lock); the read path calls it from the client's event loop, ``--stats`` and
benchmarks from other threads. The clock is injectable, so tests drive it by hand.
"""

import collections
import dataclasses
import logging
import math
import statistics
import threading
import time
from typing import Callable

from hedgefs.client.cluster_view import View, slow_by_view
from hedgefs.client.latency_rules import (  # noqa: F401 (the rules, also read as latency.X)
    CLASS_LIMITS, HALF_LIFE_S, CLASS_MIN_WEIGHT, CLASS_MIN_DATANODES, HEDGE_FACTOR, FLOOR_S, CEILING_S,
    CEILING_BYTES_PER_S, COLD_FACTOR, COLD_MIN_S, THRESHOLD_CACHE_S, RECENT_S, RECENT_MIN, JUDGE_MIN,
    SLOW_RATIO, PEER_FACTOR, PEERS_MIN, SLOW_FORGET_S, PROBE_INTERVAL_S, SILENT_MIN_S, SILENT_FACTOR, GONE_MIN_S, GONE_FACTOR,
    FAILURE_MEMORY_S, MAX_DATANODES, COLD_HEDGE_FACTOR, size_class, ceiling, cold_threshold, latency_histogram)
from hedgefs.client.overtaking import CENSORED, FAILED, OK, OVERTAKEN_MIN_S, RUNNING, Entry, ReadLog, next_look

log = logging.getLogger("hedgefs.client.latency")

WAIT_SLACK_S = 1e-6   # a wait shorter than this is none (what a float subtraction leaves of "now")


def _wait(seconds: float) -> float:
    """``seconds`` to wait, or 0: a timer set for a hair's breadth would fire at the same time again."""
    return seconds if seconds > WAIT_SLACK_S else 0.0

@dataclasses.dataclass
class _DataNode:
    classes: dict            # size class -> DecayedHistogram of its reads' latency
    p99: dict                # size class -> its p99, while its histogram has enough weight (kept fresh)
    recent: collections.deque   # (time, latency as a multiple of the threshold) of its last reads
    recent_p50: float = 0.0     # the median of those, as of its last read
    slow: bool = False
    slow_since: float = 0.0
    evidence: float = 0.0       # last sample
    inflight: int = 0
    busy_since: float = 0.0     # when reads in flight went from 0 to 1
    last_answer: float = -math.inf   # last time a read finished (data or error)
    serving: int = 0                 # reads in flight whose response header came (being sent, or paced)
    last_failure: float = -math.inf
    last_probe: float = -math.inf
    probing: bool = False
    stuck_since: float = -math.inf   # when the last of its reads judged overtaken began


class ProbeTicket:
    """A probe booked with ``book_probe``: the DataNode gets no other probe until ``done()``."""

    __slots__ = ("_node", "_lock")

    def __init__(self, node: "_DataNode", lock: threading.Lock):
        self._node, self._lock = node, lock

    def done(self) -> None:
        node = self._node
        if node is not None:
            self._node = None
            with self._lock:
                node.probing = False


@dataclasses.dataclass(frozen=True)
class Token:
    """One unit read in flight (from ``started``)."""
    datanode: str
    began: float
    entry: Entry | None = dataclasses.field(default=None, compare=False, repr=False)   # in the read log


class LatencyModel:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[str, str], None] = lambda datanode, state: None):
        self._clock = clock
        self._on_change = on_change    # (DataNode, "slow" | "recovered"), called outside our lock
        self._lock = threading.Lock()
        self._nodes: dict[str, _DataNode] = {}
        self._thresholds: dict[int, tuple[float, float]] = {}  # size class -> (until, healthy p99 or inf)
        self._peers: tuple[float, float] = (-math.inf, math.inf)  # (until, median DataNode's recent_p50 or inf)
        self._slow: frozenset[str] = frozenset()
        self._log = ReadLog()          # every read, in start order: who overtook whom
        self._last_slow = -math.inf    # last time a DataNode was judged slow
        self._last_silent = -math.inf  # last time a DataNode that had been silent answered
        self._trouble: tuple[float, float] = (-math.inf, -math.inf)   # (until, last_trouble)

    # ---------------------------------------------------------------- recording

    def started(self, datanode: str, nbytes: int | None = None) -> Token:
        now = self._clock()
        forgot = False
        with self._lock:
            node = self._node(datanode, now)
            if node.slow and now - node.evidence >= SLOW_FORGET_S:
                node.slow, forgot = False, True   # no news for long (is_slow says so already): another chance
                self._slow = frozenset(n for n, s in self._nodes.items() if s.slow)
            if node.inflight == 0:
                node.busy_since = now
            node.inflight += 1
            entry = self._log.started(datanode, None if nbytes is None else size_class(nbytes), now)
        if forgot:
            log.info("%s: no news for %.0f s; no longer avoided", datanode, SLOW_FORGET_S)
        return Token(datanode, now, entry)

    def connecting(self, token: Token) -> None:
        """The read is opening a new connection (no pooled one was free): judged against
        ``cold_threshold``, and overtaken only by reads that opened one too (overtaking.py)."""
        if token.entry is not None:
            with self._lock:
                token.entry.cold = True

    def responding(self, token: Token) -> None:
        """The read's response header arrived: its DataNode is on it, if slowly (``is_gone``)."""
        entry = token.entry
        with self._lock:
            node = self._nodes.get(token.datanode)
            if node is not None and entry is not None and not entry.served and entry.outcome == RUNNING:
                entry.served = True
                node.serving += 1

    def seed(self, views: dict[str, View]) -> None:
        """Start from the cluster's view (cluster_view.py) for the DataNodes this client has no
        reads of its own to: one its figures show slow is read around from the first read, and
        its probes' answers judge it from then on, like any slow DataNode's."""
        slow = slow_by_view(views)
        now, marked = self._clock(), []
        with self._lock:
            for name, why in slow.items():
                node = self._nodes.get(name)
                if node is not None and (node.classes or node.recent):
                    continue   # its own reads speak for it
                node = self._node(name, now)
                node.slow, node.slow_since, node.evidence = True, now, now
                marked.append((name, why))
            if marked:
                self._slow = frozenset(n for n, s in self._nodes.items() if s.slow)
        for name, why in marked:
            log.info("%s is slow by the cluster's view (%s); reading around it", name, why)
            self._on_change(name, "slow")

    def age(self, token: Token) -> float:
        return self._clock() - token.began

    def finished(self, token: Token, nbytes: int) -> float:
        """The read answered with its data; returns its latency (seconds)."""
        return self._end(token, nbytes, answered=True, sample=True)

    def failed(self, token: Token) -> None:
        """The read failed (an error, a refused connection, a bad checksum): an answer, but none
        about speed; rebuilds prefer other sources for a while."""
        self._end(token, 0, answered=True, sample=False, failure=True)

    def abandoned(self, token: Token, nbytes: int) -> None:
        """We cancelled the read. Its age is a lower bound on its latency: it counts only if it
        is already a slow read's (it says nothing about how much faster it might have been)."""
        self._end(token, nbytes, answered=False, sample=True, censored=True)

    def evidence_in(self, token: Token, nbytes: int) -> float:
        """Seconds until this read, still running, is evidence of slowness (``slow_evidence``):
        twice its threshold from its start, twice ``cold_threshold`` on a new connection."""
        now = self._clock()
        with self._lock:
            threshold = self._threshold(size_class(nbytes), nbytes, now)
            bar = self._cold(token.entry, self._nodes.get(token.datanode), now, threshold, nbytes) or threshold
        return _wait(SLOW_RATIO * bar - (now - token.began))

    @staticmethod
    def _cold(entry: Entry | None, node: "_DataNode | None", now: float, threshold: float,
              nbytes: int) -> float | None:
        """The ``cold_threshold`` this read is judged by, or None (judged by ``threshold``). On a new
        connection, unless its DataNode is *suspect*: reads in flight and no answer for that long,
        or since a threshold before the read went out (a read of it was overdue then: the
        connection is new because the pooled ones are stuck on it, not because the client is;
        docs/design.md)."""
        if entry is None or not entry.cold:
            return None
        bar = cold_threshold(threshold, nbytes)
        if node is None or not node.inflight:
            return bar
        silence = now - max(node.busy_since, node.last_answer)
        return bar if silence < bar and silence < now - entry.began + threshold else None

    def slow_evidence(self, token: Token, nbytes: int) -> float:
        """The read is still running at twice its threshold: count it now as a slow read (0 is
        returned), or, one on a new connection younger than twice ``cold_threshold``, in the seconds
        returned, at most twice the threshold (its DataNode may turn suspect meanwhile). (Otherwise
        the caller's timer is trusted: the threshold may have moved.)"""
        if token.entry is not None and token.entry.cold and (wait := self.evidence_in(token, nbytes)) > 0:
            return min(wait, self.slow_after(nbytes))
        now = self._clock()
        with self._lock:
            change = self._sample(self._node(token.datanode, now), token.datanode, nbytes, now - token.began, now,
                                  censored=True, slow=True, entry=token.entry)
        self._announce(change)
        return 0.0

    def slow_after(self, nbytes: int) -> float:
        return SLOW_RATIO * self.threshold(nbytes)   # a read still running after this is slow evidence

    def _end(self, token: Token, nbytes: int, answered: bool, sample: bool, failure: bool = False,
             censored: bool = False) -> float:
        now = self._clock()
        seconds = now - token.began
        change = None
        with self._lock:
            node = self._node(token.datanode, now)
            silence = now - max(node.busy_since, node.last_answer) if answered and node.inflight else 0.0
            if silence >= SILENT_MIN_S and silence >= self._silent_after(now):
                self._last_silent = now   # it had turned silent (questions note nothing: the answer does)
            node.inflight = max(0, node.inflight - 1)
            if token.entry is not None and token.entry.served:
                node.serving = max(0, node.serving - 1)
            if answered:
                node.last_answer = now
            if failure:
                node.last_failure = now
            if token.entry is not None:
                self._log.ended(token.entry, now, FAILED if failure else CENSORED if censored or not answered else OK,
                                size_class(nbytes))
            if sample:
                change = self._sample(node, token.datanode, nbytes, seconds, now, censored, entry=token.entry)
        self._announce(change)
        return seconds

    def _sample(self, node: _DataNode, name: str, nbytes: int, seconds: float, now: float,
                censored: bool = False, slow: bool = False, entry: Entry | None = None) -> tuple[str, str] | None:
        cls = size_class(nbytes)
        threshold = self._threshold(cls, nbytes, now)
        ratio = seconds / (self._cold(entry, node, now, threshold, nbytes) or threshold)   # as a new client would
        if slow:
            ratio = max(ratio, SLOW_RATIO)   # the caller's timer saw it run that long (the threshold may have moved)
        if censored and ratio < SLOW_RATIO:
            return None   # "at least this long", and that is not slow: no evidence either way
        hist = node.classes.get(cls)
        if hist is None:
            hist = node.classes[cls] = latency_histogram(now)
        hist.record(seconds, now)
        if hist.weight(now) >= CLASS_MIN_WEIGHT:
            node.p99[cls] = hist.quantile(0.99)
        if ratio >= SLOW_RATIO and entry is not None and self._log.excused(entry, seconds, now, self._slow_now(now)):
            return None   # the reads beside it were as late: the host was slow, not this DataNode
        node.recent.append((now, ratio))
        node.evidence = now
        return self._judge(node, name, now)

    def _judge(self, node: _DataNode, name: str, now: float) -> tuple[str, str] | None:
        recent = [r for t, r in node.recent if now - t <= RECENT_S]
        if len(recent) < RECENT_MIN:
            recent = [r for t, r in list(node.recent)[-RECENT_MIN:] if now - t < SLOW_FORGET_S]
        node.recent_p50 = statistics.median(recent) if recent else 0.0
        slow = node.recent_p50 >= SLOW_RATIO
        if slow and not node.slow:   # becoming slow takes more than staying slow
            slow = len(recent) >= JUDGE_MIN and node.recent_p50 >= PEER_FACTOR * self._peer_p50(now)
        if slow == node.slow:
            return None
        node.slow = slow
        if slow:
            node.slow_since = self._last_slow = now
        self._slow = frozenset(n for n, s in self._nodes.items() if s.slow)
        return (name, "slow" if slow else "recovered")

    def _peer_p50(self, now: float) -> float:
        """The median DataNode's recent median read (as a multiple of its threshold), where a
        DataNode silent with reads in flight counts as late as its silence; inf while fewer than
        3 DataNodes have read lately (nobody to compare with). Silence counts because when the
        client itself stalls, the DataNodes whose answers it has not yet looked at are as late
        as the first one it looks at."""
        until, value = self._peers
        if now >= until:
            unit = self._threshold(0, CLASS_LIMITS[0], now)
            medians = [max(n.recent_p50, (now - max(n.busy_since, n.last_answer)) / unit if n.inflight else 0.0)
                       for n in self._nodes.values() if now - n.evidence < SLOW_FORGET_S and n.recent]
            value = statistics.median(medians) if len(medians) >= PEERS_MIN else math.inf
            self._peers = (now + THRESHOLD_CACHE_S, value)
        return value

    def _announce(self, change: tuple[str, str] | None) -> None:
        if change is None:
            return
        name, state = change
        if state == "slow":
            log.info("%s is slow: most of its recent reads went overdue; reading around it", name)
        else:
            log.info("%s recovered: its reads are back in line with its peers'", name)
        self._on_change(name, state)

    def _healthy_p99(self, cls: int, now: float) -> float:
        """The median over DataNodes of their p99 for this size class (inf: not known yet)."""
        until, value = self._thresholds.get(cls, (-math.inf, math.inf))
        if now >= until:
            p99s = [node.p99[cls] for node in self._nodes.values() if cls in node.p99]
            value = statistics.median(p99s) if len(p99s) >= CLASS_MIN_DATANODES else math.inf
            self._thresholds[cls] = (now + THRESHOLD_CACHE_S, value)
        return value

    def _threshold(self, cls: int, nbytes: int, now: float) -> float:
        return min(ceiling(nbytes), max(FLOOR_S, HEDGE_FACTOR * self._healthy_p99(cls, now)))

    def _node(self, datanode: str, now: float) -> _DataNode:
        node = self._nodes.pop(datanode, None)   # re-inserted: the dict's order is recency
        if node is None:
            node = _DataNode({}, {}, collections.deque(maxlen=64))
            if len(self._nodes) >= MAX_DATANODES:
                del self._nodes[next(iter(self._nodes))]
        self._nodes[datanode] = node
        return node

    # ---------------------------------------------------------------- questions

    def threshold(self, nbytes: int) -> float:
        """Seconds after which a read of ``nbytes`` still running is overdue (hedged)."""
        now = self._clock()
        with self._lock:
            return self._threshold(size_class(nbytes), nbytes, now)

    def overtaken(self, token: Token, mates: tuple[Entry, ...] = ()) -> bool:
        """Is this read (still running) overtaken: later reads of its size to other DataNodes
        answered, most within half its age, or left behind by ``mates``, the reads sent with it
        (overtaking.py), and older than the healthy p99 (a new client: just 1 ms)? Then its
        DataNode, not the host, is what it waits for (a host-wide stall overtakes nothing). Also
        true of every read of a DataNode found ``stuck`` that it answered nothing since.

        The bar is the healthy p99 itself: the threshold (1.5 x it) hedges a read on its age
        alone and wants a margin; this rule has the later reads' evidence and needs none. With
        1.5 x here too, a host whose p99 is over 6.7 ms (the 10 ms floor / 1.5) made the bar the
        threshold, and the rule could never act before it (the replay tier's LRC +500 ms trace,
        p99 74 ms: no overtaken hedge with 1.5 x, 9 with the p99; tests/replay)."""
        now = self._clock()
        entry = token.entry
        if entry is None or entry.size_class is None or now - token.began < OVERTAKEN_MIN_S:
            return False
        with self._lock:
            node = self._nodes.get(token.datanode)
            if node is not None and node.last_answer < min(token.began, node.stuck_since):
                return True   # another of its reads was overtaken, and it answered nothing since either began
            p99 = self._healthy_p99(entry.size_class, now)
            if not math.isinf(p99) and now - token.began < p99:
                return False   # (no 1.5 margin: that is the threshold's, for hedging without evidence)
            return self._log.overtaken(entry, now) or self._log.left_behind(entry, mates, now)

    def stuck(self, token: Token) -> None:
        """This read was found overtaken: so is every other read of its DataNode in flight that it
        answered nothing since (a frozen DataNode's reads of a new client's first stripes: one
        verdict, not one per stripe)."""
        with self._lock:
            node = self._nodes.get(token.datanode)
            if node is not None:
                node.stuck_since = max(node.stuck_since, token.began)

    def overtaken_look_at(self, token: Token, mates: tuple[Entry, ...] = ()) -> float:
        """When to ask again whether this read, still under its threshold, is overtaken: no
        sooner than it could be (the healthy p99 old), then every quarter of its age (at
        least every 1 ms; later reads of other fetches wake nobody), and the moment ``mates``
        leave it behind (overtaking.py)."""
        now = self._clock()
        entry = token.entry
        with self._lock:
            p99 = self._healthy_p99(entry.size_class, now) if entry is not None and entry.size_class is not None \
                else math.inf
        gate = token.began + (OVERTAKEN_MIN_S if math.isinf(p99) else max(OVERTAKEN_MIN_S, p99))
        return max(gate, next_look(token.began, mates, now))

    def hedge_later(self, token: Token, nbytes: int) -> float:
        """Seconds more before hedging this read past its threshold (0: now), up to ``cold_threshold``:
        to 3 x the threshold, on a new connection to a DataNode not suspect; a quarter of its age
        (asked again then) if its peers are mostly late too (overtaking.py ``stalled``)."""
        entry = token.entry
        now = self._clock()
        age = now - token.began
        with self._lock:
            threshold = self._threshold(size_class(nbytes), nbytes, now)
            if entry is None or age >= cold_threshold(threshold, nbytes):
                return 0.0
            if age < COLD_HEDGE_FACTOR * threshold and self._cold(entry, self._nodes.get(token.datanode), now,
                                                                  threshold, nbytes):
                return _wait(COLD_HEDGE_FACTOR * threshold - age)
            stalled = self._log.stalled(entry, now, self._slow_now(now))
        return max(OVERTAKEN_MIN_S, age / 4) if stalled else 0.0

    def healthy_p99(self, nbytes: int) -> float | None:
        """What healthy DataNodes' reads of this size take at the 99th percentile, if known."""
        now = self._clock()
        with self._lock:
            value = self._healthy_p99(size_class(nbytes), now)
        return None if math.isinf(value) else value

    def is_slow(self, datanode: str) -> bool:
        """Judged slow, with fresh evidence (slowness without news for SLOW_FORGET_S is forgotten:
        the DataNode gets another chance, and its next read says how it is)."""
        if datanode not in self._slow:   # the common case, without the lock
            return False
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            return node is not None and node.slow and now - node.evidence < SLOW_FORGET_S

    def _slow_now(self, now: float) -> frozenset[str]:
        """The DataNodes slow with fresh evidence (locked)."""
        if not self._slow:
            return self._slow
        return frozenset(n for n in self._slow if now - self._nodes[n].evidence < SLOW_FORGET_S)

    @property
    def last_trouble(self) -> float:
        """The last time a DataNode was judged slow or went silent (-inf: never); at most
        THRESHOLD_CACHE_S old (every read of an open file asks)."""
        now = self._clock()
        with self._lock:
            until, value = self._trouble
            if now >= until:
                after = self._silent_after(now)
                silent = [t for n in self._nodes.values() if n.inflight
                          and (t := max(n.busy_since, n.last_answer) + after) <= now]
                value = max([self._last_slow, self._last_silent, *silent])
                self._trouble = (now + THRESHOLD_CACHE_S, value)
            return max(value, self._last_slow)

    def slow_datanodes(self, for_at_least: float = 0.0) -> frozenset[str]:
        """The DataNodes slow now (and continuously for at least ``for_at_least`` seconds)."""
        slow = [dn for dn in self._slow if self.is_slow(dn)]
        if for_at_least <= 0 or not slow:
            return frozenset(slow)
        now = self._clock()
        with self._lock:
            return frozenset(dn for dn in slow if dn in self._nodes and now - self._nodes[dn].slow_since >= for_at_least)

    def silent_for(self, datanode: str) -> float:
        """Seconds a DataNode with reads in flight has answered nothing (0 with none in flight)."""
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            if node is None or node.inflight == 0:
                return 0.0
            return now - max(node.busy_since, node.last_answer)

    def silent_after(self) -> float:
        """Silence (with reads in flight) that makes a DataNode silent: max(1 s, 20 x p99)."""
        now = self._clock()
        with self._lock:
            return self._silent_after(now)

    def _silent_after(self, now: float) -> float:
        p99 = self._healthy_p99(0, now)
        return max(SILENT_MIN_S, SILENT_FACTOR * p99) if not math.isinf(p99) else SILENT_MIN_S

    def is_silent(self, datanode: str) -> bool:
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            if node is None or node.inflight == 0:
                return False
            return now - max(node.busy_since, node.last_answer) >= self._silent_after(now)

    def is_gone(self, datanode: str) -> bool:
        """Reads in flight, none of them with its response header, and no answer for max(5 s,
        5 x the healthy p99): frozen, stalled, or cut off (a paced or delayed DataNode is on some
        read: its header came). Not ``silent_after``'s multiple: in a cluster most of whose
        DataNodes are slow the healthy p99 is a second, and 20 x that outlasts the transport's
        60 s deadline (chaos 4242041 step 207)."""
        return self.gone_in(datanode) == 0.0

    def gone_in(self, datanode: str) -> float | None:
        """Seconds until the DataNode is gone if nothing arrives meanwhile (0: gone now; None:
        no reads in flight)."""
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            if node is None or node.inflight == 0:
                return None
            p99 = self._healthy_p99(0, now)
            bar = max(GONE_MIN_S, GONE_FACTOR * p99) if not math.isinf(p99) else GONE_MIN_S
            if node.serving:
                return bar   # sending (or pacing) a read's bytes: alive; asked again later
            return _wait(bar - (now - max(node.busy_since, node.last_answer)))

    def failed_recently(self, datanode: str) -> bool:
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            return node is not None and now - node.last_failure < FAILURE_MEMORY_S

    def score(self, datanode: str) -> float:
        """A DataNode's median recent read as a multiple of its threshold (0 = unknown): lower
        is a better rebuild source or replica. Reads older than SLOW_FORGET_S do not count, so a
        DataNode that was slow and then left alone is not kept at the back for ever."""
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            fresh = [r for t, r in node.recent if now - t < SLOW_FORGET_S] if node is not None else []
            return statistics.median(fresh) if fresh else 0.0

    def book_probe(self, datanode: str) -> ProbeTicket | None:
        """A ticket for one read to this DataNode now, to notice its recovery, or None: at most one
        every 250 ms, one at a time (the ticket's ``done()`` when the read ends)."""
        now = self._clock()
        with self._lock:
            node = self._nodes.get(datanode)
            if node is None or node.probing or now - node.last_probe < PROBE_INTERVAL_S:
                return None
            node.probing, node.last_probe = True, now
            return ProbeTicket(node, self._lock)

    def snapshot(self) -> dict[str, dict]:
        """Per DataNode: slow, its median recent read as a multiple of the threshold, reads in
        flight, seconds silent."""
        now = self._clock()
        with self._lock:
            return {name: {"slow": node.slow,
                           "recent_p50": round(statistics.median(r for _, r in node.recent), 3) if node.recent else None,
                           "inflight": node.inflight,
                           "silent_s": round(now - max(node.busy_since, node.last_answer), 3) if node.inflight else 0.0}
                    for name, node in self._nodes.items()}
