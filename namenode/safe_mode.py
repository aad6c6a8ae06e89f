"""Safe mode, as HDFS's: a NameNode whose block map came from its database (a restart) or from etcd
(a new active, ha.py) does not yet know which units still exist. Until ``share`` of the block
groups of complete files are readable from DataNodes that block-reported to it (HDFS's threshold
of blocks; a group is readable with at least k of its units mapped to such DataNodes, so DataNodes
that stay down delay nothing while the others cover every group), it sends no deletes, plans no
repairs (both would act on a stale map) and, but for a new HA active, refuses namespace changes with one line
(``SafeModeRefusal``: exit 1 in the CLI; a client retries a start-up refusal for a while, as an
HDFS client does). Reads are served. It ends by itself when the share is readable or
``deadline_s`` has passed; ``safe_mode("leave")`` ends it at once, ``safe_mode("enter")`` starts
one that only an admin ends. A fresh, empty namespace never enters it.

A mixin of ``Namesystem`` (its lock, database and the DataNodes that reported: ``_reported``).
"""

from __future__ import annotations

import functools
import json
import logging

from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.locking import _locked
from hedgefs.namenode.model import SafeModeState
from hedgefs.namenode.namespace import load_policy

log = logging.getLogger("hedgefs.namenode")

START_UP, ADMIN, FAILOVER = "start-up", "admin", "failover"

# (readable groups, groups): per group of a complete file, its good units on DataNodes that
# block-reported (?1, a JSON list of ids), against its policy's k (policy_k, registered below).
_COUNTS = """
SELECT COALESCE(SUM(n >= k), 0), COUNT(*) FROM (
    SELECT policy_k(f.policy) AS k, SUM(u.datanode_id IN (SELECT value FROM json_each(?1))) AS n
    FROM groups g JOIN inodes f ON f.id = g.file_id
    LEFT JOIN units u ON u.group_id = g.id AND u.corrupt = 0
    WHERE f.state = 'complete' GROUP BY g.id)"""


@functools.lru_cache(maxsize=256)
def _policy_k(name: str | None) -> int | None:
    """A policy's k (units a group can be read from), None for no valid policy (never readable)."""
    try:
        return load_policy(name).k if name else None
    except InvalidArgument:
        return None


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
        self.db.conn.create_function("policy_k", 1, _policy_k, deterministic=True)
        self.safe_mode_reason = ""
        self._safe_mode_until: float | None = None
        if share is not None and (ha or self.db.one("SELECT 1 FROM units LIMIT 1") is not None):
            self.safe_mode_reason = FAILOVER if ha else START_UP
            if deadline_s:
                self._safe_mode_until = self.clock() + deadline_s
        self.in_safe_mode = bool(self.safe_mode_reason)
        # (readable groups, groups) as last counted: at the start and by each monitor pass in safe
        # mode (_leave_safe_mode), not by each refusal (clients retry them) or state read.
        self.safe_mode_counts = self._safe_mode_counts() if self.in_safe_mode else (0, 0)
        if self.safe_mode_reason == START_UP:
            log.warning("safe mode: no deletes, repairs or namespace changes until %.0f%% of the block groups "
                        "are readable from reported DataNodes%s", 100 * share, f" (or {deadline_s:g} s)" if deadline_s else "")

    def _refuse_in_safe_mode(self, what: str) -> None:
        """Called first by every namespace change."""
        if self.in_safe_mode and self.safe_mode_reason in (START_UP, ADMIN):
            if self.safe_mode_reason == ADMIN:
                raise SafeModeRefusal(f"cannot {what}: the NameNode is in safe mode (entered by an admin; "
                                      f"hedgefs admin safemode leave ends it)", retriable=False)
            reported, total = self.safe_mode_counts
            raise SafeModeRefusal(f"cannot {what}: the NameNode is in safe mode (start-up: {reported} of {total} "
                                  f"block groups readable from reported DataNodes, it waits for "
                                  f"{100 * self.safe_mode_share:.0f}%)", retriable=True)

    def _refuse_while_datanodes_register(self, policy, placeable: int) -> None:   # policy: a Policy
        """Too few DataNodes have registered with this process, but enough are known from the
        namespace and it started (or became the active) less than a dead interval ago: they are
        still coming (a heartbeat or two), so the refusal is one the client retries (safe mode's),
        not "bad input"."""
        known = len([d for d in self.liveness.live_ids() if d not in self.leaving])
        age = self.clock() - self._started
        if known >= policy.units and age < self.liveness.dead_interval_s:
            raise SafeModeRefusal(f"policy {policy.name} needs {policy.units} live DataNodes: {placeable} of the "
                                  f"{known} known have registered with this NameNode since it started {age:.1f} s "
                                  f"ago; the others have not reported yet", retriable=True)

    def _safe_mode_counts(self) -> tuple[int, int]:
        """(groups of complete files with at least k units on DataNodes that block-reported to this
        process, all such groups): HDFS's safe blocks and total blocks, counted in SQLite."""
        readable, total = self.db.one(_COUNTS, (json.dumps(sorted(self._reported)),))
        return readable, total

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
        """No SQL (the counts are the last pass's): safe off the writers' lock (servicer's Report)."""
        reported, total = self.safe_mode_counts
        left = max(0.0, self._safe_mode_until - self.clock()) if self._safe_mode_until and self.in_safe_mode else 0.0
        return SafeModeState(self.in_safe_mode, self.safe_mode_reason, reported, total,
                             self.safe_mode_share or 0.0, round(left, 1))
