"""A standby's receipts of units it cannot place yet, kept for its promotion.

A DataNode sends its receipts to every NameNode of an HA pair. A standby behind the journal
answers some "unknown" (``Claim.UNKNOWN``: no such group or unit in its map yet), and such a unit
would be located only by a full block report after a promotion. So the standby keeps those
receipts, and the promoted NameNode replays them through its map (``drain``), where each is
claimed as a receipt that arrived then (a group gone by then: nothing to keep).

Not without bound: past EARLY_RECEIPTS the oldest go, counted, and said once in the log (a block
report after the promotion tells those units again). Every method runs under the namesystem's
lock.
"""

from __future__ import annotations

import logging
from collections import deque

log = logging.getLogger("hedgefs.namenode")

EARLY_RECEIPTS = 100_000   # receipts kept (more: the oldest go)

Unit = tuple[int, int, int]   # (group id, unit index, generation)


class EarlyReceipts:
    def __init__(self):
        self.kept: deque[tuple[str, Unit]] = deque()   # (DataNode id, unit), oldest first
        self.dropped = 0   # ... the oldest ones past EARLY_RECEIPTS since the last drain

    def keep(self, datanode_id: str, units: list[Unit]) -> None:
        """Keep ``datanode_id``'s receipts of ``units`` (unknown to this standby yet)."""
        for unit in units:
            if len(self.kept) >= EARLY_RECEIPTS:
                self.kept.popleft()
                if not self.dropped:
                    log.warning("standby: more than %d receipts of units it does not know yet: dropping the "
                                "oldest (block reports after a promotion tell them again)", EARLY_RECEIPTS)
                self.dropped += 1
            self.kept.append((datanode_id, unit))

    def drain(self) -> list[tuple[str, Unit]]:
        """The receipts kept, oldest first, for a promotion to replay; none are kept after."""
        early, self.kept = list(self.kept), deque()
        if self.dropped:
            log.warning("promoted: replaying %d early receipts; %d older ones were dropped (limit %d)",
                        len(early), self.dropped, EARLY_RECEIPTS)
            self.dropped = 0
        return early
