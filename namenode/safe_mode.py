"""Safe mode, as HDFS's: a NameNode whose block map came from its database (a restart) or from etcd
(a new active, ha.py) does not yet know which units still exist. Until ``share`` of the units it
knows are on DataNodes that block-reported to it, it sends no deletes, plans no repairs (both
would act on a stale map) and, but for a new HA active, refuses namespace changes with one line
(``SafeModeRefusal``: exit 1 in the CLI; a client retries a start-up refusal for a while, as an
HDFS client does). Reads are served. It ends by itself when the share has reported or
``deadline_s`` has passed; ``safe_mode("leave")`` ends it at once, ``safe_mode("enter")`` starts
one that only an admin ends. A fresh, empty namespace never enters it.

A mixin of ``Namesystem`` (its lock, database and the DataNodes that reported: ``_reported``).
"""

from __future__ import annotations

import logging

from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.locking import _locked
from hedgefs.namenode.model import SafeModeState

log = logging.getLogger("hedgefs.namenode")

START_UP, ADMIN, FAILOVER = "start-up", "admin", "failover"


class SafeModeRefusal(FailedPrecondition):
    """A namespace change refused in safe mode; ``retriable``: it ends by itself (start-up)."""

    def __init__(self, message: str, retriable: bool):
        super().__init__(message)
        self.retriable = retriable


class SafeMode:
    def _init_safe_mode(self, share: float | None, deadline_s: float | None, ha: bool) -> None:
        """``share`` None: no safe mode. HA's new active always starts in it (it may not refuse
        writes: the client has failed over to it); a restart only with units in its map."""
        self.safe_mode_share = share
        self.safe_mode_reason = ""
        self._safe_mode_until: float | None = None
        if share is not None and (ha or self.db.one("SELECT 1 FROM units LIMIT 1") is not None):
            self.safe_mode_reason = FAILOVER if ha else START_UP
            if deadline_s:
                self._safe_mode_until = self.clock() + deadline_s
        self.in_safe_mode = bool(self.safe_mode_reason)
        if self.safe_mode_reason == START_UP:
            log.warning("safe mode: no deletes, repairs or namespace changes until %.0f%% of the units have "
                        "been reported%s", 100 * share, f" (or {deadline_s:g} s)" if deadline_s else "")

    def _refuse_in_safe_mode(self, what: str) -> None:
        """Called first by every namespace change."""
        if self.in_safe_mode and self.safe_mode_reason in (START_UP, ADMIN):
            if self.safe_mode_reason == ADMIN:
                raise SafeModeRefusal(f"cannot {what}: the NameNode is in safe mode (entered by an admin; "
                                      f"hedgefs admin safemode leave ends it)", retriable=False)
            reported, total = self._safe_mode_counts()
            raise SafeModeRefusal(f"cannot {what}: the NameNode is in safe mode (start-up: {reported} of {total} "
                                  f"units reported, it waits for {100 * self.safe_mode_share:.0f}%)", retriable=True)

    def _safe_mode_counts(self) -> tuple[int, int]:
        by_datanode = dict(self.db.query("SELECT datanode_id, COUNT(*) FROM units WHERE reported = 1 "
                                         "GROUP BY datanode_id"))
        return sum(n for d, n in by_datanode.items() if d in self._reported), sum(by_datanode.values())

    @_locked
    def safe_mode(self, action: str = "get") -> SafeModeState:
        """HDFS's ``dfsadmin -safemode get|enter|leave``."""
        if action == "enter":
            if not self.in_safe_mode:
                log.warning("safe mode entered by an admin: no deletes, repairs or namespace changes")
            self.in_safe_mode, self.safe_mode_reason, self._safe_mode_until = True, ADMIN, None
        elif action == "leave":
            if self.in_safe_mode:
                log.warning("safe mode (%s) left by an admin", self.safe_mode_reason)
            self.in_safe_mode, self.safe_mode_reason = False, ""
            self._scan_needed = True
        elif action not in ("", "get"):
            raise InvalidArgument(f"safe mode action must be get, enter or leave, not {action!r}")
        return self.safe_mode_state()

    def safe_mode_state(self) -> SafeModeState:
        reported, total = self._safe_mode_counts()
        left = max(0.0, self._safe_mode_until - self.clock()) if self._safe_mode_until and self.in_safe_mode else 0.0
        return SafeModeState(self.in_safe_mode, self.safe_mode_reason, reported, total,
                             self.safe_mode_share or 0.0, round(left, 1))
