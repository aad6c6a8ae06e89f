"""The block reports a NameNode waits for when it starts serving a namespace with groups (a
restart) or becomes the active (HA), so that a read of a stored file never fails for want of
them.

Unit locations are memory only: they come back with the DataNodes' block reports. Safe mode
ends at a share of the groups (safe_mode.py); a group of the rest has fewer than k located
units until the DataNodes holding it report, and a read of it would answer "no live replica"
for bytes that are perfectly stored. While reports are *due*, such a file's FileInfo is answered
at once with a mark (``locations_pending``: the one-line reason, naming the DataNodes awaited):
a client's reader asks again while it is set, up to its failover deadline, and fails with that
line after it; a stat, an rm, a listing, an S3 HEAD need no locations and are never held, nor
are the other items of a StatMany. (A client older than the mark ignores it and reads what it
got: "no live replica", as before the wait.)

Reports are due, for at most ``wait_s`` (the dead interval) after serving started, while a
DataNode this NameNode expects has not sent its full report to this process: one that is live
(it heartbeats here), one a standby heard before its promotion, or one named in
``DATA_DIR/datanodes`` (every DataNode that registered with this NameNode in an earlier life:
without it a restarted NameNode would not know of a DataNode before its first heartbeat, and a
read could come between one DataNode's report and another's heartbeat). A DataNode the liveness
judges dead is not waited for; one that never comes back (removed, frozen) holds reads of the
groups only it had at most ``wait_s``, and the NameNode says in its log whom it stopped waiting
for (those not live are dropped from the file; one that is live, its report late, stays; a
DataNode is written back when it registers again). The file is advisory: written with a rename
and no fsync, unreadable or undecodable it is logged once and this start is uninformed.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Iterable

log = logging.getLogger("hedgefs.namenode")

FILE = "datanodes"   # in the NameNode's data dir: one DataNode id a line
NAMED = 5            # DataNodes named in a refusal or a log line, at most
ANY = "(any)"        # waiting for a first report from any DataNode: none known yet


class ExpectedReports:
    def __init__(self, data_dir: str | None, wait_s: float, clock: Callable[[], float]):
        self.path = os.path.join(data_dir, FILE) if data_dir else None
        self.wait_s, self.clock = wait_s, clock
        self.known: set[str] = self._load()   # every DataNode that registered here, in this life or before
        self.expected: set[str] = set()       # waited for since serving started (armed)
        self._until: float | None = None      # armed: reports are due before then at most
        self._lock = threading.Lock()          # ``known`` and its file: registrations and a reader's give-up

    def _load(self) -> set[str]:
        if self.path is None:
            return set()
        try:
            with open(self.path, encoding="utf-8") as f:
                return {line.strip() for line in f if line.strip()}
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as err:   # unreadable, or not text (UnicodeDecodeError)
            log.warning("cannot read the DataNodes known before (%s): %s; reads right after this start may "
                        "answer 'no live replica' before their reports", self.path, err)
            return set()

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(f"{d}\n" for d in sorted(self.known))
            os.replace(tmp, self.path)
        except OSError as err:   # only the next start's wait is less informed
            log.warning("cannot write the DataNodes known (%s): %s", self.path, err)

    def registered(self, datanode_id: str) -> None:
        """A DataNode registered with this process: expected at the next start."""
        if datanode_id not in self.known:
            with self._lock:
                self.known = self.known | {datanode_id}
                self._save()

    def arm(self, heard: Iterable[str] = ()) -> None:
        """Serving starts (a restart on groups, a promotion): wait for the known DataNodes'
        reports and those of ``heard`` (a standby's DataNodes), at most ``wait_s`` from now."""
        self.expected = self.known | set(heard)
        self._until = self.clock() + self.wait_s

    @property
    def armed(self) -> bool:
        """Reports may be due (checked before any work: a short group's read pays nothing once
        the wait is over)."""
        return self._until is not None

    def waiting(self, reported: set[str], live: Iterable[str], dead: Callable[[str], bool]) -> list[str]:
        """The DataNodes whose reports are due (sorted; [ANY] while none has come and none is
        known); [] once every one expected has reported or the bound has passed (the end said in
        the log once, naming those it stopped waiting for)."""
        until = self._until
        if until is None:
            return []
        live = set(live)
        due = sorted(d for d in self.expected | live if d not in reported and not dead(d))
        if self.clock() < until and (due or not reported):
            return due or [ANY]
        with self._lock:   # the monitor's pass and a read may both get here: one ends the wait
            if self._until is None:
                return []
            self._until = None
            if not reported:
                log.warning("no DataNode has sent its block report %.0f s after this NameNode started serving: "
                            "reads no longer wait for one", self.wait_s)
                return []
            if not due:
                dead_ones = sorted(d for d in self.expected if d not in reported)
                log.info("block reports in from %d DataNodes %.1f s after this NameNode started serving%s",
                         len(reported), self.wait_s - (until - self.clock()),
                         f" (not waited for, dead: {_names(dead_ones)})" if dead_ones else ": every one expected")
                return []
            log.warning("stopped waiting for the block reports of %s, %.0f s after this NameNode started serving: "
                        "reads of groups only they hold answer 'no live replica' until they report",
                        _names(due), self.wait_s)
            gone = {d for d in due if d not in live}   # a live one, its report late, is still expected next time
            if gone:
                self.known = self.known - gone
                self._save()
        return []

    def pending(self, path: str, due: Callable[[], list[str]]) -> str:
        """A file with a group short of located units: the FileInfo's mark if ``due()`` (the
        DataNodes awaited) may still locate them, else ""."""
        waiting = due()
        if not waiting:
            return ""
        left = max(0.0, (self._until or 0.0) - self.clock())
        who = "no DataNode has sent its block report yet" if waiting == [ANY] else \
            f"the block reports of DataNodes it expects are still to come ({_names(waiting)})"
        return f"cannot read {path} yet: the NameNode is starting and {who}; it waits {left:.0f} s more at most"


def _names(ids: list[str]) -> str:
    return ", ".join(ids[:NAMED]) + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")
