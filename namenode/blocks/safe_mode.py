"""Safe mode, as HDFS's: a NameNode that has just loaded a namespace with block groups (a restart),
or become the active (HA), does not yet know where their units are: locations live in memory
and come back from block reports. Until ``share`` of the groups of complete files are readable
from what DataNodes reported (HDFS's threshold of safe blocks: at least k of a group's units
mapped, corrupt ones aside), it sends no deletes, plans no repairs (both would act on a map still
filling up) and, but for a new HA active, refuses namespace changes with one line
(``SafeModeRefusal``: exit 1 in the CLI; a client retries a start-up refusal for a while, as an
HDFS client does). A read of a file whose groups are not located yet while block reports are
still due is refused the same way, in safe mode and after it (expected.py). Safe mode ends by
itself once the share is readable or ``deadline_s`` has passed; ``safe_mode("leave")`` ends it
at once, ``safe_mode("enter")`` starts one that only an admin ends. A fresh, empty namespace
never enters it. The counts it waits on are kept by the block map as reports arrive
(``BlockMap.readable``, ``complete_groups``): no scan.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable

from hedgefs.namenode.blocks.blockmap import BlockMap
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.model import SafeModeState

log = logging.getLogger("hedgefs.namenode")


class Reason(enum.Enum):
    NONE = ""
    START_UP = "start-up"     # waiting for block reports after a restart
    ADMIN = "admin"           # entered by hand: only an admin ends it
    FAILOVER = "failover"     # a new HA active: no deletes or repairs yet, writes served


class SafeModeRefusal(FailedPrecondition):
    """A namespace change refused in safe mode; ``retriable``: it ends by itself (start-up)."""

    def __init__(self, message: str, retriable: bool):
        super().__init__(message)
        self.retriable = retriable


class SafeMode:
    def __init__(self, blocks: BlockMap, share: float | None, deadline_s: float | None,
                 clock: Callable[[], float]):
        """``share`` None: never in safe mode (but an admin's)."""
        self.blocks, self.share, self.deadline_s, self.clock = blocks, share, deadline_s, clock
        self.reason = Reason.NONE
        self._until: float | None = None

    @property
    def on(self) -> bool:
        return self.reason != Reason.NONE

    @property
    def refuses_changes(self) -> bool:
        return self.reason in (Reason.START_UP, Reason.ADMIN)

    def start(self, reason: Reason) -> None:
        """At the start of serving: a restart with groups in its namespace (START_UP), a new active
        (FAILOVER)."""
        if self.share is None or (reason == Reason.START_UP and not self.blocks.complete_groups):
            return
        self.reason = reason
        self._until = self.clock() + self.deadline_s if self.deadline_s and reason == Reason.START_UP else None
        if reason == Reason.START_UP:
            log.warning("safe mode: no deletes, repairs or namespace changes until %.0f%% of the block groups "
                        "are readable from reported DataNodes%s", 100 * self.share,
                        f" (or {self.deadline_s:g} s)" if self._until else "")

    def counts(self) -> tuple[int, int]:
        """(groups readable from what was reported, groups of complete files)."""
        return self.blocks.readable, self.blocks.complete_groups

    def refuse(self, what: str) -> None:
        """Called first by every namespace change."""
        if self.reason == Reason.ADMIN:
            raise SafeModeRefusal(f"cannot {what}: the NameNode is in safe mode (entered by an admin; "
                                  f"hedgefs admin safemode leave ends it)", retriable=False)
        if self.reason == Reason.START_UP:
            reported, total = self.counts()
            raise SafeModeRefusal(f"cannot {what}: the NameNode is in safe mode (start-up: {reported} of {total} "
                                  f"block groups readable from reported DataNodes, it waits for "
                                  f"{100 * self.share:.0f}%)", retriable=True)

    def may_leave(self) -> bool:
        """True (and out of safe mode) once ``share`` of the groups are readable, or the deadline
        passed; an admin's lasts."""
        if self.reason in (Reason.NONE, Reason.ADMIN):
            return self.reason == Reason.NONE
        reported, total = self.counts()
        late = self._until is not None and self.clock() >= self._until
        if total and reported < self.share * total and not late:
            return False
        log.info("leaving safe mode (%s): %d of %d block groups readable from reported DataNodes", self.reason.value,
                 reported, total)
        self.reason = Reason.NONE
        return True

    def act(self, action: str) -> bool:
        """HDFS's ``dfsadmin -safemode get|enter|leave``; True if it ended."""
        if action == "enter":
            if not self.on:
                log.warning("safe mode entered by an admin: no deletes, repairs or namespace changes")
            self.reason, self._until = Reason.ADMIN, None
        elif action == "leave":
            if self.on:
                log.warning("safe mode (%s) left by an admin", self.reason.value)
                self.reason = Reason.NONE
                return True
        elif action not in ("", "get"):
            raise InvalidArgument(f"safe mode action must be get, enter or leave, not {action!r}")
        return False

    def state(self) -> SafeModeState:
        reported, total = self.counts()
        left = max(0.0, self._until - self.clock()) if self._until and self.on else 0.0
        return SafeModeState(self.on, self.reason.value, reported, total, self.share or 0.0, round(left, 1))
