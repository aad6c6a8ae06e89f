"""DataNode decommission, as HDFS's: a DataNode leaving the cluster takes no new units and keeps
serving reads while the NameNode copies every unit it holds onto other DataNodes; once the block
map puts no unit on it, it is *decommissioned* and may be stopped with no group degraded.

The copies are made by the repair machinery (repair_scheduler.py, the DataNodes' repair worker):
to the repair pass a unit on a leaving DataNode is missing (a target is chosen for it, never a
DataNode already holding a unit of the group, never a leaving one) while its copy there is still
a source, so the worker's plan (ec/sources.py) reads that very unit, a copy rather than a decode.
When the new copy's receipt arrives, ``BlockMap.claim`` moves the unit to it (the leaving
DataNode does not count as a good holder) and queues the old copy's delete. A leaving DataNode
that dies meanwhile is like any dead DataNode: its units are rebuilt from the others.

A mixin of ``Namesystem`` (its lock, database, liveness and repair state). The set of leaving
DataNodes is in the meta table (``decommission/ID``), so a restarted NameNode goes on draining
them. ``recommission`` undoes it: the DataNode takes units again; copies already moved stay moved.
"""

from __future__ import annotations

import logging

from hedgefs.namenode.errors import FailedPrecondition, NotFound
from hedgefs.namenode.locking import _locked
from hedgefs.namenode.namespace import load_policy

log = logging.getLogger("hedgefs.namenode")

KEY = "decommission/"
DECOMMISSIONING = "decommissioning"
DECOMMISSIONED = "decommissioned"


class Decommissioning:
    """The decommission calls and the predicates placement and repair use; state is the Namesystem's."""

    def _load_leaving(self) -> None:
        rows = self.db.query("SELECT key FROM meta WHERE key LIKE ?", (KEY + "%",))
        self.leaving: set[str] = {row[0][len(KEY):] for row in rows}

    def _stays(self, datanode_id: str) -> bool:
        """Live and not leaving: a good holder of a unit (a leaving DataNode's copy is to be moved)."""
        return self.liveness.is_live(datanode_id) and datanode_id not in self.leaving

    def _holds(self, datanode_id: str) -> bool:
        """_usable and not leaving: whose copy of a unit counts when another copy is reported."""
        return self._usable(datanode_id) and datanode_id not in self.leaving

    def _placeable_ids(self) -> list[str]:
        """Usable DataNodes that may take new units (placement, repair targets)."""
        return [d for d in self._usable_ids() if d not in self.leaving]

    def _leaving_note(self) -> str:
        """For a refusal counting DataNodes: those left out because they are leaving."""
        leaving = sorted(d for d in self.leaving if self.liveness.is_live(d))
        return f" and in service ({', '.join(leaving)} decommissioning)" if leaving else ""

    def _leaving_groups(self) -> set[int]:
        """Groups with a unit on a live leaving DataNode: the repair pass looks at them too."""
        out: set[int] = set()
        for datanode_id in self.leaving:
            if self.liveness.is_live(datanode_id):
                out.update(r[0] for r in self.db.query("SELECT group_id FROM units WHERE datanode_id = ?",
                                                       (datanode_id,)))
        return out

    def _units_left(self, datanode_id: str) -> int:
        return self.db.one("SELECT COUNT(*) FROM units WHERE datanode_id = ?", (datanode_id,))[0]

    def admin_state(self, datanode_id: str) -> str:
        """"" (in service), decommissioning (units still mapped to it) or decommissioned."""
        if datanode_id not in self.leaving:
            return ""
        return DECOMMISSIONING if self._units_left(datanode_id) else DECOMMISSIONED

    def _widest_policy(self) -> tuple[str, int]:
        """The policy in use (the default, a directory's, a file's) that needs the most DataNodes."""
        names = {self.ns.default_policy} | {r[0] for r in self.db.query(
            "SELECT DISTINCT policy FROM inodes WHERE policy IS NOT NULL AND policy != ''")}
        widths = sorted(((load_policy(n).units, n) for n in names), reverse=True)
        return widths[0][1], widths[0][0]

    @_locked
    def decommission(self, datanode_id: str) -> tuple[str, int]:
        """Start draining ``datanode_id``; (its state, units still mapped to it). Idempotent."""
        if not self.liveness.knows(datanode_id):
            raise NotFound(f"no DataNode {datanode_id!r} (hedgefs admin report lists them)")
        if datanode_id not in self.leaving:
            name, width = self._widest_policy()
            staying = [d for d in self._placeable_ids() if d != datanode_id]
            if len(staying) < width:
                raise FailedPrecondition(
                    f"cannot decommission {datanode_id}: policy {name} needs {width} DataNodes, only "
                    f"{len(staying)} would be left in service")
            with self.db.tx():
                self.db.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (KEY + datanode_id,))
            self.leaving.add(datanode_id)
            self._scan_needed = True
            log.warning("decommissioning %s: no new units; its %d units are copied elsewhere",
                        datanode_id, self._units_left(datanode_id))
        return self.admin_state(datanode_id), self._units_left(datanode_id)

    @_locked
    def recommission(self, datanode_id: str) -> tuple[str, int]:
        """Put ``datanode_id`` back in service (it takes new units again). Idempotent."""
        if not self.liveness.knows(datanode_id):
            raise NotFound(f"no DataNode {datanode_id!r} (hedgefs admin report lists them)")
        if datanode_id in self.leaving:
            with self.db.tx():
                self.db.conn.execute("DELETE FROM meta WHERE key = ?", (KEY + datanode_id,))
            self.leaving.discard(datanode_id)
            self._scan_needed = True
            log.warning("recommissioned %s: it takes new units again", datanode_id)
        return "", self._units_left(datanode_id)
