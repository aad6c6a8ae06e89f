"""Incremental reports to the NameNode: receipts for units just stored, and bad units.

As HDFS's incremental block reports: a unit counts at the NameNode only once its DataNode says it
is stored, so a receipt goes out as soon as a write or a repair commits; a checksum failure found
by a read or the scrubber goes out the same way. One thread sends them, in batches, at once, and
retries what failed; nothing here waits for the NameNode on a caller's thread.

Batched as a group commit is: one call in flight per NameNode link, and whatever was stored while
it was out goes in the next call, at once (no timer: a lone put's receipt is never held back). A
put of many files in parallel costs each DataNode a call per round trip, not one per unit.

Deletes are told too (HDFS's incremental DELETED receipts), with the next heartbeat rather than
on this thread: ``deleted`` notes a unit this DataNode deleted (at any NameNode's command: with HA
each link hears of every delete, so a standby does not keep a location that is gone until the
next full report), ``telling`` hands the heartbeat what to tell. The order one NameNode hears
things in is the order they happened here, and only that NameNode's link is ever waited for:
``sending`` (one per link) is held while receipts are checked (is the unit still here?) and sent,
and while a heartbeat tells deletes; so a receipt checked before a delete reaches the NameNode
before the delete is told, one checked after it does not go, and a unit stored again after its
delete is no longer told deleted (``stored`` takes it off; its receipt goes after any heartbeat
that told the delete). No lock is shared between links: a NameNode that does not answer holds up
its own link's reports only, never another's (review-a M1: a DataNode-wide lock held across the
call made a frozen standby delay every receipt to the active by the 10 s deadline).

Bounded: at most ``limit`` receipts, ``limit`` bad units and ``limit`` deletes wait at a time
(keyed by unit: the same unit twice is one entry). Past that a receipt or a delete is dropped and a
full block report asked for instead (it lists every unit, so it covers both); a bad unit is
dropped and counted (the next read or scrub of it finds it again). No gRPC here: the sending
functions are given.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import count

log = logging.getLogger("hedgefs.datanode")

Unit = tuple[int, int, int]   # (group id, index, generation)


class Reports:
    def __init__(self, *, send_stored: Callable[[list[tuple[int, int, int, int]]], None],
                 send_bad: Callable[[list[tuple[int, int, int, str]]], None],
                 has_unit: Callable[[int, int, int], bool], want_block_report: Callable[[], None],
                 limit: int = 10_000, batch: int = 1000, retry_s: float = 1.0):
        self._send_stored, self._send_bad = send_stored, send_bad
        self._has_unit, self._want_block_report = has_unit, want_block_report
        self.limit, self.batch, self.retry_s = limit, batch, retry_s
        self._cond = threading.Condition()
        self.sending = threading.Lock()   # receipts being checked and sent, deletes being told (see the module)
        self._stored: dict[Unit, int] = {}     # unit -> length, oldest first
        self._bad: dict[Unit, str] = {}        # unit -> reason
        self._deleted: dict[Unit, int] = {}    # unit -> when it was noted (a sequence number), not yet told
        self._noted = count(1)
        self._stop = False
        self.dropped_receipts = 0
        self.dropped_bad = 0
        self.dropped_deletes = 0
        self._thread = threading.Thread(target=self._run, name="dn-reports", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    # ---------------------------------------------------------------- from any thread

    def stored(self, group_id: int, index: int, generation: int, length: int) -> None:
        """A unit is stored here (it is already on disk): its receipt is owed, and a delete of it
        noted before is no longer true."""
        unit = (group_id, index, generation)
        with self._cond:
            self._deleted.pop(unit, None)
            if unit not in self._stored and len(self._stored) >= self.limit:
                self.dropped_receipts += 1
                full = True
            else:
                self._stored[unit] = length
                self._cond.notify()
                full = False
        if full:
            self._want_block_report()

    def bad(self, group_id: int, index: int, generation: int, reason: str) -> None:
        unit = (group_id, index, generation)
        with self._cond:
            if unit not in self._bad and len(self._bad) >= self.limit:
                self.dropped_bad += 1
                return
            self._bad[unit] = reason
            self._cond.notify()

    def deleted(self, group_id: int, index: int, generation: int) -> None:
        """A unit was deleted here: the next heartbeat tells it, unless it is here again (stored
        since: ``stored`` runs after the unit is on disk, so it comes after this check or takes
        the note off again)."""
        unit = (group_id, index, generation)
        with self._cond:
            if self._has_unit(*unit):
                return
            full = unit not in self._deleted and len(self._deleted) >= self.limit
            if full:
                self.dropped_deletes += 1
            else:
                self._deleted.pop(unit, None)   # noted again: it goes to the end
                self._deleted[unit] = next(self._noted)
        if full:
            self._want_block_report()

    @contextmanager
    def telling(self) -> Iterator[list[Unit]]:
        """The deletes to tell, oldest first, for a heartbeat sent inside the ``with``: under
        ``sending`` (a receipt checked before the delete is out first, see the module). Those told
        are forgotten when the block ends without an exception, unless noted again meanwhile."""
        with self.sending:
            with self._cond:
                told = list(self._deleted.items())
            yield [unit for unit, _noted in told]
            with self._cond:
                for unit, noted in told:
                    if self._deleted.get(unit) == noted:
                        del self._deleted[unit]

    def covered(self, units: Iterable[Unit]) -> None:
        """A full block report listing ``units`` was accepted: their receipts are no longer owed."""
        with self._cond:
            for unit in units:
                self._stored.pop(unit, None)

    def pending(self) -> tuple[int, int]:
        """(receipts, bad units) waiting to be sent."""
        with self._cond:
            return len(self._stored), len(self._bad)

    def untold(self) -> list[Unit]:
        """Deletes the next heartbeat tells, oldest first."""
        with self._cond:
            return list(self._deleted)

    # ---------------------------------------------------------------- the sending thread

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not self._stored and not self._bad:
                    self._cond.wait()
                if self._stop:
                    return
                stored = _take(self._stored, self.batch)
                bad = _take(self._bad, self.batch)
            ok = True
            if stored:
                with self.sending:   # a unit deleted since it was stored must not be announced
                    live = [(*unit, n) for unit, n in stored.items() if self._has_unit(*unit)]
                    ok = self._send(self._send_stored, live, stored, self._stored)
            if bad and ok:
                ok = self._send(self._send_bad, [(*unit, r) for unit, r in bad.items()], bad, self._bad)
            elif bad:
                self._put_back(bad, self._bad)
            if not ok:
                with self._cond:
                    if not self._stop:
                        self._cond.wait(self.retry_s)

    def _send(self, send, items: list, taken: dict, queue: dict) -> bool:
        if not items:
            return True
        try:
            send(items)
            return True
        except Exception as e:   # the NameNode is unreachable or restarting: retried
            log.debug("incremental report of %d units failed: %s", len(items), e)
            self._put_back(taken, queue)
            return False

    def _put_back(self, taken: dict, queue: dict) -> None:
        with self._cond:
            dropped = 0
            for unit, value in taken.items():
                if unit in queue:
                    continue
                if len(queue) < self.limit:
                    queue[unit] = value
                else:
                    dropped += 1
            if queue is self._bad:
                self.dropped_bad += dropped
            else:
                self.dropped_receipts += dropped
        if dropped and queue is self._stored:
            self._want_block_report()


def _take(queue: dict, n: int) -> dict:
    out = {}
    for unit in list(queue)[:n]:
        out[unit] = queue.pop(unit)
    return out
