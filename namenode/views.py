"""What operators read from the namesystem: fsck, the cluster report, the status page's overview,
a file's or a DataNode's page. A mixin of ``Namesystem``."""

from __future__ import annotations

from collections.abc import Iterable

from hedgefs.namenode import paths
from hedgefs.namenode.liveness import HEAT_MINUTES, LOW_SPACE_PCT
from hedgefs.namenode.locking import _locked, _snapshot
from hedgefs.namenode.model import (
    ClusterReport,
    ClusterStatus,
    DataNodeReport,
    DataNodeStatus,
    FileInfo,
    FilePage,
    FsckProblem,
    FsckReport,
    Listing,
    ReadLatency,
    UnitsPage,
)
from hedgefs.namenode.namespace import LIST_PAGE_BYTES, load_policy

MAX_FSCK_PROBLEMS = 1000


class OperatorViews:
    """fsck, the cluster report, the status page's views: reads for operators."""

    @_snapshot
    def fsck(self, path: str = "/") -> FsckReport:
        files = self.ns.files_under(path)
        healthy = degraded = missing = corrupt_files = groups = 0
        problems: list[FsckProblem] = []
        each = self.blocks.groups_file_by_file([f[0] for f in files])
        for (_file_id, file_path, policy_name), file_groups in zip(files, each):
            policy = load_policy(policy_name)
            file_missing = False
            for group in file_groups:
                groups += 1
                good = len(group.good(self.liveness.is_live))
                if good >= policy.units:
                    healthy += 1
                    continue
                readable = self._readable_units(group)
                corrupt = len(readable) - good
                status = "DEGRADED" if policy.decodable(readable) else "MISSING"
                if status == "DEGRADED":
                    degraded += 1
                else:
                    missing += 1
                    file_missing = True
                if len(problems) < MAX_FSCK_PROBLEMS:
                    problems.append(FsckProblem(file_path, group.id, good, policy.k, status, corrupt,
                                                policy.units, policy.name))
            corrupt_files += file_missing
        status = "CORRUPT" if missing else "DEGRADED" if degraded else "HEALTHY"
        return FsckReport(len(files), groups, healthy, degraded, missing, status, problems, corrupt_files)

    def report(self) -> ClusterReport:
        """dfsadmin -report: each DataNode as this NameNode sees it, and the groups waiting for repair."""
        return self._report(self._mapped_units())

    def _mapped_units(self) -> dict[str, int]:
        """Units mapped to each DataNode: a count of every unit (~5 s at 30 M), so off the writers'
        lock, on a snapshot; under it every Create and Complete waited for the count. (A caller
        already holding the lock counts on its connection: a snapshot would spare nobody.)"""
        count = "SELECT datanode_id, COUNT(*) FROM units GROUP BY datanode_id"
        if self._lock._is_owned():
            return dict(self.db.query(count))
        with self.db.reading():
            return dict(self.db.query(count))

    @_locked
    def _report(self, mapped: dict[str, int]) -> ClusterReport:
        deletes = self.blocks.pending_delete_counts()
        nodes = [DataNodeReport(n.id, n.address, self._state(n.id),
                                int(self.liveness.age_s(n.id) * 1000), n.used_bytes, n.units,
                                self.repairs.count_for(n.id), deletes.get(n.id, 0), n.stats.scrub,
                                data_address=n.data_address, foreign_units=n.foreign_units,
                                capacity_bytes=n.stats.capacity_bytes, remaining_bytes=n.stats.remaining_bytes,
                                shares_filesystem_with=tuple(self.liveness.sharing(n.id)),
                                low_space=self.liveness.low_space(n.id), admin_state=self.admin_state(n.id),
                                units_mapped=mapped.get(n.id, 0))
                 for n in self.liveness.all()]
        # A group whose only lack is a unit on a live leaving DataNode is draining, not waiting
        # for repair: fsck calls it HEALTHY (the per-DataNode units_mapped shows the drain). Of
        # the groups health judges short of units (the changed ones judged again first), as the
        # monitor plans: a scan of every group here took 3.8 s at 200,000 files, under the lock.
        if not self.db.read_only:   # (a standby's view is judged at its start only)
            self.health.refresh(self.liveness.is_live)
        needs = [n for n in self._needs(self.health.unhealthy)
                 if any(i not in n.live or n.live[i] not in self.leaving for i in n.missing)]
        return ClusterReport(nodes, len(needs), self.repairs.done, self.blocks.corrupt_count(),
                             sum(n.replicated for n in needs), LOW_SPACE_PCT)

    def datanode_reads(self, datanode_ids: Iterable[str]) -> dict[str, ReadLatency]:
        """The reads of the last 60 s of each of these DataNodes, as it measured them (its last
        heartbeat; those that served none are left out): handed out with a file's locations, so a
        new client starts from the cluster's view of each DataNode (client/latency.py)."""
        out = {}
        for datanode_id in set(datanode_ids):
            node = self.liveness.get(datanode_id)
            recent = node.stats.recent_reads if node is not None else None
            if recent is not None and recent.reads:
                out[datanode_id] = recent
        return out

    def datanode_heartbeat_ages(self, datanode_ids: Iterable[str]) -> dict[str, float]:
        """Seconds since each of these DataNodes (those known) last heartbeated."""
        return {d: self.liveness.age_s(d) for d in set(datanode_ids) if self.liveness.knows(d)}

    def _state(self, datanode_id: str) -> str:
        """live, stale (heartbeat later than a third of the dead interval: the page's word) or dead."""
        if not self.liveness.is_live(datanode_id):
            return "dead"
        return "stale" if self.liveness.age_s(datanode_id) > self.liveness.dead_interval_s / 3 else "live"

    # ------------------------------------------------------------------ the operator's view
    # Each of these is one short read under the lock; the web pages render outside it.

    @_locked
    def status(self) -> ClusterStatus:
        """The overview and the DataNode table: counts kept by ``health``, liveness, repairs."""
        now_ms = self.wall_ms()
        minute = now_ms // 60_000
        first = minute - HEAT_MINUTES + 1
        tallies = self.health.tallies()
        running: dict[str, int] = {}
        for repair in self.repairs.in_flight.values():
            running[repair.target] = running.get(repair.target, 0) + 1
        nodes = []
        for n in sorted(self.liveness.all(), key=lambda n: _natural(n.id)):
            age = self.liveness.age_s(n.id)
            state = self._state(n.id)
            recent = n.stats.recent_reads
            host = n.address.rsplit(":", 1)[0]
            nodes.append(DataNodeStatus(
                n.id, n.address, f"{host}:{n.stats.http_port}" if n.stats.http_port else "", state, round(age, 1),
                n.stats.capacity_bytes, n.used_bytes, n.units, running.get(n.id, 0), n.active_repairs,
                tallies["deletes"].get(n.id, 0), dict(n.stats.faults), recent.reads if recent else 0,
                recent.p50_ms if recent else 0.0, recent.p99_ms if recent else 0.0,
                [n.p99_by_minute.get(m) for m in range(first, minute + 1)],
                n.stats.remaining_bytes, self.liveness.low_space(n.id), tuple(self.liveness.sharing(n.id)),
                self.admin_state(n.id)))
        live = [d for d in nodes if d.state != "dead"]
        filesystems = {self.liveness.filesystem_key(self.liveness.get(d.id)) or d.id: d for d in live}
        return ClusterStatus(
            cluster_id=self.cluster_id, started_ms=self.started_ms, now_ms=now_ms,
            capacity_bytes=sum(d.capacity_bytes for d in filesystems.values()),
            remaining_bytes=sum(d.remaining_bytes for d in filesystems.values()), low_space_pct=LOW_SPACE_PCT,
            used_bytes=sum(d.used_bytes for d in live),
            files=sum(tallies["files"].values()), directories=sum(tallies["dirs"].values()),
            policies=dict(sorted(tallies["files"].items())),
            groups_healthy=self.health.counts["healthy"], groups_degraded=self.health.counts["degraded"],
            groups_missing=self.health.counts["missing"],
            repairs_queued=max(0, self.health.units_lacking - len(self.repairs.in_flight)),
            repairs_running=len(self.repairs.in_flight), repairs_done=self.repairs.done,
            first_minute=first, datanodes=nodes, safe_mode=self.safe_mode_reason if self.in_safe_mode else "")

    @_snapshot
    def browse(self, path: str, after: str = "", limit: int = 500) -> FilePage | Listing:
        """A file's groups and units, or one page of a directory (names after ``after``)."""
        node, entry = self.ns.stat(path)
        if not node.is_dir:
            info = FileInfo(entry, [self._group_info(g, 0, keep_dead=True) for g in self.blocks.groups(node.id)])
            holders = {u.datanode_id for g in info.groups for u in g.units}
            return FilePage(info, {d: "live" if self.liveness.is_live(d) else "dead" for d in holders})
        entries, more = self.ns.list_page(path, False, paths.join(path, after) if after else "", limit + 1,
                                          LIST_PAGE_BYTES)
        return Listing(path, entries[:limit], len(entries) > limit or (more and len(entries) < limit + 1))

    @_locked
    def datanode_units(self, datanode_id: str, limit: int = 200) -> UnitsPage | None:
        """A DataNode's row of the table and the first ``limit`` units the block map puts on it."""
        if not self.liveness.knows(datanode_id):
            return None
        row = next(d for d in self.status().datanodes if d.id == datanode_id)
        units = self.blocks.units_on(datanode_id, limit + 1)
        return UnitsPage(row, [(g, i, self.ns.path_of(f)) for g, i, f in units[:limit]], len(units) > limit)


def _natural(name: str) -> tuple:
    """dn2 before dn10."""
    stem = name.rstrip("0123456789")
    digits = name[len(stem):]
    return stem, int(digits) if digits else -1, name
