"""What the reads that started after a read did while it ran: the latency model's yardstick for one read.

    log = ReadLog()
    entry = log.started("dn3", size_class=0, now=t)     # a unit read goes out
    log.ended(entry, now, "ok")                          # ... answered ("ok"), cancelled ("censored"), "failed"
    log.overtaken(entry, now)                            # hedge it under its threshold?
    log.stalled(entry, now, skip)                        # past it, but late with its peers: wait?
    log.excused(entry, seconds, now, skip)               # no evidence against its DataNode?
    next_look(began, mates, now)                         # when to ask ``overtaken`` again

A read is judged by its *later peers*: reads of the same size class to other DataNodes that
started at or after it, and at least ``bar`` seconds ago (so each had the time to answer
within ``bar``). Each is *fast* (answered within ``bar``) or *late* (still running, answered
later, or cancelled after more than ``bar``); failed reads and reads cancelled sooner say
nothing about speed and are skipped. Three questions use it (latency.py):

- *overtaken*: a read whose later peers answered within half its age (bar = age / 2), by 3 to 1
  over those late too, is stuck on its DataNode while the others answer: hedged before the
  threshold (a bare majority is a healthy host's tail: the replay tier's RS-6-3 healthy trace
  had 3 such hedges, each a 6-unit rebuild; with a quarter or more of its peers late, the host
  is slow with it and the threshold decides); so is one
  *left behind* by the reads sent with it (a stripe's): all answered, within 1 / 1.5 of its age;
- *stalled*: a read past its threshold whose peers beside it (bar = age / 2; earlier reads
  still running when it started count too) are mostly late as well waits with them: its hedge
  would be read from the same stalled host (the fetcher asks again, up to ``cold_threshold``);
- *excused*: a read that took its DataNode a slow read's time while the reads beside it, later
  peers and earlier reads still running when it started, were mostly late too (bar = its
  latency / 4) was slowed by the host, not by its DataNode: no evidence that the DataNode is
  slow. (The earlier reads count because in a stall a closed-loop client starts nothing new:
  the last reads before it have no later peers at all.)

A host-wide stall (every DataNode slower at once, or the client itself) makes the later peers
late as well, so it overtakes nothing and excuses itself. The log is in start order and
bounded (the last ``LOG_MAX`` reads); a question looks at most ``PEERS_ENOUGH`` peers, newest
first. Not locked: the latency model locks.
"""

from __future__ import annotations

import collections

OVERTAKERS_MIN = 3       # overtaken: at least 3 later peers answered (one or two could be luck) ...
OVERTAKEN_FACTOR = 2.0   # ... most of those that had the time, within half its age (2 x their median) ...
OVERTAKEN_MAJORITY = 3   # ... by 3 to 1 (a healthy host's tail read has a third or more of its peers late too) ...
OVERTAKEN_MIN_S = 0.001  # ... and it is at least 1 ms old (what a rebuild from k units costs, roughly)
LEFT_BEHIND_FACTOR = 1.5   # left behind: every other read of its fetch answered, the slowest in 1 / 1.5 of its age
EXCUSE_FACTOR = 4.0      # excused: fewer of its peers were 4 x faster than it than were not
LOG_MAX = 512        # reads remembered (start order); older ones have no later peers to ask about
PEERS_ENOUGH = 16    # peers looked at per question (newest first): enough for a majority
LOOK_BACK = 64       # reads started before it looked at, at most (for one still running beside it)

RUNNING, OK, CENSORED, FAILED = "running", "ok", "censored", "failed"


class Entry:
    __slots__ = ("began", "datanode", "size_class", "ended", "outcome", "cold", "served")

    def __init__(self, began: float, datanode: str, size_class: int | None):
        self.began, self.datanode, self.size_class = began, datanode, size_class
        self.ended = 0.0
        self.outcome = RUNNING
        self.cold = False   # it opened a new connection (latency.py's ``connecting``)
        self.served = False   # its response header came: the DataNode is on it (latency.py's ``responding``)


class ReadLog:
    def __init__(self):
        self._entries: collections.deque[Entry] = collections.deque(maxlen=LOG_MAX)

    def started(self, datanode: str, size_class: int | None, now: float) -> Entry:
        entry = Entry(now, datanode, size_class)
        self._entries.append(entry)
        return entry

    @staticmethod
    def ended(entry: Entry, now: float, outcome: str, size_class: int | None = None) -> None:
        entry.ended, entry.outcome = now, outcome
        if entry.size_class is None:
            entry.size_class = size_class

    def overtaken(self, entry: Entry, now: float) -> bool:
        """At least 3 later peers answered within half its age, 3 for each that had the time and
        did not, and it is at least 1 ms old."""
        age = now - entry.began
        if age < OVERTAKEN_MIN_S:
            return False
        fast, late = self.peers(entry, now, age / OVERTAKEN_FACTOR, same_conditions=True)
        return fast >= OVERTAKERS_MIN and fast >= OVERTAKEN_MAJORITY * late

    def stalled(self, entry: Entry, now: float, skip: frozenset[str]) -> bool:
        """A read past its threshold whose peers beside it (later peers, and earlier reads still
        running when it started) are mostly late too, by half its age: the host (or this client)
        stalled, not its DataNode. With no peers it is not stalled."""
        fast, late = self.peers(entry, now, (now - entry.began) / OVERTAKEN_FACTOR, earlier=True, skip=skip)
        return late > 0 and late >= fast

    @staticmethod
    def left_behind(entry: Entry, mates, now: float) -> bool:
        """Every other read of its fetch (``mates``: at least 3, sent with it, of its size, on other
        DataNodes, on a new connection if it is on one) answered, and it is 1.5 x as old as the
        slowest of them: a stripe's reads go out together, and one DataNode is what it waits for."""
        if len(mates) < OVERTAKERS_MIN:
            return False
        if any(m.outcome != OK or m.datanode == entry.datanode or m.size_class != entry.size_class
               or (entry.cold and not m.cold) for m in mates):
            return False
        return now - entry.began >= LEFT_BEHIND_FACTOR * max(m.ended - m.began for m in mates)

    def excused(self, entry: Entry, seconds: float, now: float, skip: frozenset[str]) -> bool:
        """A slow read (``seconds`` long) whose peers beside it were mostly not 4 x faster: what
        slowed it slowed them too. With no peers (reads one at a time) it is not excused."""
        fast, late = self.peers(entry, now, seconds / EXCUSE_FACTOR, earlier=True, skip=skip)
        return late > 0 and late >= fast

    def peers(self, entry: Entry, now: float, bar: float, earlier: bool = False,
              skip: frozenset[str] = frozenset(), same_conditions: bool = False) -> tuple[int, int]:
        """(fast, late) among ``entry``'s later peers that started at least ``bar`` ago; with
        ``earlier``, also among the reads started before it that were still running when it
        started (a host stall holds them up as well). Peers on DataNodes in ``skip`` (known
        slow) are no yardstick; with ``same_conditions``, neither are peers that opened a new
        connection when it did not, or the other way round (a first read on a connection waits
        for the DataNode to set it up: measured 3-4 x a pooled read's time, latency.py)."""
        fast = late = 0
        for peer in self._beside(entry, now - bar, earlier):
            if peer.datanode == entry.datanode or peer.outcome == FAILED or peer.datanode in skip:
                continue
            if same_conditions and peer.cold != entry.cold:
                continue
            if peer.size_class != entry.size_class and None not in (peer.size_class, entry.size_class):
                continue   # another size answers in another time (a size not known yet: any)
            if peer.outcome == RUNNING:
                late += 1
            elif peer.ended - peer.began <= bar:
                if peer.outcome == CENSORED:
                    continue   # cancelled early: no answer either way
                fast += 1
            else:
                late += 1
            if fast + late >= PEERS_ENOUGH:
                break
        return fast, late

    def _beside(self, entry: Entry, newest_start: float, earlier: bool):
        """Newest first: the reads started at or after ``entry`` and by ``newest_start``; then
        (``earlier``) those started before it and not done by then (at most LOOK_BACK looked at)."""
        later, looked_back = True, 0
        for peer in reversed(self._entries):
            if later and (peer is entry or peer.began < entry.began):
                if not earlier:
                    return
                later = False
            if later:
                if peer.began <= newest_start:
                    yield peer
                continue
            if peer is entry:
                continue
            looked_back += 1
            if looked_back > LOOK_BACK:
                return
            if peer.outcome == RUNNING or peer.ended > entry.began:
                yield peer


def next_look(began: float, mates, now: float) -> float:
    """When to ask again whether a read begun at ``began`` is overtaken: a quarter of its age
    from now (at least ``OVERTAKEN_MIN_S``: the later reads of other fetches wake nobody, so it is
    asked on a schedule), or the moment its ``mates`` leave it behind, once every one has answered."""
    at = now + max(OVERTAKEN_MIN_S, (now - began) / 4)
    if mates and all(m.ended for m in mates):
        behind = began + LEFT_BEHIND_FACTOR * max(m.ended - m.began for m in mates)
        if behind > now:   # (past it and not left behind: mates unlike it, say; never a time gone by)
            at = min(at, behind)
    return at
